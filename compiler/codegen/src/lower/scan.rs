//! Scans along an axis, through shared memory.

use inkwell::IntPredicate;
use tile_lang::ir::*;

use super::{Lowering, R, Repr, llvm};

impl<'c> Lowering<'c, '_> {
    pub(super) fn scan(&mut self, op: &Op, r: Option<ReduceOp>, axis: usize, reverse: bool) -> R<()> {
        let src = op.operands[0];
        let st = self.k.ty(src).clone();
        let d = st.dtype().unwrap();
        let n = st.shape[axis];
        self.stage(src)?;
        let lay = self.layout(&st);
        let stride = lay.strides()[axis] as u64;
        let mut bases = Vec::new();
        let mut pos = Vec::new();
        for i in 0..lay.per_thread() {
            let e = self.flat(&lay, i)?;
            let mut idx = self.unflatten(&lay, e)?;
            pos.push(idx[axis]);
            idx[axis] = self.i32c(0);
            bases.push(self.linear(&st.shape, &idx)?);
        }
        let region = op.regions.first().cloned();
        // Walk the axis in scan order; each slot folds the elements up to its own position.
        let first = if reverse { n as u64 - 1 } else { 0 };
        let inits: Vec<_> = bases
            .iter()
            .map(|b| {
                let at = llvm(self.b.build_int_add(*b, self.i32c(first * stride), ""))?;
                self.smem_load(st.elem, 0, at)
            })
            .collect::<R<_>>()?;
        let out = self.counted_loop(
            self.i32c(1),
            self.i32c(n as u64),
            self.i32c(1),
            true,
            inits,
            &mut |l, k, accs| {
                let kk = if reverse {
                    llvm(l.b.build_int_sub(l.i32c(n as u64 - 1), k, ""))?
                } else {
                    k
                };
                let off = llvm(l.b.build_int_mul(kk, l.i32c(stride), ""))?;
                let mut next = Vec::new();
                for (s, acc) in accs.iter().enumerate() {
                    let x = l.smem_load(st.elem, 0, llvm(l.b.build_int_add(bases[s], off, ""))?)?;
                    let c = match (r, &region) {
                        (Some(r), _) => l.binary(r.combine(), d, *acc, x)?,
                        (None, Some(reg)) => {
                            match l.region(reg, &[Repr::Scalar(*acc), Repr::Scalar(x)], &[])?.remove(0) {
                                Repr::Scalar(s) => s,
                                Repr::Tile(t) => t[0],
                            }
                        }
                        _ => unreachable!("verified: scan_with has a region"),
                    };
                    let pred = if reverse { IntPredicate::SGE } else { IntPredicate::SLE };
                    let active = llvm(l.b.build_int_compare(pred, kk, pos[s], ""))?;
                    next.push(llvm(l.b.build_select(active, c, *acc, ""))?);
                }
                Ok(next)
            },
        )?;
        self.set(op.results[0], Repr::Tile(out));
        Ok(())
    }
}
