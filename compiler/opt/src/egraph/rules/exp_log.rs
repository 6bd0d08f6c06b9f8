//! exp and log through the hardware's exp2 and log2 with folded constants. The GPU lowers
//! `exp` this way anyway, but the interpreter's `exp` is one correctly rounded op, so these
//! rules change rounding: fast-math only.

use egg::rewrite as rw;
use tile_lang::ir::{Scalar, scalar};

use super::*;

fn scaled(eg: &mut EG, c: Id, s: &Subst, k: f64, inner: fn(Id) -> TileLang, outer_mul: bool) -> Option<Id> {
    let x = s[v("?x")];
    let d = dtype(eg, x)?;
    if !d.is_float() {
        return None;
    }
    let k = add_const_like(eg, c, Scalar::F(scalar::round_float(d, k)))?;
    Some(if outer_mul {
        let l = eg.add(inner(x));
        eg.add(TileLang::Mul([l, k]))
    } else {
        let m = eg.add(TileLang::Mul([x, k]));
        eg.add(inner(m))
    })
}
fn exp_via_exp2(eg: &mut EG, c: Id, s: &Subst) -> Option<Id> {
    scaled(eg, c, s, std::f64::consts::LOG2_E, TileLang::Exp2, false)
}
fn log_via_log2(eg: &mut EG, c: Id, s: &Subst) -> Option<Id> {
    scaled(eg, c, s, std::f64::consts::LN_2, TileLang::Log2, true)
}

pub fn fast_math() -> Vec<Rw> {
    vec![
        rw!("exp-to-exp2"; "(exp ?x)" => { Build(exp_via_exp2) }),
        rw!("log-to-log2"; "(log ?x)" => { Build(log_via_log2) }),
    ]
}
