//! Strength reduction on integers: multiplies, and unsigned divisions and remainders, by powers
//! of two become shifts and masks. All exact: shifts wrap like multiplies, and for unsigned
//! values `x / 2^k = x >> k`, `x % 2^k = x & (2^k - 1)`. Signed division rounds toward zero
//! where `>>` rounds down, so signed division is left alone.

use egg::rewrite as rw;
use tile_lang::ir::DType;
use tile_lang::ir::{Scalar, scalar};

use super::*;

/// `i` and `j` are the same value of dtype `d` after wrapping.
pub fn wrap_eq(d: DType, i: i128, j: i128) -> bool {
    scalar::wrap(d, i as i64) == scalar::wrap(d, j as i64)
}

/// The exponent of a positive power of two (`2^k`, `k >= 1`).
fn log2_int(d: DType, k: Scalar) -> Option<u32> {
    let i = int_value(d, k)?;
    (i > 1 && (i & (i - 1)) == 0).then(|| i.trailing_zeros())
}
fn is_pow2(d: DType, k: Scalar) -> bool {
    log2_int(d, k).is_some()
}
fn is_unsigned(d: DType) -> bool {
    d.is_unsigned()
}

/// `x op c` → `x op' f(c)` with the new constant made from `?c`.
fn with_const(eg: &mut EG, c: Id, s: &Subst, f: fn(u32) -> i128, node: fn([Id; 2]) -> TileLang) -> Option<Id> {
    let k = s[v("?c")];
    let n = log2_int(dtype(eg, k)?, konst(eg, k)?)?;
    let new = add_const_like(eg, c, Scalar::I(f(n) as i64))?;
    Some(eg.add(node([s[v("?x")], new])))
}
fn shl_by_log2(eg: &mut EG, c: Id, s: &Subst) -> Option<Id> {
    with_const(eg, c, s, |n| n as i128, TileLang::Shl)
}
fn shr_by_log2(eg: &mut EG, c: Id, s: &Subst) -> Option<Id> {
    with_const(eg, c, s, |n| n as i128, TileLang::Shr)
}
fn and_low_bits(eg: &mut EG, c: Id, s: &Subst) -> Option<Id> {
    with_const(eg, c, s, |n| (1i128 << n) - 1, TileLang::And)
}

pub fn rules() -> Vec<Rw> {
    vec![
        rw!("mul-pow2-shl"; "(mul ?x ?c)" => { Build(shl_by_log2) } if dtype_is("?x", is_int) if const_is("?c", is_pow2)),
        rw!("udiv-pow2-shr"; "(div ?x ?c)" => { Build(shr_by_log2) } if dtype_is("?x", is_unsigned) if const_is("?c", is_pow2)),
        rw!("urem-pow2-and"; "(rem ?x ?c)" => { Build(and_low_bits) } if dtype_is("?x", is_unsigned) if const_is("?c", is_pow2)),
    ]
}
