//! Lowering of each IR op to LLVM IR for the NVPTX back end.

use std::collections::HashMap;

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use tile_lang::ir::*;

use crate::CodegenError;
use crate::layout::Layout;

type R<T> = Result<T, CodegenError>;

/// A value in registers: a scalar held alike by every thread, or a thread's slots of a tile.
#[derive(Clone, Debug)]
enum Repr<'c> {
    S(BasicValueEnum<'c>),
    T(Vec<BasicValueEnum<'c>>),
}

const GLOBAL: u16 = 1;
const SHARED: u16 = 3;
const PTX_KERNEL: u32 = 71;

/// Lowers `k` into `module` as a kernel for blocks of `threads` threads; returns the dynamic
/// shared memory it needs.
pub(crate) fn lower<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    k: &Kernel,
    threads: u32,
    spec: &[crate::ArgSpec],
) -> R<u32> {
    let b = ctx.create_builder();
    let info = crate::axis::analyze(k, spec);
    let max_vec = crate::estimate::max_vec(k);
    let mut l = L {
        info,
        max_vec,
        ctx,
        m: module,
        b,
        f: None,
        k,
        threads,
        tid: None,
        vals: HashMap::new(),
        smem: None,
        smem_bytes: 0,
        smem_state: SmemState::Fresh,
    };
    l.kernel()?;
    Ok(l.smem_bytes)
}

/// What shared memory held last, for the block reductions' barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SmemState {
    /// Nothing has used shared memory yet.
    Fresh,
    /// The last user was a block reduction whose slots start at byte `base`; nothing else
    /// touched shared memory since, and no region boundary was crossed.
    AfterReduction { base: u32 },
    /// Anything else.
    Unknown,
}

struct L<'c, 'a> {
    /// Largest chunk of a layout, in elements.
    max_vec: usize,
    /// What the axis analysis knows about integer and pointer values.
    info: HashMap<ValueId, crate::axis::AxisInfo>,
    ctx: &'c Context,
    m: &'a Module<'c>,
    b: Builder<'c>,
    f: Option<FunctionValue<'c>>,
    k: &'a Kernel,
    threads: u32,
    tid: Option<IntValue<'c>>,
    vals: HashMap<ValueId, Repr<'c>>,
    smem: Option<PointerValue<'c>>,
    smem_bytes: u32,
    /// What shared memory held last, in straight-line code (see [`SmemState`]).
    smem_state: SmemState,
}

fn llvm<T>(r: Result<T, inkwell::builder::BuilderError>) -> R<T> {
    r.map_err(|e| CodegenError::Llvm(e.to_string()))
}

impl<'c> L<'c, '_> {
    // ---- types --------------------------------------------------------------------------------

    fn ty(&self, e: Elem) -> BasicTypeEnum<'c> {
        let c = self.ctx;
        match e {
            Elem::Ptr { .. } => c.ptr_type(AddressSpace::from(GLOBAL)).into(),
            Elem::Scalar(d) => match d {
                DType::Bool => c.bool_type().into(),
                DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => c.i8_type().into(),
                DType::I16 | DType::U16 => c.i16_type().into(),
                DType::I32 | DType::U32 => c.i32_type().into(),
                DType::I64 | DType::U64 => c.i64_type().into(),
                DType::F16 => c.f16_type().into(),
                DType::BF16 => c.bf16_type().into(),
                DType::F32 => c.f32_type().into(),
                DType::F64 => c.f64_type().into(),
            },
        }
    }

    /// Bytes an element takes in shared memory (bools as bytes, pointers as 64-bit integers).
    fn smem_size(e: Elem) -> u32 {
        match e {
            Elem::Ptr { .. } => 8,
            Elem::Scalar(d) => d.bytes() as u32,
        }
    }

    fn int_type(&self, bits: u32) -> inkwell::types::IntType<'c> {
        match bits {
            8 => self.ctx.i8_type(),
            16 => self.ctx.i16_type(),
            32 => self.ctx.i32_type(),
            _ => self.ctx.i64_type(),
        }
    }

    fn i32c(&self, v: u64) -> IntValue<'c> {
        self.ctx.i32_type().const_int(v, false)
    }

    // ---- helpers ------------------------------------------------------------------------------

    /// Calls an LLVM intrinsic by name; a name LLVM does not know is an error, never a silent
    /// external function.
    fn intr(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'c>],
        args: &[BasicValueEnum<'c>],
    ) -> R<Option<BasicValueEnum<'c>>> {
        let i = Intrinsic::find(name).ok_or_else(|| CodegenError::Llvm(format!("LLVM has no intrinsic `{name}`")))?;
        let f = i
            .get_declaration(self.m, types)
            .ok_or_else(|| CodegenError::Llvm(format!("cannot declare `{name}`")))?;
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        let call = llvm(self.b.build_call(f, &args, ""))?;
        Ok(call.try_as_basic_value().basic())
    }

    fn intr1(&self, name: &str, types: &[BasicTypeEnum<'c>], args: &[BasicValueEnum<'c>]) -> R<BasicValueEnum<'c>> {
        self.intr(name, types, args)?
            .ok_or_else(|| CodegenError::Llvm(format!("`{name}` returns nothing")))
    }

    fn asm(
        &self,
        ret: Option<BasicTypeEnum<'c>>,
        text: &str,
        constraints: &str,
        args: &[BasicValueEnum<'c>],
    ) -> R<Option<BasicValueEnum<'c>>> {
        self.asm_with(ret, text, constraints, args, true)
    }

    /// Inline asm that computes a value and does nothing else: LLVM may merge, move or drop it
    /// like any pure op, but cannot see through it.
    fn pure_asm(
        &self,
        ret: BasicTypeEnum<'c>,
        text: &str,
        constraints: &str,
        args: &[BasicValueEnum<'c>],
    ) -> R<BasicValueEnum<'c>> {
        Ok(self.asm_with(Some(ret), text, constraints, args, false)?.unwrap())
    }

    fn asm_with(
        &self,
        ret: Option<BasicTypeEnum<'c>>,
        text: &str,
        constraints: &str,
        args: &[BasicValueEnum<'c>],
        side_effects: bool,
    ) -> R<Option<BasicValueEnum<'c>>> {
        let params: Vec<_> = args.iter().map(|a| a.get_type().into()).collect();
        let fty = match ret {
            Some(t) => t.fn_type(&params, false),
            None => self.ctx.void_type().fn_type(&params, false),
        };
        let asm = self.ctx.create_inline_asm(
            fty,
            text.to_string(),
            constraints.to_string(),
            side_effects,
            false,
            None,
            false,
        );
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        let call = llvm(self.b.build_indirect_call(fty, asm, &args, ""))?;
        Ok(call.try_as_basic_value().basic())
    }

    fn barrier(&self) -> R<()> {
        self.intr("llvm.nvvm.barrier.cta.sync.aligned.all", &[], &[self.i32c(0).into()])?;
        Ok(())
    }

    fn func(&self) -> FunctionValue<'c> {
        self.f.expect("lowering happens inside the kernel function")
    }

    /// Runs `body` only where `cond` holds.
    fn when(&mut self, cond: IntValue<'c>, body: impl FnOnce(&mut Self) -> R<()>) -> R<()> {
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
    fn counted_loop(
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

    // ---- layouts and indices ------------------------------------------------------------------

    fn layout(&self, t: &Type) -> Layout {
        Layout::new(&t.shape, self.threads, self.max_vec)
    }

    fn tid(&self) -> IntValue<'c> {
        self.tid.expect("set at kernel entry")
    }

    /// The flat (row-major) index of slot `i` of this thread.
    fn flat(&self, lay: &Layout, i: usize) -> R<IntValue<'c>> {
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
    fn unflatten(&self, lay: &Layout, e: IntValue<'c>) -> R<Vec<IntValue<'c>>> {
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
    fn owner(&self, lay: &Layout) -> R<IntValue<'c>> {
        if lay.replicated() {
            llvm(
                self.b
                    .build_int_compare(IntPredicate::ULT, self.tid(), self.i32c(lay.chunks as u64), "own"),
            )
        } else {
            Ok(self.ctx.bool_type().const_int(1, false))
        }
    }

    fn get(&self, v: ValueId) -> Repr<'c> {
        self.vals
            .get(&v)
            .cloned()
            .expect("a verified kernel defines values before their uses")
    }

    /// The value's elements as this thread holds them (a scalar is one element).
    fn elems(&self, v: ValueId) -> Vec<BasicValueEnum<'c>> {
        match self.get(v) {
            Repr::S(s) => vec![s],
            Repr::T(t) => t,
        }
    }

    fn scalar(&self, v: ValueId) -> BasicValueEnum<'c> {
        match self.get(v) {
            Repr::S(s) => s,
            Repr::T(t) => t[0],
        }
    }

    fn dtype(&self, v: ValueId) -> DType {
        self.k.ty(v).dtype().unwrap_or(DType::I64)
    }

    // ---- shared memory ------------------------------------------------------------------------

    fn need_smem(&mut self, bytes: u32) {
        self.smem_bytes = self.smem_bytes.max(bytes.next_multiple_of(16));
    }

    fn smem_ptr(&self, byte_off: IntValue<'c>) -> R<PointerValue<'c>> {
        let base = self.smem.expect("declared at kernel entry");
        let off = llvm(self.b.build_int_z_extend(byte_off, self.ctx.i64_type(), ""))?;
        unsafe { llvm(self.b.build_in_bounds_gep(self.ctx.i8_type(), base, &[off], "")) }
    }

    /// Stores element `x` of type `e` at shared-memory element `index` of an array at `base`.
    fn smem_store(&self, e: Elem, base: u32, index: IntValue<'c>, x: BasicValueEnum<'c>) -> R<()> {
        let sz = Self::smem_size(e);
        let off = llvm(self.b.build_int_add(
            self.i32c(base as u64),
            llvm(self.b.build_int_mul(index, self.i32c(sz as u64), ""))?,
            "",
        ))?;
        let p = self.smem_ptr(off)?;
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

    fn smem_load(&self, e: Elem, base: u32, index: IntValue<'c>) -> R<BasicValueEnum<'c>> {
        let sz = Self::smem_size(e);
        let off = llvm(self.b.build_int_add(
            self.i32c(base as u64),
            llvm(self.b.build_int_mul(index, self.i32c(sz as u64), ""))?,
            "",
        ))?;
        let p = self.smem_ptr(off)?;
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
    fn tile_to_smem(&mut self, v: ValueId, base: u32) -> R<()> {
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
            return Ok(Repr::S(self.smem_load(elem, base, src(self, &[])?)?));
        }
        let lay = self.layout(result);
        let mut out = Vec::with_capacity(lay.per_thread());
        for i in 0..lay.per_thread() {
            let e = self.flat(&lay, i)?;
            let idx = self.unflatten(&lay, e)?;
            out.push(self.smem_load(elem, base, src(self, &idx)?)?);
        }
        Ok(Repr::T(out))
    }

    /// Flat index into a tile of `shape` from per-axis indices.
    fn linear(&self, shape: &[usize], idx: &[IntValue<'c>]) -> R<IntValue<'c>> {
        let st = crate::layout::strides(shape);
        let mut acc = self.i32c(0);
        for (d, i) in idx.iter().enumerate() {
            let t = llvm(self.b.build_int_mul(*i, self.i32c(st[d] as u64), ""))?;
            acc = llvm(self.b.build_int_add(acc, t, ""))?;
        }
        Ok(acc)
    }

    // ---- the kernel ---------------------------------------------------------------------------

    fn kernel(&mut self) -> R<()> {
        let params: Vec<_> = self.k.params.iter().map(|p| self.ty(p.elem).into()).collect();
        let fty = self.ctx.void_type().fn_type(&params, false);
        let f = self.m.add_function(&self.k.name, fty, Some(Linkage::External));
        f.set_call_conventions(PTX_KERNEL);
        f.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            self.ctx
                .create_string_attribute("nvvm.maxntid", &self.threads.to_string()),
        );
        self.f = Some(f);
        let entry = self.ctx.append_basic_block(f, "entry");
        self.b.position_at_end(entry);
        let smem = self.m.add_global(
            self.ctx.i8_type().array_type(0),
            Some(AddressSpace::from(SHARED)),
            "smem",
        );
        smem.set_linkage(Linkage::External);
        smem.set_alignment(16);
        self.smem = Some(smem.as_pointer_value());
        let tid = self.intr1("llvm.nvvm.read.ptx.sreg.tid.x", &[], &[])?.into_int_value();
        self.tid = Some(tid);
        for (i, p) in self.k.params.iter().enumerate() {
            let v = f.get_nth_param(i as u32).unwrap();
            if p.elem.is_ptr() {
                // Kernel pointers are never null and point to global memory.
                v.set_name(&p.name);
            } else {
                v.set_name(&p.name);
            }
            self.vals.insert(p.value, Repr::S(v));
        }
        let body = self.k.body.clone();
        self.region(&body, &[])?;
        llvm(self.b.build_return(None))?;
        Ok(())
    }

    /// Lowers a region with its arguments bound; returns the values of its `yield`.
    fn region(&mut self, r: &Region, args: &[Repr<'c>]) -> R<Vec<Repr<'c>>> {
        for (a, v) in r.args.iter().zip(args) {
            self.vals.insert(*a, v.clone());
        }
        for op in &r.ops {
            if let OpKind::Yield = op.kind {
                return Ok(op.operands.iter().map(|v| self.get(*v)).collect());
            }
            self.op(op)?;
        }
        Ok(vec![])
    }

    /// Flattens values for phis; `rebuild` turns them back.
    fn flatten(vals: &[Repr<'c>]) -> Vec<BasicValueEnum<'c>> {
        vals.iter()
            .flat_map(|r| match r {
                Repr::S(s) => vec![*s],
                Repr::T(t) => t.clone(),
            })
            .collect()
    }

    fn rebuild(shapes: &[Repr<'c>], flat: &[BasicValueEnum<'c>]) -> Vec<Repr<'c>> {
        let mut i = 0;
        shapes
            .iter()
            .map(|r| match r {
                Repr::S(_) => {
                    i += 1;
                    Repr::S(flat[i - 1])
                }
                Repr::T(t) => {
                    i += t.len();
                    Repr::T(flat[i - t.len()..i].to_vec())
                }
            })
            .collect()
    }

    fn set(&mut self, v: ValueId, r: Repr<'c>) {
        self.vals.insert(v, r);
    }

    /// Applies `f` element by element over operands of one shape.
    fn map(&mut self, op: &Op, f: &dyn Fn(&Self, &[BasicValueEnum<'c>]) -> R<BasicValueEnum<'c>>) -> R<()> {
        let ins: Vec<Vec<BasicValueEnum<'c>>> = op.operands.iter().map(|v| self.elems(*v)).collect();
        let n = ins[0].len();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let args: Vec<_> = ins.iter().map(|x| x[i]).collect();
            out.push(f(self, &args)?);
        }
        let r = if self.k.ty(op.results[0]).is_scalar() {
            Repr::S(out[0])
        } else {
            Repr::T(out)
        };
        self.set(op.results[0], r);
        Ok(())
    }

    fn op(&mut self, op: &Op) -> R<()> {
        let rt = op.results.first().map(|r| self.k.ty(*r).clone());
        let unsupported = |what: &str| Err(CodegenError::unsupported(what, op.kind.name(), op.loc));
        match &op.kind {
            OpKind::Const(c) => {
                let t = self.ty(rt.unwrap().elem);
                let v: BasicValueEnum = match (c, t) {
                    (ConstValue::Int(i), BasicTypeEnum::IntType(it)) => it.const_int(*i as u64, true).into(),
                    (ConstValue::Bool(b), BasicTypeEnum::IntType(it)) => it.const_int(*b as u64, false).into(),
                    (ConstValue::Float(f), BasicTypeEnum::FloatType(ft)) => ft.const_float(*f).into(),
                    _ => return unsupported("this constant"),
                };
                self.set(op.results[0], Repr::S(v));
            }
            OpKind::ProgramId(a) | OpKind::NumPrograms(a) => {
                let reg = if matches!(op.kind, OpKind::ProgramId(_)) {
                    "ctaid"
                } else {
                    "nctaid"
                };
                let axis = ["x", "y", "z"][*a as usize];
                let v = self.intr1(&format!("llvm.nvvm.read.ptx.sreg.{reg}.{axis}"), &[], &[])?;
                self.set(op.results[0], Repr::S(v));
            }
            OpKind::Arange { start, .. } => {
                let lay = self.layout(&rt.unwrap());
                let mut out = Vec::new();
                for i in 0..lay.per_thread() {
                    let e = self.flat(&lay, i)?;
                    out.push(llvm(self.b.build_int_add(e, self.i32c(*start as u64), ""))?.into());
                }
                self.set(op.results[0], Repr::T(out));
            }
            OpKind::Broadcast => {
                let rt = rt.unwrap();
                let src = op.operands[0];
                let st = self.k.ty(src).clone();
                let r = if st.is_scalar() {
                    Repr::T(vec![self.scalar(src); self.layout(&rt).per_thread()])
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
            }
            OpKind::ExpandDims(_) | OpKind::Reshape => {
                let rt = rt.unwrap();
                let src = op.operands[0];
                let (a, b) = (self.layout(self.k.ty(src)), self.layout(&rt));
                let same = (a.numel, a.vec, a.chunks) == (b.numel, b.vec, b.chunks);
                let r = if same || rt.is_scalar() && self.k.ty(src).numel() == 1 {
                    match self.get(src) {
                        Repr::T(t) if rt.is_scalar() => Repr::S(t[0]),
                        Repr::S(s) if !rt.is_scalar() => Repr::T(vec![s; b.per_thread()]),
                        r => r,
                    }
                } else {
                    let rshape = rt.shape.clone();
                    self.via_smem(&[src], &rt, &|l, idx| l.linear(&rshape, idx))?
                };
                self.set(op.results[0], r);
            }
            OpKind::Permute(p) => {
                let rt = rt.unwrap();
                let src = op.operands[0];
                let sshape = self.k.ty(src).shape.clone();
                let p = p.clone();
                let r = self.via_smem(&[src], &rt, &|l, idx| {
                    let mut sidx = vec![l.i32c(0); sshape.len()];
                    for (r_axis, &s_axis) in p.iter().enumerate() {
                        sidx[s_axis] = idx[r_axis];
                    }
                    l.linear(&sshape, &sidx)
                })?;
                self.set(op.results[0], r);
            }
            OpKind::Join => {
                let rt = rt.unwrap();
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
            }
            OpKind::Split => {
                let rt = rt.unwrap();
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
            }
            OpKind::Unary(u) => {
                let d = self.dtype(op.operands[0]);
                let u = *u;
                let loc = op.loc;
                self.map(op, &|l, a| l.unary(u, d, a[0], loc))?;
            }
            OpKind::Binary(bop) => {
                let d = self.dtype(op.operands[0]);
                let bop = *bop;
                self.map(op, &|l, a| l.binary(bop, d, a[0], a[1]))?;
            }
            OpKind::Cmp(c) => {
                let e = self.k.ty(op.operands[0]).elem;
                let c = *c;
                self.map(op, &|l, a| l.compare(c, e, a[0], a[1]))?;
            }
            OpKind::Fma => {
                let t = self.ty(self.k.ty(op.operands[0]).elem);
                self.map(op, &|l, a| l.intr1("llvm.fma", &[t], &[a[0], a[1], a[2]]))?;
            }
            OpKind::Select => self.map(op, &|l, a| {
                llvm(l.b.build_select(a[0].into_int_value(), a[1], a[2], ""))
            })?,
            OpKind::Cast(r) => {
                let (from, to) = (self.dtype(op.operands[0]), rt.unwrap().dtype().unwrap());
                let loc = op.loc;
                match r {
                    Rounding::Rtz => self.map(op, &|l, a| l.cast_toward_zero(from, to, a[0], loc))?,
                    _ => self.map(op, &|l, a| l.cast(from, to, a[0], loc))?,
                }
            }
            OpKind::Bitcast => {
                let t = self.ty(rt.unwrap().elem);
                self.map(op, &|l, a| llvm(l.b.build_bit_cast(a[0], t, "")))?;
            }
            OpKind::PtrAdd => {
                let pointee = match self.k.ty(op.operands[0]).elem {
                    Elem::Ptr { pointee, .. } => pointee,
                    _ => unreachable!("verified"),
                };
                let od = self.dtype(op.operands[1]);
                let et = self.ty(Elem::Scalar(pointee));
                self.map(op, &|l, a| {
                    let off = a[1].into_int_value();
                    let off = if od.bits() == 64 {
                        off
                    } else if od.is_signed() {
                        llvm(l.b.build_int_s_extend(off, l.ctx.i64_type(), ""))?
                    } else {
                        llvm(l.b.build_int_z_extend(off, l.ctx.i64_type(), ""))?
                    };
                    let p = unsafe { llvm(l.b.build_gep(et, a[0].into_pointer_value(), &[off], ""))? };
                    Ok(p.into())
                })?;
            }
            OpKind::Load { mask, other } => self.load(op, *mask, *other)?,
            OpKind::Store { mask } => self.store(op, *mask)?,
            OpKind::Atomic { op: a, mask } => self.atomic(op, Some(*a), *mask)?,
            OpKind::AtomicCas { mask } => self.atomic(op, None, *mask)?,
            OpKind::Dot(p) => self.dot(op, *p)?,
            OpKind::Reduce { op: r, axis } => self.reduce(op, *r, *axis)?,
            OpKind::ArgReduce { max, axis } => self.arg_reduce(op, *max, *axis)?,
            OpKind::ReduceWith { axis } => self.reduce_with(op, *axis)?,
            OpKind::Scan { op: r, axis, reverse } => self.scan(op, Some(*r), *axis, *reverse)?,
            OpKind::ScanWith { axis, reverse } => self.scan(op, None, *axis, *reverse)?,
            // Regions run repeatedly or conditionally: no straight-line knowledge crosses them.
            // (on the way out, the reset after the match covers them)
            OpKind::For { .. } => {
                self.smem_state = SmemState::Unknown;
                self.for_op(op)?;
            }
            OpKind::If => {
                self.smem_state = SmemState::Unknown;
                self.if_op(op)?;
            }
            OpKind::Yield => {}
            OpKind::MultipleOf(_) | OpKind::MaxContiguous(_) => {
                let v = self.get(op.operands[0]);
                self.set(op.results[0], v);
            }
            // Debug printing and assertions exist only in debug builds, which this back end
            // does not produce yet; release code leaves them out, as Triton's does.
            OpKind::Print(_) | OpKind::Assert(_) => {}
        }
        // Only ops that never touch shared memory keep what the block reductions know about
        // it (a block reduction records its own state; every other op forgets).
        let register_only = match &op.kind {
            OpKind::Const(_)
            | OpKind::ProgramId(_)
            | OpKind::NumPrograms(_)
            | OpKind::Arange { .. }
            | OpKind::Unary(_)
            | OpKind::Binary(_)
            | OpKind::Cmp(_)
            | OpKind::Fma
            | OpKind::Select
            | OpKind::Cast(_)
            | OpKind::Bitcast
            | OpKind::PtrAdd
            | OpKind::Load { .. }
            | OpKind::Store { .. }
            | OpKind::MultipleOf(_)
            | OpKind::MaxContiguous(_)
            | OpKind::Print(_)
            | OpKind::Assert(_)
            | OpKind::Reduce { .. } => true,
            OpKind::Broadcast => self.k.ty(op.operands[0]).is_scalar(),
            _ => false,
        };
        if !register_only {
            self.smem_state = SmemState::Unknown;
        }
        Ok(())
    }

    /// Writes `srcs` to shared memory one after another, then builds `result` by reading the
    /// element `index(idx)` for each result index (indices count across the sources).
    fn via_smem(
        &mut self,
        srcs: &[ValueId],
        result: &Type,
        index: &dyn Fn(&Self, &[IntValue<'c>]) -> R<IntValue<'c>>,
    ) -> R<Repr<'c>> {
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
        self.gather(result, elem, 0, index)
    }

    // ---- elementwise --------------------------------------------------------------------------

    fn unary(&self, u: UnaryOp, d: DType, x: BasicValueEnum<'c>, loc: Loc) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        if is_narrow_int(d) {
            let w = self.widen_narrow(d, x.into_int_value())?;
            let r = self.unary(u, wide_int(d), w.into(), loc)?;
            return Ok(self.narrow_int(d, r.into_int_value())?.into());
        }
        if d.is_int() || d.is_bool() {
            let x = x.into_int_value();
            return Ok(match u {
                UnaryOp::Neg => llvm(b.build_int_neg(x, ""))?.into(),
                UnaryOp::Not => llvm(b.build_not(x, ""))?.into(),
                UnaryOp::Abs if d.is_signed() => self.intr1(
                    "llvm.abs",
                    &[x.get_type().into()],
                    &[x.into(), self.ctx.bool_type().const_zero().into()],
                )?,
                _ => x.into(),
            });
        }
        let t = x.get_type();
        let fx = x.into_float_value();
        let f32t = self.ctx.f32_type();
        let approx = |name: &str, v: BasicValueEnum<'c>| -> R<BasicValueEnum<'c>> {
            if d != DType::F32 {
                return Err(CodegenError::unsupported(
                    format!("`{}` on {d}", u.name()),
                    u.name(),
                    loc,
                ));
            }
            self.asm(Some(f32t.into()), &format!("{name} $0, $1;"), "=f,f", &[v])
                .map(|v| v.unwrap())
        };
        let mul = |a: BasicValueEnum<'c>, c: f64| -> R<BasicValueEnum<'c>> {
            Ok(llvm(b.build_float_mul(a.into_float_value(), t.into_float_type().const_float(c), ""))?.into())
        };
        Ok(match u {
            UnaryOp::Neg => llvm(b.build_float_neg(fx, ""))?.into(),
            UnaryOp::Not => x,
            UnaryOp::Abs => self.intr1("llvm.fabs", &[t], &[x])?,
            UnaryOp::Floor => self.intr1("llvm.floor", &[t], &[x])?,
            UnaryOp::Ceil => self.intr1("llvm.ceil", &[t], &[x])?,
            UnaryOp::Sqrt => self.intr1("llvm.sqrt", &[t], &[x])?,
            UnaryOp::Exp2 => approx("ex2.approx.f32", x)?,
            UnaryOp::Exp => approx("ex2.approx.f32", mul(x, std::f64::consts::LOG2_E)?)?,
            UnaryOp::Log2 => approx("lg2.approx.f32", x)?,
            UnaryOp::Log => mul(approx("lg2.approx.f32", x)?, std::f64::consts::LN_2)?,
            UnaryOp::Rsqrt => approx("rsqrt.approx.f32", x)?,
            UnaryOp::Sin => approx("sin.approx.f32", x)?,
            UnaryOp::Cos => approx("cos.approx.f32", x)?,
            UnaryOp::Tanh => approx("tanh.approx.f32", x)?,
            UnaryOp::Sigmoid => {
                // 1 / (1 + 2^(-x log2 e))
                let e = approx("ex2.approx.f32", mul(x, -std::f64::consts::LOG2_E)?)?;
                let one = f32t.const_float(1.0);
                let den = llvm(b.build_float_add(one, e.into_float_value(), ""))?;
                llvm(b.build_float_div(one, den, ""))?.into()
            }
            UnaryOp::Erf => return Err(CodegenError::unsupported("`erf`", "erf", loc)),
        })
    }

    fn binary(&self, op: BinaryOp, d: DType, a: BasicValueEnum<'c>, c: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        if d.is_float() {
            let (x, y) = (a.into_float_value(), c.into_float_value());
            return Ok(match op {
                BinaryOp::Add => llvm(b.build_float_add(x, y, ""))?.into(),
                BinaryOp::Sub => llvm(b.build_float_sub(x, y, ""))?.into(),
                BinaryOp::Mul => llvm(b.build_float_mul(x, y, ""))?.into(),
                BinaryOp::Div => llvm(b.build_float_div(x, y, ""))?.into(),
                BinaryOp::Rem => llvm(b.build_float_rem(x, y, ""))?.into(),
                BinaryOp::Max => self.intr1("llvm.maxnum", &[a.get_type()], &[a, c])?,
                BinaryOp::Min => self.intr1("llvm.minnum", &[a.get_type()], &[a, c])?,
                _ => unreachable!("verified: bitwise ops take integers"),
            });
        }
        let (x, y) = (a.into_int_value(), c.into_int_value());
        if is_narrow_int(d) {
            let (x, y) = (self.widen_narrow(d, x)?, self.widen_narrow(d, y)?);
            let r = self.int_binary(op, d.is_signed(), d.bits(), x, y)?;
            return Ok(self.narrow_int(d, r.into_int_value())?.into());
        }
        self.int_binary(op, d.is_signed(), d.bits(), x, y)
    }

    /// An integer op on `x` and `y` with the semantics of a `bits`-bit type (shift amounts of
    /// `bits` or more), computed in their LLVM type (which may be wider).
    fn int_binary(
        &self,
        op: BinaryOp,
        signed: bool,
        bits: u32,
        x: IntValue<'c>,
        y: IntValue<'c>,
    ) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        let it = x.get_type();
        let bits = it.const_int(bits as u64, false);
        Ok(match op {
            BinaryOp::Add => llvm(b.build_int_add(x, y, ""))?.into(),
            BinaryOp::Sub => llvm(b.build_int_sub(x, y, ""))?.into(),
            BinaryOp::Mul => llvm(b.build_int_mul(x, y, ""))?.into(),
            BinaryOp::Div if signed => llvm(b.build_int_signed_div(x, y, ""))?.into(),
            BinaryOp::Div => llvm(b.build_int_unsigned_div(x, y, ""))?.into(),
            BinaryOp::Rem if signed => llvm(b.build_int_signed_rem(x, y, ""))?.into(),
            BinaryOp::Rem => llvm(b.build_int_unsigned_rem(x, y, ""))?.into(),
            BinaryOp::And => llvm(b.build_and(x, y, ""))?.into(),
            BinaryOp::Or => llvm(b.build_or(x, y, ""))?.into(),
            BinaryOp::Xor => llvm(b.build_xor(x, y, ""))?.into(),
            BinaryOp::Shl | BinaryOp::Shr => {
                // Shifts by the width or more give 0 (or the sign for >> on signed types).
                let big = llvm(b.build_int_compare(IntPredicate::UGE, y, bits, ""))?;
                let max = llvm(b.build_int_sub(bits, it.const_int(1, false), ""))?;
                let amt = llvm(b.build_select(big, max, y, ""))?.into_int_value();
                if op == BinaryOp::Shl {
                    let s = llvm(b.build_left_shift(x, amt, ""))?;
                    llvm(b.build_select(big, it.const_zero(), s, ""))?
                } else if signed {
                    llvm(b.build_right_shift(x, amt, true, ""))?.into()
                } else {
                    let s = llvm(b.build_right_shift(x, amt, false, ""))?;
                    llvm(b.build_select(big, it.const_zero(), s, ""))?
                }
            }
            BinaryOp::Max | BinaryOp::Min => {
                let name = match (op, signed) {
                    (BinaryOp::Max, true) => "llvm.smax",
                    (BinaryOp::Max, false) => "llvm.umax",
                    (_, true) => "llvm.smin",
                    _ => "llvm.umin",
                };
                self.intr1(name, &[it.into()], &[x.into(), y.into()])?
            }
        })
    }

    fn compare(&self, c: CmpOp, e: Elem, a: BasicValueEnum<'c>, b: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        let d = e.dtype().unwrap_or(DType::U64);
        if d.is_float() {
            let p = match c {
                CmpOp::Eq => FloatPredicate::OEQ,
                CmpOp::Ne => FloatPredicate::UNE,
                CmpOp::Lt => FloatPredicate::OLT,
                CmpOp::Le => FloatPredicate::OLE,
                CmpOp::Gt => FloatPredicate::OGT,
                CmpOp::Ge => FloatPredicate::OGE,
            };
            return Ok(llvm(
                self.b
                    .build_float_compare(p, a.into_float_value(), b.into_float_value(), ""),
            )?
            .into());
        }
        let (a, b) = if is_narrow_int(d) {
            (
                self.widen_narrow(d, a.into_int_value())?.into(),
                self.widen_narrow(d, b.into_int_value())?.into(),
            )
        } else {
            (a, b)
        };
        let pick = |signed, unsigned| if d.is_signed() { signed } else { unsigned };
        let p = match c {
            CmpOp::Eq => IntPredicate::EQ,
            CmpOp::Ne => IntPredicate::NE,
            CmpOp::Lt => pick(IntPredicate::SLT, IntPredicate::ULT),
            CmpOp::Le => pick(IntPredicate::SLE, IntPredicate::ULE),
            CmpOp::Gt => pick(IntPredicate::SGT, IntPredicate::UGT),
            CmpOp::Ge => pick(IntPredicate::SGE, IntPredicate::UGE),
        };
        Ok(llvm(self.b.build_int_compare(p, a.into_int_value(), b.into_int_value(), ""))?.into())
    }

    /// Converts one element (round to nearest even; float to int truncates and saturates, NaN
    /// gives 0), as the interpreter does.
    fn cast(&self, from: DType, to: DType, x: BasicValueEnum<'c>, loc: Loc) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        if from == to {
            return Ok(x);
        }
        if is_narrow_int(from) {
            // Widen first; the rest of the conversion then starts from 32 bits.
            let w = self.widen_narrow(from, x.into_int_value())?;
            return self.cast(wide_int(from), to, w.into(), loc);
        }
        if matches!(from, DType::F8E4M3 | DType::F8E5M2) || matches!(to, DType::F8E4M3 | DType::F8E5M2) {
            return Err(CodegenError::unsupported(
                format!("conversion between {from} and {to}"),
                "cast",
                loc,
            ));
        }
        let tt = self.ty(Elem::Scalar(to));
        if to.is_bool() {
            return Ok(if from.is_float() {
                llvm(b.build_float_compare(
                    FloatPredicate::UNE,
                    x.into_float_value(),
                    x.get_type().into_float_type().const_zero(),
                    "",
                ))?
                .into()
            } else {
                llvm(b.build_int_compare(
                    IntPredicate::NE,
                    x.into_int_value(),
                    x.get_type().into_int_type().const_zero(),
                    "",
                ))?
                .into()
            });
        }
        if from.is_bool() {
            let x = x.into_int_value();
            return Ok(if to.is_float() {
                llvm(b.build_unsigned_int_to_float(x, tt.into_float_type(), ""))?.into()
            } else {
                llvm(b.build_int_z_extend(x, tt.into_int_type(), ""))?.into()
            });
        }
        if is_narrow_int(to) {
            let w = if from.is_float() {
                // Saturate to 32 bits, then to the narrow range.
                let (lo, hi) = tile_lang::interp::scalar::int_range(to);
                let x = self.cast(from, wide_int(to), x, loc)?;
                let i32t = self.ctx.i32_type();
                let (lo, hi) = (i32t.const_int(lo as u64, true), i32t.const_int(hi as u64, true));
                let x = if to.is_signed() {
                    let x = self.intr1("llvm.smax", &[i32t.into()], &[x, lo.into()])?;
                    self.intr1("llvm.smin", &[i32t.into()], &[x, hi.into()])?
                } else {
                    self.intr1("llvm.umin", &[i32t.into()], &[x, hi.into()])?
                };
                x.into_int_value()
            } else {
                x.into_int_value()
            };
            return Ok(self.narrow_int(to, w)?.into());
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => {
                let x = x.into_int_value();
                let t = tt.into_int_type();
                Ok(if to.bits() < from.bits() {
                    llvm(b.build_int_truncate(x, t, ""))?.into()
                } else if to.bits() == from.bits() {
                    x.into()
                } else if from.is_signed() {
                    llvm(b.build_int_s_extend(x, t, ""))?.into()
                } else {
                    llvm(b.build_int_z_extend(x, t, ""))?.into()
                })
            }
            (false, true) => {
                let x = x.into_int_value();
                Ok(if from.is_signed() {
                    llvm(b.build_signed_int_to_float(x, tt.into_float_type(), ""))?.into()
                } else {
                    llvm(b.build_unsigned_int_to_float(x, tt.into_float_type(), ""))?.into()
                })
            }
            (true, false) => {
                let name = if to.is_signed() {
                    "llvm.fptosi.sat"
                } else {
                    "llvm.fptoui.sat"
                };
                self.intr1(name, &[tt, x.get_type()], &[x])
            }
            (true, true) => {
                let x = x.into_float_value();
                let ft = tt.into_float_type();
                // f16 <-> bf16 go through f32, which holds both exactly.
                let x = if matches!((from, to), (DType::F16, DType::BF16) | (DType::BF16, DType::F16)) {
                    llvm(b.build_float_ext(x, self.ctx.f32_type(), ""))?
                } else {
                    x
                };
                let fb = |t: inkwell::types::FloatType| match t {
                    t if t == self.ctx.f64_type() => 64,
                    t if t == self.ctx.f32_type() => 32,
                    _ => 16,
                };
                Ok(if fb(ft) > fb(x.get_type()) {
                    llvm(b.build_float_ext(x, ft, ""))?.into()
                } else {
                    llvm(b.build_float_trunc(x, ft, ""))?.into()
                })
            }
        }
    }

    /// A narrowing float conversion rounded toward zero (the checker allows no other).
    fn cast_toward_zero(&self, from: DType, to: DType, x: BasicValueEnum<'c>, loc: Loc) -> R<BasicValueEnum<'c>> {
        let (f32t, i16t) = (self.ctx.f32_type(), self.ctx.i16_type());
        let x = match (from, to) {
            (DType::F64, DType::F32) => return self.pure_asm(f32t.into(), "cvt.rz.f32.f64 $0, $1;", "=f,d", &[x]),
            (DType::F32 | DType::F64, DType::F16) => {
                let a = if from == DType::F64 { "d" } else { "f" };
                let text = format!("cvt.rz.f16.{from} $0, $1;");
                let h = self.pure_asm(i16t.into(), &text, &format!("=h,{a}"), &[x])?;
                return llvm(self.b.build_bit_cast(h, self.ctx.f16_type(), ""));
            }
            (DType::F64, DType::BF16) => self.pure_asm(f32t.into(), "cvt.rz.f32.f64 $0, $1;", "=f,d", &[x])?,
            (DType::F32, DType::BF16) => x,
            _ => {
                return Err(CodegenError::unsupported(
                    format!("round-toward-zero conversion from {from} to {to}"),
                    "cast",
                    loc,
                ));
            }
        };
        // bf16 is the upper half of an f32: toward zero is dropping the lower half (finite
        // values beyond bf16's range land on its largest finite value, as the language says),
        // except that a NaN whose payload sits in the lower half must stay a NaN.
        let x = x.into_float_value();
        let bits = llvm(self.b.build_bit_cast(x, self.ctx.i32_type(), ""))?.into_int_value();
        let hi = llvm(self.b.build_right_shift(bits, self.i32c(16), false, ""))?;
        let hi = llvm(self.b.build_int_truncate(hi, i16t, ""))?;
        let nan = llvm(self.b.build_float_compare(FloatPredicate::UNO, x, x, ""))?;
        let r = llvm(self.b.build_select(nan, i16t.const_int(0x7fc0, false), hi, ""))?;
        llvm(self.b.build_bit_cast(r, self.ctx.bf16_type(), ""))
    }

    /// A narrow integer (8 or 16 bits) as an i32, sign- or zero-extended by its dtype, through a
    /// `cvt` that LLVM cannot see through. Narrow integer ops are computed on such values in
    /// 32 bits and narrowed back by [`Self::narrow_int`]: LLVM would otherwise select 16-bit PTX
    /// ops (`neg.s16`, `shr.s16`, `setp.lt.s16`), and ptxas emulates those in 32-bit registers
    /// without always re-extending between them (`(-x).to(i8).to(i16)` gave +128 for -128).
    fn widen_narrow(&self, d: DType, x: IntValue<'c>) -> R<IntValue<'c>> {
        let i16t = self.ctx.i16_type();
        let x = if x.get_type().get_bit_width() < 16 {
            llvm(self.b.build_int_z_extend(x, i16t, ""))?
        } else {
            x
        };
        let s = if d.is_signed() { "s" } else { "u" };
        let text = format!("cvt.{s}32.{s}{} $0, $1;", d.bits());
        Ok(self
            .pure_asm(self.ctx.i32_type().into(), &text, "=r,h", &[x.into()])?
            .into_int_value())
    }

    /// The low bits of a 32- or 64-bit integer as narrow dtype `d`, through a `cvt` that LLVM
    /// cannot see through (so the op that computed `x` is not narrowed to 16 bits either).
    fn narrow_int(&self, d: DType, x: IntValue<'c>) -> R<IntValue<'c>> {
        let (cls, src) = match x.get_type().get_bit_width() {
            64 => ("l", "u64"),
            32 => ("r", "u32"),
            // Already narrow (a bool or a narrow value): widen, then narrow.
            _ => ("r", "u32"),
        };
        let x = if x.get_type().get_bit_width() < 32 {
            llvm(self.b.build_int_z_extend(x, self.ctx.i32_type(), ""))?
        } else {
            x
        };
        let r = self
            .pure_asm(
                self.ctx.i16_type().into(),
                &format!("cvt.u16.{src} $0, $1;"),
                &format!("=h,{cls}"),
                &[x.into()],
            )?
            .into_int_value();
        Ok(if d.bits() < 16 {
            llvm(self.b.build_int_truncate(r, self.ctx.i8_type(), ""))?
        } else {
            r
        })
    }

    // ---- memory -------------------------------------------------------------------------------

    /// PTX register class and width for a memory access of this element type.
    fn access(e: Elem) -> (&'static str, u32) {
        match e {
            Elem::Ptr { .. } => ("l", 64),
            Elem::Scalar(d) => match d.bits() {
                8 => ("h", 8),
                16 => ("h", 16),
                32 => ("r", 32),
                _ => ("l", 64),
            },
        }
    }

    /// The integer type a value of element type `e` travels in through inline asm.
    fn reg_type(&self, e: Elem) -> BasicTypeEnum<'c> {
        match Self::access(e).1 {
            8 | 16 => self.ctx.i16_type().into(),
            32 => self.ctx.i32_type().into(),
            _ => self.ctx.i64_type().into(),
        }
    }

    fn to_reg(&self, e: Elem, x: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        let rt = self.reg_type(e);
        let bits = match e {
            Elem::Scalar(DType::Bool) => {
                llvm(self.b.build_int_z_extend(x.into_int_value(), self.ctx.i8_type(), ""))?.into()
            }
            Elem::Ptr { .. } => llvm(self.b.build_ptr_to_int(x.into_pointer_value(), self.ctx.i64_type(), ""))?.into(),
            Elem::Scalar(d) if d.is_float() && d.bits() > 8 => {
                llvm(self.b.build_bit_cast(x, self.int_type(d.bits()), ""))?
            }
            _ => x,
        };
        let bi = bits.into_int_value();
        Ok(if bi.get_type().get_bit_width() < rt.into_int_type().get_bit_width() {
            llvm(self.b.build_int_z_extend(bi, rt.into_int_type(), ""))?.into()
        } else {
            bi.into()
        })
    }

    fn of_reg(&self, e: Elem, r: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        let r = r.into_int_value();
        Ok(match e {
            Elem::Ptr { .. } => llvm(
                self.b
                    .build_int_to_ptr(r, self.ctx.ptr_type(AddressSpace::from(GLOBAL)), ""),
            )?
            .into(),
            Elem::Scalar(DType::Bool) => {
                llvm(
                    self.b
                        .build_int_compare(IntPredicate::NE, r, r.get_type().const_zero(), ""),
                )?
                .into()
            }
            Elem::Scalar(d) => {
                let w = self.int_type(d.bits());
                let r = if r.get_type().get_bit_width() > d.bits() {
                    llvm(self.b.build_int_truncate(r, w, ""))?
                } else {
                    r
                };
                if d.is_float() && d.bits() > 8 {
                    llvm(self.b.build_bit_cast(r, self.ty(e), ""))?
                } else {
                    r.into()
                }
            }
        })
    }

    /// The vector width (elements) for accesses to a tile of pointers `ptr` under `mask`: the
    /// layout's chunk when the chunk's addresses are consecutive, aligned to the whole vector, and
    /// the mask is one value over it; else 1.
    fn vector_width(&self, ptr: ValueId, mask: Option<ValueId>, e: Elem) -> usize {
        let t = self.k.ty(ptr);
        if t.is_scalar() || matches!(e, Elem::Scalar(DType::Bool) | Elem::Ptr { .. }) {
            return 1;
        }
        let bytes = Self::smem_size(e) as u64;
        let unknown = crate::axis::AxisInfo::UNKNOWN;
        let p = self.info.get(&ptr).copied().unwrap_or(unknown);
        let m = mask
            .map(|m| self.info.get(&m).copied().unwrap_or(unknown).constancy)
            .unwrap_or(u64::MAX);
        // The widest power of two within the chunk and 16 bytes that the facts allow.
        let mut w = (self.layout(t).vec as u64).min(16 / bytes);
        while w > 1 && !(p.contiguity >= w && p.divisibility >= w * bytes && m >= w) {
            w /= 2;
        }
        w as usize
    }

    fn load(&mut self, op: &Op, mask: bool, other: bool) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let e = rt.elem;
        let ptrs = self.elems(op.operands[0]);
        let masks = mask.then(|| self.elems(op.operands[1]));
        let others = other.then(|| self.elems(op.operands[1 + mask as usize]));
        let (cls, bits) = Self::access(e);
        let ty = if bits == 8 {
            "u8".to_string()
        } else {
            format!("b{bits}")
        };
        let mov = if bits == 8 {
            "b16".to_string()
        } else {
            format!("b{bits}")
        };
        let w = self.vector_width(op.operands[0], mask.then(|| op.operands[1]), e);
        let mut out = Vec::new();
        for start in (0..ptrs.len()).step_by(w) {
            let p = ptrs[start];
            let inits: Vec<BasicValueEnum> = (start..start + w)
                .map(|i| match &others {
                    Some(o) => self.to_reg(e, o[i]),
                    None => Ok(self.reg_type(e).const_zero()),
                })
                .collect::<R<_>>()?;
            let regs: Vec<BasicValueEnum> = match (&masks, w) {
                (None, 1) => {
                    let t = if e == Elem::Scalar(DType::Bool) {
                        self.ctx.i8_type().into()
                    } else {
                        self.ty(e)
                    };
                    let v = llvm(self.b.build_load(t, p.into_pointer_value(), ""))?;
                    out.push(if e == Elem::Scalar(DType::Bool) {
                        self.of_reg(e, v)?
                    } else {
                        v
                    });
                    continue;
                }
                (None, w) => {
                    let vt = match self.ty(e) {
                        BasicTypeEnum::IntType(t) => t.vec_type(w as u32),
                        BasicTypeEnum::FloatType(t) => t.vec_type(w as u32),
                        _ => unreachable!("vector_width excludes pointers"),
                    };
                    let ld = llvm(self.b.build_load(vt, p.into_pointer_value(), ""))?;
                    if let Some(inst) = ld.as_instruction_value() {
                        let _ = inst.set_alignment(w as u32 * Self::smem_size(e));
                    }
                    for j in 0..w {
                        let x = llvm(
                            self.b
                                .build_extract_element(ld.into_vector_value(), self.i32c(j as u64), ""),
                        )?;
                        out.push(x);
                    }
                    continue;
                }
                (Some(m), 1) => {
                    let text = format!("mov.{mov} $0, $2;\n\t@$3 ld.global.{ty} $0, [$1];");
                    vec![
                        self.asm(
                            Some(self.reg_type(e)),
                            &text,
                            &format!("=&{cls},l,{cls},b"),
                            &[p, inits[0], m[start]],
                        )?
                        .unwrap(),
                    ]
                }
                (Some(m), w) => {
                    // Sub-word elements travel packed into 32-bit words (PTX vectors have at most
                    // four elements).
                    let (n, packed) = if bits < 32 {
                        (w * bits as usize / 32, true)
                    } else {
                        (w, false)
                    };
                    let (cls, ty, mov) = if packed {
                        ("r", "b32".to_string(), "b32".to_string())
                    } else {
                        (cls, ty.clone(), mov.clone())
                    };
                    let inits = if packed { self.pack(&inits, bits)? } else { inits };
                    let outs: Vec<String> = (0..n).map(|j| format!("${j}")).collect();
                    let movs: String = (0..n).map(|j| format!("mov.{mov} ${j}, ${};\n\t", n + 1 + j)).collect();
                    let vec = if n == 1 { String::new() } else { format!(".v{n}") };
                    let dst = if n == 1 {
                        "$0".to_string()
                    } else {
                        format!("{{{}}}", outs.join(", "))
                    };
                    let text = format!("{movs}@${} ld.global{vec}.{ty} {dst}, [${n}];", 2 * n + 1);
                    let cons = format!("{}l,{}b", format!("=&{cls},").repeat(n), format!("{cls},").repeat(n));
                    let rt = if packed {
                        self.ctx.i32_type().into()
                    } else {
                        self.reg_type(e)
                    };
                    let mut args = vec![p];
                    args.extend(&inits);
                    args.push(m[start]);
                    let words: Vec<BasicValueEnum> = if n == 1 {
                        vec![self.asm(Some(rt), &text, &cons, &args)?.unwrap()]
                    } else {
                        let st = self.ctx.struct_type(&vec![rt; n], false);
                        let r = self
                            .asm(Some(st.into()), &text, &cons, &args)?
                            .unwrap()
                            .into_struct_value();
                        (0..n)
                            .map(|j| llvm(self.b.build_extract_value(r, j as u32, "")))
                            .collect::<R<_>>()?
                    };
                    if packed { self.unpack(&words, bits)? } else { words }
                }
            };
            for r in regs {
                out.push(self.of_reg(e, r)?);
            }
        }
        self.set(
            op.results[0],
            if rt.is_scalar() { Repr::S(out[0]) } else { Repr::T(out) },
        );
        Ok(())
    }

    /// Per-element predicate of a write: the mask (if any) and ownership (copies never write).
    fn write_preds(&self, t: &Type, masks: Option<Vec<BasicValueEnum<'c>>>, n: usize) -> R<Vec<IntValue<'c>>> {
        let own = if t.is_scalar() {
            // Every thread holds a scalar; thread 0 writes it.
            llvm(self.b.build_int_compare(IntPredicate::EQ, self.tid(), self.i32c(0), ""))?
        } else {
            self.owner(&self.layout(t))?
        };
        (0..n)
            .map(|i| match &masks {
                Some(m) => llvm(self.b.build_and(own, m[i].into_int_value(), "")),
                None => Ok(own),
            })
            .collect()
    }

    fn store(&mut self, op: &Op, mask: bool) -> R<()> {
        let t = self.k.ty(op.operands[0]).clone();
        let e = self.k.ty(op.operands[1]).elem;
        let ptrs = self.elems(op.operands[0]);
        let vals = self.elems(op.operands[1]);
        let masks = mask.then(|| self.elems(op.operands[2]));
        let preds = self.write_preds(&t, masks, ptrs.len())?;
        let (cls, bits) = Self::access(e);
        let ty = if bits == 8 {
            "u8".to_string()
        } else {
            format!("b{bits}")
        };
        let w = self.vector_width(op.operands[0], mask.then(|| op.operands[2]), e);
        for start in (0..ptrs.len()).step_by(w) {
            let regs: Vec<BasicValueEnum> = (start..start + w).map(|i| self.to_reg(e, vals[i])).collect::<R<_>>()?;
            let packed = w > 1 && bits < 32;
            let (regs, cls, ty) = if packed {
                (self.pack(&regs, bits)?, "r", "b32".to_string())
            } else {
                (regs, cls, ty.clone())
            };
            let n = regs.len();
            let mut args = vec![ptrs[start]];
            args.extend(&regs);
            args.push(preds[start].into());
            let text = if n == 1 {
                format!("@$2 st.global.{ty} [$0], $1;")
            } else {
                let vs: Vec<String> = (1..=n).map(|j| format!("${j}")).collect();
                format!("@${} st.global.v{n}.{ty} [$0], {{{}}};", n + 1, vs.join(", "))
            };
            let cons = format!("l,{}b,~{{memory}}", format!("{cls},").repeat(n));
            self.asm(None, &text, &cons, &args)?;
        }
        Ok(())
    }

    /// Packs sub-word registers (8- or 16-bit values held in i16) into 32-bit words, lowest
    /// element in the lowest bits.
    fn pack(&self, regs: &[BasicValueEnum<'c>], bits: u32) -> R<Vec<BasicValueEnum<'c>>> {
        let i32t = self.ctx.i32_type();
        let per = (32 / bits) as usize;
        regs.chunks(per)
            .map(|group| {
                let mut word = i32t.const_zero();
                for (j, r) in group.iter().enumerate() {
                    let x = llvm(self.b.build_int_z_extend(r.into_int_value(), i32t, ""))?;
                    let x = llvm(self.b.build_and(x, i32t.const_int((1u64 << bits) - 1, false), ""))?;
                    let x = llvm(
                        self.b
                            .build_left_shift(x, i32t.const_int(j as u64 * bits as u64, false), ""),
                    )?;
                    word = llvm(self.b.build_or(word, x, ""))?;
                }
                Ok(word.into())
            })
            .collect()
    }

    /// The inverse of `pack`: each 32-bit word back into i16 registers of `bits`-bit values.
    fn unpack(&self, words: &[BasicValueEnum<'c>], bits: u32) -> R<Vec<BasicValueEnum<'c>>> {
        let i32t = self.ctx.i32_type();
        let mut out = Vec::new();
        for w in words {
            for j in 0..32 / bits {
                let x = if bits == 8 {
                    // An opaque field extract: LLVM would turn shift-and-mask of a byte into
                    // 16-bit shifts (see `widen_narrow`).
                    let text = format!("bfe.u32 $0, $1, {}, 8;", j * bits);
                    self.pure_asm(i32t.into(), &text, "=r,r", &[*w])?.into_int_value()
                } else {
                    llvm(self.b.build_right_shift(
                        w.into_int_value(),
                        i32t.const_int((j * bits) as u64, false),
                        false,
                        "",
                    ))?
                };
                out.push(llvm(self.b.build_int_truncate(x, self.ctx.i16_type(), ""))?.into());
            }
        }
        Ok(out)
    }

    fn atomic(&mut self, op: &Op, kind: Option<AtomicOp>, mask: bool) -> R<()> {
        let t = self.k.ty(op.operands[0]).clone();
        let d = self.dtype(op.results[0]);
        let e = Elem::Scalar(d);
        let nvals = if kind.is_some() { 1 } else { 2 };
        let ptrs = self.elems(op.operands[0]);
        let vals: Vec<Vec<BasicValueEnum>> = (0..nvals).map(|j| self.elems(op.operands[1 + j])).collect();
        let masks = mask.then(|| self.elems(op.operands[1 + nvals]));
        let preds = self.write_preds(&t, masks, ptrs.len())?;
        let (cls, bits) = Self::access(e);
        let suffix = match (kind, d) {
            (Some(AtomicOp::Add), DType::F32) => "add.f32".to_string(),
            (Some(AtomicOp::Add), DType::F64) => "add.f64".to_string(),
            (Some(AtomicOp::Add), DType::F16) => "add.noftz.f16".to_string(),
            (Some(AtomicOp::Add), DType::BF16) => "add.noftz.bf16".to_string(),
            (Some(AtomicOp::Add), _) => format!("add.u{bits}"),
            (Some(AtomicOp::Max), d) if d.is_int() => {
                format!("max.{}{bits}", if d.is_signed() { "s" } else { "u" })
            }
            (Some(AtomicOp::Min), d) if d.is_int() => {
                format!("min.{}{bits}", if d.is_signed() { "s" } else { "u" })
            }
            (Some(AtomicOp::And), _) => format!("and.b{bits}"),
            (Some(AtomicOp::Or), _) => format!("or.b{bits}"),
            (Some(AtomicOp::Xor), _) => format!("xor.b{bits}"),
            (Some(AtomicOp::Xchg), _) => format!("exch.b{bits}"),
            (None, _) => format!("cas.b{bits}"),
            _ => {
                return Err(CodegenError::unsupported(
                    format!("atomic {} on {d}", kind.map_or("cas", |k| k.name())),
                    op.kind.name(),
                    op.loc,
                ));
            }
        };
        let mov = format!("b{}", bits.max(16));
        let mut out = Vec::new();
        for i in 0..ptrs.len() {
            let mut args = vec![ptrs[i]];
            for v in &vals {
                args.push(self.to_reg(e, v[i])?);
            }
            args.push(preds[i].into());
            // Operand $0 is the result, so the predicate (the last argument) is $len.
            let p = args.len();
            let operands = if nvals == 1 { "$2" } else { "$2, $3" };
            let text = format!("mov.{mov} $0, 0;\n\t@${p} atom.acq_rel.gpu.global.{suffix} $0, [$1], {operands};");
            let cons = format!("=&{cls},l,{}b,~{{memory}}", format!("{cls},").repeat(nvals));
            let r = self.asm(Some(self.reg_type(e)), &text, &cons, &args)?.unwrap();
            out.push(self.of_reg(e, r)?);
        }
        self.set(
            op.results[0],
            if t.is_scalar() { Repr::S(out[0]) } else { Repr::T(out) },
        );
        Ok(())
    }

    // ---- dot, reductions, scans ---------------------------------------------------------------

    fn dot(&mut self, op: &Op, p: Precision) -> R<()> {
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
        self.set(op.results[0], Repr::T(out));
        Ok(())
    }

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

    fn reduce(&mut self, op: &Op, r: ReduceOp, axis: usize) -> R<()> {
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
                Repr::S(accs[0])
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
                Repr::T(out)
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
        let src = op.operands[0];
        let st = self.k.ty(src).clone();
        let rt = self.k.ty(op.results[0]).clone();
        let n = st.shape[axis];
        self.stage(src)?;
        let bases = self.reduce_bases(&st, &rt, axis)?;
        let stride = crate::layout::strides(&st.shape)[axis] as u64;
        let inits: Vec<_> = bases.iter().map(|b| self.smem_load(st.elem, 0, *b)).collect::<R<_>>()?;
        let out = self.counted_loop(
            self.i32c(1),
            self.i32c(n as u64),
            self.i32c(1),
            true,
            inits,
            &mut |l, k, accs| {
                let off = llvm(l.b.build_int_mul(k, l.i32c(stride), ""))?;
                let mut next = Vec::new();
                for (s, acc) in accs.iter().enumerate() {
                    let x = l.smem_load(st.elem, 0, llvm(l.b.build_int_add(bases[s], off, ""))?)?;
                    next.push(f(l, *acc, x)?);
                }
                Ok(next)
            },
        )?;
        self.set(
            op.results[0],
            if rt.is_scalar() { Repr::S(out[0]) } else { Repr::T(out) },
        );
        Ok(())
    }

    /// Writes a tile to shared memory between barriers, for reading back in another layout.
    fn stage(&mut self, src: ValueId) -> R<()> {
        let t = self.k.ty(src).clone();
        self.need_smem(t.numel() as u32 * Self::smem_size(t.elem));
        self.barrier()?;
        self.tile_to_smem(src, 0)?;
        self.barrier()
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

    fn reduce_with(&mut self, op: &Op, axis: usize) -> R<()> {
        let region = op.regions[0].clone();
        self.reduce_generic(op, axis, &mut |l, a, b| {
            let r = l.region(&region, &[Repr::S(a), Repr::S(b)])?;
            Ok(match &r[0] {
                Repr::S(s) => *s,
                Repr::T(t) => t[0],
            })
        })
    }

    fn arg_reduce(&mut self, op: &Op, max: bool, axis: usize) -> R<()> {
        let src = op.operands[0];
        let st = self.k.ty(src).clone();
        let d = st.dtype().unwrap();
        let rt = self.k.ty(op.results[0]).clone();
        let n = st.shape[axis];
        self.stage(src)?;
        let bases = self.reduce_bases(&st, &rt, axis)?;
        let stride = crate::layout::strides(&st.shape)[axis] as u64;
        let mut inits = Vec::new();
        for b in &bases {
            inits.push(self.smem_load(st.elem, 0, *b)?);
            inits.push(self.i32c(0).into());
        }
        let cmp = if max { CmpOp::Gt } else { CmpOp::Lt };
        let out = self.counted_loop(
            self.i32c(1),
            self.i32c(n as u64),
            self.i32c(1),
            true,
            inits,
            &mut |l, k, accs| {
                let off = llvm(l.b.build_int_mul(k, l.i32c(stride), ""))?;
                let mut next = Vec::new();
                for (s, pair) in accs.chunks(2).enumerate() {
                    let x = l.smem_load(st.elem, 0, llvm(l.b.build_int_add(bases[s], off, ""))?)?;
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
                    next.push(llvm(l.b.build_select(better, x, pair[0], ""))?);
                    next.push(llvm(l.b.build_select(better, k.into(), pair[1], ""))?);
                }
                Ok(next)
            },
        )?;
        let idx: Vec<_> = out.chunks(2).map(|p| p[1]).collect();
        self.set(
            op.results[0],
            if rt.is_scalar() { Repr::S(idx[0]) } else { Repr::T(idx) },
        );
        Ok(())
    }

    fn scan(&mut self, op: &Op, r: Option<ReduceOp>, axis: usize, reverse: bool) -> R<()> {
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
                        (None, Some(reg)) => match l.region(reg, &[Repr::S(*acc), Repr::S(x)])?.remove(0) {
                            Repr::S(s) => s,
                            Repr::T(t) => t[0],
                        },
                        _ => unreachable!("verified: scan_with has a region"),
                    };
                    let pred = if reverse { IntPredicate::SGE } else { IntPredicate::SLE };
                    let active = llvm(l.b.build_int_compare(pred, kk, pos[s], ""))?;
                    next.push(llvm(l.b.build_select(active, c, *acc, ""))?);
                }
                Ok(next)
            },
        )?;
        self.set(op.results[0], Repr::T(out));
        Ok(())
    }

    // ---- control flow -------------------------------------------------------------------------

    fn for_op(&mut self, op: &Op) -> R<()> {
        let d = self.dtype(op.operands[0]);
        let (lo, hi, step) = (
            self.scalar(op.operands[0]).into_int_value(),
            self.scalar(op.operands[1]).into_int_value(),
            self.scalar(op.operands[2]).into_int_value(),
        );
        let inits: Vec<Repr> = op.operands[3..].iter().map(|v| self.get(*v)).collect();
        let flat = Self::flatten(&inits);
        let body = op.regions[0].clone();
        let out = self.counted_loop(lo, hi, step, !d.is_unsigned(), flat, &mut |l, i, cur| {
            let mut args = vec![Repr::S(i.into())];
            args.extend(Self::rebuild(&inits, &cur));
            let y = l.region(&body, &args)?;
            Ok(Self::flatten(&y))
        })?;
        for (r, v) in op.results.iter().zip(Self::rebuild(&inits, &out)) {
            self.set(*r, v);
        }
        Ok(())
    }

    fn if_op(&mut self, op: &Op) -> R<()> {
        let c = self.scalar(op.operands[0]).into_int_value();
        let f = self.func();
        let (tb, eb, done) = (
            self.ctx.append_basic_block(f, "then"),
            self.ctx.append_basic_block(f, "else"),
            self.ctx.append_basic_block(f, "endif"),
        );
        llvm(self.b.build_conditional_branch(c, tb, eb))?;
        let mut arms = Vec::new();
        for (bb, region) in [(tb, &op.regions[0]), (eb, &op.regions[1])] {
            self.b.position_at_end(bb);
            let y = self.region(region, &[])?;
            arms.push((Self::flatten(&y), y, self.b.get_insert_block().unwrap()));
            llvm(self.b.build_unconditional_branch(done))?;
        }
        self.b.position_at_end(done);
        let mut merged = Vec::new();
        for i in 0..arms[0].0.len() {
            let phi = llvm(self.b.build_phi(arms[0].0[i].get_type(), ""))?;
            phi.add_incoming(&[(&arms[0].0[i], arms[0].2), (&arms[1].0[i], arms[1].2)]);
            merged.push(phi.as_basic_value());
        }
        for (r, v) in op.results.iter().zip(Self::rebuild(&arms[0].1, &merged)) {
            self.set(*r, v);
        }
        Ok(())
    }
}

/// 8- and 16-bit integers: computed in 32 bits (see `L::widen_narrow`).
fn is_narrow_int(d: DType) -> bool {
    d.is_int() && d.bits() < 32
}

/// The 32-bit integer type of the same signedness as a narrow one.
fn wide_int(d: DType) -> DType {
    if d.is_signed() { DType::I32 } else { DType::U32 }
}
