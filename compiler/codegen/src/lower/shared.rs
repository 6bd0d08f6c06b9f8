//! Shared memory: addresses, element loads and stores, tiles written and gathered back in another
//! layout, barriers, and what the block reductions know about it (`SmemState`).

use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate};
use tile_lang::ir::*;

use super::{GLOBAL, Lowering, R, Repr, llvm};

/// What shared memory held last, for the block reductions' barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SmemState {
    /// Nothing has used shared memory yet.
    Fresh,
    /// The last user was a block reduction whose slots start at byte `base`; nothing else
    /// touched shared memory since, and no region boundary was crossed.
    AfterReduction { base: u32 },
    /// Anything else.
    Unknown,
}

impl<'c> Lowering<'c, '_> {
    /// Bytes an element takes in shared memory (bools as bytes, pointers as 64-bit integers).
    pub(super) fn smem_size(e: Elem) -> u32 {
        match e {
            Elem::Ptr { .. } => 8,
            Elem::Scalar(d) => d.bytes() as u32,
        }
    }

    pub(super) fn barrier(&self) -> R<()> {
        // Every warp meets here: a warpgroup holding the turn to issue wgmma hands it on first.
        self.pass_turn()?;
        if self.plan.block_threads() == self.threads {
            self.intr("llvm.nvvm.barrier.cta.sync.aligned.all", &[], &[self.i32c(0).into()])?;
        } else {
            // A producer warpgroup never meets the kernel's warps here.
            let n = self.i32c(self.threads as u64);
            self.intr(
                "llvm.nvvm.barrier.cta.sync.aligned.count",
                &[],
                &[self.i32c(0).into(), n.into()],
            )?;
        }
        Ok(())
    }

    /// Orders this thread's earlier shared-memory writes (ordinary stores and `cp.async`) before
    /// later reads by the async proxy (`wgmma`); a barrier after it makes that hold for the block.
    pub(super) fn fence_proxy_async(&self) -> R<()> {
        self.intr("llvm.nvvm.fence.proxy.async.shared_cta", &[], &[])?;
        Ok(())
    }

    /// Scratch of `bytes` bytes is used (see [`Self::smem_ptr`]).
    pub(super) fn need_smem(&mut self, bytes: u32) {
        let base = self.plan.scratch_base(self.in_pipeline > 0);
        self.smem_bytes = self.smem_bytes.max(base + bytes.next_multiple_of(16));
    }

    /// The address of scratch byte `byte_off`: scratch starts after the pipeline region inside
    /// pipelined loops, at 0 elsewhere (`GpuPlan::scratch_base`).
    pub(super) fn smem_ptr(&self, byte_off: IntValue<'c>) -> R<PointerValue<'c>> {
        let base = self.plan.scratch_base(self.in_pipeline > 0);
        let off = llvm(self.b.build_int_add(byte_off, self.i32c(base as u64), ""))?;
        self.smem_abs_ptr(off)
    }

    /// The address of element `e` (of `esz` bytes) of an array at shared byte `base`.
    pub(super) fn smem_elem_at(&self, e: IntValue<'c>, esz: u32, base: IntValue<'c>) -> R<PointerValue<'c>> {
        let off = llvm(self.b.build_int_mul(e, self.i32c(esz as u64), ""))?;
        let off = llvm(self.b.build_int_add(off, base, ""))?;
        self.smem_abs_ptr(off)
    }

    /// The address of byte `byte_off` of shared memory.
    pub(super) fn smem_abs_ptr(&self, byte_off: IntValue<'c>) -> R<PointerValue<'c>> {
        let base = self.smem.expect("declared at kernel entry");
        let off = llvm(self.b.build_int_z_extend(byte_off, self.ctx.i64_type(), ""))?;
        unsafe { llvm(self.b.build_in_bounds_gep(self.ctx.i8_type(), base, &[off], "")) }
    }

    /// Stores element `x` of type `e` at shared-memory element `index` of an array at `base`.
    pub(super) fn smem_store(&self, e: Elem, base: u32, index: IntValue<'c>, x: BasicValueEnum<'c>) -> R<()> {
        let p = self.smem_elem_ptr(e, base, index)?;
        let x = match e {
            Elem::Ptr { .. } => llvm(self.b.build_ptr_to_int(x.into_pointer_value(), self.ctx.i64_type(), ""))?.into(),
            Elem::Scalar(DType::Bool) => {
                llvm(self.b.build_int_z_extend(x.into_int_value(), self.ctx.i8_type(), ""))?.into()
            }
            _ => x,
        };
        llvm(self.b.build_store(p, x))?;
        Ok(())
    }

    /// The address of element `index` of an array of `e` at byte offset `base`.
    fn smem_elem_ptr(&self, e: Elem, base: u32, index: IntValue<'c>) -> R<PointerValue<'c>> {
        let sz = Self::smem_size(e);
        let off = llvm(self.b.build_int_add(
            self.i32c(base as u64),
            llvm(self.b.build_int_mul(index, self.i32c(sz as u64), ""))?,
            "",
        ))?;
        self.smem_ptr(off)
    }

    pub(super) fn smem_load(&self, e: Elem, base: u32, index: IntValue<'c>) -> R<BasicValueEnum<'c>> {
        let p = self.smem_elem_ptr(e, base, index)?;
        Ok(match e {
            Elem::Ptr { .. } => {
                let i = llvm(self.b.build_load(self.ctx.i64_type(), p, ""))?.into_int_value();
                llvm(
                    self.b
                        .build_int_to_ptr(i, self.ctx.ptr_type(AddressSpace::from(GLOBAL)), ""),
                )?
                .into()
            }
            Elem::Scalar(DType::Bool) => {
                // Tested in 32 bits after an opaque widening: LLVM merges neighbouring byte
                // loads into a word and would otherwise take the bytes apart with 16-bit shifts
                // and compares (see `widen_narrow`).
                let i = llvm(self.b.build_load(self.ctx.i8_type(), p, ""))?.into_int_value();
                let w = self.widen_narrow(DType::U8, i)?;
                llvm(
                    self.b
                        .build_int_compare(IntPredicate::NE, w, w.get_type().const_zero(), ""),
                )?
                .into()
            }
            _ => llvm(self.b.build_load(self.ty(e), p, ""))?,
        })
    }

    /// Writes a whole tile to shared memory at byte offset `base` (owners only).
    pub(super) fn tile_to_smem(&mut self, v: ValueId, base: u32) -> R<()> {
        let t = self.k.ty(v).clone();
        let lay = self.layout(&t);
        let vals = self.elems(v);
        let own = self.owner(&lay)?;
        self.when(own, |l| {
            for (i, x) in vals.iter().enumerate() {
                let e = if t.is_scalar() { l.i32c(0) } else { l.flat(&lay, i)? };
                l.smem_store(t.elem, base, e, *x)?;
            }
            Ok(())
        })
    }

    /// A result tile whose elements are read from shared memory: `src(l, idx)` gives the shared
    /// element index holding the value for result multi-index `idx`.
    fn gather(
        &mut self,
        result: &Type,
        elem: Elem,
        base: u32,
        src: &dyn Fn(&Self, &[IntValue<'c>]) -> R<IntValue<'c>>,
    ) -> R<Repr<'c>> {
        if result.is_scalar() {
            return Ok(Repr::Scalar(self.smem_load(elem, base, src(self, &[])?)?));
        }
        let lay = self.layout(result);
        let mut out = Vec::with_capacity(lay.per_thread());
        for i in 0..lay.per_thread() {
            let e = self.flat(&lay, i)?;
            let idx = self.unflatten(&lay, e)?;
            out.push(self.smem_load(elem, base, src(self, &idx)?)?);
        }
        Ok(Repr::Tile(out))
    }

    /// Writes `srcs` to shared memory one after another, then builds `result` by reading the
    /// element `index(idx)` for each result index (indices count across the sources).
    pub(super) fn via_smem(
        &mut self,
        srcs: &[ValueId],
        result: &Type,
        index: &dyn Fn(&Self, &[IntValue<'c>]) -> R<IntValue<'c>>,
    ) -> R<Repr<'c>> {
        let elem = self.sources_to_smem(srcs)?;
        self.gather(result, elem, 0, index)
    }

    /// Writes `srcs` to shared memory one after another between two barriers; returns their
    /// element type.
    fn sources_to_smem(&mut self, srcs: &[ValueId]) -> R<Elem> {
        let elem = self.k.ty(srcs[0]).elem;
        let sz = Self::smem_size(elem);
        let total: u32 = srcs.iter().map(|s| self.k.ty(*s).numel() as u32 * sz).sum();
        self.need_smem(total);
        self.barrier()?;
        let mut base = 0;
        for s in srcs {
            self.tile_to_smem(*s, base)?;
            base += self.k.ty(*s).numel() as u32 * sz;
        }
        self.barrier()?;
        Ok(elem)
    }

    /// [`via_smem`](Self::via_smem) with the result in layout `lay` (the blocked layout takes the
    /// chunked path).
    pub(super) fn via_smem_in(
        &mut self,
        srcs: &[ValueId],
        result: &Type,
        lay: &tile_gir::linear::LinearLayout,
        index: &dyn Fn(&Self, &[IntValue<'c>]) -> R<IntValue<'c>>,
    ) -> R<Repr<'c>> {
        let blocked = tile_gir::linear::LinearLayout::blocked(&result.shape, self.threads, self.max_vec);
        if result.is_scalar() || *lay == blocked {
            return self.via_smem(srcs, result, index);
        }
        let elem = self.sources_to_smem(srcs)?;
        let part = self.thread_part(lay)?;
        let st = crate::layout::strides(&result.shape);
        let mut out = Vec::with_capacity(lay.regs());
        for r in 0..lay.regs() {
            let e = self.at(part, lay.reg_part(r))?;
            let idx: Vec<IntValue<'c>> = (0..result.shape.len())
                .map(|d| {
                    let s = llvm(
                        self.b
                            .build_right_shift(e, self.i32c(st[d].trailing_zeros() as u64), false, ""),
                    )?;
                    llvm(self.b.build_and(s, self.i32c(result.shape[d] as u64 - 1), ""))
                })
                .collect::<R<_>>()?;
            out.push(self.smem_load(elem, 0, index(self, &idx)?)?);
        }
        Ok(Repr::Tile(out))
    }

    /// Writes a tile to shared memory between barriers, for reading back in another layout.
    pub(super) fn stage(&mut self, src: ValueId) -> R<()> {
        let t = self.k.ty(src).clone();
        self.need_smem(t.numel() as u32 * Self::smem_size(t.elem));
        self.barrier()?;
        self.tile_to_smem(src, 0)?;
        self.barrier()
    }

    /// Whether `op` keeps what the block reductions know about shared memory: only ops that never
    /// touch it do (a block reduction records its own state; every other op forgets).
    pub(super) fn register_only(&self, op: &Op) -> bool {
        match &op.kind {
            OpKind::Const(_)
            | OpKind::ProgramId(_)
            | OpKind::NumPrograms(_)
            | OpKind::Arange { .. }
            | OpKind::PtrAdd
            | OpKind::Load { .. }
            | OpKind::Store { .. }
            | OpKind::MultipleOf(_)
            | OpKind::MaxContiguous(_)
            | OpKind::Print(_)
            | OpKind::Assert(_)
            | OpKind::Reduce { .. }
            | OpKind::ReduceWith { .. } => true,
            OpKind::Broadcast => {
                self.k.ty(op.operands[0]).is_scalar()
                    || self.plan.broadcast_held(self.k, op)
                    || self
                        .plan
                        .recompute_ops(self.k, op.operands[0], tile_gir::assign::RECOMPUTE_OPS)
                        .is_some()
            }
            OpKind::ExpandDims(_) | OpKind::Reshape => self.reshape_in_registers(op),
            k => k.is_elementwise(),
        }
    }
}
