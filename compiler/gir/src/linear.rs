//! Layouts as linear maps over GF(2).
//!
//! Every size is a power of two, so a hardware index (register slot, lane, warp) and a tile's
//! row-major flat index are bit vectors. A [`LinearLayout`] gives, for each input bit, the flat
//! index it selects; the flat index of any input is the XOR of the images of its set bits. A
//! zero image means the bit does not move the element: the threads that differ only in it hold
//! copies. Blocked, mma-accumulator, mma-operand and ldmatrix-address layouts are all values of
//! this one type, so code generation, tests and printing read the same data. A shared-memory
//! swizzle is a [`LinearMap`] from a flat index to a physical one; composing a layout with it
//! gives the addresses a thread touches.

use std::fmt;

/// A linear map on flat indices: `images[i]` is where bit `i` goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearMap {
    pub images: Vec<usize>,
}

impl LinearMap {
    pub fn identity(bits: usize) -> LinearMap {
        LinearMap {
            images: (0..bits).map(|i| 1 << i).collect(),
        }
    }

    pub fn apply(&self, x: usize) -> usize {
        xor_of(&self.images, x)
    }
}

fn xor_of(images: &[usize], x: usize) -> usize {
    images
        .iter()
        .enumerate()
        .filter(|(i, _)| x >> i & 1 == 1)
        .fold(0, |acc, (_, b)| acc ^ b)
}

/// Where each hardware index of a block holds its elements of a tile of `shape`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearLayout {
    /// The tile's shape (powers of two), for the flat index and for printing.
    pub shape: Vec<usize>,
    /// Image of each bit of the register slot (slot `i` of a thread's elements).
    pub reg: Vec<usize>,
    /// Image of each of the 5 bits of the lane.
    pub lane: Vec<usize>,
    /// Image of each bit of the warp index.
    pub warp: Vec<usize>,
}

impl LinearLayout {
    /// The layout every tile has unless a pass chose another: chunks of `vec` consecutive
    /// elements (along the last axis) dealt round-robin to the block's threads. Chunk `c` goes to
    /// thread `c mod threads` as its slot-chunk `c / threads`; with fewer chunks than threads,
    /// thread `t` holds a copy of chunk `t mod chunks`.
    pub fn blocked(shape: &[usize], threads: u32, max_vec: usize) -> LinearLayout {
        let numel: usize = shape.iter().product();
        let last = shape.last().copied().unwrap_or(1);
        let vec = max_vec.min(last).min((numel / threads as usize).max(1)).max(1);
        let total_bits = numel.trailing_zeros() as usize;
        let vec_bits = vec.trailing_zeros() as usize;
        let thread_bits = threads.trailing_zeros() as usize;
        let mut reg: Vec<usize> = (0..vec_bits).map(|i| 1 << i).collect();
        let mut thread = Vec::new();
        for i in 0..thread_bits {
            let bit = vec_bits + i;
            thread.push(if bit < total_bits { 1 << bit } else { 0 });
        }
        reg.extend((vec_bits + thread_bits..total_bits).map(|b| 1 << b));
        let lane = thread[..5.min(thread.len())].to_vec();
        let warp = thread[lane.len()..].to_vec();
        LinearLayout {
            shape: shape.to_vec(),
            reg,
            lane,
            warp,
        }
    }

    /// The blocked layout with its warps on the rows: chunks of `vec` elements of the last axis
    /// go to consecutive lanes, as in [`blocked`](Self::blocked), but the warp bits take the
    /// outer axes first, so that a reduction along the last axis stays inside warps (register
    /// folds and shuffles, no shared memory). Warp bits left when the outer axes run out go to
    /// the last axis after the lanes; past the tile they hold copies. The registers take the
    /// rest, last axis first. With one row per warp or more, each warp reads whole rows in
    /// coalesced chunks of 32 lanes.
    pub fn rows(shape: &[usize], threads: u32, max_vec: usize) -> LinearLayout {
        let numel: usize = shape.iter().product();
        let last = shape.last().copied().unwrap_or(1);
        let vec = max_vec.min(last).min((numel / threads as usize).max(1)).max(1);
        let (col_bits, total_bits) = (last.trailing_zeros() as usize, numel.trailing_zeros() as usize);
        let vec_bits = vec.trailing_zeros() as usize;
        // Flat-index bits not yet given to a hardware index, the last axis's first.
        let mut cols: std::collections::VecDeque<usize> = (vec_bits..col_bits).collect();
        let mut rows: std::collections::VecDeque<usize> = (col_bits..total_bits).collect();
        let take = |first: &mut std::collections::VecDeque<usize>, then: &mut std::collections::VecDeque<usize>| {
            first
                .pop_front()
                .or_else(|| then.pop_front())
                .map_or(0, |b| 1usize << b)
        };
        let lane: Vec<usize> = (0..5).map(|_| take(&mut cols, &mut rows)).collect();
        let warp_bits = threads.trailing_zeros() as usize - 5;
        let warp: Vec<usize> = (0..warp_bits).map(|_| take(&mut rows, &mut cols)).collect();
        let mut reg: Vec<usize> = (0..vec_bits).map(|i| 1 << i).collect();
        reg.extend(cols.iter().chain(&rows).map(|b| 1usize << b));
        LinearLayout {
            shape: shape.to_vec(),
            reg,
            lane,
            warp,
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Elements a thread holds.
    pub fn regs(&self) -> usize {
        1 << self.reg.len()
    }

    /// The flat index that register `reg` of lane `lane` of warp `warp` holds.
    pub fn apply(&self, reg: usize, lane: usize, warp: usize) -> usize {
        xor_of(&self.reg, reg) ^ xor_of(&self.lane, lane) ^ xor_of(&self.warp, warp)
    }

    /// The part of [`apply`](Self::apply) known at compile time.
    pub fn reg_part(&self, reg: usize) -> usize {
        xor_of(&self.reg, reg)
    }

    /// This layout followed by `m` (for instance a shared-memory swizzle).
    pub fn then(&self, m: &LinearMap) -> LinearLayout {
        let f = |v: &Vec<usize>| v.iter().map(|b| m.apply(*b)).collect();
        LinearLayout {
            shape: self.shape.clone(),
            reg: f(&self.reg),
            lane: f(&self.lane),
            warp: f(&self.warp),
        }
    }

    /// Threads whose index differs only in these bits of `tid` hold the same elements: the bits
    /// whose image is zero. A thread with any of them set holds a copy (it does not own).
    pub fn copy_mask(&self) -> usize {
        let mut m = 0;
        for (i, b) in self.lane.iter().chain(&self.warp).enumerate() {
            if *b == 0 {
                m |= 1 << i;
            }
        }
        m
    }

    /// Whether the threads' registers cover every element exactly once among owners.
    pub fn is_bijective_on_owners(&self) -> bool {
        let bases: Vec<usize> = self
            .reg
            .iter()
            .chain(&self.lane)
            .chain(&self.warp)
            .copied()
            .filter(|b| *b != 0)
            .collect();
        bases.len() == self.numel().trailing_zeros() as usize && rank(&bases) == bases.len()
    }

    /// The most consecutive elements (up to 8) a thread holds in consecutive registers, starting
    /// at a multiple of their count: the widest vector a memory access in this layout can use.
    pub fn contiguous_run(&self) -> usize {
        let mut bits = 0;
        while bits < 3 && self.reg.get(bits) == Some(&(1 << bits)) {
            bits += 1;
        }
        loop {
            let run = 1usize << bits;
            let others = self.reg[bits..].iter().chain(&self.lane).chain(&self.warp);
            if bits == 0 || others.into_iter().all(|b| b % run == 0) {
                return run;
            }
            bits -= 1;
        }
    }

    /// Two layouts of one shape hold the same elements in the same registers of the same threads.
    pub fn same_as(&self, other: &LinearLayout) -> bool {
        self == other
    }
}

/// How a reduction along one axis runs on a tile held in some layout: registers folded in each
/// thread, lanes combined by butterfly shuffles, warps through shared memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisReduce {
    /// The result's layout (the input's, without the axis: threads that differed only along
    /// the axis hold copies).
    pub out: LinearLayout,
    /// The input's register bits that stay (one result register for each of their values)
    /// and those folded away; [`groups`](Self::groups) spells out which registers each result
    /// folds (built only where code is emitted: a tile of 2^18 elements has thousands).
    keep: Vec<usize>,
    fold: Vec<usize>,
    /// Lane bits along the axis: one butterfly shuffle each (`shfl.xor` masks).
    pub lane_masks: Vec<u32>,
    /// Warp-index bits along the axis: partials exchanged through shared memory.
    pub warp_masks: Vec<u32>,
}

impl AxisReduce {
    /// For each result register, the input registers it folds, in order.
    pub fn groups(&self) -> Vec<Vec<usize>> {
        let spread = |bits: &[usize], v: usize| {
            bits.iter()
                .enumerate()
                .filter(|(j, _)| v >> j & 1 == 1)
                .fold(0, |acc, (_, i)| acc | 1 << i)
        };
        (0..1usize << self.keep.len())
            .map(|o| {
                (0..1usize << self.fold.len())
                    .map(|f| spread(&self.keep, o) | spread(&self.fold, f))
                    .collect()
            })
            .collect()
    }
}

impl LinearLayout {
    /// The same bases on another shape with the same number of elements (reshapes and
    /// `expand_dims` keep the row-major flat index).
    pub fn with_shape(&self, shape: &[usize]) -> LinearLayout {
        LinearLayout {
            shape: shape.to_vec(),
            ..self.clone()
        }
    }

    /// The reduction along `axis`, when every basis moves either only along the axis or only
    /// across it (`None` when one mixes both).
    pub fn reduce_axis(&self, axis: usize) -> Option<AxisReduce> {
        let st = crate::layout::strides(&self.shape);
        let (stride, size) = (st[axis], self.shape[axis]);
        let axis_mask = (size - 1) * stride;
        let low = stride - 1;
        let project = |b: usize| (b & low) | ((b & !(low | axis_mask)) / size);
        let along = |b: usize| -> Option<bool> {
            match (b & axis_mask != 0, b & !axis_mask != 0) {
                (true, true) => None,
                (a, _) => Some(a),
            }
        };
        let mut out_shape = self.shape.clone();
        out_shape.remove(axis);
        let (mut keep, mut fold) = (Vec::new(), Vec::new());
        for (i, b) in self.reg.iter().enumerate() {
            if along(*b)? { fold.push(i) } else { keep.push(i) }
        }
        let part = |v: &[usize]| -> Option<(Vec<usize>, Vec<u32>)> {
            let (mut bases, mut masks) = (Vec::new(), Vec::new());
            for (i, b) in v.iter().enumerate() {
                if along(*b)? {
                    bases.push(0);
                    masks.push(1 << i);
                } else {
                    bases.push(project(*b));
                }
            }
            Some((bases, masks))
        };
        let (lane, lane_masks) = part(&self.lane)?;
        let (warp, warp_masks) = part(&self.warp)?;
        let out = LinearLayout {
            shape: out_shape,
            reg: keep.iter().map(|i| project(self.reg[*i])).collect(),
            lane,
            warp,
        };
        Some(AxisReduce {
            out,
            keep,
            fold,
            lane_masks,
            warp_masks,
        })
    }

    /// For a broadcast of a tile held in layout `src` to this layout (leading axes added, axes of
    /// size 1 stretched): the source flat index each of this layout's register bits selects,
    /// when every thread already holds its elements (else `None`). Linear algebra on the bases
    /// alone: the lanes and warps must select what the source's do, and each register image must
    /// lie in the span of the source's register images.
    fn broadcast_images(&self, src: &LinearLayout) -> Option<Vec<usize>> {
        let off = self.shape.len() - src.shape.len();
        let (rst, sst) = (crate::layout::strides(&self.shape), crate::layout::strides(&src.shape));
        let project = |b: usize| -> usize {
            (0..src.shape.len())
                .filter(|j| src.shape[*j] > 1)
                .map(|j| ((b / rst[j + off]) % self.shape[j + off]) * sst[j])
                .fold(0, |a, c| a ^ c)
        };
        let same = |a: &[usize], b: &[usize]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| project(*x) == *y);
        if !same(&self.lane, &src.lane) || !same(&self.warp, &src.warp) {
            return None;
        }
        let held = echelon(&src.reg);
        let images: Vec<usize> = self.reg.iter().map(|b| project(*b)).collect();
        images.iter().all(|x| reduce(&held, *x) == 0).then_some(images)
    }

    /// Whether a broadcast from `src` to this layout needs no data movement
    /// ([`broadcast_from`](Self::broadcast_from) is `Some`), without building its map.
    pub fn broadcast_held(&self, src: &LinearLayout) -> bool {
        self.broadcast_images(src).is_some()
    }

    /// How many distinct source registers a broadcast from `src` held in registers repeats (the
    /// registers its result really needs), without building its map.
    pub fn broadcast_distinct(&self, src: &LinearLayout) -> Option<usize> {
        self.broadcast_images(src).map(|images| 1 << rank(&images))
    }

    /// For a broadcast of a tile held in layout `src` to this layout (leading axes added, axes of
    /// size 1 stretched): the source register that holds each of this layout's registers'
    /// element, when every thread already holds it (else `None`).
    pub fn broadcast_from(&self, src: &LinearLayout) -> Option<Vec<usize>> {
        let images = self.broadcast_images(src)?;
        // The first source register holding each flat index (a map, not a search per register:
        // tiles of 2^18 elements have thousands of registers a thread).
        let mut first: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
        for s in 0..src.regs() {
            first.entry(src.reg_part(s)).or_insert(s);
        }
        (0..self.regs())
            .map(|r| first.get(&xor_of(&images, r)).copied())
            .collect()
    }
}

/// A basis of the span of `vectors` over GF(2), in row-echelon order (leading bits
/// descending).
fn echelon(vectors: &[usize]) -> Vec<usize> {
    let mut basis: Vec<usize> = Vec::new();
    for &v in vectors {
        let x = reduce(&basis, v);
        if x != 0 {
            basis.push(x);
            basis.sort_unstable_by(|a, b| b.cmp(a));
        }
    }
    basis
}

/// `x` reduced by an [`echelon`] basis: zero exactly when `x` lies in its span.
fn reduce(basis: &[usize], x: usize) -> usize {
    basis.iter().fold(x, |x, b| x.min(x ^ b))
}

/// Rank over GF(2) of a set of bit vectors.
pub fn rank(vectors: &[usize]) -> usize {
    echelon(vectors).len()
}

impl fmt::Display for LinearLayout {
    /// `[r:(0,1) (8,0) | l:(0,2) .. | w:(16,0)]`: each basis as a coordinate per axis.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let coords = |flat: usize| {
            let st = crate::layout::strides(&self.shape);
            let c: Vec<String> = (0..self.shape.len())
                .map(|d| ((flat / st[d]) % self.shape[d]).to_string())
                .collect();
            format!("({})", c.join(","))
        };
        let part =
            |name: &str, v: &[usize]| format!("{name}:{}", v.iter().map(|b| coords(*b)).collect::<Vec<_>>().join(" "));
        write!(
            f,
            "[{} | {} | {}]",
            part("r", &self.reg),
            part("l", &self.lane),
            part("w", &self.warp)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    /// The blocked linear layout is the layout `Layout` describes with chunks and slots.
    #[test]
    fn blocked_matches_the_chunked_layout() {
        for shape in [
            vec![1024],
            vec![64, 64],
            vec![16, 8],
            vec![4],
            vec![2, 2, 32],
            vec![128, 1],
        ] {
            for threads in [32u32, 64, 128, 256] {
                for max_vec in [1, 2, 4, 8] {
                    let lay = Layout::new(&shape, threads, max_vec);
                    let ll = LinearLayout::blocked(&shape, threads, max_vec);
                    assert_eq!(ll.regs(), lay.per_thread(), "{shape:?} {threads} {max_vec}");
                    for t in 0..threads as usize {
                        for i in 0..lay.per_thread() {
                            let (slot, j) = (i / lay.vec, i % lay.vec);
                            let c = (slot * lay.threads + t) & (lay.chunks - 1);
                            let want = c * lay.vec + j;
                            assert_eq!(ll.apply(i, t % 32, t / 32), want, "{shape:?} t{t} i{i}");
                        }
                        let owns = t < lay.chunks;
                        assert_eq!(t & ll.copy_mask() == 0, owns || !lay.replicated());
                    }
                    assert!(ll.is_bijective_on_owners());
                }
            }
        }
    }

    /// Reducing a layout along an axis, simulated on indices: every result register of every
    /// thread folds exactly the elements of its row, and the result layout says which row.
    #[test]
    fn axis_reductions_fold_whole_rows() {
        use crate::mma::MmaPlan;
        use tile_lang::ir::DType;
        let mut layouts = vec![
            LinearLayout::blocked(&[64, 64], 128, 4),
            LinearLayout::blocked(&[16, 256], 256, 8),
        ];
        for (m, n, w) in [(64, 64, 4), (128, 128, 8), (32, 64, 4), (64, 32, 2)] {
            layouts.push(MmaPlan::new(m, n, 16, DType::BF16, DType::F32, w).unwrap().acc());
        }
        for l in layouts {
            let (rows, cols) = (l.shape[0], l.shape[1]);
            let threads = 32 << l.warp.len();
            for axis in [0, 1] {
                let Some(red) = l.reduce_axis(axis) else { continue };
                assert_eq!(red.out.regs(), red.groups().len());
                for t in 0..threads {
                    for (o, g) in red.groups().iter().enumerate() {
                        // The elements this thread and its partners (lane and warp masks) fold.
                        let mut seen = Vec::new();
                        let lane_combos = 1 << red.lane_masks.len();
                        let warp_combos = 1 << red.warp_masks.len();
                        for lc in 0..lane_combos {
                            for wc in 0..warp_combos {
                                let mut lane = t % 32;
                                let mut warp = t / 32;
                                for (j, m) in red.lane_masks.iter().enumerate() {
                                    if lc >> j & 1 == 1 {
                                        lane ^= *m as usize;
                                    }
                                }
                                for (j, m) in red.warp_masks.iter().enumerate() {
                                    if wc >> j & 1 == 1 {
                                        warp ^= *m as usize;
                                    }
                                }
                                for r in g {
                                    seen.push(l.apply(*r, lane, warp));
                                }
                            }
                        }
                        seen.sort();
                        seen.dedup();
                        let out = red.out.apply(o, t % 32, t / 32);
                        let want: Vec<usize> = if axis == 1 {
                            (0..cols).map(|c| out * cols + c).collect()
                        } else {
                            (0..rows).map(|r| r * cols + out).collect()
                        };
                        assert_eq!(seen, want, "{l} axis {axis} t{t} o{o}");
                    }
                }
            }
        }
    }

    /// A broadcast back from the reduced layout needs no data movement.
    #[test]
    fn broadcasts_from_the_reduced_layout_stay_in_registers() {
        use crate::mma::MmaPlan;
        use tile_lang::ir::DType;
        let acc = MmaPlan::new(64, 64, 16, DType::BF16, DType::F32, 4).unwrap().acc();
        let rows = acc.reduce_axis(1).unwrap().out.with_shape(&[64, 1]);
        let map = acc.broadcast_from(&rows).unwrap();
        for t in 0..128 {
            for (r, s) in map.iter().enumerate() {
                assert_eq!(acc.apply(r, t % 32, t / 32) / 64, rows.apply(*s, t % 32, t / 32));
            }
        }
        assert!(acc.broadcast_from(&LinearLayout::blocked(&[64, 1], 128, 4)).is_none());
    }

    /// The row layout covers its tile once, keeps chunks of `vec` consecutive elements in a
    /// thread, reduces rows without shared memory whenever the rows are at least the warps, and
    /// takes a row vector (`[C]`, its slice over the rows) back into registers.
    #[test]
    fn row_layouts_keep_rows_inside_warps() {
        for (shape, threads, max_vec) in [
            (vec![4, 1024], 128, 4),
            (vec![8, 1024], 256, 8),
            (vec![2, 4096], 512, 4),
            (vec![16, 64], 128, 4),
            (vec![4, 16], 128, 4),
        ] {
            let l = LinearLayout::rows(&shape, threads, max_vec);
            let (rows, cols) = (shape[0], shape[1]);
            assert!(l.is_bijective_on_owners(), "{l}");
            let vec = max_vec.min(cols).min(rows * cols / threads as usize).max(1);
            assert!(
                (0..vec.trailing_zeros() as usize).all(|i| l.reg[i] == 1 << i),
                "{l}: chunks of {vec}"
            );
            let red = l.reduce_axis(1).unwrap();
            let warps = threads as usize / 32;
            if rows >= warps && cols >= 32 {
                assert!(red.warp_masks.is_empty(), "{l}: rows need no shared memory");
            }
            assert_eq!(
                red.warp_masks.len(),
                (warps / rows.min(warps)).trailing_zeros() as usize
            );
            // [C] and [1, C] tiles in the slice over the rows broadcast in registers.
            let slice = l.reduce_axis(0).unwrap().out;
            let map = l
                .broadcast_from(&slice.with_shape(&[1, cols]))
                .expect("row vector in registers");
            for t in 0..threads as usize {
                for (r, s) in map.iter().enumerate() {
                    assert_eq!(l.apply(r, t % 32, t / 32) % cols, slice.apply(*s, t % 32, t / 32));
                }
            }
            // The per-row statistics broadcast back in registers too.
            let per_row = red.out.with_shape(&[rows, 1]);
            assert!(l.broadcast_from(&per_row).is_some());
        }
    }

    /// The basis-only answers agree with the per-register map on every pair of row, blocked
    /// and reduced layouts these shapes give.
    #[test]
    fn broadcast_checks_agree_with_the_map() {
        for (shape, threads, max_vec) in [(vec![4, 1024], 128, 4), (vec![16, 64], 256, 8), (vec![64, 64], 128, 4)] {
            let (rows, cols) = (shape[0], shape[1]);
            let dests = [
                LinearLayout::rows(&shape, threads, max_vec),
                LinearLayout::blocked(&shape, threads, max_vec),
            ];
            for l in &dests {
                let srcs = [
                    l.reduce_axis(0).map(|r| r.out.with_shape(&[1, cols])),
                    l.reduce_axis(1).map(|r| r.out.with_shape(&[rows, 1])),
                    Some(LinearLayout::blocked(&[rows, 1], threads, max_vec)),
                    Some(LinearLayout::blocked(&[cols], threads, max_vec)),
                ];
                for src in srcs.iter().flatten() {
                    let map = l.broadcast_from(src);
                    assert_eq!(l.broadcast_held(src), map.is_some(), "{l} from {src}");
                    let distinct = map.map(|m| m.into_iter().collect::<std::collections::HashSet<_>>().len());
                    assert_eq!(l.broadcast_distinct(src), distinct, "{l} from {src}");
                }
            }
        }
    }

    #[test]
    fn rank_counts_independent_vectors() {
        assert_eq!(rank(&[1, 2, 3]), 2);
        assert_eq!(rank(&[4, 2, 1, 7]), 3);
        assert_eq!(rank(&[0, 0]), 0);
    }
}
