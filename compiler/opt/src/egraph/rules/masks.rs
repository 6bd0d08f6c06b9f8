//! Masks and `where`: selects with a known or repeated choice, double negation, and constant
//! operands of `and`/`or` on bools. Negated integer comparisons flip (not for floats: NaN makes
//! `!(a < b)` differ from `a >= b`). All exact.

use egg::rewrite as rw;
use tile_lang::ir::DType;
use tile_lang::ir::Scalar;

use super::*;

fn is_true(d: DType, k: Scalar) -> bool {
    d.is_bool() && k == Scalar::B(true)
}
fn is_false(d: DType, k: Scalar) -> bool {
    d.is_bool() && k == Scalar::B(false)
}
fn int_or_bool(d: DType) -> bool {
    d.is_int() || d.is_bool()
}

pub fn rules() -> Vec<Rw> {
    vec![
        rw!("select-same"; "(select ?c ?x ?x)" => "?x"),
        rw!("select-true"; "(select ?c ?a ?b)" => "?a" if const_is("?c", is_true)),
        rw!("select-false"; "(select ?c ?a ?b)" => "?b" if const_is("?c", is_false)),
        rw!("select-not"; "(select (not ?c) ?a ?b)" => "(select ?c ?b ?a)"),
        rw!("not-not"; "(not (not ?x))" => "?x"),
        rw!("and-true"; "(and ?x ?t)" => "?x" if const_is("?t", is_true)),
        rw!("and-false"; "(and ?x ?f)" => "?f" if const_is("?f", is_false)),
        rw!("or-false"; "(or ?x ?f)" => "?x" if const_is("?f", is_false)),
        rw!("or-true"; "(or ?x ?t)" => "?t" if const_is("?t", is_true)),
        rw!("and-comm"; "(and ?a ?b)" => "(and ?b ?a)"),
        rw!("or-comm"; "(or ?a ?b)" => "(or ?b ?a)"),
        rw!("not-lt-int"; "(not (lt ?a ?b))" => "(ge ?a ?b)" if dtype_is("?a", int_or_bool)),
        rw!("not-le-int"; "(not (le ?a ?b))" => "(gt ?a ?b)" if dtype_is("?a", int_or_bool)),
        rw!("not-gt-int"; "(not (gt ?a ?b))" => "(le ?a ?b)" if dtype_is("?a", int_or_bool)),
        rw!("not-ge-int"; "(not (ge ?a ?b))" => "(lt ?a ?b)" if dtype_is("?a", int_or_bool)),
        // Exact for floats too: NaN compares unequal either way round.
        rw!("not-eq"; "(not (eq ?a ?b))" => "(ne ?a ?b)"),
        rw!("not-ne"; "(not (ne ?a ?b))" => "(eq ?a ?b)"),
    ]
}
