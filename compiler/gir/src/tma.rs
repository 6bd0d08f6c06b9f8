//! Copies by the TMA engine (sm_90): the tensor maps a kernel takes, the boxes that fill a
//! staged operand's buffer, and the boxes a TMA store copies out of its staging buffer.
//!
//! A block load through a tensor descriptor (`load_block`) that a pipelined loop stages for a
//! `wgmma` is copied by `cp.async.bulk.tensor` when its base, shape and strides are known on the
//! host (kernel parameters or constants), its rows are 16-byte aligned and its innermost stride
//! is 1. The host encodes one 128-byte tensor map per such descriptor (`cuTensorMapEncodeTiled`)
//! and passes it as an extra kernel parameter, after the kernel's own, in the order of
//! [`TensorMap`]s the compiler reports. The boxes write the operand's buffer in exactly the
//! layout of its [`Swizzle`]: column blocks of at most 128 bytes, each a box whose rows the TMA
//! engine swizzles in the mode of the block's width.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use tile_lang::ir::{BinaryOp, ConstValue, DType, Kernel, Op, OpKind, ValueId, block};

use crate::ArgSpec;
use crate::Target;
use crate::assign::GpuPlan;
use crate::mma::Swizzle;

/// The most tensor maps one kernel takes (further descriptors are read with `cp.async`).
pub const MAX_TENSOR_MAPS: usize = 8;

/// An integer the host knows at launch: a kernel argument (by parameter index) or a constant;
/// or, as the outermost extent of a map over a batch of entries ([`TensorMap`]), as many
/// entries as the buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostInt {
    Param(usize),
    Const(i64),
    /// The number of whole entries (the map's inner dimensions, one outer stride apart) that
    /// fit in the base buffer: an entry past the buffer's end reads zeros and is not written.
    Fit,
}

impl std::fmt::Display for HostInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostInt::Param(i) => write!(f, "arg{i}"),
            HostInt::Const(c) => write!(f, "{c}"),
            HostInt::Fit => f.write_str("fit"),
        }
    }
}

/// A tensor map the host encodes for a launch. Dimensions are listed innermost first, as the
/// driver takes them.
///
/// A descriptor whose base is a pointer parameter moved by an entry index times a stride
/// parameter (`a + bid * stride_ab`: one matrix of a batch) gets one more, outermost, dimension:
/// extent [`HostInt::Fit`], that stride, box extent 1; its accesses give the entry index as
/// the outermost coordinate ([`Prepared::entry_of`]). The tensor's edges stay the entry's own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMap {
    pub dtype: DType,
    /// The kernel parameter holding the tensor's base address.
    pub base: usize,
    /// Extent of each dimension, in elements.
    pub dims: Vec<HostInt>,
    /// Stride of each dimension but the innermost (which is 1), in elements.
    pub strides: Vec<HostInt>,
    /// Box extent per dimension.
    pub box_dims: Vec<u32>,
    /// Swizzle span in bytes: 32, 64 or 128 (the box's inner width).
    pub swizzle: u32,
}

/// The text form, one line (kept in the JIT's cache entries):
/// `bf16 base=0 dims=arg5,arg3 strides=arg7 box=64,128 swizzle=128`.
impl std::fmt::Display for TensorMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[HostInt]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
        let boxes = self
            .box_dims
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",");
        write!(
            f,
            "{} base={} dims={} strides={} box={} swizzle={}",
            self.dtype,
            self.base,
            list(&self.dims),
            list(&self.strides),
            boxes,
            self.swizzle
        )
    }
}

impl std::str::FromStr for TensorMap {
    type Err = String;

    fn from_str(s: &str) -> Result<TensorMap, String> {
        let bad = || format!("not a tensor map: `{s}`");
        let mut words = s.split(' ');
        let dtype = DType::from_name(words.next().ok_or_else(bad)?).ok_or_else(bad)?;
        let mut field = |name: &str| -> Result<&str, String> {
            words
                .next()
                .and_then(|w| w.strip_prefix(name))
                .and_then(|w| w.strip_prefix('='))
                .ok_or_else(bad)
        };
        let host = |w: &str| -> Result<HostInt, String> {
            if w == "fit" {
                return Ok(HostInt::Fit);
            }
            match w.strip_prefix("arg") {
                Some(i) => i.parse().map(HostInt::Param).map_err(|_| bad()),
                None => w.parse().map(HostInt::Const).map_err(|_| bad()),
            }
        };
        let list = |w: &str| -> Result<Vec<HostInt>, String> {
            if w.is_empty() {
                Ok(vec![])
            } else {
                w.split(',').map(host).collect()
            }
        };
        let base = field("base")?.parse().map_err(|_| bad())?;
        let dims = list(field("dims")?)?;
        let strides = list(field("strides")?)?;
        let box_dims = field("box")?
            .split(',')
            .map(|b| b.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let swizzle = field("swizzle")?.parse().map_err(|_| bad())?;
        Ok(TensorMap {
            dtype,
            base,
            dims,
            strides,
            box_dims,
            swizzle,
        })
    }
}

/// How the TMA engine fills a staged operand buffer laid out as `swz`: `boxes` boxes of
/// `[rows, cols]` elements, box `j` reading columns `j * cols ..` into bytes
/// `j * box_bytes ..` of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaBoxes {
    pub rows: u32,
    pub cols: u32,
    pub boxes: u32,
    pub box_bytes: u32,
    /// Swizzle span in bytes (the box's row).
    pub swizzle: u32,
}

impl TmaBoxes {
    /// The boxes for a buffer of `dtype` elements in layout `swz`, or why none fit.
    pub fn for_swizzle(swz: &Swizzle, dtype: DType) -> Result<TmaBoxes, String> {
        let esz = dtype.bytes() as u32;
        let row = swz.block as u32 * esz;
        if !matches!(row, 32 | 64 | 128) {
            return Err(format!("rows of {row} bytes (the TMA swizzles 32, 64 or 128)"));
        }
        // The engine swizzles 16-byte chunks by address bits: the buffer's swizzle must be the
        // one of its row width (checked against `Swizzle::apply` in the tests).
        let (vec, phases) = (swz.vec as u32 * esz, swz.max_phase as u32);
        if vec != 16 || phases != row / 16 || swz.per_phase as u32 * row != 128 {
            return Err("a swizzle the TMA engine does not produce".into());
        }
        if swz.rows > 256 {
            return Err(format!("{} rows (a box has at most 256)", swz.rows));
        }
        Ok(TmaBoxes {
            rows: swz.rows as u32,
            cols: swz.block as u32,
            boxes: (swz.cols / swz.block) as u32,
            box_bytes: swz.rows as u32 * row,
            swizzle: row,
        })
    }

    pub fn bytes(&self) -> u32 {
        self.boxes * self.box_bytes
    }
}

// ---- `prepare`: which block loads the TMA engine copies, and the expansion of every other
// block access into pointer arithmetic ----
//
// A block load qualifies when a pipelined loop at the top of the kernel (or directly inside a
// loop there) stages it for a wgmma with TMA boxes (`StagedLoad::tma`), and the launch's
// specialisation proves what the tensor map needs: the base is a 16-byte-aligned pointer
// argument, the innermost stride is 1, and every other stride is a multiple of 16 bytes; the
// shape and strides are arguments or constants the host can read at launch. A block store of a
// 2-D tile qualifies on the same facts, on sm_90a, when its staging buffer (`store_boxes`)
// fits beside the rest of the kernel's shared memory. Everything else is expanded
// (`tile_lang::ir::block::expand_blocks`): loads copied with `cp.async` like any pointer load,
// stores as pointer stores.

/// A kernel ready for the lowering: its remaining block loads and stores each go through one of
/// `maps`.
#[derive(Clone, Debug)]
pub struct Prepared<'k> {
    pub kernel: Cow<'k, Kernel>,
    pub maps: Vec<TensorMap>,
    /// The map of each block access left in `kernel`: a load's by its result, a store's by the
    /// tile it stores.
    pub map_of: HashMap<ValueId, usize>,
    /// The entry index (an integer scalar of at most 32 bits, defined outside the access's
    /// loop) of each access in `map_of` whose map has an entries dimension: its outermost
    /// coordinate.
    pub entry_of: HashMap<ValueId, ValueId>,
    /// The block loads of pipelined loops the TMA engine does not copy, and why (they are
    /// expanded into pointer loads, which cp.async may still stage).
    pub refusals: Vec<crate::Refusal>,
}

/// The op defining each value of `k`.
fn definitions(k: &Kernel) -> HashMap<ValueId, &Op> {
    let mut m = HashMap::new();
    fn go<'a>(r: &'a tile_lang::ir::Region, m: &mut HashMap<ValueId, &'a Op>) {
        for op in &r.ops {
            for v in &op.results {
                m.insert(*v, op);
            }
            for sub in &op.regions {
                go(sub, m);
            }
        }
    }
    go(&k.body, &mut m);
    m
}

/// The tensor a descriptor access reads or writes, as the host can size it: the pointer
/// parameter it is based on and its extents and strides (outermost first), each an argument or
/// a constant. Whichever way the access is lowered (TMA, or pointer arithmetic), it stays
/// inside `1 + Σ (dim - 1) * stride` elements of its base when every dimension is positive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockExtent {
    pub base: usize,
    pub dims: Vec<HostInt>,
    pub strides: Vec<HostInt>,
    /// Where the access is in the source.
    pub loc: tile_lang::ir::Loc,
}

impl BlockExtent {
    /// The elements the tensor spans from its base for integer arguments `int` (by parameter
    /// index), when they are known and the strides are not negative; 0 when a dimension is
    /// empty (nothing is accessed).
    pub fn elements(&self, int: &dyn Fn(usize) -> Option<i64>) -> Option<u64> {
        let value = |h: &HostInt| match h {
            HostInt::Param(p) => int(*p),
            HostInt::Const(c) => Some(*c),
            HostInt::Fit => None,
        };
        let mut last: i128 = 0;
        for (d, s) in self.dims.iter().zip(&self.strides) {
            let (d, s) = (value(d)? as i128, value(s)? as i128);
            if d <= 0 {
                return Some(0);
            }
            if s < 0 {
                return None;
            }
            last += (d - 1) * s;
        }
        u64::try_from(last + 1).ok()
    }
}

/// Every descriptor access of `k` whose base is a pointer parameter and whose extents and
/// strides the host knows: what a launch checks each buffer's length against (the JIT), so that
/// a block access lowered to pointer arithmetic is held to the tensor it describes as the TMA
/// engine holds it.
pub fn block_extents(k: &Kernel) -> Vec<BlockExtent> {
    if !block::has_blocks(k) {
        return Vec::new();
    }
    let defs = definitions(k);
    let params: HashMap<ValueId, usize> = k.params.iter().enumerate().map(|(i, p)| (p.value, i)).collect();
    let mut out: Vec<BlockExtent> = Vec::new();
    k.walk(&mut |op| {
        if !matches!(op.kind, OpKind::LoadBlock { .. } | OpKind::StoreBlock { .. }) {
            return;
        }
        let o = block::operands(op);
        let Some(&base) = params.get(&o.ptr) else {
            return;
        };
        let host = |v: &ValueId| host_int(k, *v, &defs, &params);
        let (Some(dims), Some(strides)) = (
            o.shape.iter().map(host).collect::<Option<Vec<_>>>(),
            o.strides.iter().map(host).collect::<Option<Vec<_>>>(),
        ) else {
            return;
        };
        let e = BlockExtent {
            base,
            dims,
            strides,
            loc: op.loc,
        };
        if !out
            .iter()
            .any(|x| x.base == e.base && x.dims == e.dims && x.strides == e.strides)
        {
            out.push(e);
        }
    });
    out
}

/// Chooses the TMA block loads and stores of `k` and expands every other block access.
pub fn prepare<'k>(k: &'k Kernel, warps: u32, stages: u32, target: &Target, spec: &[ArgSpec]) -> Prepared<'k> {
    let mut out = Prepared {
        kernel: Cow::Borrowed(k),
        maps: Vec::new(),
        map_of: HashMap::new(),
        entry_of: HashMap::new(),
        refusals: Vec::new(),
    };
    if !block::has_blocks(k) {
        return out;
    }
    let plan = GpuPlan::new(k, warps, stages, target);
    let defs = definitions(k);
    let params: HashMap<ValueId, usize> = k.params.iter().enumerate().map(|(i, p)| (p.value, i)).collect();
    let mut keep = HashSet::new();
    // Loops at the top of the kernel, and directly inside a loop there (a persistent kernel's
    // loop over tiles): the lowering sets up a ring's barriers before each run of its loop, or
    // once before the tile loop when a producer runs both (`pipeline::TileLoop`).
    let loops = k.body.ops.iter().flat_map(|op| {
        let inner: Vec<&Op> = match op.kind {
            OpKind::For { .. } => op.regions[0]
                .ops
                .iter()
                .filter(|o| matches!(o.kind, OpKind::For { .. }))
                .collect(),
            _ => Vec::new(),
        };
        std::iter::once(op).chain(inner)
    });
    let refuse = |op: &Op, why: String| crate::Refusal {
        loc: op.loc,
        path: "TMA",
        why: format!("{why}; the block is loaded by pointer loads instead"),
        asked: false,
    };
    let mut refusals = Vec::new();
    for op in loops {
        let OpKind::For { .. } = op.kind else { continue };
        let Some(pl) = plan.pipelines.get(&op.regions[0].args[0]) else {
            continue;
        };
        // Block loads the plan did not stage for the TMA engine, and why.
        refusals.extend(
            plan.refusals
                .iter()
                .filter(|r| r.path == "pipelining")
                .filter(|r| {
                    op.regions[0]
                        .ops
                        .iter()
                        .any(|o| matches!(o.kind, OpKind::LoadBlock { .. }) && o.loc == r.loc)
                })
                .map(|r| crate::Refusal {
                    path: "TMA",
                    ..r.clone()
                }),
        );
        // Values the loop defines: an entry index must be known before the loop runs (the copies
        // of later iterations are issued ahead, from the loop's own coordinates).
        let inside = defined_in(op);
        for ld in &pl.loads {
            let Some(mut boxes) = ld.tma else { continue };
            // A multicast load's map copies one program's share of the rows.
            if ld.multicast {
                boxes.rows /= k.cluster;
            }
            let lop = defs[&ld.load];
            let mapped = tensor_map(k, lop, &defs, &params, spec, boxes).and_then(|(m, entry)| match entry {
                Some(e) if inside.contains(&e) => Err(format!(
                    "its base moves by an entry index computed inside the loop (line {}): the index of a batch entry must be known before the loop",
                    op.loc.line
                )),
                _ => Ok((m, entry)),
            });
            let (i, entry) = match mapped {
                Ok((m, entry)) => match map_index(&mut out.maps, m) {
                    Some(i) => (i, entry),
                    None => {
                        refusals.push(refuse(
                            lop,
                            format!("the kernel has more than {MAX_TENSOR_MAPS} descriptors"),
                        ));
                        continue;
                    }
                },
                Err(why) => {
                    refusals.push(refuse(lop, why));
                    continue;
                }
            };
            if let Some(e) = entry {
                out.entry_of.insert(ld.load, e);
            }
            out.map_of.insert(ld.load, i);
            keep.insert(ld.load);
        }
    }
    out.refusals = refusals;
    // Stores of 2-D tiles through descriptors: a TMA store each, where the kernel still fits
    // with their staging buffers.
    if target.wgmma {
        let loads = (out.maps.clone(), out.map_of.clone(), out.entry_of.clone());
        let mut kept_stores = HashSet::new();
        let mut stores = Vec::new();
        k.walk(&mut |op| {
            if let OpKind::StoreBlock { rank: 2 } = op.kind {
                stores.push(op.clone());
            }
        });
        for op in &stores {
            let v = block::operands(op).value.expect("a store has a value");
            let Some((_, boxes)) = store_boxes(k, v) else { continue };
            let Ok((m, entry)) = tensor_map(k, op, &defs, &params, spec, boxes) else {
                continue;
            };
            let Some(i) = map_index(&mut out.maps, m) else { continue };
            if let Some(e) = entry {
                out.entry_of.insert(v, e);
            }
            out.map_of.insert(v, i);
            kept_stores.insert(v);
        }
        if !kept_stores.is_empty() {
            let kept = block::expand_blocks(k, &keep, &kept_stores);
            let plan = GpuPlan::new(&kept, warps, stages, target);
            if crate::estimate::smem_bytes_in(&kept, &plan) <= target.max_smem_per_block {
                out.kernel = Cow::Owned(kept);
                return out;
            }
            (out.maps, out.map_of, out.entry_of) = loads;
        }
    }
    out.kernel = Cow::Owned(block::expand_blocks(k, &keep, &HashSet::new()));
    out
}

/// The values `op`'s regions define: their arguments and their ops' results, nested ones
/// included.
fn defined_in(op: &Op) -> HashSet<ValueId> {
    fn go(r: &tile_lang::ir::Region, out: &mut HashSet<ValueId>) {
        out.extend(r.args.iter().copied());
        for o in &r.ops {
            out.extend(o.results.iter().copied());
            for sub in &o.regions {
                go(sub, out);
            }
        }
    }
    let mut out = HashSet::new();
    for r in &op.regions {
        go(r, &mut out);
    }
    out
}

/// The index of `map` among `maps`, added when it is new and there is room for it.
fn map_index(maps: &mut Vec<TensorMap>, map: TensorMap) -> Option<usize> {
    if let Some(i) = maps.iter().position(|m| *m == map) {
        return Some(i);
    }
    (maps.len() < MAX_TENSOR_MAPS).then(|| {
        maps.push(map);
        maps.len() - 1
    })
}

/// The staging buffer of a TMA store of tile `v` (2-D, at most 256 rows): column blocks of up
/// to 128 bytes, 128-byte swizzled as the engine reads them (so that threads writing their
/// elements spread over the banks), one box each; `None` when no box fits.
pub fn store_boxes(k: &Kernel, v: ValueId) -> Option<(Swizzle, TmaBoxes)> {
    let t = k.ty(v);
    let dtype = t.dtype()?;
    let [rows, cols] = t.shape[..] else { return None };
    let esz = dtype.bytes();
    let block = (128 / esz).min(cols);
    if block == 0 || cols % block != 0 {
        return None;
    }
    let swz = Swizzle::in_blocks(rows, cols, block, esz);
    let boxes = TmaBoxes::for_swizzle(&swz, dtype).ok()?;
    Some((swz, boxes))
}

/// The tensor map a block load reads through (or a block store writes through), and the entry
/// index of a map over a batch of entries, or why the host cannot encode one.
fn tensor_map(
    k: &Kernel,
    op: &Op,
    defs: &HashMap<ValueId, &Op>,
    params: &HashMap<ValueId, usize>,
    spec: &[ArgSpec],
    boxes: TmaBoxes,
) -> Result<(TensorMap, Option<ValueId>), String> {
    let o = block::operands(op);
    let dtype = k
        .ty(o.value.unwrap_or_else(|| op.results[0]))
        .dtype()
        .ok_or("the block holds no numbers")?;
    let fact = |p: usize| spec.get(p).copied().unwrap_or_default();
    let host = |v: ValueId| host_int(k, v, defs, params);
    // A stride the engine takes: a positive multiple of 16 bytes (8 elements of bf16, 16 of fp8).
    let aligned = |s: &HostInt| match s {
        HostInt::Const(c) => (c * dtype.bytes() as i64) % 16 == 0 && *c > 0,
        HostInt::Param(p) => fact(*p).divisibility() * dtype.bytes() as u64 >= 16,
        HostInt::Fit => false,
    };
    let (base, entry) = match params.get(&o.ptr) {
        Some(&p) => (p, None),
        None => {
            let (p, e) = entry_base(k, o.ptr, defs, params).ok_or(
                "the descriptor's base is computed in the kernel, not a pointer parameter or a pointer parameter plus an entry index times a stride (`a + bid * stride_ab`): move the offset into the coordinates, or pass the offset tensor as a parameter",
            )?;
            (p, Some(e))
        }
    };
    if !fact(base).divisible_by_16 {
        return Err(
            "its base is not known to be 16-byte aligned (the JIT specialises on it at each launch; `tilec compile` needs --assume-aligned)"
                .into(),
        );
    }
    if let Some((_, stride)) = entry
        && !aligned(&stride)
    {
        return Err(format!(
            "its base moves by an entry stride not known to be a multiple of 16 bytes ({} elements of {dtype})",
            16_usize.div_ceil(dtype.bytes())
        ));
    }
    let computed = "the descriptor's shape or strides are computed in the kernel (`batch * M`, say): a tensor map is encoded on the host from arguments and constants, so pass them as parameters";
    let mut dims: Vec<HostInt> = o
        .shape
        .iter()
        .rev()
        .map(|v| host(*v))
        .collect::<Option<_>>()
        .ok_or(computed)?;
    let mut strides: Vec<HostInt> = o
        .strides
        .iter()
        .rev()
        .map(|v| host(*v))
        .collect::<Option<_>>()
        .ok_or(computed)?;
    let unit = match strides[0] {
        HostInt::Const(c) => c == 1,
        HostInt::Param(p) => fact(p).equals_one,
        HostInt::Fit => false,
    };
    if !unit {
        return Err(
            "its innermost stride is not known to be 1 (the constant 1, or an argument equal to 1 at the launch)"
                .into(),
        );
    }
    if !strides[1..].iter().all(aligned) {
        return Err(format!(
            "its row strides are not known to be multiples of 16 bytes ({} elements of {dtype})",
            16_usize.div_ceil(dtype.bytes())
        ));
    }
    let mut box_dims = vec![boxes.cols, boxes.rows];
    if let Some((_, stride)) = entry {
        dims.push(HostInt::Fit);
        strides.push(stride);
        box_dims.push(1);
    }
    let map = TensorMap {
        dtype,
        base,
        dims,
        strides: strides[1..].to_vec(),
        box_dims,
        swizzle: boxes.swizzle,
    };
    Ok((map, entry.map(|(index, _)| index)))
}

/// A descriptor base `ptr + index * stride` (or `stride * index`): the pointer parameter, and
/// the entry index (a 32-bit integer, through widening casts) with the stride as the host knows
/// it.
fn entry_base(
    k: &Kernel,
    ptr: ValueId,
    defs: &HashMap<ValueId, &Op>,
    params: &HashMap<ValueId, usize>,
) -> Option<(usize, (ValueId, HostInt))> {
    let add = defs.get(&ptr)?;
    if add.kind != OpKind::PtrAdd {
        return None;
    }
    let base = *params.get(&add.operands[0])?;
    let mul = defs.get(&add.operands[1])?;
    if mul.kind != OpKind::Binary(BinaryOp::Mul) {
        return None;
    }
    let (x, y) = (mul.operands[0], mul.operands[1]);
    let host = |v| host_int(k, v, defs, params);
    // The stride is the operand the host knows (the second when both are).
    let (index, stride) = match (host(x), host(y)) {
        (_, Some(s)) => (x, s),
        (Some(s), None) => (y, s),
        (None, None) => return None,
    };
    let index = narrowest(k, index, defs);
    let is_32 = k.ty(index).dtype().is_some_and(|d| d.is_int() && d.bits() == 32);
    is_32.then_some((base, (index, stride)))
}

/// `v` before the widening integer casts that produced it.
fn narrowest(k: &Kernel, v: ValueId, defs: &HashMap<ValueId, &Op>) -> ValueId {
    match defs.get(&v) {
        Some(op) if matches!(op.kind, OpKind::Cast(_)) && widens(k, op) => narrowest(k, op.operands[0], defs),
        _ => v,
    }
}

/// Whether a cast keeps every integer value (i32 to i64, u32 to i64).
fn widens(k: &Kernel, op: &Op) -> bool {
    let (Some(from), Some(to)) = (k.ty(op.operands[0]).dtype(), k.ty(op.results[0]).dtype()) else {
        return false;
    };
    from.int_widens_to(to)
}

/// `v` as the host knows it: an integer argument or a constant, through widening casts and
/// hints.
fn host_int(k: &Kernel, v: ValueId, defs: &HashMap<ValueId, &Op>, params: &HashMap<ValueId, usize>) -> Option<HostInt> {
    if let Some(p) = params.get(&v) {
        return Some(HostInt::Param(*p));
    }
    let op = defs.get(&v)?;
    match &op.kind {
        OpKind::Const(ConstValue::Int(c)) => Some(HostInt::Const(*c)),
        OpKind::MultipleOf(_) | OpKind::MaxContiguous(_) => host_int(k, op.operands[0], defs, params),
        // Casts between integers that keep every value (i32 to i64) keep the argument's.
        OpKind::Cast(_) if widens(k, op) => host_int(k, op.operands[0], defs, params),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TMA engine's swizzle of a box: 16-byte chunk `c` of row `r` (rows of `span` bytes)
    /// lands at chunk `c ^ ((r * span / 128) % (span / 16))`, the address-bit XOR of the
    /// `SWIZZLE_{span}B` modes (bits [4, 4 + log2(span / 16)) xor bits [7, ..)).
    fn tma_offset(span: usize, r: usize, c_bytes: usize) -> usize {
        let addr = r * span + c_bytes;
        let chunk_bits = (span / 16).trailing_zeros();
        let mask = (1 << chunk_bits) - 1;
        let x = (addr >> 7) & mask;
        addr ^ (x << 4)
    }

    #[test]
    fn boxes_reproduce_the_operand_swizzle() {
        let bf16 = [(64, 64, 64), (128, 32, 32), (64, 16, 16), (32, 256, 64), (64, 128, 64)].map(|c| (c, DType::BF16));
        let fp8 = [(128, 128, 128), (256, 64, 64), (64, 32, 32), (64, 256, 128)].map(|c| (c, DType::F8E4M3));
        for ((rows, cols, block), dtype) in bf16.into_iter().chain(fp8) {
            let esz = dtype.bytes();
            let swz = Swizzle::in_blocks(rows, cols, block, esz);
            let b = TmaBoxes::for_swizzle(&swz, dtype).unwrap();
            assert_eq!(b.boxes as usize * b.cols as usize, cols);
            for r in 0..rows {
                for c in 0..cols {
                    let (j, cc) = (c / b.cols as usize, c % b.cols as usize);
                    let tma = j * b.box_bytes as usize + tma_offset(b.swizzle as usize, r, cc * esz);
                    assert_eq!(
                        tma,
                        swz.apply(r * cols + c) * esz,
                        "{rows}x{cols}/{block} {dtype} at ({r}, {c})"
                    );
                }
            }
        }
    }

    #[test]
    fn the_text_form_round_trips() {
        let m = TensorMap {
            dtype: DType::BF16,
            base: 1,
            dims: vec![HostInt::Param(5), HostInt::Const(4096)],
            strides: vec![HostInt::Param(7)],
            box_dims: vec![64, 128],
            swizzle: 128,
        };
        assert_eq!(
            m.to_string(),
            "bf16 base=1 dims=arg5,4096 strides=arg7 box=64,128 swizzle=128"
        );
        assert_eq!(m.to_string().parse::<TensorMap>(), Ok(m));
        assert!("bf16 base=x".parse::<TensorMap>().is_err());
    }

    #[test]
    fn narrow_rows_have_no_boxes() {
        assert!(TmaBoxes::for_swizzle(&Swizzle::in_blocks(64, 8, 8, 2), DType::BF16).is_err());
    }

    /// A kernel with one tile of each shape and dtype, as a store's value.
    fn tiles(shapes: &[(&[i64], DType)]) -> Kernel {
        Kernel {
            name: "stores".into(),
            params: vec![],
            consts: vec![],
            warps: vec![],
            stages: vec![],
            cluster: 1,
            body: Default::default(),
            values: shapes
                .iter()
                .map(|(shape, dtype)| tile_lang::ir::Type {
                    elem: tile_lang::ir::Elem::Scalar(*dtype),
                    shape: shape.iter().map(|&x| x as usize).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn store_staging_is_one_box_per_128_byte_column_block() {
        let k = tiles(&[
            (&[128, 256], DType::BF16),
            (&[16, 32], DType::F32),
            (&[16, 4], DType::F32),
            (&[300, 64], DType::BF16),
            (&[64], DType::BF16),
            (&[64, 96], DType::BF16),
        ]);
        let boxes = |i: u32| store_boxes(&k, ValueId(i)).map(|(_, b)| (b.boxes, b.rows, b.cols, b.box_bytes));
        // Four 64-column blocks of 128 rows, 16 KB each.
        assert_eq!(boxes(0), Some((4, 128, 64, 16384)));
        // f32: 32 columns make a 128-byte row.
        assert_eq!(boxes(1), Some((1, 16, 32, 2048)));
        // Rows of 16 bytes, more than 256 rows, not 2-D, columns not a multiple of the block:
        // no TMA store (pointer stores instead).
        assert_eq!(boxes(2), None);
        assert_eq!(boxes(3), None);
        assert_eq!(boxes(4), None);
        assert_eq!(boxes(5), None);
    }

    #[test]
    fn a_map_is_added_once_and_not_past_the_limit() {
        let map = |base| TensorMap {
            dtype: DType::BF16,
            base,
            dims: vec![HostInt::Param(3), HostInt::Param(4)],
            strides: vec![HostInt::Param(5)],
            box_dims: vec![64, 128],
            swizzle: 128,
        };
        let mut maps = Vec::new();
        assert_eq!(map_index(&mut maps, map(0)), Some(0));
        assert_eq!(map_index(&mut maps, map(1)), Some(1));
        assert_eq!(map_index(&mut maps, map(0)), Some(0));
        for b in 2..MAX_TENSOR_MAPS {
            assert_eq!(map_index(&mut maps, map(b)), Some(b));
        }
        assert_eq!(map_index(&mut maps, map(MAX_TENSOR_MAPS)), None);
        assert_eq!(maps.len(), MAX_TENSOR_MAPS);
    }
}
