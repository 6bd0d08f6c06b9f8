//! Global memory: loads and stores (predicated inline asm, vectorised when the axis facts allow),
//! their register classes and packing of sub-word elements, write predicates, and atomics.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, BasicValueEnum, IntValue};
use inkwell::{AddressSpace, IntPredicate};
use tile_lang::ir::*;

use super::{GLOBAL, Lowering, R, llvm};
use crate::CodegenError;
use tile_gir::linear::LinearLayout;

impl<'c> Lowering<'c, '_> {
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

    pub(super) fn to_reg(&self, e: Elem, x: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
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

    pub(super) fn of_reg(&self, e: Elem, r: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
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

    /// The layout a load or store runs in when the GPU plan gave it one of its own (see
    /// `GpuPlan::wanted`); `None`: the blocked layout.
    fn access_layout(&self, op: &Op) -> Option<LinearLayout> {
        match op.kind {
            OpKind::Load { .. } if self.plan.layouts.contains_key(&op.results[0]) => Some(self.lin(op.results[0])),
            OpKind::Store { .. } if self.plan.in_memory_layout(self.k, op.operands[1]) => {
                Some(self.lin(op.operands[1]))
            }
            _ => None,
        }
    }

    /// [`vector_width`](Self::vector_width) for an access in layout `lay` (`None`: blocked).
    /// The vector width of an access written as predicated PTX (`predicated`: a masked or
    /// hinted load, any store), in `lay` or the tile's blocked layout.
    fn vector_width_in(
        &self,
        ptr: ValueId,
        mask: Option<ValueId>,
        e: Elem,
        lay: Option<&LinearLayout>,
        predicated: bool,
    ) -> usize {
        let t = self.k.ty(ptr);
        if t.is_scalar() {
            return 1;
        }
        let chunk = match lay {
            Some(l) => l.contiguous_run() as u64,
            None => self.layout(t).vec as u64,
        };
        self.width_of_chunk(ptr, mask, e, chunk, predicated)
    }

    /// The vector width (elements) for accesses to a tile of pointers `ptr` under `mask`: the
    /// layout's chunk when the chunk's addresses are consecutive, aligned to the whole vector, and
    /// the mask is one value over it; else 1.
    pub(super) fn vector_width(&self, ptr: ValueId, mask: Option<ValueId>, e: Elem) -> usize {
        let t = self.k.ty(ptr);
        if t.is_scalar() {
            return 1;
        }
        self.width_of_chunk(ptr, mask, e, self.layout(t).vec as u64, mask.is_some())
    }

    /// The widest access within a thread's chunk of `chunk` consecutive elements; `predicated`
    /// when it is written as predicated PTX rather than an LLVM load.
    fn width_of_chunk(&self, ptr: ValueId, mask: Option<ValueId>, e: Elem, chunk: u64, predicated: bool) -> usize {
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
        let mut w = chunk.min(16 / bytes);
        while w > 1 && !(p.contiguity >= w && p.divisibility >= w * bytes && m >= w) {
            w /= 2;
        }
        // Sub-word elements of predicated PTX accesses travel packed into whole 32-bit words: a
        // width that does not fill one (two bytes, one short) goes one element at a time.
        if predicated && w > 1 && w * bytes < 4 {
            return 1;
        }
        w as usize
    }

    /// The PTX qualifiers and the L2 cache policy operand that carry an eviction hint: L1's
    /// priority, and a fractional L2 policy covering every line the access touches. `None` for
    /// the caches' own policy.
    fn cache_hint(&self, evict: Evict) -> R<Option<(String, BasicValueEnum<'c>)>> {
        let name = match evict {
            Evict::Normal => return Ok(None),
            Evict::First => "evict_first",
            Evict::Last => "evict_last",
        };
        // Pure: LLVM merges the policies of one kind and hoists them out of loops.
        let text = format!("createpolicy.fractional.L2::{name}.b64 $0, 1.0;");
        let policy = self.pure_asm(self.ctx.i64_type().into(), &text, "=l", &[])?;
        Ok(Some((format!(".L1::{name}.L2::cache_hint"), policy)))
    }

    /// The elements each `cp.async` of a load staged in place copies: the widest run of the
    /// load's layout whose addresses the facts prove consecutive and aligned, of 4 to 16 bytes;
    /// `None` when narrower (the load then runs where it stands, its stage unused).
    pub(super) fn staged_run(&self, op: &Op) -> Option<usize> {
        let OpKind::Load { mask, .. } = op.kind else {
            return None;
        };
        let e = self.k.ty(op.results[0]).elem;
        let lay = self.access_layout(op);
        let w = self.vector_width_in(op.operands[0], mask.then(|| op.operands[1]), e, lay.as_ref(), false);
        (w as u32 * Self::smem_size(e) >= 4).then_some(w)
    }

    /// A load a pipelined loop copied into the stage at `at` (`StagedLoad::dot` is `None`): each
    /// thread reads its elements of the load's layout from their flat indices, a run at a time,
    /// and takes `other` where the mask is false (the copy zero-filled those).
    fn load_staged(&mut self, op: &Op, at: IntValue<'c>, run: usize, mask: bool, other: bool) -> R<()> {
        let v = op.results[0];
        let e = self.k.ty(v).elem;
        let esz = Self::smem_size(e);
        let lay = self.lin(v);
        let masks = mask.then(|| self.elems(op.operands[1]));
        let others = other.then(|| self.elems(op.operands[1 + mask as usize]));
        let part = self.thread_part(&lay)?;
        let one = |xs: &Vec<BasicValueEnum<'c>>, i: usize| xs[i.min(xs.len() - 1)];
        let mut out = Vec::with_capacity(lay.regs());
        for g in 0..lay.regs() / run {
            let p = self.smem_elem_at(self.at(part, lay.reg_part(g * run))?, esz, at)?;
            let vt = match self.ty(e) {
                BasicTypeEnum::IntType(t) => t.vec_type(run as u32),
                BasicTypeEnum::FloatType(t) => t.vec_type(run as u32),
                _ => unreachable!("only numeric loads are staged"),
            };
            let ld = llvm(self.b.build_load(vt, p, ""))?;
            if let Some(inst) = ld.as_instruction_value() {
                let _ = inst.set_alignment(run as u32 * esz);
            }
            for j in 0..run {
                let i = g * run + j;
                let x = llvm(
                    self.b
                        .build_extract_element(ld.into_vector_value(), self.i32c(j as u64), ""),
                )?;
                let x = match (&masks, &others) {
                    (Some(m), Some(o)) => llvm(self.b.build_select(one(m, i).into_int_value(), x, one(o, i), ""))?,
                    _ => x,
                };
                out.push(x);
            }
        }
        self.set_elems(v, out);
        Ok(())
    }

    pub(super) fn load(&mut self, op: &Op, mask: bool, other: bool, evict: Evict) -> R<()> {
        if let Some(at) = self.staged.get(&op.results[0]).copied()
            && let Some(run) = self.staged_run(op)
        {
            return self.load_staged(op, at, run, mask, other);
        }
        let rt = self.k.ty(op.results[0]).clone();
        let e = rt.elem;
        let ptrs = self.elems(op.operands[0]);
        let hint = self.cache_hint(evict)?;
        // Through a `*T` argument, never written during the launch: the non-coherent path,
        // which ptxas may also move above earlier stores.
        let nc = if matches!(self.k.ty(op.operands[0]).elem, Elem::Ptr { mutable: false, .. }) {
            ".nc"
        } else {
            ""
        };
        let (q, policy) = match &hint {
            Some((q, p)) => (format!("{nc}{q}"), vec![*p]),
            None => (nc.to_string(), vec![]),
        };
        // A hinted load is PTX written here, predicated like a masked one (on true).
        let mut masks = match mask {
            true => Some(self.elems(op.operands[1])),
            false if hint.is_some() || self.guard.is_some() => {
                Some(vec![self.ctx.bool_type().const_int(1, false).into(); ptrs.len()])
            }
            false => None,
        };
        // Evaluated for a later iteration of a pipelined loop: nothing read unless it runs.
        if let (Some(g), Some(ms)) = (self.guard, masks.as_mut()) {
            for m in ms.iter_mut() {
                *m = llvm(self.b.build_and(m.into_int_value(), g, ""))?.into();
            }
        }
        let others = other.then(|| self.elems(op.operands[1 + mask as usize]));
        if !self.k.ty(op.results[0]).is_scalar() {
            let all: Vec<Vec<BasicValueEnum<'c>>> = std::iter::once(ptrs.clone())
                .chain(masks.clone())
                .chain(others.clone())
                .collect();
            self.same_lengths(op, &all)?;
        }
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
        let lay = self.access_layout(op);
        let w = self.vector_width_in(
            op.operands[0],
            mask.then(|| op.operands[1]),
            e,
            lay.as_ref(),
            masks.is_some(),
        );
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
                    let pol = if policy.is_empty() { "" } else { ", $4" };
                    let text = format!("mov.{mov} $0, $2;\n\t@$3 ld.global{q}.{ty} $0, [$1]{pol};");
                    let cons = format!("=&{cls},l,{cls},b{}", ",l".repeat(policy.len()));
                    let mut args = vec![p, inits[0], m[start]];
                    args.extend(&policy);
                    vec![self.asm(Some(self.reg_type(e)), &text, &cons, &args)?.unwrap()]
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
                    let pol = if policy.is_empty() {
                        String::new()
                    } else {
                        format!(", ${}", 2 * n + 2)
                    };
                    let text = format!("{movs}@${} ld.global{q}{vec}.{ty} {dst}, [${n}]{pol};", 2 * n + 1);
                    let cons = format!(
                        "{}l,{}b{}",
                        format!("=&{cls},").repeat(n),
                        format!("{cls},").repeat(n),
                        ",l".repeat(policy.len())
                    );
                    let rt = if packed {
                        self.ctx.i32_type().into()
                    } else {
                        self.reg_type(e)
                    };
                    let mut args = vec![p];
                    args.extend(&inits);
                    args.push(m[start]);
                    args.extend(&policy);
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
        self.set_elems(op.results[0], out);
        Ok(())
    }

    /// Per-element predicate of a write: the mask (if any) and ownership (copies never write).
    fn write_preds(
        &self,
        t: &Type,
        lay: Option<&LinearLayout>,
        masks: Option<Vec<BasicValueEnum<'c>>>,
        n: usize,
    ) -> R<Vec<IntValue<'c>>> {
        let own = if t.is_scalar() {
            // Every thread holds a scalar; thread 0 writes it.
            llvm(self.b.build_int_compare(IntPredicate::EQ, self.tid(), self.i32c(0), ""))?
        } else if let Some(l) = lay {
            self.owns(l)?
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

    pub(super) fn store(&mut self, op: &Op, mask: bool, evict: Evict) -> R<()> {
        let t = self.k.ty(op.operands[0]).clone();
        let e = self.k.ty(op.operands[1]).elem;
        let ptrs = self.elems(op.operands[0]);
        let vals = self.elems(op.operands[1]);
        let masks = mask.then(|| self.elems(op.operands[2]));
        if !t.is_scalar() {
            let all: Vec<Vec<BasicValueEnum<'c>>> =
                [ptrs.clone(), vals.clone()].into_iter().chain(masks.clone()).collect();
            self.same_lengths(op, &all)?;
        }
        let lay = self.access_layout(op);
        let preds = self.write_preds(&t, lay.as_ref(), masks, ptrs.len())?;
        let (cls, bits) = Self::access(e);
        let ty = if bits == 8 {
            "u8".to_string()
        } else {
            format!("b{bits}")
        };
        // Stores are always predicated PTX.
        let w = self.vector_width_in(op.operands[0], mask.then(|| op.operands[2]), e, lay.as_ref(), true);
        let hint = self.cache_hint(evict)?;
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
            let (q, pol) = match &hint {
                Some((q, p)) => {
                    args.push(*p);
                    (q.as_str(), format!(", ${}", n + 2))
                }
                None => ("", String::new()),
            };
            let text = if n == 1 {
                format!("@$2 st.global{q}.{ty} [$0], $1{pol};")
            } else {
                let vs: Vec<String> = (1..=n).map(|j| format!("${j}")).collect();
                format!("@${} st.global{q}.v{n}.{ty} [$0], {{{}}}{pol};", n + 1, vs.join(", "))
            };
            let cons = format!(
                "l,{}b,{}~{{memory}}",
                format!("{cls},").repeat(n),
                "l,".repeat(hint.is_some() as usize)
            );
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

    pub(super) fn atomic(&mut self, op: &Op, kind: Option<AtomicOp>, mask: bool) -> R<()> {
        let t = self.k.ty(op.operands[0]).clone();
        let d = self.dtype(op.results[0]);
        let e = Elem::Scalar(d);
        let nvals = if kind.is_some() { 1 } else { 2 };
        let ptrs = self.elems(op.operands[0]);
        let vals: Vec<Vec<BasicValueEnum>> = (0..nvals).map(|j| self.elems(op.operands[1 + j])).collect();
        let masks = mask.then(|| self.elems(op.operands[1 + nvals]));
        let preds = self.write_preds(&t, None, masks, ptrs.len())?;
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
        self.set_elems(op.results[0], out);
        Ok(())
    }
}
