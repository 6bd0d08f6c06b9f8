//! Elementwise ops: constants, unary and binary arithmetic, comparisons, casts (8- and 16-bit
//! integers through `widen_narrow`/`narrow_int`), `select`, `fma`, bitcasts and pointer offsets.

use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tile_lang::ir::floats::FloatFormat;
use tile_lang::ir::*;

use super::{Lowering, R, Repr, llvm};
use crate::CodegenError;

/// The f32 exponential of `exp`, `exp2`, `sigmoid` and `erf`. Flushing results below 2^-126 to
/// zero (and subnormal arguments, whose exp2 is 1 either way) lets ptxas emit one `MUFU.EX2`;
/// without `.ftz` it wraps each in a comparison and two multiplications to reach the subnormal
/// results. The interpreter flushes the same results (`ir::scalar::unary`).
const EX2: &str = "ex2.approx.ftz.f32";

impl<'c> Lowering<'c, '_> {
    /// The elements per thread of an op's tile operands, which must hold one element per slot
    /// of one layout (else an error naming the operand: a plan and its lowering disagree).
    pub(super) fn same_lengths(&self, op: &Op, ins: &[Vec<BasicValueEnum<'c>>]) -> R<usize> {
        let n = ins.first().map_or(0, |x| x.len());
        if let Some((i, x)) = ins.iter().enumerate().find(|(_, x)| x.len() != n) {
            return Err(CodegenError::unsupported(
                format!(
                    "operands in different layouts (operand {i}, %{}, holds {} elements per thread; operand 0 holds {n})",
                    op.operands[i].0,
                    x.len()
                ),
                op.kind.name(),
                op.loc,
            ));
        }
        Ok(n)
    }

    /// Applies `f` element by element over operands of one shape.
    fn map(&mut self, op: &Op, f: &dyn Fn(&Self, &[BasicValueEnum<'c>]) -> R<BasicValueEnum<'c>>) -> R<()> {
        let ins: Vec<Vec<BasicValueEnum<'c>>> = op.operands.iter().map(|v| self.elems(*v)).collect();
        let n = self.same_lengths(op, &ins)?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let args: Vec<_> = ins.iter().map(|x| x[i]).collect();
            out.push(f(self, &args)?);
        }
        self.set_elems(op.results[0], out);
        Ok(())
    }

    /// A constant scalar.
    pub(super) fn constant(&mut self, op: &Op, c: &ConstValue) -> R<()> {
        let t = self.ty(self.k.ty(op.results[0]).elem);
        let v: BasicValueEnum = match (c, t) {
            (ConstValue::Int(i), BasicTypeEnum::IntType(it)) => it.const_int(*i as u64, true).into(),
            (ConstValue::Bool(b), BasicTypeEnum::IntType(it)) => it.const_int(*b as u64, false).into(),
            // fp8 values are held as their 8-bit patterns.
            (ConstValue::Float(f), BasicTypeEnum::IntType(it))
                if let Some(fmt) = self
                    .k
                    .ty(op.results[0])
                    .dtype()
                    .filter(|d| d.is_fp8())
                    .and_then(FloatFormat::of) =>
            {
                it.const_int(
                    fmt.encode(fmt.round(*f, tile_lang::ir::floats::Rounding::NearestEven)),
                    false,
                )
                .into()
            }
            (ConstValue::Float(f), BasicTypeEnum::FloatType(ft)) => ft.const_float(*f).into(),
            _ => return Err(CodegenError::unsupported("this constant", op.kind.name(), op.loc)),
        };
        self.set(op.results[0], Repr::Scalar(v));
        Ok(())
    }

    /// An elementwise op (unary, binary, comparison, `fma`, `select`, cast, bitcast, pointer
    /// offset) on tiles:
    /// [`element`](Self::element) on each slot.
    pub(super) fn elementwise(&mut self, op: &Op) -> R<()> {
        if let OpKind::Cast(r) = op.kind
            && let Some(to) = self.k.ty(op.results[0]).dtype()
            && (to.is_fp8() || self.dtype(op.operands[0]).is_fp8())
        {
            return self.fp8_in_pairs(op, self.dtype(op.operands[0]), to, r);
        }
        if let OpKind::Cast(r) = op.kind
            && r != Rounding::Rtz
            && self.dtype(op.operands[0]) == DType::F32
            && let Some(name) = match self.k.ty(op.results[0]).dtype() {
                Some(DType::BF16) => Some("llvm.nvvm.ff2bf16x2.rn"),
                Some(DType::F16) => Some("llvm.nvvm.ff2f16x2.rn"),
                _ => None,
            }
        {
            return self.narrow_in_pairs(op, name);
        }
        self.map(op, &|l, a| l.element(op, a))
    }

    /// f32 to bf16/f16 (nearest even), two slots per `cvt.rn.{bf16,f16}x2.f32`: half the
    /// instructions, and what lets a wgmma accumulator be converted after the loop without
    /// ptxas serialising the loop's wgmma (it does so when scalar `cvt`s read the accumulator).
    fn narrow_in_pairs(&mut self, op: &Op, name: &str) -> R<()> {
        let x = self.elems(op.operands[0]);
        let mut out = Vec::with_capacity(x.len());
        for pair in x.chunks(2) {
            if pair.len() == 1 {
                let to = self.k.ty(op.results[0]).dtype().unwrap();
                out.push(self.cast(DType::F32, to, pair[0], op.loc)?);
                continue;
            }
            // The first operand lands in the upper half.
            let v = self.intr1(name, &[], &[pair[1], pair[0]])?.into_vector_value();
            for j in 0..2 {
                out.push(llvm(self.b.build_extract_element(v, self.i32c(j), ""))?);
            }
        }
        self.set_elems(op.results[0], out);
        Ok(())
    }

    /// A conversion to or from fp8, two slots per `cvt` (`cvt.rn.satfinite.{e4m3,e5m2}x2.f32`
    /// to fp8, `cvt.rn.f16x2.{e4m3,e5m2}x2` from it; see [`fp8_convert`](Self::fp8_convert)).
    fn fp8_in_pairs(&mut self, op: &Op, from: DType, to: DType, r: Rounding) -> R<()> {
        if r == Rounding::Rtz && to.is_fp8() {
            return Err(CodegenError::unsupported(
                format!("round-toward-zero conversion from {from} to {to} (fp8 conversions round to nearest even)"),
                "cast",
                op.loc,
            ));
        }
        let x = self.elems(op.operands[0]);
        let mut out = Vec::with_capacity(x.len());
        for pair in x.chunks(2) {
            out.extend(self.fp8_convert(from, to, pair, op.loc)?);
        }
        self.set_elems(op.results[0], out);
        Ok(())
    }

    /// One or two values converted to or from fp8, each rounded once as the interpreter does:
    /// to fp8 from the f32 of [`fp8_source`](Self::fp8_source), from fp8 through f16 (or f32),
    /// which hold every fp8 value exactly.
    fn fp8_convert(&self, from: DType, to: DType, x: &[BasicValueEnum<'c>], loc: Loc) -> R<Vec<BasicValueEnum<'c>>> {
        let (lo, hi) = (x[0], x.get(1).copied());
        if to.is_fp8() {
            let lo = self.fp8_source(from, lo, loc)?;
            let hi = hi.map(|h| self.fp8_source(from, h, loc)).transpose()?;
            return self.to_fp8_pair(to, lo, hi);
        }
        let (wide, lo, hi) = self.from_fp8_pair(from, lo, hi)?;
        [Some(lo), hi]
            .into_iter()
            .flatten()
            .map(|h| self.cast(wide, to, h, loc))
            .collect()
    }

    /// `x` (of dtype `from`) as the f32 that a conversion to fp8 rounds. Exact for f16, bf16
    /// and integers up to 2^24 (larger ones saturate either way); an f64 is rounded to odd
    /// (toward zero, the last bit set when that was inexact), which keeps the information a
    /// second rounding to fp8's 4 or 3 bits needs to round as rounding `x` once would (rounding
    /// f64 to f32 to nearest would not: 1.0625 + 2^-30 would become the tie 1.0625).
    fn fp8_source(&self, from: DType, x: BasicValueEnum<'c>, loc: Loc) -> R<BasicValueEnum<'c>> {
        if from != DType::F64 {
            return self.cast(from, DType::F32, x, loc);
        }
        let b = &self.b;
        let (f32t, i32t) = (self.ctx.f32_type(), self.ctx.i32_type());
        let t = self.pure_asm(f32t.into(), "cvt.rz.f32.f64 $0, $1;", "=f,d", &[x])?;
        let back = llvm(b.build_float_ext(t.into_float_value(), self.ctx.f64_type(), ""))?;
        // ONE is false for NaN, which stays NaN.
        let inexact = llvm(b.build_float_compare(FloatPredicate::ONE, back, x.into_float_value(), ""))?;
        let bits = llvm(b.build_bit_cast(t, i32t, ""))?.into_int_value();
        let bits = llvm(b.build_or(bits, llvm(b.build_int_z_extend(inexact, i32t, ""))?, ""))?;
        llvm(b.build_bit_cast(bits, f32t, ""))
    }

    /// f32 `lo` (and `hi`) rounded to the fp8 `to` by one `cvt ... x2.f32` (or
    /// [`soft_to_fp8`](Self::soft_to_fp8) each on targets without it): one or two 8-bit values.
    fn to_fp8_pair(
        &self,
        to: DType,
        lo: BasicValueEnum<'c>,
        hi: Option<BasicValueEnum<'c>>,
    ) -> R<Vec<BasicValueEnum<'c>>> {
        if !self.target.fp8 {
            return [Some(lo), hi]
                .into_iter()
                .flatten()
                .map(|x| self.soft_to_fp8(to, x))
                .collect();
        }
        let name = if to == DType::F8E4M3 {
            "llvm.nvvm.ff.to.e4m3x2.rn"
        } else {
            "llvm.nvvm.ff.to.e5m2x2.rn"
        };
        let zero = self.ctx.f32_type().const_zero().into();
        // The first operand lands in the upper byte.
        let packed = self.intr1(name, &[], &[hi.unwrap_or(zero), lo])?;
        // Split in 32 bits: LLVM would take the upper byte with a 16-bit shift, which ptxas does
        // not always keep in range (see `widen_narrow`).
        let i32t = self.ctx.i32_type();
        let both = self.pure_asm(
            self.ctx.struct_type(&[i32t.into(), i32t.into()], false).into(),
            "{\n.reg .b32 t;\ncvt.u32.u16 t, $2;\nand.b32 $0, t, 255;\nshr.b32 $1, t, 8;\n}",
            "=r,=r,h",
            &[packed],
        )?;
        (0..if hi.is_some() { 2 } else { 1 })
            .map(|j| {
                let b = llvm(self.b.build_extract_value(both.into_struct_value(), j, ""))?.into_int_value();
                Ok(llvm(self.b.build_int_truncate(b, self.ctx.i8_type(), ""))?.into())
            })
            .collect()
    }

    /// The fp8 `from` values `lo` (and `hi`) exactly in a wider dtype, which it returns first:
    /// f16 by one `cvt.rn.f16x2.*x2`, or f32 by [`soft_from_fp8`](Self::soft_from_fp8) on
    /// targets without it.
    fn from_fp8_pair(
        &self,
        from: DType,
        lo: BasicValueEnum<'c>,
        hi: Option<BasicValueEnum<'c>>,
    ) -> R<(DType, BasicValueEnum<'c>, Option<BasicValueEnum<'c>>)> {
        if !self.target.fp8 {
            let hi = hi.map(|h| self.soft_from_fp8(from, h)).transpose()?;
            return Ok((DType::F32, self.soft_from_fp8(from, lo)?, hi));
        }
        let name = if from == DType::F8E4M3 {
            "llvm.nvvm.e4m3x2.to.f16x2.rn"
        } else {
            "llvm.nvvm.e5m2x2.to.f16x2.rn"
        };
        // Packed by a `prmt` in 32 bits: LLVM would pack bytes with 16-bit shifts, which ptxas
        // does not always keep in range (see `widen_narrow`).
        let i32t = self.ctx.i32_type();
        let wide = |x: BasicValueEnum<'c>| llvm(self.b.build_int_z_extend(x.into_int_value(), i32t, ""));
        let (lo, hi_or_0) = (wide(lo)?, hi.map(wide).transpose()?.unwrap_or(i32t.const_zero()));
        let packed = self.pure_asm(
            self.ctx.i16_type().into(),
            "{\n.reg .b32 t;\nprmt.b32 t, $1, $2, 0x40;\ncvt.u16.u32 $0, t;\n}",
            "=h,r,r",
            &[lo.into(), hi_or_0.into()],
        )?;
        let v = self.intr1(name, &[], &[packed])?.into_vector_value();
        let lo = llvm(self.b.build_extract_element(v, self.i32c(0), ""))?;
        let hi = match hi {
            Some(_) => Some(llvm(self.b.build_extract_element(v, self.i32c(1), ""))?),
            None => None,
        };
        Ok((DType::F16, lo, hi))
    }

    /// f32 `x` rounded to the fp8 `to` in integer and f32 arithmetic, for targets without fp8
    /// conversions: the magnitude is scaled so that one fp8 step is 1, rounded to nearest even
    /// (`llvm.rint`), clamped to the largest finite value (inf included) and re-biased; NaN gives
    /// the format's NaN. The same result as `cvt.rn.satfinite` and the interpreter.
    fn soft_to_fp8(&self, to: DType, x: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        let fmt = FloatFormat::of(to).expect("an fp8 dtype");
        let (i32t, f32t) = (self.ctx.i32_type(), self.ctx.f32_type());
        let (man, bias) = (fmt.man_bits as i64, fmt.bias() as i64);
        let emin = 1 - bias;
        let b = &self.b;
        let c = |v: i64| i32t.const_int(v as u64, true);
        let pow2 = |e: IntValue<'c>| -> R<inkwell::values::FloatValue<'c>> {
            // 2^e for -126 <= e <= 127, from its exponent field.
            let bits = llvm(b.build_left_shift(llvm(b.build_int_add(e, c(127), ""))?, c(23), ""))?;
            Ok(llvm(b.build_bit_cast(bits, f32t, ""))?.into_float_value())
        };
        let u = llvm(b.build_bit_cast(x, i32t, ""))?.into_int_value();
        let a = llvm(b.build_and(u, c(0x7fff_ffff), ""))?;
        let mag = llvm(b.build_bit_cast(a, f32t, ""))?.into_float_value();
        // The quantum's exponent: that of the value, at least the smallest normal's, less the
        // mantissa bits.
        let e = llvm(b.build_int_sub(llvm(b.build_right_shift(a, c(23), false, ""))?, c(127), ""))?;
        let e = self
            .intr1("llvm.smax", &[i32t.into()], &[e.into(), c(emin).into()])?
            .into_int_value();
        let q = llvm(b.build_int_sub(e, c(man), ""))?;
        let steps = llvm(b.build_float_mul(mag, pow2(llvm(b.build_int_neg(q, ""))?)?, ""))?;
        let steps = self
            .intr1("llvm.rint", &[f32t.into()], &[steps.into()])?
            .into_float_value();
        let r = llvm(b.build_float_mul(steps, pow2(q)?, ""))?;
        let r = self
            .intr1(
                "llvm.minnum",
                &[f32t.into()],
                &[r.into(), f32t.const_float(fmt.max_finite()).into()],
            )?
            .into_float_value();
        // Encode: a normal value re-biased from f32's fields, a subnormal one as its step count.
        let rb = llvm(b.build_bit_cast(r, i32t, ""))?.into_int_value();
        let normal = llvm(b.build_int_sub(
            llvm(b.build_right_shift(rb, c(23 - man), false, ""))?,
            c((127 - bias) << man),
            "",
        ))?;
        let sub = llvm(b.build_float_to_unsigned_int(
            llvm(b.build_float_mul(r, f32t.const_float(2f64.powi((man - emin) as i32)), ""))?,
            i32t,
            "",
        ))?;
        let is_normal =
            llvm(b.build_float_compare(FloatPredicate::OGE, r, f32t.const_float(2f64.powi(emin as i32)), ""))?;
        let bits = llvm(b.build_select(is_normal, normal, sub, ""))?.into_int_value();
        let nan = llvm(b.build_int_compare(IntPredicate::UGT, a, c(0x7f80_0000), ""))?;
        let nan_bits = c(fmt.encode(f64::NAN) as i64);
        let bits = llvm(b.build_select(nan, nan_bits, bits, ""))?.into_int_value();
        let sign = llvm(b.build_right_shift(llvm(b.build_and(u, c(0x8000_0000), ""))?, c(24), false, ""))?;
        let bits = llvm(b.build_or(bits, sign, ""))?;
        Ok(llvm(b.build_int_truncate(bits, self.ctx.i8_type(), ""))?.into())
    }

    /// The fp8 `from` value `x` (its 8-bit pattern) as f32, exactly, in integer arithmetic for
    /// targets without fp8 conversions: exponent and mantissa move into f32's fields and a
    /// multiplication by 2^(127 - bias) re-biases them (subnormals included); the top exponent
    /// is NaN (and for e5m2, with a zero mantissa, infinity).
    fn soft_from_fp8(&self, from: DType, x: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        let fmt = FloatFormat::of(from).expect("an fp8 dtype");
        let (i32t, f32t) = (self.ctx.i32_type(), self.ctx.f32_type());
        let man = fmt.man_bits as u64;
        let b = &self.b;
        let c = |v: u64| i32t.const_int(v, false);
        let u = llvm(b.build_int_z_extend(x.into_int_value(), i32t, ""))?;
        let m = llvm(b.build_and(u, c(0x7f), ""))?;
        let bits = llvm(b.build_left_shift(m, c(23 - man), ""))?;
        let f = llvm(b.build_bit_cast(bits, f32t, ""))?.into_float_value();
        let f = llvm(b.build_float_mul(f, f32t.const_float(2f64.powi(127 - fmt.bias())), ""))?;
        // Special values: the all-ones exponent (e5m2) or all-ones pattern (e4m3).
        let top = if fmt.has_infinity {
            0x7f & !((1 << man) - 1)
        } else {
            0x7f
        };
        let special = llvm(b.build_int_compare(IntPredicate::UGE, m, c(top), ""))?;
        let inf_or_nan = if fmt.has_infinity {
            let inf = llvm(b.build_int_compare(IntPredicate::EQ, m, c(top), ""))?;
            llvm(b.build_select(inf, f32t.const_float(f64::INFINITY), f32t.const_float(f64::NAN), ""))?
                .into_float_value()
        } else {
            f32t.const_float(f64::NAN)
        };
        let f = llvm(b.build_select(special, inf_or_nan, f, ""))?.into_float_value();
        let neg = llvm(b.build_int_compare(IntPredicate::NE, llvm(b.build_and(u, c(0x80), ""))?, c(0), ""))?;
        let nf = llvm(b.build_float_neg(f, ""))?;
        llvm(b.build_select(neg, nf, f, ""))
    }

    /// An elementwise op applied to one element of each operand.
    pub(super) fn element(&self, op: &Op, a: &[BasicValueEnum<'c>]) -> R<BasicValueEnum<'c>> {
        let loc = op.loc;
        let d = self.dtype(op.operands[0]);
        match &op.kind {
            OpKind::Unary(u) => self.unary(*u, d, a[0], loc),
            OpKind::Binary(bop) => self.binary(*bop, d, a[0], a[1]),
            OpKind::Cmp(c) => self.compare(*c, self.k.ty(op.operands[0]).elem, a[0], a[1]),
            OpKind::Fma => {
                let t = self.ty(self.k.ty(op.operands[0]).elem);
                self.intr1("llvm.fma", &[t], &[a[0], a[1], a[2]])
            }
            OpKind::Select => llvm(self.b.build_select(a[0].into_int_value(), a[1], a[2], "")),
            OpKind::Cast(r) => {
                let to = self.k.ty(op.results[0]).dtype().unwrap();
                match r {
                    Rounding::Rtz => self.cast_toward_zero(d, to, a[0], loc),
                    _ => self.cast(d, to, a[0], loc),
                }
            }
            OpKind::Bitcast => {
                let t = self.ty(self.k.ty(op.results[0]).elem);
                llvm(self.b.build_bit_cast(a[0], t, ""))
            }
            OpKind::PtrAdd => {
                let Elem::Ptr { pointee, .. } = self.k.ty(op.operands[0]).elem else {
                    unreachable!("verified")
                };
                let od = self.dtype(op.operands[1]);
                let off = a[1].into_int_value();
                let off = if od.bits() == 64 {
                    off
                } else if od.is_signed() {
                    llvm(self.b.build_int_s_extend(off, self.ctx.i64_type(), ""))?
                } else {
                    llvm(self.b.build_int_z_extend(off, self.ctx.i64_type(), ""))?
                };
                let et = self.ty(Elem::Scalar(pointee));
                let p = unsafe { llvm(self.b.build_gep(et, a[0].into_pointer_value(), &[off], ""))? };
                Ok(p.into())
            }
            _ => Err(CodegenError::unsupported("this op", op.kind.name(), loc)),
        }
    }

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
        if d == DType::F64 {
            match u {
                UnaryOp::Exp => return self.exp_f64(fx, false),
                UnaryOp::Exp2 => return self.exp_f64(fx, true),
                UnaryOp::Log => return self.log_f64(fx, false),
                UnaryOp::Log2 => return self.log_f64(fx, true),
                UnaryOp::Sigmoid => return self.sigmoid_f64(fx),
                UnaryOp::Rsqrt => return self.rsqrt_f64(fx),
                UnaryOp::Tanh => return self.tanh_f64(fx),
                UnaryOp::Sin => return self.sincos_f64(fx, false),
                UnaryOp::Cos => return self.sincos_f64(fx, true),
                UnaryOp::Erf => return self.erf_f64(fx),
                _ => {}
            }
        }
        Ok(match u {
            UnaryOp::Neg => llvm(b.build_float_neg(fx, ""))?.into(),
            UnaryOp::Not => x,
            UnaryOp::Abs => self.intr1("llvm.fabs", &[t], &[x])?,
            UnaryOp::Floor => self.intr1("llvm.floor", &[t], &[x])?,
            UnaryOp::Ceil => self.intr1("llvm.ceil", &[t], &[x])?,
            UnaryOp::Sqrt => self.intr1("llvm.sqrt", &[t], &[x])?,
            UnaryOp::Exp2 => approx(EX2, x)?,
            UnaryOp::Exp => approx(EX2, mul(x, std::f64::consts::LOG2_E)?)?,
            UnaryOp::Log2 => approx("lg2.approx.f32", x)?,
            UnaryOp::Log => mul(approx("lg2.approx.f32", x)?, std::f64::consts::LN_2)?,
            UnaryOp::Rsqrt => approx("rsqrt.approx.f32", x)?,
            UnaryOp::Sin => approx("sin.approx.f32", x)?,
            UnaryOp::Cos => approx("cos.approx.f32", x)?,
            UnaryOp::Tanh => approx("tanh.approx.f32", x)?,
            UnaryOp::Sigmoid => {
                // 1 / (1 + 2^(-x log2 e))
                let e = approx(EX2, mul(x, -std::f64::consts::LOG2_E)?)?;
                let one = f32t.const_float(1.0);
                let den = llvm(b.build_float_add(one, e.into_float_value(), ""))?;
                llvm(b.build_float_div(one, den, ""))?.into()
            }
            UnaryOp::Erf if d == DType::F32 => self.erf_f32(x)?,
            UnaryOp::Erf => return Err(CodegenError::unsupported(format!("`erf` on {d}"), "erf", loc)),
        })
    }

    /// `erf` on f32, with FMAs and one `ex2.approx` (largest error 1.3e-7 over the whole range
    /// when simulated in f32 with an exact `ex2`, against erf in 40-digit arithmetic; the
    /// approximate `ex2` adds at most a few 1e-8):
    /// - |x| < 1: x * P(x^2), P of degree 7 fitted to erf(√t)/√t on t in [0, 1];
    /// - 1 <= |x| <= 4: ±(1 - 2^(-G(|x| - 2.5) log2 e)), G of degree 9 fitted to -ln(erfc(x));
    ///   past 4, erfc is below half an f32 ulp of 1 and |x| is clamped to 4 (so ±inf give ±1);
    /// - NaN gives NaN.
    fn erf_f32(&self, x: BasicValueEnum<'c>) -> R<BasicValueEnum<'c>> {
        // Chebyshev fits (mpmath's chebyfit), highest degree first, rounded to f32.
        const SMALL: [f64; 8] = [
            -9.667044650996104e-06,
            0.00011265958892181516,
            -0.0008484080317430198,
            0.005221031606197357,
            -0.026865430176258087,
            0.11283782124519348,
            -0.37612637877464294,
            1.128379225730896,
        ];
        const BIG: [f64; 10] = [
            7.582681860185403e-08,
            -1.6155811408680165e-06,
            1.2925695955345873e-05,
            -7.738760177744552e-05,
            0.0004207916499581188,
            -0.002165169920772314,
            0.010858112946152687,
            0.9438936710357666,
            5.352680683135986,
            7.806815147399902,
        ];
        let b = &self.b;
        let f32t = self.ctx.f32_type();
        let t: BasicTypeEnum = f32t.into();
        let c = |v: f64| -> BasicValueEnum<'c> { f32t.const_float(v).into() };
        let horner = |coef: &[f64], v: BasicValueEnum<'c>| -> R<BasicValueEnum<'c>> {
            let mut acc = c(coef[0]);
            for k in &coef[1..] {
                acc = self.intr1("llvm.fma", &[t], &[acc, v, c(*k)])?;
            }
            Ok(acc)
        };
        let fx = x.into_float_value();
        let a = self.intr1("llvm.fabs", &[t], &[x])?;
        let sq = llvm(b.build_float_mul(fx, fx, ""))?;
        let small = llvm(b.build_float_mul(fx, horner(&SMALL, sq.into())?.into_float_value(), ""))?;
        let ac = self.intr1("llvm.minnum", &[t], &[a, c(4.0)])?;
        let u = llvm(b.build_float_sub(ac.into_float_value(), f32t.const_float(2.5), ""))?;
        let g = horner(&BIG, u.into())?;
        let arg = llvm(b.build_float_mul(g.into_float_value(), f32t.const_float(-std::f64::consts::LOG2_E), ""))?;
        let e = self
            .asm(Some(t), &format!("{EX2} $0, $1;"), "=f,f", &[arg.into()])?
            .expect("the asm returns a value");
        let one_minus = llvm(b.build_float_sub(f32t.const_float(1.0), e.into_float_value(), ""))?;
        // The sign by a comparison, not `copysign`: of a widened bf16/f16 value LLVM would read
        // the sign bit with 16-bit integer shifts.
        let neg = llvm(b.build_float_compare(FloatPredicate::OLT, fx, f32t.const_float(0.0), ""))?;
        let minus = llvm(b.build_float_neg(one_minus, ""))?;
        let big = llvm(b.build_select(neg, minus, one_minus, ""))?;
        let is_small =
            llvm(b.build_float_compare(FloatPredicate::OLT, a.into_float_value(), f32t.const_float(1.0), ""))?;
        let r = llvm(b.build_select(is_small, small, big.into_float_value(), ""))?;
        let nan = llvm(b.build_float_compare(FloatPredicate::UNO, fx, fx, ""))?;
        Ok(llvm(b.build_select(nan, fx, r.into_float_value(), ""))?.into())
    }

    pub(super) fn binary(
        &self,
        op: BinaryOp,
        d: DType,
        a: BasicValueEnum<'c>,
        c: BasicValueEnum<'c>,
    ) -> R<BasicValueEnum<'c>> {
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

    pub(super) fn compare(
        &self,
        c: CmpOp,
        e: Elem,
        a: BasicValueEnum<'c>,
        b: BasicValueEnum<'c>,
    ) -> R<BasicValueEnum<'c>> {
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
    pub(super) fn cast(&self, from: DType, to: DType, x: BasicValueEnum<'c>, loc: Loc) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        if from == to {
            return Ok(x);
        }
        if is_narrow_int(from) {
            // Widen first; the rest of the conversion then starts from 32 bits.
            let w = self.widen_narrow(from, x.into_int_value())?;
            return self.cast(wide_int(from), to, w.into(), loc);
        }
        if to.is_fp8() || from.is_fp8() {
            return Ok(self.fp8_convert(from, to, &[x], loc)?[0]);
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
    pub(super) fn widen_narrow(&self, d: DType, x: IntValue<'c>) -> R<IntValue<'c>> {
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
}

/// 8- and 16-bit integers: computed in 32 bits (see `Lowering::widen_narrow`).
fn is_narrow_int(d: DType) -> bool {
    d.is_int() && d.bits() < 32
}

/// The 32-bit integer type of the same signedness as a narrow one.
fn wide_int(d: DType) -> DType {
    if d.is_signed() { DType::I32 } else { DType::U32 }
}
