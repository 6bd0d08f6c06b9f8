//! Cast chains. A cast to a type that holds every value of the source exactly changes no
//! value, so the chain through it collapses: `A → B → A` is the identity and `A → B → C` is
//! `A → C` — except int → float → int, where the float saturates what a direct int → int
//! cast would wrap (unless C holds A as well). All exact.

use egg::rewrite as rw;
use tile_lang::ir::DType;

use super::*;

/// Every value of `a` is a value of `b` (bool as 0 and 1).
pub fn holds(b: DType, a: DType) -> bool {
    use DType::*;
    if a == b {
        return true;
    }
    let mantissa = |d: DType| match d {
        F8E4M3 => 4,
        F8E5M2 => 3,
        F16 => 11,
        BF16 => 8,
        F32 => 24,
        F64 => 53,
        _ => 0,
    };
    match (a.is_float(), b.is_float()) {
        _ if a.is_bool() => true,
        _ if b.is_bool() => false,
        (false, false) => {
            (a.is_signed() == b.is_signed() && b.bits() >= a.bits())
                || (a.is_unsigned() && b.is_signed() && b.bits() > a.bits())
        }
        // Integers of n value bits fit a float with at least n mantissa bits.
        (false, true) => (a.bits() - a.is_signed() as u32) <= mantissa(b),
        (true, false) => false,
        (true, true) => matches!(
            (a, b),
            (F8E4M3, F16 | BF16 | F32 | F64)
                | (F8E5M2, F16 | BF16 | F32 | F64)
                | (F16, F32 | F64)
                | (BF16, F32 | F64)
                | (F32, F64)
        ),
    }
}

fn dt(eg: &EG, s: &Subst, x: &str) -> Option<DType> {
    dtype(eg, s[v(x)])
}

/// `?m` (the middle) holds `?x`, and the result has `?x`'s type.
fn round_trip(eg: &mut EG, c: Id, s: &Subst) -> bool {
    matches!((dt(eg, s, "?x"), dt(eg, s, "?m"), dtype(eg, c)), (Some(a), Some(b), Some(r)) if r == a && holds(b, a))
}

fn chain(eg: &mut EG, c: Id, s: &Subst) -> bool {
    let (Some(a), Some(b), Some(r)) = (dt(eg, s, "?x"), dt(eg, s, "?m"), dtype(eg, c)) else {
        return false;
    };
    let saturates = a.is_int() && b.is_float() && r.is_int() && !holds(r, a);
    holds(b, a) && !saturates
}

fn same_as_x(eg: &mut EG, c: Id, s: &Subst) -> bool {
    ty(eg, c).is_some() && ty(eg, c) == ty(eg, s[v("?x")])
}

pub fn rules() -> Vec<Rw> {
    vec![
        rw!("cast-same"; "(cast ?t ?x)" => "?x" if same_as_x),
        rw!("cast-round-trip"; "(cast ?t (cast ?u ?x))" => "?x" if round_trip_at_m),
        rw!("cast-chain"; "(cast ?t (cast ?u ?x))" => "(cast ?t ?x)" if chain_at_m),
    ]
}

// The inner cast's class is bound through its type leaf's parent; name it `?m` by looking it up.
fn with_m(eg: &mut EG, c: Id, s: &Subst, f: fn(&mut EG, Id, &Subst) -> bool) -> bool {
    let x = s[v("?x")];
    let u = s[v("?u")];
    let Some(m) = eg.lookup(TileLang::Cast([u, x])) else {
        return false;
    };
    let mut s2 = s.clone();
    s2.insert(v("?m"), m);
    f(eg, c, &s2)
}
fn round_trip_at_m(eg: &mut EG, c: Id, s: &Subst) -> bool {
    with_m(eg, c, s, round_trip)
}
fn chain_at_m(eg: &mut EG, c: Id, s: &Subst) -> bool {
    with_m(eg, c, s, chain)
}
