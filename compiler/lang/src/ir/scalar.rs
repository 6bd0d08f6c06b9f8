//! Element semantics shared by the interpreter and the checker's constant folding: rounding to
//! each float format, integer wrapping, casts, and every unary and binary op on one element.
//!
//! Integers are held in an `i64`: signed types sign-extended, unsigned types zero-extended, u64 as
//! its bit pattern. Floats are held in an `f64` already rounded to their dtype.

use super::floats::{self, FloatFormat, Rounding};
use crate::ir::{BinaryOp, CmpOp, ConstValue, DType, OpKind, UnaryOp};

/// Wraps an integer to the width and signedness of `d` (two's complement).
pub fn wrap(d: DType, v: i64) -> i64 {
    match d {
        DType::Bool => (v != 0) as i64,
        DType::I8 => v as i8 as i64,
        DType::I16 => v as i16 as i64,
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::U16 => v as u16 as i64,
        DType::U32 => v as u32 as i64,
        _ => v,
    }
}

/// The range of values of an integer dtype.
pub fn int_range(d: DType) -> (i128, i128) {
    match d {
        DType::Bool => (0, 1),
        d if d.is_signed() => (-(1i128 << (d.bits() - 1)), (1i128 << (d.bits() - 1)) - 1),
        d => (0, (1i128 << d.bits()) - 1),
    }
}

/// Rounds `x` to the nearest value of float format `d` (ties to even), once.
pub fn round_float(d: DType, x: f64) -> f64 {
    match FloatFormat::of(d) {
        Some(f) => f.round(x, Rounding::NearestEven),
        None => x,
    }
}

/// Rounds toward zero to format `d`, once.
pub fn round_float_rtz(d: DType, x: f64) -> f64 {
    match FloatFormat::of(d) {
        Some(f) => f.round(x, Rounding::TowardZero),
        None => x,
    }
}

/// The largest finite value of a float format.
pub fn max_finite(d: DType) -> f64 {
    match FloatFormat::of(d) {
        Some(f) => f.max_finite(),
        None if d == DType::F64 => f64::MAX,
        None => 0.0,
    }
}

/// The bit pattern of a value of dtype `d` (as held by the interpreter).
pub fn to_bits(d: DType, v: Scalar) -> u64 {
    match (d, v) {
        (DType::F64, Scalar::F(x)) => x.to_bits(),
        (DType::F32, Scalar::F(x)) => (x as f32).to_bits() as u64,
        (d, Scalar::F(x)) if d.is_float() => FloatFormat::of(d).map_or(0, |f| f.encode(x)),
        (d, Scalar::I(i)) => (i as u64) & mask(d.bits()),
        (_, Scalar::B(b)) => b as u64,
        (_, Scalar::F(_)) => 0,
    }
}

pub fn from_bits(d: DType, b: u64) -> Scalar {
    match d {
        DType::F64 => Scalar::F(f64::from_bits(b)),
        DType::F32 => Scalar::F(f32::from_bits(b as u32) as f64),
        d if d.is_float() => Scalar::F(FloatFormat::of(d).map_or(0.0, |f| f.decode(b))),
        DType::Bool => Scalar::B(b & 1 != 0),
        d => Scalar::I(wrap(d, b as i64)),
    }
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 }
}

/// One element of a tile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    B(bool),
    I(i64),
    F(f64),
}

impl Scalar {
    /// Zero of dtype `d` (`false` for bool): what a masked or out-of-bounds load reads.
    pub fn zero(d: DType) -> Scalar {
        if d.is_float() {
            Scalar::F(0.0)
        } else if d.is_bool() {
            Scalar::B(false)
        } else {
            Scalar::I(0)
        }
    }

    pub fn from_const(c: ConstValue) -> Scalar {
        match c {
            ConstValue::Int(i) => Scalar::I(i),
            ConstValue::Float(f) => Scalar::F(f),
            ConstValue::Bool(b) => Scalar::B(b),
            ConstValue::DType(_) => Scalar::I(0),
        }
    }

    pub fn to_const(self) -> ConstValue {
        match self {
            Scalar::I(i) => ConstValue::Int(i),
            Scalar::F(f) => ConstValue::Float(f),
            Scalar::B(b) => ConstValue::Bool(b),
        }
    }

    /// The value as f64 (integers by their dtype's interpretation).
    pub fn as_f64(self, d: DType) -> f64 {
        match self {
            Scalar::F(f) => f,
            Scalar::I(i) if d == DType::U64 => i as u64 as f64,
            Scalar::I(i) => i as f64,
            Scalar::B(b) => b as u8 as f64,
        }
    }
}

/// Converts one element from dtype `from` to dtype `to` (round to nearest even for floats;
/// float to integer truncates toward zero and saturates, NaN becomes 0).
pub fn cast(from: DType, to: DType, v: Scalar, rtz: bool) -> Scalar {
    if to.is_bool() {
        return Scalar::B(match v {
            Scalar::B(b) => b,
            Scalar::I(i) => i != 0,
            Scalar::F(f) => f != 0.0,
        });
    }
    if to.is_float() {
        let x = match v {
            // Integers wider than 53 bits must not round twice (through f64, then to `to`).
            Scalar::I(i) if to != DType::F64 => floats::int_to_f64_round_odd(if from == DType::U64 {
                i as u64 as i128
            } else {
                i as i128
            }),
            v => v.as_f64(from),
        };
        return Scalar::F(if rtz {
            round_float_rtz(to, x)
        } else {
            round_float(to, x)
        });
    }
    match v {
        Scalar::B(b) => Scalar::I(b as i64),
        Scalar::I(i) => Scalar::I(wrap(to, i)),
        Scalar::F(f) => {
            if f.is_nan() {
                return Scalar::I(0);
            }
            let t = f.trunc();
            if to == DType::U64 {
                let u = if t <= 0.0 {
                    0
                } else if t >= u64::MAX as f64 {
                    u64::MAX
                } else {
                    t as u64
                };
                return Scalar::I(u as i64);
            }
            let (lo, hi) = int_range(to);
            Scalar::I((t.clamp(lo as f64, hi as f64)) as i64)
        }
    }
}

/// The checker's folding of a cast between constants.
pub fn cast_const(c: ConstValue, from: DType, to: DType) -> ConstValue {
    cast(from, to, Scalar::from_const(c), false).to_const()
}

/// Applies a unary op to one element of dtype `d`.
pub fn unary(op: UnaryOp, d: DType, v: Scalar) -> Scalar {
    match v {
        Scalar::B(b) => Scalar::B(if op == UnaryOp::Not { !b } else { b }),
        Scalar::I(i) => {
            let r = match op {
                UnaryOp::Neg => i.wrapping_neg(),
                UnaryOp::Not => !i,
                UnaryOp::Abs if d.is_signed() => i.wrapping_abs(),
                _ => i,
            };
            Scalar::I(wrap(d, r))
        }
        Scalar::F(x) => {
            let r = match op {
                UnaryOp::Neg => -x,
                UnaryOp::Not => x,
                UnaryOp::Abs => x.abs(),
                UnaryOp::Floor => x.floor(),
                UnaryOp::Ceil => x.ceil(),
                UnaryOp::Exp => x.exp(),
                UnaryOp::Exp2 => x.exp2(),
                UnaryOp::Log => x.ln(),
                UnaryOp::Log2 => x.log2(),
                UnaryOp::Sqrt => x.sqrt(),
                UnaryOp::Rsqrt => 1.0 / x.sqrt(),
                UnaryOp::Sin => x.sin(),
                UnaryOp::Cos => x.cos(),
                UnaryOp::Tanh => x.tanh(),
                UnaryOp::Erf => libm::erf(x),
                UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            };
            // The GPU's f32 exponential flushes results below 2^-126 to zero (codegen's `EX2`);
            // f16, bf16 and fp8 are computed in f32 there.
            // What is flushed is the f32 result: one that rounds up to 2^-126 stays.
            let flushed = matches!(op, UnaryOp::Exp | UnaryOp::Exp2)
                && d != DType::F64
                && round_float(DType::F32, r).abs() < f32::MIN_POSITIVE as f64;
            Scalar::F(round_float(d, if flushed { 0.0 } else { r }))
        }
    }
}

/// Applies a binary op to two elements of dtype `d`. Integer division by zero is an error.
pub fn binary(op: BinaryOp, d: DType, a: Scalar, b: Scalar) -> Result<Scalar, &'static str> {
    use BinaryOp::*;
    Ok(match (a, b) {
        (Scalar::B(x), Scalar::B(y)) => Scalar::B(match op {
            And => x && y,
            Or => x || y,
            Xor => x != y,
            Max => x || y,
            Min => x && y,
            _ => return Err("arithmetic on bool"),
        }),
        (Scalar::I(x), Scalar::I(y)) => {
            let unsigned = d.is_unsigned();
            let bits = d.bits() as i64;
            let r = match op {
                Add => x.wrapping_add(y),
                Sub => x.wrapping_sub(y),
                Mul => x.wrapping_mul(y),
                Div | Rem if y == 0 => return Err("integer division by zero"),
                Div if unsigned => ((x as u64) / (y as u64)) as i64,
                Rem if unsigned => ((x as u64) % (y as u64)) as i64,
                Div => x.wrapping_div(y),
                Rem => x.wrapping_rem(y),
                And => x & y,
                Or => x | y,
                Xor => x ^ y,
                // Shift amounts of the width or more give 0 (or the sign, for >> on signed).
                Shl => {
                    if (y as u64) >= bits as u64 {
                        0
                    } else {
                        x.wrapping_shl(y as u32)
                    }
                }
                Shr if unsigned => {
                    if (y as u64) >= bits as u64 {
                        0
                    } else {
                        ((x as u64) >> y) as i64
                    }
                }
                Shr => x >> (y as u64).min(63),
                Max if unsigned => (x as u64).max(y as u64) as i64,
                Min if unsigned => (x as u64).min(y as u64) as i64,
                Max => x.max(y),
                Min => x.min(y),
            };
            Scalar::I(wrap(d, r))
        }
        (Scalar::F(x), Scalar::F(y)) => {
            let r = match op {
                Add => x + y,
                Sub => x - y,
                Mul => x * y,
                Div => x / y,
                Rem => x % y,
                // IEEE maxNum/minNum: a NaN operand is ignored (as the GPU's max.f32).
                Max => x.max(y),
                Min => x.min(y),
                _ => return Err("bitwise op on floats"),
            };
            Scalar::F(round_float(d, r))
        }
        _ => return Err("mismatched element kinds"),
    })
}

pub fn compare(op: CmpOp, d: DType, a: Scalar, b: Scalar) -> bool {
    use std::cmp::Ordering;
    let ord = match (a, b) {
        (Scalar::I(x), Scalar::I(y)) if d.is_unsigned() => Some((x as u64).cmp(&(y as u64))),
        (Scalar::I(x), Scalar::I(y)) => Some(x.cmp(&y)),
        (Scalar::B(x), Scalar::B(y)) => Some(x.cmp(&y)),
        (Scalar::F(x), Scalar::F(y)) => x.partial_cmp(&y),
        _ => None,
    };
    match (op, ord) {
        // Every comparison with NaN is false, except `!=`.
        (CmpOp::Ne, None) => true,
        (_, None) => false,
        (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
        (CmpOp::Ne, Some(o)) => o != Ordering::Equal,
        (CmpOp::Lt, Some(o)) => o == Ordering::Less,
        (CmpOp::Le, Some(o)) => o != Ordering::Greater,
        (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
        (CmpOp::Ge, Some(o)) => o != Ordering::Less,
    }
}

/// Constant folding for the checker: `Ok(None)` when the op is not folded.
pub fn fold_binary(kind: &OpKind, d: DType, a: ConstValue, b: ConstValue) -> Result<Option<ConstValue>, String> {
    let (x, y) = (Scalar::from_const(a), Scalar::from_const(b));
    match kind {
        OpKind::Binary(op) => binary(*op, d, x, y)
            .map(|e| Some(e.to_const()))
            .map_err(|m| m.to_string()),
        OpKind::Cmp(op) => Ok(Some(ConstValue::Bool(compare(*op, d, x, y)))),
        _ => Ok(None),
    }
}

pub fn fold_unary(op: UnaryOp, d: DType, c: ConstValue) -> Option<ConstValue> {
    Some(unary(op, d, Scalar::from_const(c)).to_const())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(op: UnaryOp, d: DType, x: f64) -> f64 {
        match unary(op, d, Scalar::F(x)) {
            Scalar::F(r) => r,
            other => panic!("{other:?}"),
        }
    }

    /// Below f64, `exp` and `exp2` flush results under 2^-126 to zero, as the GPU's
    /// `ex2.approx.ftz` does; the smallest normal result and f64 keep their values.
    #[test]
    fn exponentials_flush_subnormal_results() {
        let min_normal = f32::MIN_POSITIVE as f64;
        for d in [DType::F32, DType::BF16] {
            assert_eq!(f(UnaryOp::Exp2, d, -130.0), 0.0, "{d}");
            assert_eq!(f(UnaryOp::Exp, d, -88.0), 0.0, "{d}"); // e^-88 ~ 6e-39 < 2^-126
            assert_eq!(f(UnaryOp::Exp2, d, -126.0), min_normal, "{d}");
        }
        assert_eq!(f(UnaryOp::Exp2, DType::F64, -130.0), 2f64.powi(-130));
        // Just below 2^-126 in f64, 2^-126 in f32: not flushed.
        let below = (-126.0f64).exp2() * (1.0 - 2f64.powi(-30));
        assert_eq!(f(UnaryOp::Exp2, DType::F32, below.log2()), min_normal);
        assert_eq!(
            f(UnaryOp::Exp, DType::F32, -87.0),
            round_float(DType::F32, (-87f64).exp())
        );
    }
}
