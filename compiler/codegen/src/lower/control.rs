//! Control flow: `for` and `if` ops, counted loops and guarded blocks.

use inkwell::IntPredicate;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue};
use tile_lang::ir::*;

use super::{Lowering, R, Repr, llvm};

impl<'c> Lowering<'c, '_> {
    pub(super) fn func(&self) -> FunctionValue<'c> {
        self.f.expect("lowering happens inside the kernel function")
    }

    /// Runs `body` only where `cond` holds.
    pub(super) fn when(&mut self, cond: IntValue<'c>, body: impl FnOnce(&mut Self) -> R<()>) -> R<()> {
        let then = self.ctx.append_basic_block(self.func(), "then");
        let done = self.ctx.append_basic_block(self.func(), "done");
        llvm(self.b.build_conditional_branch(cond, then, done))?;
        self.b.position_at_end(then);
        body(self)?;
        llvm(self.b.build_unconditional_branch(done))?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// A counted loop `for i in lo..hi step` carrying `inits`; `body` returns the next values.
    #[allow(clippy::type_complexity)]
    pub(super) fn counted_loop(
        &mut self,
        lo: IntValue<'c>,
        hi: IntValue<'c>,
        step: IntValue<'c>,
        signed: bool,
        inits: Vec<BasicValueEnum<'c>>,
        body: &mut dyn FnMut(&mut Self, IntValue<'c>, Vec<BasicValueEnum<'c>>) -> R<Vec<BasicValueEnum<'c>>>,
    ) -> R<Vec<BasicValueEnum<'c>>> {
        let f = self.func();
        let pre = self.b.get_insert_block().unwrap();
        let head = self.ctx.append_basic_block(f, "loop");
        let body_bb = self.ctx.append_basic_block(f, "body");
        let exit = self.ctx.append_basic_block(f, "exit");
        llvm(self.b.build_unconditional_branch(head))?;
        self.b.position_at_end(head);
        let iv = llvm(self.b.build_phi(lo.get_type(), "i"))?;
        let phis: Vec<_> = inits
            .iter()
            .map(|v| llvm(self.b.build_phi(v.get_type(), "c")))
            .collect::<R<_>>()?;
        iv.add_incoming(&[(&lo, pre)]);
        for (p, v) in phis.iter().zip(&inits) {
            p.add_incoming(&[(v, pre)]);
        }
        let i = iv.as_basic_value().into_int_value();
        let pred = if signed { IntPredicate::SLT } else { IntPredicate::ULT };
        let go = llvm(self.b.build_int_compare(pred, i, hi, "go"))?;
        llvm(self.b.build_conditional_branch(go, body_bb, exit))?;
        self.b.position_at_end(body_bb);
        let cur: Vec<_> = phis.iter().map(|p| p.as_basic_value()).collect();
        let next = body(self, i, cur.clone())?;
        let i_next = llvm(self.b.build_int_add(i, step, "inext"))?;
        // Stop rather than wrap around when `i + step` overflows.
        let wrapped = llvm(self.b.build_int_compare(pred, i_next, i, "wrap"))?;
        let latch = self.b.get_insert_block().unwrap();
        let cont = self.ctx.append_basic_block(f, "cont");
        llvm(self.b.build_conditional_branch(wrapped, exit, cont))?;
        self.b.position_at_end(cont);
        llvm(self.b.build_unconditional_branch(head))?;
        iv.add_incoming(&[(&i_next, cont)]);
        for (p, v) in phis.iter().zip(&next) {
            p.add_incoming(&[(v, cont)]);
        }
        // The exit sees the loop-carried values from the header (normal exit) or the latch.
        self.b.position_at_end(exit);
        let mut out = Vec::new();
        for (p, v) in phis.iter().zip(&next) {
            let phi = llvm(self.b.build_phi(v.get_type(), "out"))?;
            phi.add_incoming(&[(&p.as_basic_value(), head), (v, latch)]);
            out.push(phi.as_basic_value());
        }
        Ok(out)
    }

    pub(super) fn for_op(&mut self, op: &Op) -> R<()> {
        if let Some(pl) = self.plan.pipelines.get(&op.regions[0].args[0]).cloned() {
            return self.for_pipelined(op, &pl);
        }
        self.ring_setup(op)?;
        let (lo, hi, step, signed, inits) = self.loop_operands(op)?;
        let flat = Self::flatten(&inits);
        let body = op.regions[0].clone();
        let out = self.counted_loop(lo, hi, step, signed, flat, &mut |l, i, cur| {
            let mut args = vec![Repr::Scalar(i.into())];
            args.extend(Self::rebuild(&inits, &cur));
            let y = l.region(&body, &args, &op.results)?;
            Ok(Self::flatten(&y))
        })?;
        for (r, v) in op.results.iter().zip(Self::rebuild(&inits, &out)) {
            self.set(*r, v);
        }
        Ok(())
    }

    /// A `for`'s bounds, whether they compare signed, and its initial values in the layouts the
    /// loop carries them in.
    #[allow(clippy::type_complexity)]
    pub(super) fn loop_operands(
        &mut self,
        op: &Op,
    ) -> R<(IntValue<'c>, IntValue<'c>, IntValue<'c>, bool, Vec<Repr<'c>>)> {
        let d = self.dtype(op.operands[0]);
        let bound = |l: &Self, i: usize| l.scalar(op.operands[i]).into_int_value();
        let (lo, hi, step) = (bound(self, 0), bound(self, 1), bound(self, 2));
        let inits: Vec<Repr> = (3..op.operands.len())
            .map(|i| self.operand_in(op, i, &[]))
            .collect::<R<_>>()?;
        Ok((lo, hi, step, !d.is_unsigned(), inits))
    }

    pub(super) fn if_op(&mut self, op: &Op) -> R<()> {
        let c = self.scalar(op.operands[0]).into_int_value();
        // wgmma dots still pending here stay in flight through both branches (none reads them:
        // `settle_wgmma` waited for those before the `if`).
        let saved = self.pending_before_branch();
        let floor = self.wgmma_floor.replace(saved.0.len());
        let out = self.either(
            c,
            |l| {
                let y = l.region(&op.regions[0], &[], &op.results)?;
                l.restore_pending(&saved);
                Ok(y)
            },
            |l| {
                let y = l.region(&op.regions[1], &[], &op.results)?;
                l.restore_pending(&saved);
                Ok(y)
            },
        )?;
        self.wgmma_floor = floor;
        for (r, v) in op.results.iter().zip(out) {
            self.set(*r, v);
        }
        Ok(())
    }

    /// Runs `then` where `cond` holds and `otherwise` elsewhere; both give values of the same
    /// shapes, merged (with phis) into what comes after.
    pub(super) fn either(
        &mut self,
        cond: IntValue<'c>,
        then: impl FnOnce(&mut Self) -> R<Vec<Repr<'c>>>,
        otherwise: impl FnOnce(&mut Self) -> R<Vec<Repr<'c>>>,
    ) -> R<Vec<Repr<'c>>> {
        let f = self.func();
        let (tb, eb, done) = (
            self.ctx.append_basic_block(f, "then"),
            self.ctx.append_basic_block(f, "else"),
            self.ctx.append_basic_block(f, "endif"),
        );
        llvm(self.b.build_conditional_branch(cond, tb, eb))?;
        self.b.position_at_end(tb);
        let a = then(self)?;
        let a_end = self.b.get_insert_block().expect("inside the kernel");
        llvm(self.b.build_unconditional_branch(done))?;
        self.b.position_at_end(eb);
        let b = otherwise(self)?;
        let b_end = self.b.get_insert_block().expect("inside the kernel");
        llvm(self.b.build_unconditional_branch(done))?;
        self.b.position_at_end(done);
        let mut merged = Vec::new();
        for (x, y) in Self::flatten(&a).iter().zip(&Self::flatten(&b)) {
            let phi = llvm(self.b.build_phi(x.get_type(), ""))?;
            phi.add_incoming(&[(x, a_end), (y, b_end)]);
            merged.push(phi.as_basic_value());
        }
        Ok(Self::rebuild(&a, &merged))
    }
}
