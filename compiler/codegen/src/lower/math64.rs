//! Math functions on f64, which PTX has no instructions for: `exp`, `exp2`, `log`, `log2` (and
//! `sigmoid` through `exp`), in f64 arithmetic with FMAs. Each is within a few ulps of the
//! correctly rounded result over its whole range (3 ulps at most for `log2` near 1, 1 elsewhere,
//! measured in f64 against 50-digit arithmetic when the algorithms were chosen); inputs past the
//! range give inf, 0 and NaN as IEEE says.
//!
//! - exp: x = n ln2 + r with n = rint(x log2 e) and r reduced in two FMAs (ln 2 split in two
//!   doubles), |r| <= ln2 / 2; e^r by its Taylor series to degree 13; 2^n applied as two powers
//!   built from exponent bits, so that results down to the smallest subnormal come out right.
//! - exp2: n = rint(x), r = (x - n) ln 2, then as exp.
//! - log: x = m 2^e with m in [√½, √2) (subnormals scaled by 2^54 first); log m = 2 atanh(s),
//!   s = (m - 1) / (m + 1), by its series in s² to s^19; log x = e ln2 + log m.
//! - log2: e + log m · log2 e.
//! - tanh: for |x| < 0.55, x + x³ Q(x²) with Q of degree 11 fitted to (tanh √t - √t) / t^{3/2}
//!   on t in [0, 0.3025] (mpmath's chebyfit; fit error 2.2e-19); past it, ±(1 - 2 / (e^{2|x|} + 1))
//!   through `exp`. Simulated in f64: within 3 ulps (3e-16 relative) over the whole range.

use inkwell::FloatPredicate;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue};

use super::{Lowering, R, llvm};

const LN2_HI: f64 = 0.6931471805599453;
const LN2_LO: f64 = 2.3190468138462996e-17;
const LOG2_E: f64 = 1.4426950408889634;

/// 1/k! for k = 13 down to 0.
const EXP_TAYLOR: [f64; 14] = [
    1.6059043836821613e-10,
    2.08767569878681e-09,
    2.505210838544172e-08,
    2.755731922398589e-07,
    2.7557319223985893e-06,
    2.48015873015873e-05,
    0.0001984126984126984,
    0.001388888888888889,
    0.008333333333333333,
    0.041666666666666664,
    0.16666666666666666,
    0.5,
    1.0,
    1.0,
];

/// 2 / (2k + 1) for k = 9 down to 0: 2 atanh(s) / s as a series in s².
const LOG_ATANH: [f64; 10] = [
    0.10526315789473684,
    0.11764705882352941,
    0.13333333333333333,
    0.15384615384615385,
    0.18181818181818182,
    0.2222222222222222,
    0.2857142857142857,
    0.4,
    0.6666666666666666,
    2.0,
];

/// Q(t) for `tanh` on |x| < 0.55, highest degree first.
const TANH_Q: [f64; 12] = [
    7.874274345344419e-06,
    -3.372080112046316e-05,
    9.455133052924858e-05,
    -0.0002384727248015252,
    0.0005899052969492733,
    -0.001455819097151351,
    0.0035921267699626346,
    -0.0088632354631468,
    0.021869488534073906,
    -0.05396825396822037,
    0.1333333333333331,
    -0.3333333333333333,
];

impl<'c> Lowering<'c, '_> {
    fn f64c(&self, v: f64) -> FloatValue<'c> {
        self.ctx.f64_type().const_float(v)
    }

    fn f64_intr(&self, name: &str, args: &[BasicValueEnum<'c>]) -> R<FloatValue<'c>> {
        let t: BasicTypeEnum = self.ctx.f64_type().into();
        Ok(self.intr1(name, &[t], args)?.into_float_value())
    }

    fn horner64(&self, coef: &[f64], v: FloatValue<'c>) -> R<FloatValue<'c>> {
        let mut acc = self.f64c(coef[0]);
        for c in &coef[1..] {
            acc = self.f64_intr("llvm.fma", &[acc.into(), v.into(), self.f64c(*c).into()])?;
        }
        Ok(acc)
    }

    /// 2^k for an i64 `k` in [-1022, 1023], from its exponent bits.
    fn pow2i(&self, k: IntValue<'c>) -> R<FloatValue<'c>> {
        let i64t = self.ctx.i64_type();
        let biased = llvm(self.b.build_int_add(k, i64t.const_int(1023, false), ""))?;
        let bits = llvm(self.b.build_left_shift(biased, i64t.const_int(52, false), ""))?;
        Ok(llvm(self.b.build_bit_cast(bits, self.ctx.f64_type(), ""))?.into_float_value())
    }

    /// e^r · 2^n for |r| <= ln2 / 2 and an integral `n` in [-1076, 1025].
    fn exp_core(&self, n: FloatValue<'c>, r: FloatValue<'c>) -> R<FloatValue<'c>> {
        let b = &self.b;
        let i64t = self.ctx.i64_type();
        let p = self.horner64(&EXP_TAYLOR, r)?;
        let ni = llvm(b.build_float_to_signed_int(n, i64t, ""))?;
        let h = llvm(b.build_right_shift(ni, i64t.const_int(1, false), true, ""))?;
        let k = llvm(b.build_int_sub(ni, h, ""))?;
        let scaled = llvm(b.build_float_mul(p, self.pow2i(h)?, ""))?;
        llvm(b.build_float_mul(scaled, self.pow2i(k)?, ""))
    }

    fn nan_passes(&self, x: FloatValue<'c>, r: FloatValue<'c>) -> R<BasicValueEnum<'c>> {
        let nan = llvm(self.b.build_float_compare(FloatPredicate::UNO, x, x, ""))?;
        llvm(self.b.build_select(nan, x, r, ""))
    }

    /// `exp` (or `exp2` when `base2`) on f64.
    pub(super) fn exp_f64(&self, x: FloatValue<'c>, base2: bool) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        // Past these, the result is 0 or inf whatever the input; NaN clamps to the low end and
        // is passed through at the end.
        let (lo, hi) = if base2 { (-1076.0, 1025.0) } else { (-746.0, 710.0) };
        let xc = self.f64_intr("llvm.maxnum", &[x.into(), self.f64c(lo).into()])?;
        let xc = self.f64_intr("llvm.minnum", &[xc.into(), self.f64c(hi).into()])?;
        let (n, r) = if base2 {
            let n = self.f64_intr("llvm.rint", &[xc.into()])?;
            let f = llvm(b.build_float_sub(xc, n, ""))?;
            (n, llvm(b.build_float_mul(f, self.f64c(LN2_HI), ""))?)
        } else {
            let t = llvm(b.build_float_mul(xc, self.f64c(LOG2_E), ""))?;
            let n = self.f64_intr("llvm.rint", &[t.into()])?;
            let neg_n = llvm(b.build_float_neg(n, ""))?;
            let r = self.f64_intr("llvm.fma", &[neg_n.into(), self.f64c(LN2_HI).into(), xc.into()])?;
            let r = self.f64_intr("llvm.fma", &[neg_n.into(), self.f64c(LN2_LO).into(), r.into()])?;
            (n, r)
        };
        let e = self.exp_core(n, r)?;
        self.nan_passes(x, e)
    }

    /// `log` (or `log2` when `base2`) on f64.
    pub(super) fn log_f64(&self, x: FloatValue<'c>, base2: bool) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        let (i64t, f64t) = (self.ctx.i64_type(), self.ctx.f64_type());
        // Subnormals: scaled into the normal range first.
        let sub = llvm(b.build_float_compare(FloatPredicate::OLT, x, self.f64c(f64::MIN_POSITIVE), ""))?;
        let xs = llvm(b.build_float_mul(x, self.f64c(2f64.powi(54)), ""))?;
        let xs = llvm(b.build_select(sub, xs, x, ""))?.into_float_value();
        let bits = llvm(b.build_bit_cast(xs, i64t, ""))?.into_int_value();
        let exp_bits = llvm(b.build_right_shift(bits, i64t.const_int(52, false), false, ""))?;
        let exp_bits = llvm(b.build_and(exp_bits, i64t.const_int(0x7ff, false), ""))?;
        let adj = llvm(b.build_select(
            sub,
            i64t.const_int((1023 + 54) as u64, false),
            i64t.const_int(1023, false),
            "",
        ))?
        .into_int_value();
        let e = llvm(b.build_int_sub(exp_bits, adj, ""))?;
        let mant = llvm(b.build_and(bits, i64t.const_int((1u64 << 52) - 1, false), ""))?;
        let one_bits = llvm(b.build_or(mant, i64t.const_int(1023u64 << 52, false), ""))?;
        let m = llvm(b.build_bit_cast(one_bits, f64t, ""))?.into_float_value();
        // m in [1, 2) to [√½, √2).
        let big = llvm(b.build_float_compare(FloatPredicate::OGT, m, self.f64c(std::f64::consts::SQRT_2), ""))?;
        let half = llvm(b.build_float_mul(m, self.f64c(0.5), ""))?;
        let m = llvm(b.build_select(big, half, m, ""))?.into_float_value();
        let big_i = llvm(b.build_int_z_extend(big, i64t, ""))?;
        let e = llvm(b.build_int_add(e, big_i, ""))?;
        let ef = llvm(b.build_signed_int_to_float(e, f64t, ""))?;
        let f = llvm(b.build_float_sub(m, self.f64c(1.0), ""))?;
        let den = llvm(b.build_float_add(f, self.f64c(2.0), ""))?;
        let s = llvm(b.build_float_div(f, den, ""))?;
        let z = llvm(b.build_float_mul(s, s, ""))?;
        let lm = llvm(b.build_float_mul(s, self.horner64(&LOG_ATANH, z)?, ""))?;
        let r = if base2 {
            self.f64_intr("llvm.fma", &[lm.into(), self.f64c(LOG2_E).into(), ef.into()])?
        } else {
            let low = self.f64_intr("llvm.fma", &[ef.into(), self.f64c(LN2_LO).into(), lm.into()])?;
            self.f64_intr("llvm.fma", &[ef.into(), self.f64c(LN2_HI).into(), low.into()])?
        };
        // log 0 = -inf, log inf = inf, log of a negative or NaN = NaN.
        let zero = llvm(b.build_float_compare(FloatPredicate::OEQ, x, self.f64c(0.0), ""))?;
        let inf = llvm(b.build_float_compare(FloatPredicate::OEQ, x, self.f64c(f64::INFINITY), ""))?;
        let bad = llvm(b.build_float_compare(FloatPredicate::ULT, x, self.f64c(0.0), ""))?;
        let r = llvm(b.build_select(inf, self.f64c(f64::INFINITY), r, ""))?.into_float_value();
        let r = llvm(b.build_select(zero, self.f64c(f64::NEG_INFINITY), r, ""))?.into_float_value();
        llvm(b.build_select(bad, self.f64c(f64::NAN), r, ""))
    }

    /// 1 / (1 + e^-x) on f64.
    pub(super) fn sigmoid_f64(&self, x: FloatValue<'c>) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        let e = self.exp_f64(llvm(b.build_float_neg(x, ""))?, false)?.into_float_value();
        let den = llvm(b.build_float_add(self.f64c(1.0), e, ""))?;
        Ok(llvm(b.build_float_div(self.f64c(1.0), den, ""))?.into())
    }

    /// `tanh` on f64: the polynomial near 0, `1 - 2 / (e^{2|x|} + 1)` with the sign of x past it
    /// (both computed, one selected; NaN takes the second path and stays NaN, ±inf gives ±1).
    pub(super) fn tanh_f64(&self, x: FloatValue<'c>) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        let t = llvm(b.build_float_mul(x, x, ""))?;
        let q = self.horner64(&TANH_Q, t)?;
        let xt = llvm(b.build_float_mul(x, t, ""))?;
        let near = self.f64_intr("llvm.fma", &[xt.into(), q.into(), x.into()])?;
        // x + x³Q rounds -0 to +0; tanh keeps the sign of zero.
        let near = self.f64_intr("llvm.copysign", &[near.into(), x.into()])?;
        let a = self.f64_intr("llvm.fabs", &[x.into()])?;
        let two_a = llvm(b.build_float_mul(a, self.f64c(2.0), ""))?;
        let e = self.exp_f64(two_a, false)?.into_float_value();
        let den = llvm(b.build_float_add(e, self.f64c(1.0), ""))?;
        let frac = llvm(b.build_float_div(self.f64c(2.0), den, ""))?;
        let far = llvm(b.build_float_sub(self.f64c(1.0), frac, ""))?;
        let far = self.f64_intr("llvm.copysign", &[far.into(), x.into()])?;
        let small = llvm(b.build_float_compare(FloatPredicate::OLT, a, self.f64c(0.55), ""))?;
        llvm(b.build_select(small, near, far, ""))
    }

    /// 1 / √x on f64 (division and square root both correctly rounded).
    pub(super) fn rsqrt_f64(&self, x: FloatValue<'c>) -> R<BasicValueEnum<'c>> {
        let s = self.f64_intr("llvm.sqrt", &[x.into()])?;
        Ok(llvm(self.b.build_float_div(self.f64c(1.0), s, ""))?.into())
    }
}
