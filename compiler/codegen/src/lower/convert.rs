//! Layout conversions: an operand whose layout (from the GPU plan) differs from the one its user
//! wants is rebuilt before the user runs — copied when it is a splat, else written to shared
//! memory by its owners and read back in the other layout between barriers. Addresses come from
//! the layouts' linear maps: a thread's part is computed from its id, a register's part is a
//! constant.

use inkwell::IntPredicate;
use inkwell::values::{BasicValueEnum, IntValue};
use tile_gir::linear::LinearLayout;
use tile_lang::ir::*;

use super::{Lowering, R, Repr, llvm};

impl<'c> Lowering<'c, '_> {
    /// The layout the GPU plan gave `v`.
    pub(super) fn lin(&self, v: ValueId) -> LinearLayout {
        self.plan.layout(self.k, v)
    }

    /// Converts the operands of `op` that its lowering wants in another layout; returns what it
    /// replaced, to be put back after `op` (other users may want the original).
    pub(super) fn prepare_operands(&mut self, op: &Op) -> R<Vec<(ValueId, Repr<'c>)>> {
        if matches!(op.kind, OpKind::For { .. } | OpKind::If) {
            // `for` converts its initial values itself; `if` reads a scalar.
            return Ok(Vec::new());
        }
        self.prepare_some(op, 0..op.operands.len())
    }

    /// [`Self::prepare_operands`] for operands `which` of `op` only.
    pub(super) fn prepare_some(
        &mut self,
        op: &Op,
        which: impl IntoIterator<Item = usize>,
    ) -> R<Vec<(ValueId, Repr<'c>)>> {
        let mut saved = Vec::new();
        for i in which {
            let v = op.operands[i];
            if saved.iter().any(|(s, _)| *s == v) {
                continue;
            }
            if let Some(to) = self.plan.conversion(self.k, op, i, &[]) {
                let r = self.convert(v, &to)?;
                saved.push((v, self.get(v)));
                self.set(v, r);
            }
        }
        Ok(saved)
    }

    /// Operand `i` of `op` in the layout `op` wants it in.
    pub(super) fn operand_in(&mut self, op: &Op, i: usize, yields_to: &[ValueId]) -> R<Repr<'c>> {
        let v = op.operands[i];
        match self.plan.conversion(self.k, op, i, yields_to) {
            Some(to) => self.convert(v, &to),
            None => Ok(self.get(v)),
        }
    }

    /// `v` rebuilt in layout `to`.
    fn convert(&mut self, v: ValueId, to: &LinearLayout) -> R<Repr<'c>> {
        let from = self.lin(v);
        if self.plan.is_splat(self.k, v) {
            return Ok(Repr::Tile(vec![self.elems(v)[0]; to.regs()]));
        }
        if self
            .plan
            .recompute_ops(self.k, v, tile_gir::assign::RECOMPUTE_OPS)
            .is_some()
        {
            return self.recompute_in(v, to);
        }
        let t = self.k.ty(v).clone();
        let vals = self.elems(v);
        self.need_smem(t.numel() as u32 * Self::smem_size(t.elem));
        self.barrier()?;
        let own = self.owns(&from)?;
        let from_part = self.thread_part(&from)?;
        self.when(own, |l| {
            for (r, x) in vals.iter().enumerate() {
                let e = l.at(from_part, from.reg_part(r))?;
                l.smem_store(t.elem, 0, e, *x)?;
            }
            Ok(())
        })?;
        self.barrier()?;
        let to_part = self.thread_part(to)?;
        let mut out = Vec::with_capacity(to.regs());
        for r in 0..to.regs() {
            let e = self.at(to_part, to.reg_part(r))?;
            out.push(self.smem_load(t.elem, 0, e)?);
        }
        // Its reads may still run when a later block reduction writes its partials.
        self.smem_state = super::shared::SmemState::Unknown;
        Ok(Repr::Tile(out))
    }

    /// The part of a layout's flat index that this thread's lane and warp select.
    pub(super) fn thread_part(&self, l: &LinearLayout) -> R<IntValue<'c>> {
        self.thread_part_of(l, self.tid())
    }

    /// [`thread_part`](Self::thread_part) from a thread index read here, which LLVM cannot hoist:
    /// what is computed from it stays where it is used instead of living in registers across a
    /// loop (recomputed index tiles are cheaper than the registers they would hold).
    pub(super) fn thread_part_here(&self, l: &LinearLayout) -> R<IntValue<'c>> {
        let tid = self
            .asm(Some(self.ctx.i32_type().into()), "mov.u32 $0, %tid.x;", "=r", &[])?
            .unwrap()
            .into_int_value();
        self.thread_part_of(l, tid)
    }

    fn thread_part_of(&self, l: &LinearLayout, tid: IntValue<'c>) -> R<IntValue<'c>> {
        let mut acc = self.i32c(0);
        for (i, img) in l.lane.iter().chain(&l.warp).enumerate() {
            if *img == 0 {
                continue;
            }
            let bit = llvm(self.b.build_and(tid, self.i32c(1 << i), ""))?;
            let set = llvm(self.b.build_int_compare(IntPredicate::NE, bit, self.i32c(0), ""))?;
            let term = llvm(self.b.build_select(set, self.i32c(*img as u64), self.i32c(0), ""))?;
            acc = llvm(self.b.build_xor(acc, term.into_int_value(), ""))?;
        }
        Ok(acc)
    }

    /// A thread's part XOR a register's constant part.
    pub(super) fn at(&self, part: IntValue<'c>, reg: usize) -> R<IntValue<'c>> {
        if reg == 0 {
            return Ok(part);
        }
        llvm(self.b.build_xor(part, self.i32c(reg as u64), ""))
    }

    /// Whether this thread owns its elements of layout `l` (holds no copy of another thread's).
    pub(super) fn owns(&self, l: &LinearLayout) -> R<IntValue<'c>> {
        let mask = l.copy_mask();
        if mask == 0 {
            return Ok(self.ctx.bool_type().const_int(1, false));
        }
        let m = llvm(self.b.build_and(self.tid(), self.i32c(mask as u64), ""))?;
        llvm(self.b.build_int_compare(IntPredicate::EQ, m, self.i32c(0), "own"))
    }

    /// Elements of a splat in layout `l`.
    pub(super) fn splat_in(&self, x: BasicValueEnum<'c>, l: &LinearLayout) -> Repr<'c> {
        Repr::Tile(vec![x; l.regs()])
    }
}
