//! Reductions: block-wide reductions through warp shuffles and shared memory for a few outputs,
//! reductions along an axis through shared memory, arg reductions and `reduce_with`.

use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tile_lang::ir::*;

use super::shared::SmemState;
use super::{Lowering, R, Repr, llvm};

impl<'c> Lowering<'c, '_> {
    fn identity(&self, r: ReduceOp, d: DType) -> BasicValueEnum<'c> {
        let t = self.ty(Elem::Scalar(d));
        if d.is_float() {
            let ft = t.into_float_type();
            return match r {
                ReduceOp::Prod => ft.const_float(1.0),
                ReduceOp::Max => ft.const_float(f64::NEG_INFINITY),
                ReduceOp::Min => ft.const_float(f64::INFINITY),
                _ => ft.const_zero(),
            }
            .into();
        }
        let it = t.into_int_type();
        let w = d.bits();
        let v: u64 = match r {
            ReduceOp::Prod => 1,
            ReduceOp::Max if d.is_signed() => 1u64 << (w - 1),
            ReduceOp::Min if d.is_signed() => (1u64 << (w - 1)) - 1,
            ReduceOp::Min | ReduceOp::And => u64::MAX,
            _ => 0,
        };
        it.const_int(v, false).into()
    }

    /// Exchanges a value with lane `lane ^ mask` of the warp.
    fn shuffle_xor(&self, d: DType, x: BasicValueEnum<'c>, mask: u32) -> R<BasicValueEnum<'c>> {
        let e = Elem::Scalar(d);
        let r = self.to_reg(e, x)?.into_int_value();
        let i32t = self.ctx.i32_type();
        let full = i32t.const_int(0xffff_ffff, false);
        let shfl = |v: IntValue<'c>| -> R<IntValue<'c>> {
            Ok(self
                .intr1(
                    "llvm.nvvm.shfl.sync.bfly.i32",
                    &[],
                    &[
                        full.into(),
                        v.into(),
                        self.i32c(mask as u64).into(),
                        self.i32c(31).into(),
                    ],
                )?
                .into_int_value())
        };
        let out = if r.get_type().get_bit_width() == 64 {
            let lo = llvm(self.b.build_int_truncate(r, i32t, ""))?;
            let hi = llvm(
                self.b.build_int_truncate(
                    llvm(
                        self.b
                            .build_right_shift(r, r.get_type().const_int(32, false), false, ""),
                    )?,
                    i32t,
                    "",
                ),
            )?;
            let (lo, hi) = (shfl(lo)?, shfl(hi)?);
            let i64t = self.ctx.i64_type();
            let hi = llvm(self.b.build_left_shift(
                llvm(self.b.build_int_z_extend(hi, i64t, ""))?,
                i64t.const_int(32, false),
                "",
            ))?;
            llvm(self.b.build_or(hi, llvm(self.b.build_int_z_extend(lo, i64t, ""))?, ""))?
        } else {
            let w = llvm(self.b.build_int_z_extend_or_bit_cast(r, i32t, ""))?;
            let s = shfl(w)?;
            if r.get_type().get_bit_width() < 32 {
                llvm(self.b.build_int_truncate(s, r.get_type(), ""))?
            } else {
                s
            }
        };
        self.of_reg(e, out.into())
    }

    pub(super) fn reduce(&mut self, op: &Op, r: ReduceOp, axis: usize) -> R<()> {
        if let Some(red) = self.plan.linear_reduce(self.k, op) {
            return self.reduce_in_layout(op, r, &red);
        }
        let src = op.operands[0];
        let st = self.k.ty(src).clone();
        let d = st.dtype().unwrap();
        let rt = self.k.ty(op.results[0]).clone();
        let bop = r.combine();
        let nout = rt.numel();
        if tile_gir::estimate::block_reduction(self.k, &self.plan, op) {
            let lay = self.layout(&st);
            let vals = self.elems(src);
            let id = self.identity(r, d);
            // One output starts from the first element; several start from the identity.
            let (mut accs, first) = if nout == 1 {
                (vec![vals[0]], 1)
            } else {
                (vec![id; nout], 0)
            };
            for (i, v) in vals.iter().enumerate().skip(first) {
                let o = if nout == 1 {
                    None
                } else {
                    let e = self.flat(&lay, i)?;
                    let mut idx = self.unflatten(&lay, e)?;
                    idx.remove(axis);
                    Some(self.linear(&rt.shape, &idx)?)
                };
                for (k, acc) in accs.iter_mut().enumerate() {
                    let x = match o {
                        None => *v,
                        Some(o) => {
                            let hit = llvm(self.b.build_int_compare(IntPredicate::EQ, o, self.i32c(k as u64), ""))?;
                            llvm(self.b.build_select(hit, *v, id, ""))?
                        }
                    };
                    *acc = self.binary(bop, d, *acc, x)?;
                }
            }
            let own = self.owner(&lay)?;
            for acc in accs.iter_mut() {
                *acc = llvm(self.b.build_select(own, *acc, id, ""))?;
                for m in [16, 8, 4, 2, 1] {
                    let other = self.shuffle_xor(d, *acc, m)?;
                    *acc = self.binary(bop, d, *acc, other)?;
                }
            }
            let warps = self.threads / self.target.warp_size;
            if warps > 1 {
                let e = Elem::Scalar(d);
                let base = self.partials_slot()?;
                let lane = llvm(self.b.build_and(self.tid(), self.i32c(31), ""))?;
                let warp = llvm(self.b.build_right_shift(self.tid(), self.i32c(5), false, ""))?;
                let first = llvm(self.b.build_int_compare(IntPredicate::EQ, lane, self.i32c(0), ""))?;
                let partials = accs.clone();
                self.when(first, |l| {
                    for (k, acc) in partials.iter().enumerate() {
                        let at = llvm(l.b.build_int_add(warp, l.i32c((k as u32 * warps) as u64), ""))?;
                        l.smem_store(e, base, at, *acc)?;
                    }
                    Ok(())
                })?;
                self.barrier()?;
                for (k, acc) in accs.iter_mut().enumerate() {
                    *acc = self.smem_load(e, base, self.i32c((k as u32 * warps) as u64))?;
                    for w in 1..warps {
                        let v = self.smem_load(e, base, self.i32c((k as u32 * warps + w) as u64))?;
                        *acc = self.binary(bop, d, *acc, v)?;
                    }
                }
                self.smem_state = SmemState::AfterReduction { base };
            }
            let result = if rt.is_scalar() {
                Repr::Scalar(accs[0])
            } else {
                let rlay = self.layout(&rt);
                let mut out = Vec::with_capacity(rlay.per_thread());
                for j in 0..rlay.per_thread() {
                    let f = self.flat(&rlay, j)?;
                    let mut x = accs[0];
                    for (k, acc) in accs.iter().enumerate().skip(1) {
                        let hit = llvm(self.b.build_int_compare(IntPredicate::EQ, f, self.i32c(k as u64), ""))?;
                        x = llvm(self.b.build_select(hit, *acc, x, ""))?;
                    }
                    out.push(x);
                }
                Repr::Tile(out)
            };
            self.set(op.results[0], result);
            return Ok(());
        }
        self.smem_state = SmemState::Unknown;
        self.reduce_generic(op, axis, &mut |l, a, b| l.binary(bop, d, a, b))
    }

    /// Reduction along `axis` through shared memory: each result element folds its row.
    fn reduce_generic(
        &mut self,
        op: &Op,
        axis: usize,
        f: &mut dyn FnMut(&mut Self, BasicValueEnum<'c>, BasicValueEnum<'c>) -> R<BasicValueEnum<'c>>,
    ) -> R<()> {
        let out = self.fold_axis(op, axis, &|_, first| vec![first], &mut |l, acc, x, _| {
            Ok(vec![f(l, acc[0], x)?])
        })?;
        self.set_elems(op.results[0], out);
        Ok(())
    }

    /// Folds, for each result slot, the row of operand 0 along `axis` through shared memory:
    /// `init` makes the slot's carried values from the row's first element, `step` the next ones
    /// from them, the element and its position `k`. Returns every slot's carried values in order.
    fn fold_axis(
        &mut self,
        op: &Op,
        axis: usize,
        init: &dyn Fn(&Self, BasicValueEnum<'c>) -> Vec<BasicValueEnum<'c>>,
        step: &mut dyn FnMut(
            &mut Self,
            &[BasicValueEnum<'c>],
            BasicValueEnum<'c>,
            IntValue<'c>,
        ) -> R<Vec<BasicValueEnum<'c>>>,
    ) -> R<Vec<BasicValueEnum<'c>>> {
        let src = op.operands[0];
        let st = self.k.ty(src).clone();
        let rt = self.k.ty(op.results[0]).clone();
        let n = st.shape[axis];
        self.stage(src)?;
        let bases = self.reduce_bases(&st, &rt, axis)?;
        let stride = crate::layout::strides(&st.shape)[axis] as u64;
        let mut inits = Vec::new();
        for b in &bases {
            let first = self.smem_load(st.elem, 0, *b)?;
            inits.extend(init(self, first));
        }
        let width = inits.len() / bases.len();
        self.counted_loop(
            self.i32c(1),
            self.i32c(n as u64),
            self.i32c(1),
            true,
            inits,
            &mut |l, k, accs| {
                let off = llvm(l.b.build_int_mul(k, l.i32c(stride), ""))?;
                let mut next = Vec::new();
                for (s, acc) in accs.chunks(width).enumerate() {
                    let x = l.smem_load(st.elem, 0, llvm(l.b.build_int_add(bases[s], off, ""))?)?;
                    next.extend(step(l, acc, x, k)?);
                }
                Ok(next)
            },
        )
    }

    /// For each result slot, the shared index of its first element along `axis`.
    fn reduce_bases(&self, st: &Type, rt: &Type, axis: usize) -> R<Vec<IntValue<'c>>> {
        if rt.is_scalar() {
            return Ok(vec![self.i32c(0)]);
        }
        let lay = self.layout(rt);
        (0..lay.per_thread())
            .map(|i| {
                let e = self.flat(&lay, i)?;
                let mut idx = self.unflatten(&lay, e)?;
                idx.insert(axis, self.i32c(0));
                self.linear(&st.shape, &idx)
            })
            .collect()
    }

    /// `reduce` with a combine helper, over one tile or several together: folded in the
    /// operands' layout (`GpuPlan::linear_reduce`; the plan converts them all into the first
    /// one's).
    pub(super) fn reduce_with(&mut self, op: &Op, _axis: usize) -> R<()> {
        let region = op.regions[0].clone();
        let red = self.plan.linear_reduce(self.k, op).ok_or_else(|| {
            crate::CodegenError::unsupported(
                "`reduce` with a helper in a layout that mixes its axis",
                "reduce_with",
                op.loc,
            )
        })?;
        let dtypes: Vec<DType> = op.operands.iter().map(|v| self.dtype(*v)).collect();
        let vals: Vec<Vec<BasicValueEnum<'c>>> = op.operands.iter().map(|v| self.elems(*v)).collect();
        let out = self.fold_in_layout(&red, &dtypes, vals, true, &mut |l, a, b| {
            let args: Vec<Repr<'c>> = a.iter().chain(b).map(|x| Repr::Scalar(*x)).collect();
            let r = l.region(&region, &args, &[])?;
            Ok(r.iter()
                .map(|x| match x {
                    Repr::Scalar(s) => *s,
                    Repr::Tile(t) => t[0],
                })
                .collect())
        })?;
        for (r, regs) in op.results.iter().zip(out) {
            let v = if self.k.ty(*r).is_scalar() {
                Repr::Scalar(regs[0])
            } else {
                Repr::Tile(regs)
            };
            self.set(*r, v);
        }
        Ok(())
    }

    pub(super) fn arg_reduce(&mut self, op: &Op, max: bool, axis: usize) -> R<()> {
        let st = self.k.ty(op.operands[0]).clone();
        let d = st.dtype().unwrap();
        let cmp = if max { CmpOp::Gt } else { CmpOp::Lt };
        // Carried per slot: the best value so far and its position.
        let out = self.fold_axis(
            op,
            axis,
            &|l, first| vec![first, l.i32c(0).into()],
            &mut |l, pair, x, k| {
                let mut better = l.compare(cmp, st.elem, x, pair[0])?.into_int_value();
                if d.is_float() {
                    // A NaN never wins, and a NaN best so far is replaced by any number.
                    let best_nan = llvm(l.b.build_float_compare(
                        FloatPredicate::UNO,
                        pair[0].into_float_value(),
                        pair[0].into_float_value(),
                        "",
                    ))?;
                    let x_num = llvm(l.b.build_float_compare(
                        FloatPredicate::ORD,
                        x.into_float_value(),
                        x.into_float_value(),
                        "",
                    ))?;
                    let take = llvm(l.b.build_and(best_nan, x_num, ""))?;
                    better = llvm(l.b.build_or(better, take, ""))?;
                }
                Ok(vec![
                    llvm(l.b.build_select(better, x, pair[0], ""))?,
                    llvm(l.b.build_select(better, k.into(), pair[1], ""))?,
                ])
            },
        )?;
        let idx: Vec<_> = out.chunks(2).map(|p| p[1]).collect();
        self.set_elems(op.results[0], idx);
        Ok(())
    }
}

impl<'c> Lowering<'c, '_> {
    /// Where a reduction writes its partials for the other warps: one of two slot arrays of
    /// `GpuPlan::reduction_slot` bytes, the one the previous reduction did not use
    /// when nothing else touched shared memory since (then the barrier between that reduction's
    /// writes and reads already orders its reads before these writes); else the first, after a
    /// barrier. The caller sets `smem_state` to `AfterReduction` at this base once it has read.
    fn partials_slot(&mut self) -> R<u32> {
        let slot = self.plan.reduction_slot;
        self.need_smem(2 * slot);
        let (base, lead) = match self.smem_state {
            SmemState::Fresh => (0, false),
            SmemState::AfterReduction { base } => (if base == 0 { slot } else { 0 }, false),
            SmemState::Unknown => (0, true),
        };
        if lead {
            self.barrier()?;
        }
        Ok(base)
    }

    /// A reduction along an axis in its operand's layout (`AxisReduce`).
    fn reduce_in_layout(&mut self, op: &Op, r: ReduceOp, red: &tile_gir::linear::AxisReduce) -> R<()> {
        let src = op.operands[0];
        let d = self.k.ty(src).dtype().unwrap();
        let rd = self.k.ty(op.results[0]).dtype().unwrap();
        let bop = r.combine();
        let vals = self
            .elems(src)
            .into_iter()
            .map(|x| self.cast(d, rd, x, op.loc))
            .collect::<R<Vec<_>>>()?;
        let mut out = self.fold_in_layout(red, &[rd], vec![vals], false, &mut |l, a, b| {
            Ok(vec![l.binary(bop, rd, a[0], b[0])?])
        })?;
        let regs = out.remove(0);
        let v = if self.k.ty(op.results[0]).is_scalar() {
            Repr::Scalar(regs[0])
        } else {
            Repr::Tile(regs)
        };
        self.set(op.results[0], v);
        Ok(())
    }

    /// Combines `acc` (one value per tile) with the lanes' across each of `masks` in turn
    /// (butterfly shuffles): afterwards the lanes that differ only in those bits hold the same
    /// values. With `ordered`, both lanes of a pair combine the lower lane's values first.
    fn butterfly(
        &mut self,
        acc: &mut Vec<BasicValueEnum<'c>>,
        dtypes: &[DType],
        masks: &[u32],
        ordered: bool,
        combine: &mut dyn FnMut(&mut Self, &[BasicValueEnum<'c>], &[BasicValueEnum<'c>]) -> R<Vec<BasicValueEnum<'c>>>,
    ) -> R<()> {
        for m in masks {
            let other = acc
                .iter()
                .zip(dtypes)
                .map(|(x, d)| self.shuffle_xor(*d, *x, *m))
                .collect::<R<Vec<_>>>()?;
            *acc = if ordered {
                // The upper lane of the pair (its bit `m` set) combines (other, own).
                let bit = llvm(self.b.build_and(self.tid(), self.i32c(*m as u64), ""))?;
                let upper = llvm(self.b.build_int_compare(IntPredicate::NE, bit, self.i32c(0), ""))?;
                let pick =
                    |l: &Self, a: &[BasicValueEnum<'c>], b: &[BasicValueEnum<'c>]| -> R<Vec<BasicValueEnum<'c>>> {
                        a.iter()
                            .zip(b)
                            .map(|(x, y)| llvm(l.b.build_select(upper, *y, *x, "")))
                            .collect()
                    };
                let (lo, hi) = (pick(self, acc, &other)?, pick(self, &other, acc)?);
                combine(self, &lo, &hi)?
            } else {
                combine(self, acc, &other)?
            };
        }
        Ok(())
    }

    /// Folds tiles held in one layout along an axis together (`AxisReduce`), `combine` taking
    /// the accumulated values and the next ones (one per tile) and giving the combined ones:
    /// each thread folds its registers of a row, lanes along the axis combine by butterfly
    /// shuffles, and warps along it exchange partials through shared memory, folded in warp
    /// order (a built-in op) or as a tree over the lanes along the axis (a helper, `butterfly`
    /// again), so that every copy of a result is the same value. With `ordered` (a helper that need not give the same bits both ways round),
    /// the two lanes of a shuffle both combine the lower lane's values first, so that they keep
    /// agreeing. Returns each tile's result registers.
    fn fold_in_layout(
        &mut self,
        red: &tile_gir::linear::AxisReduce,
        dtypes: &[DType],
        vals: Vec<Vec<BasicValueEnum<'c>>>,
        ordered: bool,
        combine: &mut dyn FnMut(&mut Self, &[BasicValueEnum<'c>], &[BasicValueEnum<'c>]) -> R<Vec<BasicValueEnum<'c>>>,
    ) -> R<Vec<Vec<BasicValueEnum<'c>>>> {
        let at = |r: usize| -> Vec<BasicValueEnum<'c>> { vals.iter().map(|v| v[r]).collect() };
        // accs[o]: the values of result register o, one per tile.
        let groups = red.groups();
        let mut accs = Vec::with_capacity(groups.len());
        for g in &groups {
            let mut acc = at(g[0]);
            for i in &g[1..] {
                acc = combine(self, &acc, &at(*i))?;
            }
            accs.push(acc);
        }
        for acc in accs.iter_mut() {
            self.butterfly(acc, dtypes, &red.lane_masks, ordered, combine)?;
        }
        if !red.warp_masks.is_empty() {
            let slot = self.partials_slot()?;
            // Where tile j's partials start in the slot: one per thread and result register each.
            let n = accs.len() as u32;
            let mut starts = Vec::with_capacity(dtypes.len());
            let mut off = slot;
            for d in dtypes {
                starts.push(off);
                off += self.threads * n * Self::smem_size(Elem::Scalar(*d));
            }
            // Slot of (register o, lane, warp): o * threads + lane * warps + warp, so that the
            // partials one thread combines (the warps along the axis) lie together and are read
            // as vectors when every warp is along the axis. After the shuffles, lanes that differ
            // only along the axis hold the same values: only the first of them writes, and all
            // read its slots (one address per warp: a broadcast, no bank conflicts).
            let warps = self.threads / self.target.warp_size;
            let along: u32 = red.lane_masks.iter().fold(0, |a, m| a | m);
            let lane = llvm(self.b.build_and(self.tid(), self.i32c((31 & !along) as u64), ""))?;
            let warp = llvm(self.b.build_right_shift(self.tid(), self.i32c(5), false, ""))?;
            let row = llvm(self.b.build_int_mul(lane, self.i32c(warps as u64), ""))?;
            let mine = llvm(self.b.build_int_add(row, warp, ""))?;
            let first = llvm(self.b.build_and(self.tid(), self.i32c(along as u64), ""))?;
            let first = llvm(self.b.build_int_compare(IntPredicate::EQ, first, self.i32c(0), ""))?;
            let partials = accs.clone();
            let threads = self.threads;
            self.when(first, |l| {
                for (o, acc) in partials.iter().enumerate() {
                    let at = llvm(l.b.build_int_add(mine, l.i32c((o as u32 * threads) as u64), ""))?;
                    for (j, x) in acc.iter().enumerate() {
                        l.smem_store(Elem::Scalar(dtypes[j]), starts[j], at, *x)?;
                    }
                }
                Ok(())
            })?;
            self.barrier()?;
            // The warps' partials are folded as a tree: the first `kl` lane bits along the axis
            // each take one warp bit (lane bit j set: warp bit j's partials), every lane folds
            // the partials of the remaining warp bits in order, then those lanes combine by
            // butterfly shuffles. Every copy of a result is the same value, as after the
            // shuffles above.
            let all: u32 = red.warp_masks.iter().fold(0, |a, m| a | m);
            let across = llvm(self.b.build_and(warp, self.i32c((!all & (warps - 1)) as u64), ""))?;
            let mut base = llvm(self.b.build_int_add(row, across, ""))?;
            // Only a helper's combine (`ordered`: possibly costly, as Welford's division is) goes
            // through the tree; a built-in op is one instruction a partial, and its in-order fold
            // adds no shuffle chain (nor registers) to the kernel.
            let kl = if ordered {
                red.lane_masks.len().min(red.warp_masks.len())
            } else {
                0
            };
            for j in 0..kl {
                let bit = llvm(self.b.build_and(self.tid(), self.i32c(red.lane_masks[j] as u64), ""))?;
                let set = llvm(self.b.build_int_compare(IntPredicate::NE, bit, self.i32c(0), ""))?;
                let w = llvm(
                    self.b
                        .build_select(set, self.i32c(red.warp_masks[j] as u64), self.i32c(0), ""),
                )?;
                base = llvm(self.b.build_or(base, w.into_int_value(), ""))?;
            }
            let serial = &red.warp_masks[kl..];
            for (o, acc) in accs.iter_mut().enumerate() {
                for c in 0..1u32 << serial.len() {
                    let w: u32 = serial
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| c >> j & 1 == 1)
                        .fold(0, |a, (_, m)| a | m);
                    let at = llvm(self.b.build_or(base, self.i32c(w as u64), ""))?;
                    let at = llvm(
                        self.b
                            .build_int_add(at, self.i32c((o as u32 * self.threads) as u64), ""),
                    )?;
                    let x = dtypes
                        .iter()
                        .enumerate()
                        .map(|(j, d)| self.smem_load(Elem::Scalar(*d), starts[j], at))
                        .collect::<R<Vec<_>>>()?;
                    *acc = if c == 0 { x } else { combine(self, acc, &x)? };
                }
                self.butterfly(acc, dtypes, &red.lane_masks[..kl], ordered, combine)?;
            }
            self.smem_state = SmemState::AfterReduction { base: slot };
        }
        // Per tile, its result registers.
        Ok((0..dtypes.len()).map(|j| accs.iter().map(|a| a[j]).collect()).collect())
    }
}
