//! Division by constants. `x / c → x * (1/c)` is exact when `1/c` is exactly representable in
//! the dtype and `c` is a power of two: both sides are then one rounding of the same real
//! number. For any other `c`, and for hoisting the reciprocal of a broadcast scalar (one
//! division per row instead of one per element), the rule is fast-math.

use egg::rewrite as rw;
use tile_lang::ir::DType;
use tile_lang::ir::{Scalar, scalar};

use super::*;

/// The reciprocal of `c` in dtype `d`, when it is exact and `c` is a power of two.
fn exact_recip(d: DType, k: Scalar) -> Option<f64> {
    let Scalar::F(c) = k else { return None };
    let r = 1.0 / c;
    let pow2 = c != 0.0 && c.is_finite() && c.abs().to_bits() & ((1u64 << 52) - 1) == 0;
    (d.is_float() && pow2 && r.is_finite() && scalar::round_float(d, r) == r).then_some(r)
}
fn has_exact_recip(d: DType, k: Scalar) -> bool {
    exact_recip(d, k).is_some()
}
/// Any finite non-zero constant whose rounded reciprocal is finite and non-zero.
fn has_recip(d: DType, k: Scalar) -> bool {
    matches!(k, Scalar::F(c) if d.is_float() && c != 0.0 && c.is_finite()
        && { let r = scalar::round_float(d, 1.0 / c); r.is_finite() && r != 0.0 })
}

fn mul_by_recip(eg: &mut EG, c: Id, s: &Subst) -> Option<Id> {
    let k = s[v("?c")];
    let d = dtype(eg, k)?;
    let Scalar::F(x) = konst(eg, k)? else { return None };
    let r = add_const_like(eg, c, Scalar::F(scalar::round_float(d, 1.0 / x)))?;
    Some(eg.add(TileLang::Mul([s[v("?x")], r])))
}

/// `x / broadcast(s)` → `x * broadcast(1 / s)`.
fn mul_by_broadcast_recip(eg: &mut EG, _: Id, s: &Subst) -> Option<Id> {
    let sc = s[v("?s")];
    if !dtype(eg, sc)?.is_float() {
        return None;
    }
    let one = add_const_like(eg, sc, Scalar::F(1.0))?;
    let r = eg.add(TileLang::Div([one, sc]));
    let b = eg.add(TileLang::Broadcast([s[v("?t")], r]));
    Some(eg.add(TileLang::Mul([s[v("?x")], b])))
}

pub fn rules() -> Vec<Rw> {
    vec![rw!("fdiv-pow2-mul"; "(div ?x ?c)" => { Build(mul_by_recip) } if const_is("?c", has_exact_recip))]
}

pub fn fast_math() -> Vec<Rw> {
    vec![
        rw!("fdiv-const-mul"; "(div ?x ?c)" => { Build(mul_by_recip) } if const_is("?c", has_recip)),
        rw!("fdiv-broadcast-recip"; "(div ?x (broadcast ?t ?s))" => { Build(mul_by_broadcast_recip) }),
    ]
}
