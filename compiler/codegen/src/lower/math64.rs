//! Math functions on f64, which PTX has no instructions for: `exp`, `exp2`, `log`, `log2` (and
//! `sigmoid` through `exp`), `tanh`, `sin`, `cos`, `erf`, in f64 arithmetic with FMAs. Each is
//! within a few ulps of the correctly rounded result over its whole range (3 ulps at most for
//! `log2` near 1 and `tanh`, 2 for `sin`/`cos`, 1 for the others, measured in f64 against
//! multi-precision arithmetic when the algorithms were chosen); inputs past the range give inf, 0
//! and NaN as IEEE says.
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
//! - sin, cos: |x| = n π/2 + r with |r| <= π/4 and the quadrant n mod 4, then the Taylor series of
//!   sin r (to r²¹) or cos r (to r²²). Below 2^19 π/2, n = rint(|x| 2/π) and r comes from three
//!   FMAs with π/2 split in three doubles (Cody and Waite); above, from |x|'s 53-bit mantissa times
//!   a 192-bit window of the bits of 2/π chosen by its exponent (Payne and Hanek, in 64- and
//!   128-bit integers): the product's bits at the binary point give n mod 4 and 126 bits of the
//!   fraction. Simulated in f64 against 480-digit arithmetic over 45,000 arguments of every
//!   exponent: within 2 ulps.
//! - erf: for |x| < 1 its Taylor series x E(x²) (to x³⁹); for 1 <= |x| < 6, 1 - e^{-x²} R(x) with
//!   R = erfc(x) e^{x²} as a polynomial of degree 17 on [1, 2.5] or [2.5, 6] (mpmath's chebyfit;
//!   erfc's share of erf is small there, so exp's ulp hardly shows); past 6, ±1 (erfc(6) is below
//!   half an ulp of 1). Simulated in f64 against 40-digit arithmetic over 36,000 arguments:
//!   within 1 ulp.

use inkwell::FloatPredicate;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue};

use super::{Lowering, R, llvm};

/// NVPTX's constant address space.
const CONSTANT: u16 = 4;

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

/// π/2 as the sum of three doubles (Cody and Waite's reduction), and 2/π.
const PIO2: [f64; 3] = [1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33];
const TWO_OVER_PI: f64 = 0.6366197723675814;
/// Below this |x| (2^19 π/2) the three-part reduction is exact enough; above it, Payne and Hanek.
const SINCOS_SMALL: f64 = 823549.6645826427;
/// (-1)^k / (2k+1)! for k = 10 down to 1: sin r = r + r³ S(r²).
const SIN_TAYLOR: [f64; 10] = [
    1.9572941063391263e-20,
    -8.22063524662433e-18,
    2.8114572543455206e-15,
    -7.647163731819816e-13,
    1.6059043836821613e-10,
    -2.505210838544172e-08,
    2.7557319223985893e-06,
    -0.0001984126984126984,
    0.008333333333333333,
    -0.16666666666666666,
];
/// (-1)^k / (2k)! for k = 11 down to 2: cos r = 1 - r²/2 + r⁴ C(r²).
const COS_TAYLOR: [f64; 10] = [
    -8.896791392450574e-22,
    4.110317623312165e-19,
    -1.5619206968586225e-16,
    4.779477332387385e-14,
    -1.1470745597729725e-11,
    2.08767569878681e-09,
    -2.755731922398589e-07,
    2.48015873015873e-05,
    -0.001388888888888889,
    0.041666666666666664,
];
/// The bits of 2/π (the first 1216), after 64 zero bits, as big-endian 64-bit words: the window
/// of the Payne–Hanek reduction starts at bit `E + 62` for |x| = M 2^E, M a 53-bit integer.
const TWO_OVER_PI_WORDS: [u64; 20] = [
    0x0000000000000000,
    0xa2f9836e4e441529,
    0xfc2757d1f534ddc0,
    0xdb6295993c439041,
    0xfe5163abdebbc561,
    0xb7246e3a424dd2e0,
    0x06492eea09d1921c,
    0xfe1deb1cb129a73e,
    0xe88235f52ebb4484,
    0xe99c7026b45f7e41,
    0x3991d639835339f4,
    0x9c845f8bbdf9283b,
    0x1ff897ffde05980f,
    0xef2f118b5a0a6d1f,
    0x6d367ecf27cb09b7,
    0x4f463f669e5fea2d,
    0x7527bac7ebe5f17b,
    0x3d0739f78a5292ea,
    0x6bfb5fb11f8d5d08,
    0x56033046fc7b6bab,
];

/// 2/√π (-1)^n / (n! (2n+1)) for n = 19 down to 0: erf x = x E(x²) for |x| < 1.
const ERF_TAYLOR: [f64; 20] = [
    -2.3784598852774293e-19,
    4.763348040515068e-18,
    -9.063970842808673e-17,
    1.6342614095367152e-15,
    -2.7835162072109215e-14,
    4.4632242632864775e-13,
    -6.7113668551641105e-12,
    9.422759064650411e-11,
    -1.2290555301717928e-09,
    1.4807192815879218e-08,
    -1.6365844691234924e-07,
    1.6462114365889248e-06,
    -1.492565035840625e-05,
    0.00012055332981789664,
    -0.0008548327023450853,
    0.005223977625442188,
    -0.026866170645131252,
    0.11283791670955126,
    -0.37612638903183754,
    1.1283791670955126,
];
/// erfc(x) e^{x²} on [1, 2.5] as a polynomial in x - 1.75 (mpmath's chebyfit, relative error 5e-17).
const ERFC_NEAR: [f64; 18] = [
    -1.2122502617537188e-09,
    4.843675986860995e-09,
    -1.589789230506663e-08,
    6.045191233829322e-08,
    -2.278695540562056e-07,
    8.275753489404636e-07,
    -2.9279023630255475e-06,
    1.0086535231948864e-05,
    -3.375536224123748e-05,
    0.00010950531744961819,
    -0.00034353335270409817,
    0.0010392045192651948,
    -0.0030209746514672014,
    0.008404319207503399,
    -0.02225999524138744,
    0.055763630087083585,
    -0.13097634551448523,
    0.2849722347374364,
];
/// erfc(x) e^{x²} on [2.5, 6] as a polynomial in x - 4.25 (relative error 4e-14, below 1e-17 of erf).
const ERFC_FAR: [f64; 18] = [
    -1.5102194078549945e-13,
    8.823359255401374e-13,
    -3.015284892628943e-12,
    1.6935756371615156e-11,
    -1.0582084470379627e-10,
    5.83003829862679e-10,
    -3.131942133869568e-09,
    1.6769860931768107e-08,
    -8.855633757213729e-08,
    4.6027202386353464e-07,
    -2.354599450127567e-06,
    1.1848086566773046e-05,
    -5.859550056872909e-05,
    0.0002845751589621955,
    -0.0013559331670631794,
    0.006331866273628397,
    -0.028944331414616106,
    0.12934527478599253,
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

    /// `sin` (or `cos` when `cos`) on f64 (see the module's notes).
    pub(super) fn sincos_f64(&self, x: FloatValue<'c>, cos: bool) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        let i32t = self.ctx.i32_type();
        let ax = self.f64_intr("llvm.fabs", &[x.into()])?;
        // Cody and Waite.
        let n = self.f64_intr(
            "llvm.rint",
            &[llvm(b.build_float_mul(ax, self.f64c(TWO_OVER_PI), ""))?.into()],
        )?;
        let neg_n = llvm(b.build_float_neg(n, ""))?;
        let mut r_small = ax;
        for p in PIO2 {
            r_small = self.f64_intr("llvm.fma", &[neg_n.into(), self.f64c(p).into(), r_small.into()])?;
        }
        let n_i = self.intr1(
            "llvm.fptosi.sat",
            &[i32t.into(), self.ctx.f64_type().into()],
            &[n.into()],
        )?;
        let q_small = llvm(b.build_and(n_i.into_int_value(), i32t.const_int(3, false), ""))?;
        // Payne and Hanek only where needed (rarely): a branch around it, not a select.
        let small = llvm(b.build_float_compare(FloatPredicate::OLT, ax, self.f64c(SINCOS_SMALL), ""))?;
        let before = b.get_insert_block().expect("inside a function");
        let f = before.get_parent().expect("inside a function");
        let (large_bb, reduced) = (
            self.ctx.append_basic_block(f, "payne_hanek"),
            self.ctx.append_basic_block(f, "reduced"),
        );
        llvm(b.build_conditional_branch(small, reduced, large_bb))?;
        b.position_at_end(large_bb);
        let (r_large, q_large) = self.payne_hanek(ax)?;
        let large_end = b.get_insert_block().expect("inside a function");
        llvm(b.build_unconditional_branch(reduced))?;
        b.position_at_end(reduced);
        let r = llvm(b.build_phi(self.ctx.f64_type(), "r"))?;
        r.add_incoming(&[(&r_small, before), (&r_large, large_end)]);
        let q = llvm(b.build_phi(i32t, "q"))?;
        q.add_incoming(&[(&q_small, before), (&q_large, large_end)]);
        let (r, q) = (
            r.as_basic_value().into_float_value(),
            q.as_basic_value().into_int_value(),
        );
        // cos x = sin(x + π/2): one quadrant on.
        let q = llvm(b.build_int_add(q, i32t.const_int(cos as u64, false), ""))?;
        let r2 = llvm(b.build_float_mul(r, r, ""))?;
        let s = self.horner64(&SIN_TAYLOR, r2)?;
        let r3 = llvm(b.build_float_mul(r, r2, ""))?;
        let sin_r = self.f64_intr("llvm.fma", &[r3.into(), s.into(), r.into()])?;
        let c = self.horner64(&COS_TAYLOR, r2)?;
        let r4 = llvm(b.build_float_mul(r2, r2, ""))?;
        let one_minus = self.f64_intr("llvm.fma", &[self.f64c(-0.5).into(), r2.into(), self.f64c(1.0).into()])?;
        let cos_r = self.f64_intr("llvm.fma", &[r4.into(), c.into(), one_minus.into()])?;
        let odd = llvm(b.build_and(q, i32t.const_int(1, false), ""))?;
        let odd = llvm(b.build_int_compare(inkwell::IntPredicate::NE, odd, i32t.const_zero(), ""))?;
        let v = llvm(b.build_select(odd, cos_r, sin_r, ""))?.into_float_value();
        let flip = llvm(b.build_and(q, i32t.const_int(2, false), ""))?;
        let flip = llvm(b.build_int_compare(inkwell::IntPredicate::NE, flip, i32t.const_zero(), ""))?;
        // sin is odd: the sign of x too (cos is even).
        let flip = if cos {
            flip
        } else {
            let neg_x = llvm(b.build_float_compare(FloatPredicate::OLT, x, self.f64c(0.0), ""))?;
            llvm(b.build_xor(flip, neg_x, ""))?
        };
        let nv = llvm(b.build_float_neg(v, ""))?;
        let v = llvm(b.build_select(flip, nv, v, ""))?.into_float_value();
        // -0.0 stays -0.0 for sin (v is +0.0 there and x < 0 is false); inf and NaN give NaN.
        let v = if cos {
            v
        } else {
            let zero = llvm(b.build_float_compare(FloatPredicate::OEQ, x, self.f64c(0.0), ""))?;
            llvm(b.build_select(zero, x, v, ""))?.into_float_value()
        };
        let finite = llvm(b.build_float_compare(FloatPredicate::OLT, ax, self.f64c(f64::INFINITY), ""))?;
        llvm(b.build_select(finite, v, self.f64c(f64::NAN), ""))
    }

    /// Payne and Hanek's reduction of a finite `ax` >= 2^19 π/2 (other values give unused
    /// results, computed without reading outside the table): `ax` = (4k + q + f) π/2 with
    /// |f| <= 1/2; returns (f π/2, q).
    fn payne_hanek(&self, ax: FloatValue<'c>) -> R<(FloatValue<'c>, IntValue<'c>)> {
        let b = &self.b;
        let (i32t, i64t, i128t, f64t) = (
            self.ctx.i32_type(),
            self.ctx.i64_type(),
            self.ctx.i128_type(),
            self.ctx.f64_type(),
        );
        let c64 = |v: u64| i64t.const_int(v, false);
        let bits = llvm(b.build_bit_cast(ax, i64t, ""))?.into_int_value();
        let e = llvm(b.build_and(llvm(b.build_right_shift(bits, c64(52), false, ""))?, c64(0x7ff), ""))?;
        let m = llvm(b.build_or(llvm(b.build_and(bits, c64((1 << 52) - 1), ""))?, c64(1 << 52), ""))?;
        // The window's first bit: E + 62 with E = e - 1075, kept inside the table.
        let j = llvm(b.build_int_sub(e, c64(1075 - 62), ""))?;
        let j = self.intr1("llvm.smax", &[i64t.into()], &[j.into(), c64(0).into()])?;
        let j = self
            .intr1("llvm.smin", &[i64t.into()], &[j.into(), c64(1033).into()])?
            .into_int_value();
        let k = llvm(b.build_right_shift(j, c64(6), false, ""))?;
        let sh = llvm(b.build_and(j, c64(63), ""))?;
        let table = self.two_over_pi_table();
        let word = |i: u64| -> R<IntValue<'c>> {
            let idx = llvm(b.build_int_add(k, c64(i), ""))?;
            let p = unsafe { llvm(b.build_gep(i64t, table, &[idx], ""))? };
            Ok(llvm(b.build_load(i64t, p, ""))?.into_int_value())
        };
        let t: Vec<IntValue<'c>> = (0..4).map(word).collect::<R<_>>()?;
        let fshl = |hi: IntValue<'c>, lo: IntValue<'c>| -> R<IntValue<'c>> {
            Ok(self
                .intr1("llvm.fshl", &[i64t.into()], &[hi.into(), lo.into(), sh.into()])?
                .into_int_value())
        };
        let (w2, w1, w0) = (fshl(t[0], t[1])?, fshl(t[1], t[2])?, fshl(t[2], t[3])?);
        let wide = |v: IntValue<'c>| llvm(b.build_int_z_extend(v, i128t, ""));
        let c128 = |v: u64| i128t.const_int(v, false);
        let m128 = wide(m)?;
        let p0 = llvm(b.build_int_mul(m128, wide(w0)?, ""))?;
        let p1 = llvm(b.build_int_mul(m128, wide(w1)?, ""))?;
        // Only the low 64 bits of M w2 reach the bits kept (below 2^192).
        let p2 = wide(llvm(b.build_int_mul(m, w2, ""))?)?;
        let a1 = llvm(b.build_right_shift(p0, c128(64), false, ""))?;
        let mask = c128(u64::MAX);
        let mid = llvm(b.build_int_add(a1, llvm(b.build_and(p1, mask, ""))?, ""))?;
        let l1 = llvm(b.build_and(mid, mask, ""))?;
        let carry = llvm(b.build_right_shift(mid, c128(64), false, ""))?;
        let b1 = llvm(b.build_right_shift(p1, c128(64), false, ""))?;
        let l2 = llvm(b.build_and(
            llvm(b.build_int_add(llvm(b.build_int_add(b1, p2, ""))?, carry, ""))?,
            mask,
            "",
        ))?;
        // Bits 190 and 191 of the product are n mod 4; the 126 below them the fraction.
        let q = llvm(b.build_right_shift(l2, c128(62), false, ""))?;
        let q = llvm(b.build_int_truncate(q, i32t, ""))?;
        let frac_hi = llvm(b.build_and(l2, c128((1 << 62) - 1), ""))?;
        let f = llvm(b.build_or(llvm(b.build_left_shift(frac_hi, c128(64), ""))?, l1, ""))?;
        // A fraction of a half or more counts as the next quadrant less the rest.
        let upper = llvm(b.build_int_compare(
            inkwell::IntPredicate::UGE,
            f,
            i128t.const_int_arbitrary_precision(&[0, 1 << 61]),
            "",
        ))?;
        let f_minus = llvm(b.build_int_sub(f, i128t.const_int_arbitrary_precision(&[0, 1 << 62]), ""))?;
        let f = llvm(b.build_select(upper, f_minus, f, ""))?.into_int_value();
        let q = llvm(b.build_int_add(q, llvm(b.build_int_z_extend(upper, i32t, ""))?, ""))?;
        let q = llvm(b.build_and(q, i32t.const_int(3, false), ""))?;
        // |f| to f64: its top 64 bits after normalising (rounded once), scaled by 2^-126.
        let neg = llvm(b.build_int_compare(inkwell::IntPredicate::SLT, f, c128(0), ""))?;
        let abs = llvm(b.build_select(neg, llvm(b.build_int_neg(f, ""))?, f, ""))?.into_int_value();
        let lz = self.intr1(
            "llvm.ctlz",
            &[i128t.into()],
            &[abs.into(), self.ctx.bool_type().const_zero().into()],
        )?;
        let lz = lz.into_int_value();
        // (abs is never 0 for a finite double: no multiple of π/2 is one; lz <= 127 keeps the
        // shift defined regardless.)
        let lz = self
            .intr1("llvm.umin", &[i128t.into()], &[lz.into(), c128(127).into()])?
            .into_int_value();
        let top = llvm(b.build_right_shift(llvm(b.build_left_shift(abs, lz, ""))?, c128(64), false, ""))?;
        let top = llvm(b.build_int_truncate(top, i64t, ""))?;
        let fv = llvm(b.build_unsigned_int_to_float(top, f64t, ""))?;
        // 2^(64 - 126 - lz) = 2^-62 · 2^-lz, as two powers to stay normal.
        let lz64 = llvm(b.build_int_truncate(lz, i64t, ""))?;
        let scale = self.pow2i(llvm(b.build_int_neg(lz64, ""))?)?;
        let fv = llvm(b.build_float_mul(llvm(b.build_float_mul(fv, self.f64c(2f64.powi(-62)), ""))?, scale, ""))?;
        let lo = llvm(b.build_float_mul(fv, self.f64c(PIO2[1]), ""))?;
        let r = self.f64_intr("llvm.fma", &[fv.into(), self.f64c(PIO2[0]).into(), lo.into()])?;
        let nr = llvm(b.build_float_neg(r, ""))?;
        let r = llvm(b.build_select(neg, nr, r, ""))?.into_float_value();
        Ok((r, q))
    }

    /// The module's constant table of the bits of 2/π (created on first use).
    fn two_over_pi_table(&self) -> inkwell::values::PointerValue<'c> {
        const NAME: &str = "two_over_pi_bits";
        if let Some(g) = self.m.get_global(NAME) {
            return g.as_pointer_value();
        }
        let i64t = self.ctx.i64_type();
        let words: Vec<IntValue<'c>> = TWO_OVER_PI_WORDS.iter().map(|w| i64t.const_int(*w, false)).collect();
        let g = self.m.add_global(
            i64t.array_type(words.len() as u32),
            Some(inkwell::AddressSpace::from(CONSTANT)),
            NAME,
        );
        g.set_initializer(&i64t.const_array(&words));
        g.set_constant(true);
        g.set_linkage(inkwell::module::Linkage::Internal);
        g.as_pointer_value()
    }

    /// `erf` on f64 (see the module's notes).
    pub(super) fn erf_f64(&self, x: FloatValue<'c>) -> R<BasicValueEnum<'c>> {
        let b = &self.b;
        let ax = self.f64_intr("llvm.fabs", &[x.into()])?;
        let x2 = llvm(b.build_float_mul(ax, ax, ""))?;
        let small = llvm(b.build_float_mul(ax, self.horner64(&ERF_TAYLOR, x2)?, ""))?;
        let near = self.horner64(&ERFC_NEAR, llvm(b.build_float_sub(ax, self.f64c(1.75), ""))?)?;
        let far = self.horner64(&ERFC_FAR, llvm(b.build_float_sub(ax, self.f64c(4.25), ""))?)?;
        let is_near = llvm(b.build_float_compare(FloatPredicate::OLT, ax, self.f64c(2.5), ""))?;
        let r = llvm(b.build_select(is_near, near, far, ""))?.into_float_value();
        // Past 6 the result is 1 whatever exp gives; clamping keeps exp away from underflow.
        let xc = self.f64_intr("llvm.minnum", &[x2.into(), self.f64c(36.0).into()])?;
        let e = self
            .exp_f64(llvm(b.build_float_neg(xc, ""))?, false)?
            .into_float_value();
        let mid = llvm(b.build_float_sub(self.f64c(1.0), llvm(b.build_float_mul(e, r, ""))?, ""))?;
        let below_one = llvm(b.build_float_compare(FloatPredicate::OLT, ax, self.f64c(1.0), ""))?;
        let below_six = llvm(b.build_float_compare(FloatPredicate::OLT, ax, self.f64c(6.0), ""))?;
        let v = llvm(b.build_select(below_six, mid, self.f64c(1.0), ""))?.into_float_value();
        let v = llvm(b.build_select(below_one, small, v, ""))?.into_float_value();
        // erf is odd (and keeps -0.0); NaN passes.
        let v = self.f64_intr("llvm.copysign", &[v.into(), x.into()])?;
        self.nan_passes(x, v)
    }
}
