//! Algebra: identities that remove an op, and commutativity so the other rules see both
//! operand orders. Constant folding itself is the analysis (`analysis.rs`), with the
//! interpreter's element semantics. All exact except `fma-contract` (fast-math).

use egg::rewrite as rw;
use tile_lang::ir::DType;
use tile_lang::ir::Scalar;

use super::*;

/// `x + (-0.0) = x` for every float x, but `-0.0 + 0.0 = +0.0`: only the negative zero is the
/// additive identity of floats.
fn is_add_identity(d: DType, k: Scalar) -> bool {
    match k {
        Scalar::F(f) => d.is_float() && f == 0.0 && f.is_sign_negative(),
        Scalar::I(0) => d.is_int(),
        _ => false,
    }
}
/// `x - (+0.0) = x` for every float x (including `-0.0 - 0.0 = -0.0`).
fn is_sub_identity(d: DType, k: Scalar) -> bool {
    match k {
        Scalar::F(f) => d.is_float() && f.to_bits() == 0,
        Scalar::I(0) => d.is_int(),
        _ => false,
    }
}
fn is_one(d: DType, k: Scalar) -> bool {
    match k {
        Scalar::F(f) => d.is_float() && f == 1.0,
        Scalar::I(1) => d.is_int(),
        _ => false,
    }
}
/// `x * -1` wraps like `-x` for every integer type (unsigned: the all-ones value).
fn is_minus_one(d: DType, k: Scalar) -> bool {
    match k {
        Scalar::F(f) => d.is_float() && f == -1.0,
        _ => int_value(d, k).is_some_and(|i| crate::egraph::rules::strength::wrap_eq(d, i, -1)),
    }
}
fn is_int_zero(d: DType, k: Scalar) -> bool {
    d.is_int() && k == Scalar::I(0)
}
fn int_or_bool(d: DType) -> bool {
    d.is_int() || d.is_bool()
}

fn zero_like(eg: &mut EG, c: Id, _: &Subst) -> Option<Id> {
    add_const_like(eg, c, Scalar::I(0))
}

pub fn rules() -> Vec<Rw> {
    vec![
        rw!("add-comm"; "(add ?a ?b)" => "(add ?b ?a)"),
        rw!("mul-comm"; "(mul ?a ?b)" => "(mul ?b ?a)"),
        rw!("max-comm"; "(max ?a ?b)" => "(max ?b ?a)"),
        rw!("min-comm"; "(min ?a ?b)" => "(min ?b ?a)"),
        rw!("add-zero"; "(add ?x ?z)" => "?x" if const_is("?z", is_add_identity)),
        rw!("sub-zero"; "(sub ?x ?z)" => "?x" if const_is("?z", is_sub_identity)),
        rw!("mul-one"; "(mul ?x ?o)" => "?x" if const_is("?o", is_one)),
        rw!("div-one"; "(div ?x ?o)" => "?x" if const_is("?o", is_one)),
        rw!("mul-zero-int"; "(mul ?x ?z)" => "?z" if const_is("?z", is_int_zero)),
        rw!("mul-minus-one"; "(mul ?x ?m)" => "(neg ?x)" if const_is("?m", is_minus_one)),
        rw!("neg-neg"; "(neg (neg ?x))" => "?x"),
        rw!("sub-neg"; "(sub ?a (neg ?b))" => "(add ?a ?b)"),
        rw!("add-neg"; "(add ?a (neg ?b))" => "(sub ?a ?b)"),
        rw!("sub-self-int"; "(sub ?x ?x)" => { Build(zero_like) } if dtype_is("?x", is_int)),
        rw!("xor-self-int"; "(xor ?x ?x)" => { Build(zero_like) } if dtype_is("?x", is_int)),
        rw!("max-self"; "(max ?x ?x)" => "?x"),
        rw!("min-self"; "(min ?x ?x)" => "?x"),
        rw!("and-self"; "(and ?x ?x)" => "?x" if dtype_is("?x", int_or_bool)),
        rw!("or-self"; "(or ?x ?x)" => "?x" if dtype_is("?x", int_or_bool)),
    ]
}

/// Rules that change rounding.
pub fn fast_math() -> Vec<Rw> {
    vec![
        // One rounding instead of two.
        rw!("fma-contract"; "(add (mul ?a ?b) ?c)" => "(fma ?a ?b ?c)" if dtype_is("?c", is_float)),
    ]
}
