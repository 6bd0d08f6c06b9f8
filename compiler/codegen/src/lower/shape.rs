//! Shape ops: program ids, `arange`, broadcasts, `expand_dims`/`reshape`, permutes, join and
//! split (every data movement through shared memory).

use inkwell::values::IntValue;
use tile_lang::ir::*;

use super::{Lowering, R, Repr, llvm};

impl<'c> Lowering<'c, '_> {
    /// `program_id` or `num_programs` along axis `a`: a special register.
    pub(super) fn program_id(&mut self, op: &Op, a: u8) -> R<()> {
        let reg = if matches!(op.kind, OpKind::ProgramId(_)) {
            "ctaid"
        } else {
            "nctaid"
        };
        let axis = ["x", "y", "z"][a as usize];
        let v = self.intr1(&format!("llvm.nvvm.read.ptx.sreg.{reg}.{axis}"), &[], &[])?;
        self.set(op.results[0], Repr::Scalar(v));
        Ok(())
    }

    pub(super) fn arange(&mut self, op: &Op, start: i64) -> R<()> {
        let lay = self.layout(self.k.ty(op.results[0]));
        let mut out = Vec::new();
        for i in 0..lay.per_thread() {
            let e = self.flat(&lay, i)?;
            out.push(llvm(self.b.build_int_add(e, self.i32c(start as u64), ""))?.into());
        }
        self.set(op.results[0], Repr::Tile(out));
        Ok(())
    }

    pub(super) fn broadcast(&mut self, op: &Op) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let src = op.operands[0];
        let st = self.k.ty(src).clone();
        let r = if st.is_scalar() {
            Repr::Tile(vec![self.scalar(src); self.layout(&rt).per_thread()])
        } else {
            let off = rt.shape.len() - st.shape.len();
            let sshape = st.shape.clone();
            self.via_smem(&[src], &rt, &|l, idx| {
                let picked: Vec<IntValue> = (0..sshape.len())
                    .map(|d| if sshape[d] == 1 { l.i32c(0) } else { idx[d + off] })
                    .collect();
                l.linear(&sshape, &picked)
            })?
        };
        self.set(op.results[0], r);
        Ok(())
    }

    /// `expand_dims` and `reshape`: the same registers when the layouts agree, else through shared
    /// memory.
    pub(super) fn reshape(&mut self, op: &Op) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let src = op.operands[0];
        let (a, b) = (self.layout(self.k.ty(src)), self.layout(&rt));
        let same = (a.numel, a.vec, a.chunks) == (b.numel, b.vec, b.chunks);
        let r = if same || rt.is_scalar() && self.k.ty(src).numel() == 1 {
            match self.get(src) {
                Repr::Tile(t) if rt.is_scalar() => Repr::Scalar(t[0]),
                Repr::Scalar(s) if !rt.is_scalar() => Repr::Tile(vec![s; b.per_thread()]),
                r => r,
            }
        } else {
            let rshape = rt.shape.clone();
            self.via_smem(&[src], &rt, &|l, idx| l.linear(&rshape, idx))?
        };
        self.set(op.results[0], r);
        Ok(())
    }

    pub(super) fn permute(&mut self, op: &Op, p: &[usize]) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let src = op.operands[0];
        let sshape = self.k.ty(src).shape.clone();
        let r = self.via_smem(&[src], &rt, &|l, idx| {
            let mut sidx = vec![l.i32c(0); sshape.len()];
            for (r_axis, &s_axis) in p.iter().enumerate() {
                sidx[s_axis] = idx[r_axis];
            }
            l.linear(&sshape, &sidx)
        })?;
        self.set(op.results[0], r);
        Ok(())
    }

    pub(super) fn join(&mut self, op: &Op) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let (a, b) = (op.operands[0], op.operands[1]);
        let n = self.k.ty(a).numel() as u64;
        let ashape = self.k.ty(a).shape.clone();
        // b sits right after a: element k of b is shared element n + k.
        let r = self.via_smem(&[a, b], &rt, &|l, idx| {
            let (last, rest) = idx.split_last().unwrap();
            let base = l.linear(&ashape, rest)?;
            let off = llvm(l.b.build_int_mul(*last, l.i32c(n), ""))?;
            llvm(l.b.build_int_add(base, off, ""))
        })?;
        self.set(op.results[0], r);
        Ok(())
    }

    pub(super) fn split(&mut self, op: &Op) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let src = op.operands[0];
        let sshape = self.k.ty(src).shape.clone();
        for (which, res) in op.results.iter().enumerate() {
            let sshape = sshape.clone();
            let r = self.via_smem(&[src], &rt, &|l, idx| {
                let mut full = idx.to_vec();
                full.push(l.i32c(which as u64));
                l.linear(&sshape, &full)
            })?;
            self.set(*res, r);
        }
        Ok(())
    }
}
