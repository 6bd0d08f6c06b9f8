//! What debug builds (`CompileOptions::debug`) check that release builds leave out: an
//! `assert` whose condition fails for some element traps the launch, after printing the
//! kernel, the assertion's line, its message, the program (block) and the first element this
//! thread holds that failed, as the interpreter reports them.

use inkwell::IntPredicate;
use inkwell::values::{BasicValueEnum, IntValue};
use tile_lang::ir::*;

use super::{Lowering, R, llvm};

impl<'c> Lowering<'c, '_> {
    pub(super) fn assert_op(&mut self, op: &Op, msg: &str) -> R<()> {
        let v = op.operands[0];
        let t = self.k.ty(v).clone();
        let truth = |l: &Self, e: BasicValueEnum<'c>| -> R<IntValue<'c>> {
            let e = e.into_int_value();
            if e.get_type().get_bit_width() == 1 {
                Ok(e)
            } else {
                llvm(l.b.build_int_compare(IntPredicate::NE, e, e.get_type().const_zero(), ""))
            }
        };
        // Whether an element this thread owns failed, and the flat index of the first.
        let (failed, index, lay) = if t.is_scalar() {
            let ok = truth(self, self.scalar(v))?;
            (llvm(self.b.build_not(ok, ""))?, self.i32c(0), None)
        } else {
            let lay = self.layout(&t);
            let own = self.owner(&lay)?;
            let mut failed = self.ctx.bool_type().const_zero();
            let mut index = self.i32c(0);
            for (i, e) in self.elems(v).into_iter().enumerate() {
                let ok = truth(self, e)?;
                let bad = llvm(self.b.build_not(ok, ""))?;
                let bad = llvm(self.b.build_and(bad, own, ""))?;
                let not_yet = llvm(self.b.build_not(failed, ""))?;
                let first = llvm(self.b.build_and(bad, not_yet, ""))?;
                let flat = self.flat(&lay, i)?;
                index = llvm(self.b.build_select(first, flat, index, ""))?.into_int_value();
                failed = llvm(self.b.build_or(failed, bad, ""))?;
            }
            (failed, index, Some(lay))
        };
        let f = self.func();
        let (stop, go_on) = (
            self.ctx.append_basic_block(f, "assert_failed"),
            self.ctx.append_basic_block(f, "assert_ok"),
        );
        llvm(self.b.build_conditional_branch(failed, stop, go_on))?;
        self.b.position_at_end(stop);
        let mut args = Vec::new();
        for axis in ["x", "y", "z"] {
            let id = format!("llvm.nvvm.read.ptx.sreg.ctaid.{axis}");
            args.push(self.intr1(&id, &[], &[])?.into_int_value());
        }
        args.push(self.tid());
        let element = match &lay {
            Some(lay) => {
                let at = self.unflatten(lay, index)?;
                let n = at.len();
                args.extend(at);
                format!(", element [{}]", vec!["%u"; n].join(", "))
            }
            None => String::new(),
        };
        // `%` in the message is printed, not read as a conversion.
        let message = format!(
            "tile assert: kernel `{}` at {}:{}: {} (program (%u, %u, %u), thread %u{element}); trapping\n",
            self.k.name,
            op.loc.line,
            op.loc.col,
            msg.replace('%', "%%")
        );
        self.print_and_trap_from(&message, &args, false)?;
        self.b.position_at_end(go_on);
        Ok(())
    }
}
