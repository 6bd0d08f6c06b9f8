//! `dot`: both operands through shared memory, then a plain FMA loop over the inner dimension.

use tile_lang::ir::*;

use super::{Lowering, R, Repr, llvm};

impl<'c> Lowering<'c, '_> {
    pub(super) fn dot(&mut self, op: &Op, p: Precision) -> R<()> {
        let (a, b, c) = (op.operands[0], op.operands[1], op.operands[2]);
        let (ta, tb) = (self.k.ty(a).clone(), self.k.ty(b).clone());
        let (m, kk, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
        let din = ta.dtype().unwrap();
        let dacc = self.dtype(c);
        let sz = Self::smem_size(ta.elem);
        let b_base = (m * kk) as u32 * sz;
        self.need_smem(b_base + (kk * n) as u32 * sz);
        self.barrier()?;
        self.tile_to_smem(a, 0)?;
        self.tile_to_smem(b, b_base)?;
        self.barrier()?;
        let rt = self.k.ty(op.results[0]).clone();
        let lay = self.layout(&rt);
        let acc0 = self.elems(c);
        let mut rows = Vec::new();
        let mut cols = Vec::new();
        for i in 0..lay.per_thread() {
            let e = self.flat(&lay, i)?;
            let idx = self.unflatten(&lay, e)?;
            rows.push(llvm(self.b.build_int_mul(idx[0], self.i32c(kk as u64), ""))?);
            cols.push(idx[1]);
        }
        let acc_t = self.ty(Elem::Scalar(dacc));
        let loc = op.loc;
        let out = self.counted_loop(
            self.i32c(0),
            self.i32c(kk as u64),
            self.i32c(1),
            true,
            acc0,
            &mut |l, k, accs| {
                let mut next = Vec::new();
                for (s, acc) in accs.iter().enumerate() {
                    let ai = llvm(l.b.build_int_add(rows[s], k, ""))?;
                    let bi = llvm(l.b.build_int_add(llvm(l.b.build_int_mul(k, l.i32c(n as u64), ""))?, cols[s], ""))?;
                    let x = l.smem_load(ta.elem, 0, ai)?;
                    let y = l.smem_load(ta.elem, b_base, bi)?;
                    if dacc.is_int() {
                        let x = llvm(l.b.build_int_s_extend(x.into_int_value(), acc_t.into_int_type(), ""))?;
                        let y = llvm(l.b.build_int_s_extend(y.into_int_value(), acc_t.into_int_type(), ""))?;
                        let pr = llvm(l.b.build_int_mul(x, y, ""))?;
                        next.push(llvm(l.b.build_int_add(acc.into_int_value(), pr, ""))?.into());
                    } else {
                        let mut x = l.cast(din, dacc, x, loc)?;
                        let mut y = l.cast(din, dacc, y, loc)?;
                        if p == Precision::Tf32 {
                            x = l
                                .asm(Some(l.ctx.f32_type().into()), "cvt.rna.tf32.f32 $0, $1;", "=f,f", &[x])?
                                .unwrap();
                            y = l
                                .asm(Some(l.ctx.f32_type().into()), "cvt.rna.tf32.f32 $0, $1;", "=f,f", &[y])?
                                .unwrap();
                        }
                        next.push(l.intr1("llvm.fma", &[acc_t], &[x, y, *acc])?);
                    }
                }
                Ok(next)
            },
        )?;
        self.set(op.results[0], Repr::Tile(out));
        Ok(())
    }
}
