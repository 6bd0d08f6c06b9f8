//! Layouts, and which tile elements a thread's slots hold.

use inkwell::IntPredicate;
use inkwell::values::IntValue;
use tile_lang::ir::*;

use super::{Lowering, R, llvm};
use crate::layout::Layout;

impl<'c> Lowering<'c, '_> {
    pub(super) fn layout(&self, t: &Type) -> Layout {
        Layout::new(&t.shape, self.threads, self.max_vec)
    }

    pub(super) fn tid(&self) -> IntValue<'c> {
        self.tid.expect("set at kernel entry")
    }

    /// The flat (row-major) index of slot `i` of this thread.
    pub(super) fn flat(&self, lay: &Layout, i: usize) -> R<IntValue<'c>> {
        let (chunk_slot, j) = (i / lay.vec, i % lay.vec);
        let c = llvm(
            self.b
                .build_int_add(self.i32c((chunk_slot * lay.threads) as u64), self.tid(), ""),
        )?;
        let c = llvm(self.b.build_and(c, self.i32c(lay.chunks as u64 - 1), ""))?;
        let e = llvm(self.b.build_int_mul(c, self.i32c(lay.vec as u64), ""))?;
        llvm(self.b.build_int_add(e, self.i32c(j as u64), "e"))
    }

    /// Index along each axis of flat index `e`.
    pub(super) fn unflatten(&self, lay: &Layout, e: IntValue<'c>) -> R<Vec<IntValue<'c>>> {
        let st = lay.strides();
        (0..lay.shape.len())
            .map(|d| {
                let s = llvm(
                    self.b
                        .build_right_shift(e, self.i32c(st[d].trailing_zeros() as u64), false, ""),
                )?;
                llvm(self.b.build_and(s, self.i32c(lay.shape[d] as u64 - 1), ""))
            })
            .collect()
    }

    /// Whether this thread owns its slots of a tile of this layout (not a copy).
    pub(super) fn owner(&self, lay: &Layout) -> R<IntValue<'c>> {
        if lay.replicated() {
            llvm(
                self.b
                    .build_int_compare(IntPredicate::ULT, self.tid(), self.i32c(lay.chunks as u64), "own"),
            )
        } else {
            Ok(self.ctx.bool_type().const_int(1, false))
        }
    }

    /// Flat index into a tile of `shape` from per-axis indices.
    pub(super) fn linear(&self, shape: &[usize], idx: &[IntValue<'c>]) -> R<IntValue<'c>> {
        let st = crate::layout::strides(shape);
        let mut acc = self.i32c(0);
        for (d, i) in idx.iter().enumerate() {
            let t = llvm(self.b.build_int_mul(*i, self.i32c(st[d] as u64), ""))?;
            acc = llvm(self.b.build_int_add(acc, t, ""))?;
        }
        Ok(acc)
    }
}
