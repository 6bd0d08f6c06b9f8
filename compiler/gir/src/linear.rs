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
        LinearMap { images: (0..bits).map(|i| 1 << i).collect() }
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
        LinearLayout { shape: shape.to_vec(), reg, lane, warp }
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
        LinearLayout { shape: self.shape.clone(), reg: f(&self.reg), lane: f(&self.lane), warp: f(&self.warp) }
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

    /// Two layouts of one shape hold the same elements in the same registers of the same threads.
    pub fn same_as(&self, other: &LinearLayout) -> bool {
        self == other
    }
}

/// Rank over GF(2) of a set of bit vectors.
pub fn rank(vectors: &[usize]) -> usize {
    let mut basis: Vec<usize> = Vec::new();
    for &v in vectors {
        let mut x = v;
        for b in &basis {
            x = x.min(x ^ b);
        }
        if x != 0 {
            basis.push(x);
            basis.sort_unstable_by(|a, b| b.cmp(a));
        }
    }
    basis.len()
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
        let part = |name: &str, v: &[usize]| {
            format!("{name}:{}", v.iter().map(|b| coords(*b)).collect::<Vec<_>>().join(" "))
        };
        write!(f, "[{} | {} | {}]", part("r", &self.reg), part("l", &self.lane), part("w", &self.warp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    /// The blocked linear layout is the layout `Layout` describes with chunks and slots.
    #[test]
    fn blocked_matches_the_chunked_layout() {
        for shape in [vec![1024], vec![64, 64], vec![16, 8], vec![4], vec![2, 2, 32], vec![128, 1]] {
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

    #[test]
    fn rank_counts_independent_vectors() {
        assert_eq!(rank(&[1, 2, 3]), 2);
        assert_eq!(rank(&[4, 2, 1, 7]), 3);
        assert_eq!(rank(&[0, 0]), 0);
    }
}
