//! What the lowering will need, computed from the IR alone (no LLVM): the dynamic shared memory
//! a kernel asks for and how many elements of each tile a thread holds. The optimizer calls
//! these for every candidate configuration, where running the real lowering would be too slow.
//!
//! Layouts, conversions, tensor-core dots, recomputed broadcasts and pipeline buffers come from
//! the same [`GpuPlan`] the lowering reads; the remaining rules (`via_smem`, `stage`, the FMA
//! `dot`, the full reduction's per-warp partials, and `need_smem`'s rounding to 16 bytes) mirror
//! the lowering's (`tile-codegen`'s `lower/`); the test
//! `estimate_matches_lowering` in `tests/suite/optimizer.rs` compares them with `compile` on
//! every example and candidate, so a change to the lowering that forgets this file fails there.

use tile_lang::ir::{DType, Elem, Kernel, Op, OpKind, Region, Type, ValueId};

use crate::assign::{GpuPlan, RECOMPUTE_OPS};

use crate::layout::Layout;

/// Elements per layout chunk, as the lowering chooses it: 16 bytes of the narrowest element the
/// kernel loads or stores (8 for 16-bit types, 4 for f32).
pub fn max_vec(k: &Kernel) -> usize {
    let mut narrowest = 4;
    k.walk(&mut |op| {
        if matches!(op.kind, OpKind::Load { .. } | OpKind::Store { .. })
            && let Elem::Ptr { pointee, .. } = k.ty(op.operands[0]).elem
            && pointee != DType::Bool
        {
            narrowest = narrowest.min(pointee.bytes());
        }
    });
    (16 / narrowest).min(8)
}

/// Elements of a tile of `shape` that each of `threads` threads holds in registers (scalars: 1).
pub fn elems_per_thread(shape: &[usize], threads: u32, max_vec: usize) -> usize {
    if shape.is_empty() {
        return 1;
    }
    Layout::new(shape, threads, max_vec).per_thread()
}

/// Bytes an element takes in shared memory (bools as bytes, pointers as 64-bit integers).
fn smem_size(e: Elem) -> u32 {
    match e {
        Elem::Ptr { .. } => 8,
        Elem::Scalar(d) => d.bytes() as u32,
    }
}

fn tile_bytes(t: &Type) -> u32 {
    t.numel() as u32 * smem_size(t.elem)
}

/// The dynamic shared memory the lowering of `k` by `plan` needs: the pipeline region, then the
/// largest scratch any op needs.
pub fn smem_bytes_in(k: &Kernel, plan: &GpuPlan) -> u32 {
    let (inside, outside) = scratch_needs(k, plan);
    let at = |inside_loop: bool, need: u32| {
        if need == 0 {
            0
        } else {
            plan.scratch_base(inside_loop) + need
        }
    };
    at(true, inside).max(at(false, outside)).max(plan.pipeline_bytes)
}

/// The most scratch any op needs inside pipelined loops, and outside them.
pub fn scratch_needs(k: &Kernel, plan: &GpuPlan) -> (u32, u32) {
    let (mut need_in, mut need_out) = (0u32, 0u32);
    scratch_uses(k, plan, &mut |_, bytes, inside| {
        let need = if inside { &mut need_in } else { &mut need_out };
        *need = (*need).max(bytes);
    });
    (need_in, need_out)
}

/// Calls `f` with every op that moves data through scratch shared memory, the bytes it needs
/// there (rounded up to 16; an op may be reported more than once: once per operand it converts
/// to another layout, once for its own staging), and whether it is inside a pipelined loop.
/// What [`scratch_needs`] sizes the region by, and what the config model charges as
/// shared-memory traffic.
pub fn scratch_uses(k: &Kernel, plan: &GpuPlan, f: &mut dyn FnMut(&Op, u32, bool)) {
    let threads = plan.threads;
    let mv = max_vec(k);
    walk_with_yields(&k.body, &[], plan, false, &mut |op, yields_to, inside| {
        let mut want = |bytes: u32| f(op, bytes.next_multiple_of(16), inside);
        // Operands the lowering converts to another layout go through scratch.
        let skipped = op
            .results
            .first()
            .is_some_and(|r| plan.is_staged_operand(*r) || plan.fused_permutes.contains(r));
        if !matches!(op.kind, OpKind::If) && !skipped {
            for i in 0..op.operands.len() {
                let v = op.operands[i];
                if plan.conversion(k, op, i, yields_to).is_some() && plan.recompute_ops(k, v, RECOMPUTE_OPS).is_none() {
                    want(tile_bytes(k.ty(v)));
                }
            }
        }
        let src = || k.ty(op.operands[0]);
        let res = || k.ty(op.results[0]);
        match &op.kind {
            OpKind::Broadcast
                if !src().is_scalar()
                    && !plan.broadcast_held(k, op)
                    && plan.recompute_ops(k, op.operands[0], RECOMPUTE_OPS).is_none() =>
            {
                want(tile_bytes(src()))
            }
            // The same registers when the flat index stays where it was.
            OpKind::ExpandDims(_) | OpKind::Reshape
                if !res().is_scalar()
                    && plan.layout(k, op.results[0]) == plan.layout(k, op.operands[0]).with_shape(&res().shape) => {}
            OpKind::ExpandDims(_) | OpKind::Reshape => {
                let (a, b) = (
                    Layout::new(&src().shape, threads, mv),
                    Layout::new(&res().shape, threads, mv),
                );
                let same = (a.numel, a.vec, a.chunks) == (b.numel, b.vec, b.chunks);
                if !(same || res().is_scalar() && src().numel() == 1) {
                    want(tile_bytes(src()));
                }
            }
            OpKind::Permute(_) if plan.fused_permutes.contains(&op.results[0]) => {}
            OpKind::Permute(_) | OpKind::Split => want(tile_bytes(src())),
            OpKind::Join => want(tile_bytes(src()) + tile_bytes(k.ty(op.operands[1]))),
            OpKind::Dot(_) => match plan.mma(op.results[0]) {
                Some(_) if plan.dot_needs_no_scratch(k, op) => {}
                Some(p) => want(p.smem_bytes() as u32),
                None => {
                    let (a, b) = (src(), k.ty(op.operands[1]));
                    want((a.numel() + b.numel()) as u32 * smem_size(a.elem));
                }
            },
            // Partials exchanged across warps: two slot arrays, used alternately.
            OpKind::Reduce { .. } | OpKind::ReduceWith { .. }
                if plan.linear_reduce(k, op).is_some() || block_reduction(k, plan, op) =>
            {
                if reduction_partials(k, plan, op) > 0 {
                    want(2 * plan.reduction_slot);
                }
            }
            OpKind::Reduce { .. }
            | OpKind::ReduceWith { .. }
            | OpKind::ArgReduce { .. }
            | OpKind::Scan { .. }
            | OpKind::ScanWith { .. } => want(tile_bytes(src())),
            // A TMA store's staging buffer, on a 1024-byte boundary (its swizzle's).
            OpKind::StoreBlock { .. } => {
                let v = *op.operands.last().expect("a store has a value");
                if let Some((_, boxes)) = crate::tma::store_boxes(k, v) {
                    want(tma_store_offset(plan, inside) + boxes.bytes());
                }
            }
            _ => {}
        }
    });
}

/// Where a TMA store's staging buffer starts in scratch (inside a pipelined loop or not): the
/// first 1024-byte boundary of the scratch region.
pub fn tma_store_offset(plan: &GpuPlan, inside: bool) -> u32 {
    let base = plan.scratch_base(inside);
    base.next_multiple_of(1024) - base
}

/// Whether a `Reduce` the plan does not run in its operand's layout is a block reduction: a
/// handful of outputs (a row per program, a few rows), each reduced block-wide by in-thread
/// partials, a butterfly across the warp, then across warps in shared memory. Each of a thread's
/// elements is matched against every output, so the path is kept to one output or to a small
/// product of outputs and elements per thread; other reductions fold rows through shared memory.
pub fn block_reduction(k: &Kernel, plan: &GpuPlan, op: &Op) -> bool {
    const FEW: usize = 8;
    let (src, res) = (k.ty(op.operands[0]), k.ty(op.results[0]));
    let nout = res.numel();
    matches!(op.kind, OpKind::Reduce { .. })
        && plan.linear_reduce(k, op).is_none()
        && (nout == 1 || (nout <= FEW && nout * elems_per_thread(&src.shape, plan.threads, plan.max_vec) <= 64))
}

/// Bytes of shared memory a reduction's partials take when it combines them across warps (0
/// when it does not): in its operand's layout, one slot per thread and result register; as a
/// block reduction, one 8-byte slot per warp and output.
pub fn reduction_partials(k: &Kernel, plan: &GpuPlan, op: &Op) -> u32 {
    if let Some(red) = plan.linear_reduce(k, op) {
        // One slot per thread and result register, for each tile folded together.
        let bytes: u32 = op.results.iter().map(|r| smem_size(k.ty(*r).elem)).sum();
        return if red.warp_masks.is_empty() {
            0
        } else {
            plan.threads * red.out.regs() as u32 * bytes
        };
    }
    let warps = plan.warps;
    if block_reduction(k, plan, op) && warps > 1 {
        warps * 8 * k.ty(op.results[0]).numel() as u32
    } else {
        0
    }
}

/// The size of each of the two slot arrays that reductions exchanging partials across warps
/// use alternately (the largest such reduction's partials, in 16-byte units): consecutive
/// reductions then need no barrier before writing their partials, since the barrier between the
/// previous one's writes and reads orders its reads before the next one's writes to the other
/// array.
pub fn reduction_slot(k: &Kernel, plan: &GpuPlan) -> u32 {
    let mut most = 0;
    k.walk(&mut |op| {
        if matches!(op.kind, OpKind::Reduce { .. } | OpKind::ReduceWith { .. }) {
            most = most.max(reduction_partials(k, plan, op));
        }
    });
    most.next_multiple_of(16)
}

/// Calls `f` on every op with the values a `yield` in its region hands its operands to (the
/// results of the enclosing `for` or `if`; none for other regions).
/// Also says whether the op is inside a pipelined loop (at any depth).
fn walk_with_yields(
    r: &Region,
    yields_to: &[ValueId],
    plan: &GpuPlan,
    inside: bool,
    f: &mut dyn FnMut(&Op, &[ValueId], bool),
) {
    for op in &r.ops {
        f(op, yields_to, inside);
        let to: &[ValueId] = match op.kind {
            OpKind::For { .. } | OpKind::If => &op.results,
            _ => &[],
        };
        let pipelined = matches!(op.kind, OpKind::For { .. }) && plan.pipelines.contains_key(&op.regions[0].args[0]);
        for sub in &op.regions {
            walk_with_yields(sub, to, plan, inside || pipelined, f);
        }
    }
}
