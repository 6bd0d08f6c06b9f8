//! The rewrite rules, one file per topic. Every rule is directional and its right side is
//! never costlier than its left; conditions are small named functions of the analysis (type
//! and constant of a class). Rules marked fast-math change rounding and run only under
//! `OptOptions::fast_math`; their measured errors are in docs/optimizer.md.

use egg::{Applier, Id, PatternAst, Rewrite, Subst, Symbol, Var};
use tile_lang::ir::Scalar;
use tile_lang::ir::{DType, Type};

use super::OptOptions;
use super::analysis::{EG, TileAnalysis};
use super::lang::TileLang;

pub mod algebra;
pub mod broadcast;
pub mod casts;
pub mod division;
pub mod exp_log;
pub mod masks;
pub mod reductions;
pub mod strength;

pub type Rw = Rewrite<TileLang, TileAnalysis>;

/// Every rule the options allow.
pub fn all(opts: &OptOptions) -> Vec<Rw> {
    let mut r = Vec::new();
    r.extend(algebra::rules());
    r.extend(strength::rules());
    r.extend(division::rules());
    r.extend(casts::rules());
    r.extend(masks::rules());
    r.extend(broadcast::rules());
    r.extend(reductions::rules());
    if opts.fast_math {
        r.extend(algebra::fast_math());
        r.extend(division::fast_math());
        r.extend(exp_log::fast_math());
        r.extend(reductions::fast_math());
    }
    if let Some(only) = &opts.only_rules {
        r.retain(|rw| only.iter().any(|n| n.as_str() == rw.name.as_str()));
    }
    r
}

pub fn v(s: &str) -> Var {
    s.parse().expect("a pattern variable")
}

pub fn konst(eg: &EG, id: Id) -> Option<Scalar> {
    eg[id].data.konst
}

pub fn dtype(eg: &EG, id: Id) -> Option<DType> {
    super::analysis::dtype(eg, id)
}

pub fn ty(eg: &EG, id: Id) -> Option<Type> {
    super::analysis::ty(eg, id)
}

/// A condition on the dtype of `?x`.
pub fn dtype_is(x: &'static str, f: fn(DType) -> bool) -> impl Fn(&mut EG, Id, &Subst) -> bool {
    move |eg, _, s| dtype(eg, s[v(x)]).is_some_and(f)
}

/// A condition on the constant value (and dtype) of `?c`.
pub fn const_is(c: &'static str, f: fn(DType, Scalar) -> bool) -> impl Fn(&mut EG, Id, &Subst) -> bool {
    move |eg, _, s| {
        let id = s[v(c)];
        matches!((dtype(eg, id), konst(eg, id)), (Some(d), Some(k)) if f(d, k))
    }
}

/// `?a` and `?b` have one type.
pub fn same_type(a: &'static str, b: &'static str) -> impl Fn(&mut EG, Id, &Subst) -> bool {
    move |eg, _, s| ty(eg, s[v(a)]).is_some() && ty(eg, s[v(a)]) == ty(eg, s[v(b)])
}

pub fn is_int(d: DType) -> bool {
    d.is_int()
}
pub fn is_float(d: DType) -> bool {
    d.is_float()
}

/// The integer value of a constant (u64 by its bit pattern).
pub fn int_value(d: DType, k: Scalar) -> Option<i128> {
    match k {
        Scalar::I(i) if d == DType::U64 => Some(i as u64 as i128),
        Scalar::I(i) if d.is_int() => Some(i as i128),
        _ => None,
    }
}

/// An applier written in Rust: builds the right side from the match and unions it with the
/// matched class (used where the right side needs a new constant or type).
pub struct Build(pub fn(&mut EG, Id, &Subst) -> Option<Id>);

impl Applier<TileLang, TileAnalysis> for Build {
    fn apply_one(&self, eg: &mut EG, eclass: Id, s: &Subst, _: Option<&PatternAst<TileLang>>, _: Symbol) -> Vec<Id> {
        match (self.0)(eg, eclass, s) {
            Some(id) if eg.union(eclass, id) => vec![id],
            _ => vec![],
        }
    }
}

/// A constant of the matched class's type (or of `?x`'s type).
pub fn add_const_like(eg: &mut EG, like: Id, val: Scalar) -> Option<Id> {
    let t = ty(eg, like)?;
    super::analysis::add_const(eg, &t, val)
}
