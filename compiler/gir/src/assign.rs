//! Layout assignment: the GPU stage's decisions for one kernel at one warp count.
//!
//! Every tile starts in the blocked layout ([`LinearLayout::blocked`]). A `dot` that tensor cores
//! can run gets a [`MmaPlan`] and its result the plan's accumulator layout; that layout then
//! spreads forward to the values that can live in it without moving data:
//! - elementwise ops whose tile operands all hold it, or are broadcasts (which gather from
//!   shared memory, or splat a scalar, into any layout as cheaply as into the blocked one);
//! - loop-carried values whose next value holds it (the initial value is converted once, before
//!   the loop) or whose initial value does (the next value is converted if it differs), and
//!   `if` results both branches yield in it;
//! - `multiple_of` / `max_contiguous`, which pass their operand through, and `expand_dims` /
//!   `reshape`, which keep the flat index;
//! - reductions along an axis ([`LinearLayout::reduce_axis`]): the result takes the layout
//!   without the axis, and a broadcast back from it needs no data movement
//!   ([`LinearLayout::broadcast_from`]).
//!
//! Everything else reads its operands in the blocked layout; the lowering converts an operand
//! whose layout differs from the one its user wants ([`GpuPlan::wanted`]), through shared memory
//! unless it is a splat. `tilec compile --emit gir` prints the result ([`GpuPlan::render`]).

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use tile_lang::ir::{Kernel, Op, OpKind, Region, ValueId};

use crate::Target;
use crate::linear::{AxisReduce, LinearLayout};
use crate::mma::Instr;
use crate::mma::{MmaPlan, NoMma};
use crate::pipeline::LoopPipeline;

/// The GPU stage's decisions for a kernel.
#[derive(Clone, Debug, Default)]
pub struct GpuPlan {
    /// Warps of the block's compute threads (a producer warpgroup comes on top).
    pub warps: u32,
    /// Their threads: `warps` times the target's warp size.
    pub threads: u32,
    pub max_vec: usize,
    /// Tiles whose layout is not the blocked one.
    pub layouts: HashMap<ValueId, LinearLayout>,
    /// Each `dot` (by its result): its tensor-core plan, or why it runs as an FMA loop.
    pub dots: HashMap<ValueId, Result<MmaPlan, NoMma>>,
    /// Tensor-core dots whose B is `trans(x)` of an `x` used nowhere else: `x` is written to
    /// shared memory as it is (`[n, k]`) and read with `ldmatrix` without `.trans`; the
    /// transposition itself is never lowered. By dot result, the `x`.
    pub transposed_b: HashMap<ValueId, ValueId>,
    /// The `trans` results those dots read through (the lowering skips them).
    pub fused_permutes: HashSet<ValueId>,
    /// Pipelined loops, by their body's index argument.
    pub pipelines: HashMap<ValueId, LoopPipeline>,
    /// Bytes of shared memory all pipelined loops' stage buffers take (at its start).
    pub pipeline_bytes: u32,
    /// Whether scratch outside pipelined loops starts at 0, over their dead buffers (see
    /// [`GpuPlan::scratch_base`]).
    pub alias_scratch: bool,
    /// The row layout the kernel's row tiles take (see [`row_layout`]), when it has one.
    pub rows: Option<LinearLayout>,
    /// Bytes of each of the two slot arrays reductions exchange partials across warps through
    /// ([`crate::estimate::reduction_slot`], computed once the layouts are settled).
    pub reduction_slot: u32,
    /// Values made by `broadcast`, which can produce any layout directly.
    broadcasts: HashSet<ValueId>,
    /// The op defining each single-result value (ops without regions).
    defs: HashMap<ValueId, Op>,
    /// Fast paths the plan did not take (pipelining, producer warpgroups) and why.
    pub refusals: Vec<crate::Refusal>,
}

/// The most ops a broadcast's source may take to be computed again at each result index (in
/// registers) instead of going through shared memory.
pub const RECOMPUTE_OPS: usize = 12;

impl GpuPlan {
    /// Where scratch shared memory (conversions, reductions, unpipelined dot operands) starts
    /// for an op `inside` a pipelined loop or not: after the pipeline region, except outside
    /// pipelined loops when the kernel only fits by reusing their buffers (`alias_scratch`) —
    /// such loops then end with a barrier after their last copies and dots, so their buffers
    /// are dead outside them (and written only after a barrier when they start).
    pub fn scratch_base(&self, inside: bool) -> u32 {
        if inside || !self.alias_scratch {
            self.pipeline_bytes
        } else {
            0
        }
    }

    /// Threads per block: the kernel's warps, and a producer warpgroup's when a pipelined loop
    /// has one (what every launch uses).
    pub fn block_threads(&self) -> u32 {
        self.threads + self.producer().map_or(0, |_| crate::pipeline::PRODUCER_THREADS)
    }

    /// The producer warpgroup of the kernel's warp-specialised loop, if it has one.
    pub fn producer(&self) -> Option<&crate::pipeline::Producer> {
        self.pipelines.values().find_map(|p| p.producer.as_ref())
    }

    /// Assigns layouts for `k` in blocks of `warps` warps on `target`, pipelining loops `stages`
    /// deep (unless a loop's `#[stages(..)]` says otherwise).
    pub fn new(k: &Kernel, warps: u32, stages: u32, target: &Target) -> GpuPlan {
        let mut p = GpuPlan {
            warps,
            threads: warps * target.warp_size,
            max_vec: crate::estimate::max_vec(k),
            ..GpuPlan::default()
        };
        let chained = chained_dots(k);
        k.walk(&mut |op| {
            if op.regions.is_empty() && op.results.len() == 1 {
                p.defs.insert(op.results[0], op.clone());
            }
            if let OpKind::Broadcast = op.kind {
                p.broadcasts.insert(op.results[0]);
            }
            // A loop-carried tile that starts as a broadcast can start in any layout too.
            if let OpKind::For { .. } = op.kind {
                for (i, a) in op.regions[0].args[1..].iter().enumerate() {
                    if p.broadcasts.contains(&op.operands[3 + i]) {
                        p.broadcasts.insert(*a);
                    }
                }
            }
            if let OpKind::Dot(_) = op.kind {
                let (a, c) = (k.ty(op.operands[0]), k.ty(op.operands[2]));
                let (m, kk, n) = (a.shape[0], a.shape[1], c.shape[1]);
                let rows = chained.contains(&op.results[0]);
                let (din, dacc) = (a.dtype().unwrap(), c.dtype().unwrap());
                // wgmma where it fits (chained dots with every warpgroup on its own rows).
                // fp8 has no mma.sync here: why wgmma does not fit is the reason to give.
                let wg = target
                    .wgmma
                    .then(|| MmaPlan::wgmma_with_rows(m, n, kk, din, dacc, warps, rows));
                let plan = match wg {
                    Some(Ok(p)) => Ok(p),
                    Some(Err(why)) if din.is_fp8() && dacc == tile_lang::ir::DType::F32 => Err(why),
                    _ => MmaPlan::with_rows(m, n, kk, din, dacc, warps, rows),
                };
                if let Ok(pl) = &plan {
                    p.layouts.insert(op.results[0], pl.acc());
                }
                p.dots.insert(op.results[0], plan);
            }
        });
        // dot(a, trans(x)): read x as B stored [n, k].
        let mut uses: HashMap<ValueId, usize> = HashMap::new();
        let mut permutes: HashMap<ValueId, ValueId> = HashMap::new();
        k.walk(&mut |op| {
            for v in &op.operands {
                *uses.entry(*v).or_default() += 1;
            }
            if matches!(&op.kind, OpKind::Permute(p) if p == &[1, 0]) {
                permutes.insert(op.results[0], op.operands[0]);
            }
        });
        let mut bt = Vec::new();
        k.walk(&mut |op| {
            if matches!(op.kind, OpKind::Dot(_))
                && p.mma(op.results[0]).is_some()
                && let Some(x) = permutes.get(&op.operands[1])
                && uses.get(&op.operands[1]) == Some(&1)
                && uses.get(x) == Some(&1)
            {
                bt.push((op.results[0], op.operands[1], *x));
            }
        });
        for (d, t, x) in bt {
            p.transposed_b.insert(d, x);
            p.fused_permutes.insert(t);
        }
        // wgmma reads 8-bit operands K-major only: an fp8 B must be given as `trans(x)`.
        let mn_major_fp8: Vec<ValueId> = p
            .dots
            .iter()
            .filter(|(v, d)| matches!(d, Ok(pl) if pl.input.is_fp8() && !p.transposed_b.contains_key(v)))
            .map(|(v, _)| *v)
            .collect();
        for v in mn_major_fp8 {
            p.layouts.remove(&v);
            p.dots.insert(
                v,
                Err(NoMma::Wgmma(
                    "wgmma reads fp8 B only K-major: give B as trans(x) with x: [n, k] row-major".into(),
                )),
            );
        }
        let mmas: HashMap<ValueId, MmaPlan> = p.dots.iter().filter_map(|(v, d)| Some((*v, d.clone().ok()?))).collect();
        (p.pipelines, p.pipeline_bytes) = crate::pipeline::plan(k, stages, &mmas, &p.transposed_b, &mut p.refusals);
        if p.dots.is_empty() {
            p.rows = row_layout(k, p.threads, p.max_vec);
            if let Some(l) = p.rows.clone() {
                p.seed_rows(k, &l);
            }
        }
        // Forward propagation to a fixed point. Reductions fold in their operand's layout as it
        // is at the end, which a later pass may still change (a tile made of indices takes its
        // user's layout, a loop-carried value its next value's): their results are set again
        // after each pass, and their users convert from whatever they hold. Every other value
        // only ever leaves the blocked layout, so this ends; the cap is a guard.
        for _ in 0..64 {
            let before = p.layouts.len();
            p.propagate(k, &k.body);
            let moved = p.settle_reductions(k);
            if p.layouts.len() == before && !moved {
                break;
            }
        }
        p.reduction_slot = crate::estimate::reduction_slot(k, &p);
        // Row loops (staging only plain loads) whose stages and the scratch used beside them do
        // not fit in shared memory run unpipelined: their stages speed them up, nothing needs them.
        if p.pipeline_bytes > 0 && p.pipelines.values().all(|l| l.loads.iter().all(|s| s.dot.is_none())) {
            let (inside, _) = crate::estimate::scratch_needs(k, &p);
            if p.pipeline_bytes + inside > target.max_smem_per_block {
                let (bytes, limit) = (p.pipeline_bytes + inside, target.max_smem_per_block);
                k.walk(&mut |op| {
                    if matches!(op.kind, OpKind::For { .. }) && p.pipelines.contains_key(&op.regions[0].args[0]) {
                        p.refusals.push(crate::Refusal {
                            loc: op.loc,
                            path: "pipelining",
                            why: format!(
                                "its stages and the scratch beside them take {bytes} B of shared memory, over the {limit} B a block may use (fewer stages or a smaller block fit)"
                            ),
                            asked: false,
                        });
                    }
                });
                p.pipelines.clear();
                p.pipeline_bytes = 0;
                p.reduction_slot = crate::estimate::reduction_slot(k, &p);
            }
        }
        // Scratch after the pipelined loops reuses their buffers only when the kernel would not
        // fit otherwise.
        if p.pipeline_bytes > 0 {
            let (inside, outside) = crate::estimate::scratch_needs(k, &p);
            p.alias_scratch = p.pipeline_bytes + inside.max(outside) > target.max_smem_per_block
                && p.pipeline_bytes.max(outside) <= target.max_smem_per_block;
            // Warp specialisation, once the kernel's shared memory is known.
            let smem = crate::estimate::smem_bytes_in(k, &p);
            crate::pipeline::specialize(
                k,
                &mut p.pipelines,
                &mmas,
                warps,
                target,
                smem,
                p.alias_scratch,
                &mut p.refusals,
            );
            crate::pipeline::multicast(k, &mut p.pipelines, target);
        }
        p
    }

    /// The layout `v` has.
    pub fn layout(&self, k: &Kernel, v: ValueId) -> LinearLayout {
        self.layouts
            .get(&v)
            .cloned()
            .unwrap_or_else(|| LinearLayout::blocked(&k.ty(v).shape, self.threads, self.max_vec))
    }

    /// Whether tile `v` is a scalar broadcast (one value everywhere: any layout is a copy).
    pub fn is_splat(&self, k: &Kernel, v: ValueId) -> bool {
        self.defs
            .get(&v)
            .is_some_and(|op| matches!(op.kind, OpKind::Broadcast) && k.ty(op.operands[0]).is_scalar())
    }

    /// Ops needed to compute tile `v` at any index from indices and scalars alone, within
    /// `budget`: `arange`, `expand_dims`, broadcasts and elementwise ops over them. A broadcast
    /// of such a tile is computed in registers at each of its result's indices.
    pub fn recompute_ops(&self, k: &Kernel, v: ValueId, budget: usize) -> Option<usize> {
        if k.ty(v).is_scalar() || self.is_splat(k, v) {
            return Some(0);
        }
        let op = self.defs.get(&v)?;
        let own = match op.kind {
            OpKind::Arange { .. } => return (budget >= 1).then_some(1),
            OpKind::ExpandDims(_) | OpKind::Broadcast => 0,
            OpKind::Unary(_)
            | OpKind::Binary(_)
            | OpKind::Cmp(_)
            | OpKind::Fma
            | OpKind::Select
            | OpKind::Cast(_)
            | OpKind::PtrAdd => 1,
            _ => return None,
        };
        let mut used = own;
        for o in &op.operands {
            used += self.recompute_ops(k, *o, budget.checked_sub(used)?)?;
        }
        (used <= budget).then_some(used)
    }

    /// The op defining `v` (ops without regions and with one result).
    pub fn def(&self, v: ValueId) -> Option<&Op> {
        self.defs.get(&v)
    }

    /// Whether the lowering converts operand `i` of `op` (see [`wanted`](Self::wanted)), and
    /// the layout it converts to.
    pub fn conversion(&self, k: &Kernel, op: &Op, i: usize, yields_to: &[ValueId]) -> Option<LinearLayout> {
        let v = op.operands[i];
        let to = self.wanted(k, op, i, yields_to)?;
        (to != self.layout(k, v)).then_some(to)
    }

    /// Whether `v` is a load a pipelined loop copies ahead into shared memory.
    pub fn is_staged(&self, v: ValueId) -> bool {
        self.pipelines.values().any(|p| p.loads.iter().any(|l| l.load == v))
    }

    /// Whether `v` is a load a pipelined loop copies ahead for a tensor-core dot, which reads it
    /// from shared memory: the tile never lives in registers and the lowering skips the load.
    /// (A load staged in a loop without dots is read back into registers where it stands.)
    pub fn is_staged_operand(&self, v: ValueId) -> bool {
        self.pipelines
            .values()
            .any(|p| p.loads.iter().any(|l| l.load == v && l.dot.is_some()))
    }

    /// Whether operand `operand` of the dot with result `v` is read from a pipeline's buffers
    /// (a stage, or a resident copy written before the loop).
    pub fn operand_staged(&self, v: ValueId, operand: usize) -> bool {
        self.pipelines.values().any(|p| {
            p.loads.iter().any(|l| l.dot == Some(v) && l.operand == operand)
                || p.resident.iter().any(|l| l.dot == Some(v) && l.operand == operand)
        })
    }

    /// The registers of the dot's A operand that hold each element of its fragments, when its
    /// layout already is the fragments' (attention's P, in the accumulator layout of the dot
    /// before it): the dot then reads A from registers, not shared memory.
    pub fn a_in_registers(&self, k: &Kernel, op: &Op) -> Option<Vec<usize>> {
        let plan = self.mma(op.results[0])?;
        let a = op.operands[0];
        // The fragment maps are those of 16-bit elements.
        if !self.layouts.contains_key(&a) || plan.input.bytes() != 2 {
            return None;
        }
        plan.a_fragment().broadcast_from(&self.layout(k, a))
    }

    /// Whether the dot `op` writes none of its operands to scratch.
    pub fn dot_needs_no_scratch(&self, k: &Kernel, op: &Op) -> bool {
        let v = op.results[0];
        (self.operand_staged(v, 0) || self.a_in_registers(k, op).is_some()) && self.operand_staged(v, 1)
    }

    /// The tensor-core plan of the dot whose result is `v`, if it has one.
    pub fn mma(&self, v: ValueId) -> Option<&MmaPlan> {
        self.dots.get(&v).and_then(|p| p.as_ref().ok())
    }

    /// The layout operand `i` of `op` must be in when `op` reads it (`None`: any; scalars need
    /// none). `yields_to` are the values a `yield` hands its operands to (the enclosing `for`'s
    /// or `if`'s results).
    pub fn wanted(&self, k: &Kernel, op: &Op, i: usize, yields_to: &[ValueId]) -> Option<LinearLayout> {
        let v = op.operands[i];
        if k.ty(v).is_scalar() {
            return None;
        }
        match &op.kind {
            OpKind::Reduce { .. } if self.linear_reduce(k, op).is_some() => None,
            OpKind::ReduceWith { .. } => Some(self.reduce_with_layout(k, op)),
            OpKind::ExpandDims(_) | OpKind::Reshape if self.layouts.contains_key(&op.results[0]) => {
                Some(self.layout(k, op.results[0]).with_shape(&k.ty(v).shape))
            }
            OpKind::Broadcast if self.broadcast_held(k, op) => None,
            OpKind::Dot(_) if i < 2 && self.mma(op.results[0]).is_some() => None,
            // A TMA store writes its tile into the staging buffer from any layout.
            OpKind::StoreBlock { .. } => None,
            OpKind::Dot(_) if i == 2 => Some(self.layout(k, op.results[0])),
            // A load runs in its result's layout when the plan gave it one (seeded only where
            // it keeps the blocked layout's vectors); a store in its value's when that keeps
            // them; others go through the blocked layout.
            OpKind::Load { .. } if self.layouts.contains_key(&op.results[0]) => Some(self.layout(k, op.results[0])),
            OpKind::Store { .. } if self.in_memory_layout(k, op.operands[1]) => Some(self.layout(k, op.operands[1])),
            k_ if elementwise(k_) || passthrough(k_) => Some(self.layout(k, op.results[0])),
            OpKind::For { .. } if i >= 3 => Some(self.layout(k, op.results[i - 3])),
            OpKind::Yield => yields_to.get(i).map(|r| self.layout(k, *r)),
            _ => Some(LinearLayout::blocked(&k.ty(v).shape, self.threads, self.max_vec)),
        }
    }

    /// Sets each reduction's result to the layout its lowering produces from its operand's
    /// current layout (`linear_reduce`; without one, the blocked layout); says whether any moved.
    fn settle_reductions(&mut self, k: &Kernel) -> bool {
        let mut fixes = Vec::new();
        k.walk(&mut |op| {
            if matches!(op.kind, OpKind::Reduce { .. } | OpKind::ReduceWith { .. }) {
                let out = self.linear_reduce(k, op).map(|r| r.out);
                for r in &op.results {
                    let want = out.clone().filter(|_| !k.ty(*r).is_scalar());
                    if self.layouts.get(r) != want.as_ref() {
                        fixes.push((*r, want));
                    }
                }
            }
        });
        let moved = !fixes.is_empty();
        for (r, l) in fixes {
            match l {
                Some(l) => self.layouts.insert(r, l),
                None => self.layouts.remove(&r),
            };
        }
        moved
    }

    /// Whether tile `v` has a layout of its own whose chunks of consecutive elements are as
    /// wide as the blocked layout's: memory is then accessed in it, with the same vectors.
    pub fn in_memory_layout(&self, k: &Kernel, v: ValueId) -> bool {
        let Some(l) = self.layouts.get(&v) else { return false };
        let blocked = LinearLayout::blocked(&k.ty(v).shape, self.threads, self.max_vec);
        l.contiguous_run() >= blocked.contiguous_run()
    }

    /// Gives the row layout `l` (and its slice over the rows, for the row vectors broadcast
    /// into it) to every value of those shapes whose lowering obeys the plan's layout:
    /// elementwise ops, loads, broadcasts, `arange` and loop-carried values. The rest keep the
    /// blocked layout and are converted where used; reductions, `expand_dims` and reshapes
    /// follow their operands in [`propagate`](Self::propagate).
    fn seed_rows(&mut self, k: &Kernel, l: &LinearLayout) {
        let cols = *l.shape.last().unwrap_or(&1);
        let slice = l.reduce_axis(0).map(|r| r.out);
        // Per-row values of a 2-D tile (`[R]`, `[R, 1]`): the layout its row reductions give.
        let rows = l.shape[0];
        let column = (l.shape.len() == 2).then(|| l.reduce_axis(1).map(|r| r.out)).flatten();
        let seed = |shape: &[usize]| -> Option<LinearLayout> {
            if shape == &l.shape[..] {
                return Some(l.clone());
            }
            if rows == cols {
                // A square tile: `[C]` would be both a row and a column vector.
                return None;
            }
            // A row vector: `[C]`, `[1, C]`.
            if shape.last() == Some(&cols) && shape.iter().rev().skip(1).all(|d| *d == 1) {
                return slice.as_ref().map(|s| s.with_shape(shape));
            }
            // A column vector: `[R]`, `[R, 1]`.
            if shape.first() == Some(&rows) && shape.iter().skip(1).all(|d| *d == 1) {
                return column.as_ref().map(|c| c.with_shape(shape));
            }
            None
        };
        let mut seeds = Vec::new();
        k.walk(&mut |op| {
            let obeys = op.kind.is_elementwise()
                || passthrough(&op.kind)
                || matches!(
                    op.kind,
                    OpKind::Load { .. } | OpKind::Broadcast | OpKind::Arange { .. } | OpKind::For { .. } | OpKind::If
                );
            if !obeys {
                return;
            }
            let mut vals = op.results.clone();
            if let OpKind::For { .. } = op.kind {
                vals.extend(&op.regions[0].args[1..]);
            }
            for v in vals {
                if let Some(l) = seed(&k.ty(v).shape) {
                    // A load runs in its result's layout: only one that keeps the blocked
                    // layout's vectors (a column vector may not; it is then loaded blocked and
                    // converted where used).
                    let blocked = LinearLayout::blocked(&k.ty(v).shape, self.threads, self.max_vec);
                    if matches!(op.kind, OpKind::Load { .. }) && l.contiguous_run() < blocked.contiguous_run() {
                        continue;
                    }
                    seeds.push((v, l));
                }
            }
        });
        self.layouts.extend(seeds);
    }

    /// For a broadcast of a tile whose elements every thread already holds (in the layouts the
    /// plan gave both): the source register of each result register.
    pub fn broadcast_in_registers(&self, k: &Kernel, op: &Op) -> Option<Vec<usize>> {
        let src = op.operands[0];
        if k.ty(src).is_scalar() {
            return None;
        }
        self.layout(k, op.results[0]).broadcast_from(&self.layout(k, src))
    }

    /// Whether [`broadcast_in_registers`](Self::broadcast_in_registers) is `Some`, without
    /// building the map (the estimate asks this of every broadcast of every candidate).
    pub fn broadcast_held(&self, k: &Kernel, op: &Op) -> bool {
        let src = op.operands[0];
        !k.ty(src).is_scalar() && self.layout(k, op.results[0]).broadcast_held(&self.layout(k, src))
    }

    /// The distinct source registers a broadcast held in registers repeats (what its result
    /// really occupies), when it is held in registers.
    pub fn broadcast_distinct(&self, k: &Kernel, op: &Op) -> Option<usize> {
        let src = op.operands[0];
        if k.ty(src).is_scalar() {
            return None;
        }
        self.layout(k, op.results[0]).broadcast_distinct(&self.layout(k, src))
    }

    /// The reduction `op` runs in its operand's layout (blocked or not, when its bases each move
    /// along or across the axis, never both: in-thread folds, lane shuffles, warps through
    /// shared memory), if it does.
    pub fn linear_reduce(&self, k: &Kernel, op: &Op) -> Option<AxisReduce> {
        match op.kind {
            // 1-D tiles take the block reduction (converted to the blocked layout first).
            OpKind::Reduce { axis, .. } if k.ty(op.operands[0]).shape.len() >= 2 => {
                self.layout(k, op.operands[0]).reduce_axis(axis)
            }
            OpKind::ReduceWith { axis } => self.reduce_with_layout(k, op).reduce_axis(axis),
            _ => None,
        }
    }

    /// The layout a `reduce` with a helper folds its tiles in: the first one's when a reduction
    /// along the axis can run in it, else the blocked one (where it always can); the other
    /// tiles are converted to it.
    pub fn reduce_with_layout(&self, k: &Kernel, op: &Op) -> LinearLayout {
        let OpKind::ReduceWith { axis } = op.kind else {
            return self.layout(k, op.operands[0]);
        };
        let first = self.layout(k, op.operands[0]);
        if first.reduce_axis(axis).is_some() {
            first
        } else {
            LinearLayout::blocked(&k.ty(op.operands[0]).shape, self.threads, self.max_vec)
        }
    }

    fn propagate(&mut self, k: &Kernel, r: &Region) {
        for op in &r.ops {
            // A loop-carried tile whose initial value already has a layout keeps it in the
            // body (the yield is converted to it if the body leaves it).
            if let OpKind::For { .. } = op.kind {
                for (i, res) in op.results.iter().enumerate() {
                    if let Some(l) = self.layouts.get(&op.operands[3 + i]).cloned()
                        && !self.layouts.contains_key(res)
                        && !k.ty(*res).is_scalar()
                    {
                        self.layouts.insert(*res, l.clone());
                        self.layouts.insert(op.regions[0].args[i + 1], l);
                    }
                }
            }
            for sub in &op.regions {
                self.propagate(k, sub);
            }
            let res = op.results.first().copied();
            let Some(res) = res else { continue };
            // Backward: operands of an elementwise op that are made of indices and scalars are
            // computed in its layout (a mask compared with the accumulator's rows and columns).
            if (elementwise(&op.kind) || passthrough(&op.kind))
                && let Some(l) = self.layouts.get(&res).cloned()
            {
                for v in &op.operands {
                    if !k.ty(*v).is_scalar()
                        && !self.layouts.contains_key(v)
                        && self.recompute_ops(k, *v, RECOMPUTE_OPS).is_some_and(|n| n > 0)
                        && k.ty(*v).shape == k.ty(res).shape
                    {
                        self.layouts.insert(*v, l.clone());
                    }
                }
            }
            if self.layouts.contains_key(&res) && !matches!(op.kind, OpKind::For { .. } | OpKind::If) {
                continue;
            }
            match &op.kind {
                OpKind::Reduce { .. } => {
                    if let Some(red) = self.linear_reduce(k, op) {
                        self.layouts.insert(res, red.out);
                    }
                }
                OpKind::ReduceWith { .. } => {
                    // Every result of a fold in a layout of its own comes out in its reduced layout.
                    if let Some(red) = self.linear_reduce(k, op)
                        && !k.ty(res).is_scalar()
                    {
                        for r in &op.results {
                            self.layouts.entry(*r).or_insert_with(|| red.out.clone());
                        }
                    }
                }
                OpKind::ExpandDims(_) | OpKind::Reshape => {
                    if let Some(l) = self.layouts.get(&op.operands[0]) {
                        let l = l.with_shape(&k.ty(res).shape);
                        self.layouts.insert(res, l);
                    }
                }
                kind if elementwise(kind) || passthrough(kind) => {
                    let tiles: Vec<ValueId> = op.operands.iter().copied().filter(|v| !k.ty(*v).is_scalar()).collect();
                    let chosen: Vec<&LinearLayout> = tiles.iter().filter_map(|v| self.layouts.get(v)).collect();
                    let Some(l) = chosen.first().map(|l| (*l).clone()) else {
                        continue;
                    };
                    // (tiles made of indices and scalars are computed in the chosen layout)
                    let fits = tiles.iter().all(|v| match self.layouts.get(v) {
                        Some(x) => *x == l,
                        None => self.broadcasts.contains(v) || self.recompute_ops(k, *v, RECOMPUTE_OPS).is_some(),
                    });
                    if fits && !k.ty(res).is_scalar() {
                        for v in tiles {
                            self.layouts.entry(v).or_insert_with(|| l.clone());
                        }
                        self.layouts.insert(res, l);
                    }
                }
                OpKind::For { .. } => {
                    let body = &op.regions[0];
                    let Some(y) = body.yield_op() else {
                        continue;
                    };
                    for (i, yv) in y.operands.iter().enumerate() {
                        if let Some(l) = self.layouts.get(yv).cloned()
                            && !self.layouts.contains_key(&op.results[i])
                        {
                            self.layouts.insert(op.results[i], l.clone());
                            self.layouts.insert(body.args[i + 1], l.clone());
                            let init = op.operands[3 + i];
                            if self.broadcasts.contains(&init) {
                                self.layouts.entry(init).or_insert(l);
                            }
                        }
                    }
                }
                OpKind::If => {
                    let yields: Vec<&Op> = op.regions.iter().filter_map(|r| r.ops.last()).collect();
                    if yields.len() != 2 {
                        continue;
                    }
                    for (i, r) in op.results.iter().enumerate() {
                        let (a, b) = (yields[0].operands.get(i), yields[1].operands.get(i));
                        if let (Some(a), Some(b)) = (a, b)
                            && let (Some(la), Some(lb)) = (self.layouts.get(a), self.layouts.get(b))
                            && la == lb
                            && !self.layouts.contains_key(r)
                        {
                            self.layouts.insert(*r, la.clone());
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The plan as text: each dot's decision, then every value not in the blocked layout.
    pub fn render(&self, k: &Kernel) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "gir {} ({} warps)", k.name, self.warps);
        let mut sums = Vec::new();
        k.walk(&mut |op| {
            if let OpKind::SplitSum = op.kind {
                sums.push(format!("%{}", op.operands[0].0));
            }
        });
        if let Some(l) = crate::split::top_loop(k)
            && !sums.is_empty()
        {
            let _ = writeln!(
                s,
                "  split: loop %{} over clusters of {} programs, each 1/{} of its iterations; rank 0 sums {} ({} B of slots) and runs the rest",
                l.regions[0].args[0].0,
                k.cluster,
                k.cluster,
                sums.join(", "),
                crate::split::slot_bytes(k)
            );
        }
        if let Some(l) = &self.rows {
            let shape: Vec<String> = l.shape.iter().map(|d| d.to_string()).collect();
            let _ = writeln!(
                s,
                "  rows: [{}] tiles with the warps on their rows, {l}",
                shape.join(", ")
            );
        }
        let mut dots: Vec<_> = self.dots.iter().collect();
        dots.sort_by_key(|(v, _)| v.0);
        for (v, d) in dots {
            match d {
                Ok(p) => {
                    let (a, b) = (
                        p.a_smem(),
                        if self.transposed_b.contains_key(v) {
                            p.bt_smem()
                        } else {
                            p.b_smem()
                        },
                    );
                    let (instr, unit, count) = match p.instr {
                        Instr::MmaSync => (format!("mma.m16n8k16.{} warps", p.input), "warp", "mma"),
                        Instr::Wgmma => (
                            format!("wgmma.m64n{}k{}.{} warpgroups", p.instr_n(), p.instr_k(), p.input),
                            "warpgroup",
                            "wgmma",
                        ),
                    };
                    let _ = writeln!(
                        s,
                        "  dot %{}: {instr} {}x{} ({unit} block {}x{}), {} {count}, A {}, B{} smem [{}, {}{}] swizzle {}/{}, {} B",
                        v.0,
                        p.warps_m,
                        p.warps_n,
                        p.wm(),
                        p.wn(),
                        p.mma_count(),
                        // A read from registers (attention's P) never goes to shared memory.
                        match self.defs.get(v).and_then(|op| self.a_in_registers(k, op)) {
                            Some(_) => "in registers".to_string(),
                            None => format!("smem [{}, {}] swizzle {}/{}", a.rows, a.cols, a.per_phase, a.max_phase),
                        },
                        if self.transposed_b.contains_key(v) {
                            " (transposed)"
                        } else {
                            ""
                        },
                        b.rows,
                        b.cols,
                        if b.block < b.cols {
                            format!(" in blocks of {}", b.block)
                        } else {
                            String::new()
                        },
                        b.per_phase,
                        b.max_phase,
                        p.smem_bytes()
                    );
                }
                Err(why) => {
                    let _ = writeln!(s, "  dot %{}: fma loop: {why}", v.0);
                }
            }
        }
        let mut loops: Vec<_> = self.pipelines.iter().collect();
        loops.sort_by_key(|(v, _)| v.0);
        for (iv, l) in loops {
            let loads: Vec<String> = l
                .loads
                .iter()
                .map(|s| {
                    let how = match &s.tma {
                        Some(b) => format!(
                            " by TMA ({} box{} of [{}, {}], {}-byte swizzle{})",
                            b.boxes,
                            if b.boxes == 1 { "" } else { "es" },
                            b.rows,
                            b.cols,
                            b.swizzle,
                            if s.multicast {
                                format!(
                                    "; multicast: each of the cluster's {} programs copies {} rows for all",
                                    k.cluster,
                                    b.rows / k.cluster
                                )
                            } else {
                                String::new()
                            }
                        ),
                        None => String::new(),
                    };
                    match s.dot {
                        Some(d) => format!("%{} -> {} of dot %{}{how}", s.load.0, ["A", "B"][s.operand], d.0),
                        None => format!("%{} -> read back in its own layout", s.load.0),
                    }
                })
                .collect();
            let mut in_flight = if l.async_dots.is_empty() {
                String::new()
            } else {
                let d: Vec<String> = l.async_dots.iter().map(|(d, _)| format!("%{}", d.0)).collect();
                format!(", wgmma {} in flight across iterations", d.join(" "))
            };
            if let Some(pr) = &l.producer {
                in_flight += &format!(
                    ", copies issued by a producer warpgroup of {} threads",
                    crate::pipeline::PRODUCER_THREADS
                );
                if let Some((p, c)) = pr.regs {
                    in_flight += &format!(" (setmaxnreg: producer {p}, consumers {c} registers)");
                }
                if let Some(t) = &pr.tile_loop {
                    in_flight += &format!(
                        ", which runs the tile loop %{} too: the ring goes on from tile to tile",
                        t.iv.0
                    );
                }
                if pr.pingpong {
                    in_flight += ", consumer warpgroups take turns issuing wgmma (ping-pong)";
                }
            }
            let _ = writeln!(
                s,
                "  loop %{}: {} stages of {} B at {} ({} {} ahead{in_flight}), staged {}",
                iv.0,
                l.stages,
                l.stage_bytes,
                l.base,
                match (l.tma(), l.loads.iter().all(|x| x.tma.is_some())) {
                    (true, true) => "TMA ring of full/empty mbarriers",
                    (true, false) => "TMA and cp.async",
                    _ => "cp.async",
                },
                l.ahead,
                loads.join(", ")
            );
        }
        let mut groups: Vec<(&LinearLayout, Vec<u32>)> = Vec::new();
        let mut vals: Vec<_> = self.layouts.iter().collect();
        vals.sort_by_key(|(v, _)| v.0);
        for (v, l) in vals {
            match groups.iter_mut().find(|(g, _)| *g == l) {
                Some((_, vs)) => vs.push(v.0),
                None => groups.push((l, vec![v.0])),
            }
        }
        for (l, vs) in groups {
            let names: Vec<String> = vs.iter().map(|v| format!("%{v}")).collect();
            let _ = writeln!(s, "  layout {l}: {}", names.join(" "));
        }
        s
    }
}

/// The row layout for a kernel that reduces a 2-D tile along its rows across warps (in the
/// blocked layout, where a `[ROWS, BLOCK]` tile spreads each row over every warp) when fewer
/// warps would take part with the warps on the rows ([`LinearLayout::rows`]): several rows per
/// program then reduce by register folds and shuffles, without shared memory or barriers. The
/// largest such tile decides; `None` when no reduction gains.
fn row_layout(k: &Kernel, threads: u32, max_vec: usize) -> Option<LinearLayout> {
    let mut best: Option<LinearLayout> = None;
    // Shapes that other folds along an axis (argmax, scans) read: those run in the blocked
    // layout, so their tiles are left in it.
    let mut others = HashSet::new();
    k.walk(&mut |op| {
        if let OpKind::ArgReduce { .. } | OpKind::Scan { .. } | OpKind::ScanWith { .. } = op.kind {
            others.insert(k.ty(op.operands[0]).shape.clone());
        }
    });
    k.walk(&mut |op| {
        let (OpKind::Reduce { axis, .. } | OpKind::ReduceWith { axis }) = op.kind else {
            return;
        };
        let shape = &k.ty(op.operands[0]).shape;
        if shape.len() != 2 || axis != 1 || others.contains(shape) {
            return;
        }
        let crossing = |l: &LinearLayout| l.reduce_axis(axis).map_or(usize::MAX, |r| r.warp_masks.len());
        let rows = LinearLayout::rows(shape, threads, max_vec);
        if crossing(&rows) < crossing(&LinearLayout::blocked(shape, threads, max_vec))
            && best.as_ref().is_none_or(|b| b.numel() < rows.numel())
        {
            best = Some(rows);
        }
    });
    best
}

/// Dots whose result flows (through elementwise ops and row reductions' broadcasts) into the A
/// operand of another dot, and those other dots: attention's two products. Their warps each
/// take whole rows, so that the row statistics between them stay within a warp and the second
/// accumulator's rows match the first's.
fn chained_dots(k: &Kernel) -> HashSet<ValueId> {
    // For each value, its users: (whether the user is a dot reading it as A, whether it is
    // elementwise, the user's result).
    let mut users: HashMap<ValueId, Vec<(bool, bool, ValueId)>> = HashMap::new();
    let mut dots = Vec::new();
    k.walk(&mut |op| {
        let Some(res) = op.results.first().copied() else { return };
        let pass = elementwise(&op.kind) || passthrough(&op.kind);
        for (i, v) in op.operands.iter().enumerate() {
            let as_a = matches!(op.kind, OpKind::Dot(_)) && i == 0;
            users.entry(*v).or_default().push((as_a, pass, res));
        }
        if matches!(op.kind, OpKind::Dot(_)) {
            dots.push(res);
        }
    });
    let mut out = HashSet::new();
    for d in dots {
        let mut work = vec![(d, 0)];
        let mut seen = HashSet::new();
        while let Some((v, depth)) = work.pop() {
            if depth > 16 || !seen.insert(v) {
                continue;
            }
            for (as_a, pass, res) in users.get(&v).into_iter().flatten() {
                if *as_a {
                    out.insert(d);
                    out.insert(*res);
                } else if *pass {
                    work.push((*res, depth + 1));
                }
            }
        }
    }
    out
}

fn elementwise(k: &OpKind) -> bool {
    k.is_elementwise()
}

/// Ops whose result keeps its operand's layout element for element: hints, and a split's sum
/// (each thread adds the other programs' values of its own elements).
fn passthrough(k: &OpKind) -> bool {
    matches!(k, OpKind::MultipleOf(_) | OpKind::MaxContiguous(_) | OpKind::SplitSum)
}
