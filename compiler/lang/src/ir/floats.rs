//! The float formats narrower than f64, as data, and the one rounding function every conversion
//! to them goes through.
//!
//! A value of a narrow format is held in an `f64` (which represents every one of them exactly).
//! Rounding works on that exact `f64`: the quantum (the weight of the last mantissa bit) at the
//! value's exponent is a power of two, so scaling by it is exact, rounding it to an integer is
//! the one rounding step, and multiplying back is exact again. No intermediate format is
//! involved, so no value is rounded twice.

use crate::ir::DType;

/// What a value beyond the largest finite one becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// IEEE: to infinity when rounding to nearest; to the largest finite value toward zero.
    Infinity,
    /// The GPU's `satfinite` conversions (the language's fp8 rule): the largest finite value,
    /// infinities included.
    Saturate,
}

/// How to round a value that falls between two of the format's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// To the nearest value, ties to the one with an even last mantissa bit (`"rne"`).
    NearestEven,
    /// To the neighbour closer to zero (`"rtz"`).
    TowardZero,
}

/// A binary float format: sign, `exp_bits` exponent bits, `man_bits` explicit mantissa bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloatFormat {
    pub exp_bits: u32,
    pub man_bits: u32,
    /// IEEE formats reserve the all-ones exponent for infinities and NaNs; e4m3 (the "fn"
    /// variant) has no infinity and only the all-ones pattern is NaN.
    pub has_infinity: bool,
    pub overflow: Overflow,
}

pub const F32: FloatFormat = FloatFormat {
    exp_bits: 8,
    man_bits: 23,
    has_infinity: true,
    overflow: Overflow::Infinity,
};
pub const F16: FloatFormat = FloatFormat {
    exp_bits: 5,
    man_bits: 10,
    has_infinity: true,
    overflow: Overflow::Infinity,
};
pub const BF16: FloatFormat = FloatFormat {
    exp_bits: 8,
    man_bits: 7,
    has_infinity: true,
    overflow: Overflow::Infinity,
};
pub const E4M3: FloatFormat = FloatFormat {
    exp_bits: 4,
    man_bits: 3,
    has_infinity: false,
    overflow: Overflow::Saturate,
};
pub const E5M2: FloatFormat = FloatFormat {
    exp_bits: 5,
    man_bits: 2,
    has_infinity: true,
    overflow: Overflow::Saturate,
};

impl FloatFormat {
    /// The format of a float dtype narrower than f64.
    pub fn of(d: DType) -> Option<FloatFormat> {
        match d {
            DType::F32 => Some(F32),
            DType::F16 => Some(F16),
            DType::BF16 => Some(BF16),
            DType::F8E4M3 => Some(E4M3),
            DType::F8E5M2 => Some(E5M2),
            _ => None,
        }
    }

    /// The exponent bias.
    pub fn bias(self) -> i32 {
        (1 << (self.exp_bits - 1)) - 1
    }

    /// The exponent of the smallest normal value.
    fn emin(self) -> i32 {
        1 - self.bias()
    }

    fn max_exp_field(self) -> u64 {
        (1 << self.exp_bits) - 1
    }

    fn man_mask(self) -> u64 {
        (1 << self.man_bits) - 1
    }

    /// The largest finite value.
    pub fn max_finite(self) -> f64 {
        let man = (1u64 << (self.man_bits + 1)) - 1; // all ones, with the implicit bit
        let (field, man) = if self.has_infinity {
            (self.max_exp_field() - 1, man)
        } else {
            (self.max_exp_field(), man - 1) // all ones is NaN
        };
        man as f64 * pow2(field as i32 - self.bias() - self.man_bits as i32)
    }

    /// Rounds `x` to this format, once.
    pub fn round(self, x: f64, mode: Rounding) -> f64 {
        if x.is_nan() || x == 0.0 {
            return x;
        }
        let a = x.abs();
        let r = if a.is_infinite() {
            f64::INFINITY
        } else {
            let q = exponent(a).max(self.emin()) - self.man_bits as i32;
            let n = a * pow2(-q);
            let n = match mode {
                Rounding::NearestEven => n.round_ties_even(),
                Rounding::TowardZero => n.trunc(),
            };
            n * pow2(q)
        };
        let r = if r > self.max_finite() {
            match (self.overflow, mode) {
                (Overflow::Infinity, Rounding::NearestEven) if self.has_infinity => f64::INFINITY,
                (Overflow::Infinity, _) if a.is_infinite() => f64::INFINITY,
                _ => self.max_finite(),
            }
        } else {
            r
        };
        r.copysign(x)
    }

    /// The bit pattern of `x`, a value of this format (already rounded to it). NaN gives the
    /// format's canonical quiet NaN with `x`'s sign.
    pub fn encode(self, x: f64) -> u64 {
        let sign = (x.is_sign_negative() as u64) << (self.exp_bits + self.man_bits);
        if x.is_nan() {
            let quiet = if self.has_infinity {
                (self.max_exp_field() << self.man_bits) | (1 << (self.man_bits - 1))
            } else {
                (self.max_exp_field() << self.man_bits) | self.man_mask()
            };
            return sign | quiet;
        }
        let a = x.abs();
        if a == 0.0 {
            return sign;
        }
        if a.is_infinite() {
            return sign | (self.max_exp_field() << self.man_bits);
        }
        let e = exponent(a);
        let bits = if e < self.emin() {
            // Subnormal: a multiple of the smallest quantum, with a zero exponent field.
            (a / pow2(self.emin() - self.man_bits as i32)) as u64
        } else {
            let field = (e + self.bias()) as u64;
            let man = (a / pow2(e - self.man_bits as i32)) as u64 & self.man_mask();
            (field << self.man_bits) | man
        };
        sign | bits
    }

    /// The value of a bit pattern of this format.
    pub fn decode(self, b: u64) -> f64 {
        let sign = if (b >> (self.exp_bits + self.man_bits)) & 1 != 0 {
            -1.0
        } else {
            1.0
        };
        let field = (b >> self.man_bits) & self.max_exp_field();
        let man = b & self.man_mask();
        if field == self.max_exp_field() {
            if self.has_infinity {
                return if man == 0 { sign * f64::INFINITY } else { f64::NAN };
            }
            if man == self.man_mask() {
                return f64::NAN;
            }
        }
        let m = self.man_bits as i32;
        if field == 0 {
            sign * man as f64 * pow2(self.emin() - m)
        } else {
            sign * ((1u64 << m) | man) as f64 * pow2(field as i32 - self.bias() - m)
        }
    }
}

/// 2^e for the exponents the formats use (well inside f64's normal range, up to 2^1023).
fn pow2(e: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&e));
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// floor(log2(a)) for a positive finite `a`, exactly (f64 subnormals included).
fn exponent(a: f64) -> i32 {
    let bits = a.to_bits();
    let field = ((bits >> 52) & 0x7ff) as i32;
    if field == 0 {
        // Subnormal: the leading one is in the mantissa.
        let man = bits & ((1 << 52) - 1);
        -1074 + (63 - man.leading_zeros() as i32)
    } else {
        field - 1023
    }
}

/// An integer as an f64 that every format with at most 24 mantissa bits rounds exactly as it
/// would round the integer itself: exact up to 53 significant bits, otherwise truncated to 53
/// bits with the last one set when anything was dropped (rounding to odd). With 53 ≥ 2p + 2 bits
/// for every narrow format's precision p, the second rounding then cannot differ from one
/// rounding of the integer.
pub fn int_to_f64_round_odd(v: i128) -> f64 {
    let neg = v < 0;
    let m = v.unsigned_abs();
    let width = 128 - m.leading_zeros();
    let r = if width <= 53 {
        m as f64
    } else {
        let shift = width - 53;
        let kept = (m >> shift) | ((m & ((1u128 << shift) - 1) != 0) as u128);
        kept as f64 * 2f64.powi(shift as i32)
    };
    if neg { -r } else { r }
}

#[cfg(test)]
mod tests;
