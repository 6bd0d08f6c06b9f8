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
        // A few outputs (a row per program, a handful of rows): each is a block-wide reduction —
        // in-thread partials, a butterfly across the warp, then across warps in shared memory.
        // Each of a thread's elements is matched against every output, so the path is kept to
        // one output or to a small product of outputs and elements per thread.
        const FEW: usize = 8;
        let nout = rt.numel();
        let per_thread = self.layout(&st).per_thread();
        if nout == 1 || (nout <= FEW && nout * per_thread <= 64) {
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
            let warps = self.threads / 32;
            if warps > 1 {
                let e = Elem::Scalar(d);
                // Two slot arrays, used alternately by consecutive block reductions: the barrier
                // between the previous reduction's writes and reads also orders its reads before
                // this one's writes to the other array, so no leading barrier is needed then (nor
                // before the kernel's first use of shared memory).
                let slots = warps * 8 * nout as u32;
                self.need_smem(2 * slots);
                let (base, lead) = match self.smem_state {
                    SmemState::Fresh => (0, false),
                    SmemState::AfterReduction { base } => (if base == 0 { slots } else { 0 }, false),
                    SmemState::Unknown => (0, true),
                };
                if lead {
                    self.barrier()?;
                }
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

    pub(super) fn reduce_with(&mut self, op: &Op, axis: usize) -> R<()> {
        let region = op.regions[0].clone();
        self.reduce_generic(op, axis, &mut |l, a, b| {
            let r = l.region(&region, &[Repr::Scalar(a), Repr::Scalar(b)], &[])?;
            Ok(match &r[0] {
                Repr::Scalar(s) => *s,
                Repr::Tile(t) => t[0],
            })
        })
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
    /// A reduction along an axis in its operand's layout (`AxisReduce`): each thread folds its
    /// registers of a row, lanes along the axis combine by butterfly shuffles, and warps along
    /// it exchange partials through shared memory, combined in warp order so that every copy of
    /// a result is the same value.
    fn reduce_in_layout(&mut self, op: &Op, r: ReduceOp, red: &tile_gir::linear::AxisReduce) -> R<()> {
        let src = op.operands[0];
        let d = self.k.ty(src).dtype().unwrap();
        let rd = self.k.ty(op.results[0]).dtype().unwrap();
        let bop = r.combine();
        let vals = self.elems(src);
        let mut accs = Vec::with_capacity(red.groups.len());
        for g in &red.groups {
            let mut acc = self.cast(d, rd, vals[g[0]], op.loc)?;
            for i in &g[1..] {
                let x = self.cast(d, rd, vals[*i], op.loc)?;
                acc = self.binary(bop, rd, acc, x)?;
            }
            accs.push(acc);
        }
        for acc in accs.iter_mut() {
            for m in &red.lane_masks {
                let other = self.shuffle_xor(rd, *acc, *m)?;
                *acc = self.binary(bop, rd, *acc, other)?;
            }
        }
        if !red.warp_masks.is_empty() {
            let e = Elem::Scalar(rd);
            let n = accs.len() as u32;
            self.need_smem(self.threads * n * Self::smem_size(e));
            self.barrier()?;
            for (o, acc) in accs.iter().enumerate() {
                let at = llvm(
                    self.b
                        .build_int_add(self.tid(), self.i32c((o as u32 * self.threads) as u64), ""),
                )?;
                self.smem_store(e, 0, at, *acc)?;
            }
            self.barrier()?;
            let all: u32 = red.warp_masks.iter().fold(0, |a, m| a | m);
            let base = llvm(
                self.b
                    .build_and(self.tid(), self.i32c(!(all << 5) as u64 & 0xffff_ffff), ""),
            )?;
            for (o, acc) in accs.iter_mut().enumerate() {
                for c in 0..1u32 << red.warp_masks.len() {
                    let w: u32 = red
                        .warp_masks
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| c >> j & 1 == 1)
                        .fold(0, |a, (_, m)| a | m);
                    let at = llvm(self.b.build_or(base, self.i32c((w << 5) as u64), ""))?;
                    let at = llvm(
                        self.b
                            .build_int_add(at, self.i32c((o as u32 * self.threads) as u64), ""),
                    )?;
                    let x = self.smem_load(e, 0, at)?;
                    *acc = if c == 0 { x } else { self.binary(bop, rd, *acc, x)? };
                }
            }
            self.smem_state = SmemState::Unknown;
        }
        self.set(op.results[0], Repr::Tile(accs));
        Ok(())
    }
}
