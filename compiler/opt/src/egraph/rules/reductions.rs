//! Reduction identities. Reductions are `Pure` nodes of the e-graph (their op and axis live in
//! the analysis's side table), so these rules match with [`ReduceSearcher`] instead of a
//! pattern and build their right side in Rust.
//!
//! Exact: a max, min, and or or of a broadcast scalar is that scalar (every element is the
//! same; NaN included); an integer sum of a broadcast scalar is the scalar times the count
//! (wrapping both ways); integer sums of `x * c` and of `-x` take the factor or the negation
//! out (wrapping arithmetic is a ring). Fast-math: the float sum of `x * c` or `x / c` with a
//! broadcast `c` becomes `sum(x) * c` or `sum(x) / c` (one rounding moves; error measured in
//! docs/optimizer.md). Float `sum(-x)` is left alone: `-0.0 + 0.0` sums to `+0.0` either way,
//! so the negated sum differs in the sign of zero.

use egg::{Id, Rewrite, SearchMatches, Searcher, Subst, Var};
use tile_lang::ir::Scalar;
use tile_lang::ir::{DType, OpKind, ReduceOp, Type};

use super::*;

/// Matches `reduce<op, axis> ?x` for one `op`; binds `?x`.
pub struct ReduceSearcher(pub ReduceOp);

impl Searcher<TileLang, TileAnalysis> for ReduceSearcher {
    fn search_eclass_with_limit(&self, eg: &EG, eclass: Id, limit: usize) -> Option<SearchMatches<'_, TileLang>> {
        let mut substs = Vec::new();
        for n in &eg[eclass].nodes {
            if substs.len() >= limit {
                break;
            }
            if let TileLang::Pure(k, kids) = n
                && let (OpKind::Reduce { op, .. }, _) = &eg.analysis.pure[k.0 as usize]
                && *op == self.0
            {
                let mut s = Subst::with_capacity(1);
                s.insert(v("?x"), kids[0]);
                substs.push(s);
            }
        }
        (!substs.is_empty()).then_some(SearchMatches {
            eclass,
            substs,
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        vec![v("?x")]
    }
}

/// The reduction in `eclass` over `x`: its op, axis, result type and the size of the axis.
fn reduction(eg: &EG, eclass: Id, x: Id) -> Option<(ReduceOp, usize, Type, usize)> {
    eg[eclass].nodes.iter().find_map(|n| match n {
        TileLang::Pure(k, kids) if eg.find(kids[0]) == eg.find(x) => match &eg.analysis.pure[k.0 as usize] {
            (OpKind::Reduce { op, axis }, t) => {
                let len = *ty(eg, x)?.shape.get(*axis)?;
                Some((*op, *axis, t.clone(), len))
            }
            _ => None,
        },
        _ => None,
    })
}

/// A scalar class `s` that `x` broadcasts (or the constant every element of `x` holds).
fn splat_of(eg: &mut EG, x: Id) -> Option<Id> {
    let scalar = eg[x].nodes.iter().find_map(|n| match n {
        TileLang::Broadcast([_, s]) if ty(eg, *s).is_some_and(|t| t.is_scalar()) => Some(*s),
        _ => None,
    });
    if scalar.is_some() {
        return scalar;
    }
    let (k, d) = (konst(eg, x)?, dtype(eg, x)?);
    super::super::analysis::add_const(eg, &Type::scalar(d), k)
}

/// `?x` is `lhs ∘ broadcast(c)` for a binary node picked by `pick`: returns `(lhs, c)`.
fn op_with_splat(eg: &mut EG, x: Id, pick: fn(&TileLang) -> Option<[Id; 2]>) -> Option<(Id, Id)> {
    let pairs: Vec<[Id; 2]> = eg[x].nodes.iter().filter_map(pick).collect();
    for [a, b] in pairs {
        if let Some(c) = splat_of(eg, b) {
            return Some((a, c));
        }
    }
    None
}

/// A `Pure` reduce node of `op` over `axis` on `x`, typed `t`.
fn add_reduce(eg: &mut EG, op: ReduceOp, axis: usize, t: Type, x: Id) -> Id {
    let kind = OpKind::Reduce { op, axis };
    let table = &mut eg.analysis.pure;
    let i = table
        .iter()
        .position(|(k, ty)| *k == kind && *ty == t)
        .unwrap_or_else(|| {
            table.push((kind, t));
            table.len() - 1
        });
    eg.add(TileLang::Pure(super::super::lang::PureKey(i as u32), vec![x]))
}

/// `ty` as a leaf, for casts and broadcasts.
fn ty_leaf(eg: &mut EG, t: Type) -> Id {
    eg.add(TileLang::Ty(super::super::lang::TyLit(t)))
}

/// The scalar `s` as a value of type `t` (a broadcast when `t` is a tile).
fn as_type(eg: &mut EG, s: Id, t: Type) -> Id {
    if t.is_scalar() {
        s
    } else {
        let leaf = ty_leaf(eg, t);
        eg.add(TileLang::Broadcast([leaf, s]))
    }
}

/// The reduction keeps the operand's dtype (no widening accumulator in between).
fn keeps_dtype(eg: &EG, x: Id, t: &Type) -> bool {
    dtype(eg, x).is_some() && dtype(eg, x) == t.dtype()
}

fn idempotent_of_splat(eg: &mut EG, eclass: Id, s: &Subst) -> Option<Id> {
    let x = s[v("?x")];
    let (_, _, t, _) = reduction(eg, eclass, x)?;
    if !keeps_dtype(eg, x, &t) {
        return None;
    }
    let c = splat_of(eg, x)?;
    Some(as_type(eg, c, t))
}

fn int_sum_of_splat(eg: &mut EG, eclass: Id, s: &Subst) -> Option<Id> {
    let x = s[v("?x")];
    let (_, _, t, len) = reduction(eg, eclass, x)?;
    let d = t.dtype().filter(|d| d.is_int())?;
    if !keeps_dtype(eg, x, &t) {
        return None;
    }
    let c = splat_of(eg, x)?;
    let n = super::super::analysis::add_const(eg, &Type::scalar(d), Scalar::I(len as i64))?;
    let prod = eg.add(TileLang::Mul([c, n]));
    Some(as_type(eg, prod, t))
}

/// `sum(a ∘ broadcast(c))` → `sum(a) ∘ c` for `∘` picked by `pick`, when `dtype_ok`.
fn factor_out(
    eg: &mut EG,
    eclass: Id,
    s: &Subst,
    pick: fn(&TileLang) -> Option<[Id; 2]>,
    dtype_ok: fn(DType) -> bool,
    rebuild: fn([Id; 2]) -> TileLang,
) -> Option<Id> {
    let x = s[v("?x")];
    let (op, axis, t, _) = reduction(eg, eclass, x)?;
    t.dtype().filter(|d| dtype_ok(*d))?;
    if !keeps_dtype(eg, x, &t) {
        return None;
    }
    let (a, c) = op_with_splat(eg, x, pick)?;
    let r = add_reduce(eg, op, axis, t.clone(), a);
    let c = as_type(eg, c, t);
    Some(eg.add(rebuild([r, c])))
}

fn mul_pair(n: &TileLang) -> Option<[Id; 2]> {
    match n {
        TileLang::Mul(c) => Some(*c),
        _ => None,
    }
}
fn div_pair(n: &TileLang) -> Option<[Id; 2]> {
    match n {
        TileLang::Div(c) => Some(*c),
        _ => None,
    }
}

fn int_sum_neg(eg: &mut EG, eclass: Id, s: &Subst) -> Option<Id> {
    let x = s[v("?x")];
    let (op, axis, t, _) = reduction(eg, eclass, x)?;
    t.dtype().filter(|d| d.is_int())?;
    if !keeps_dtype(eg, x, &t) {
        return None;
    }
    let a = eg[x].nodes.iter().find_map(|n| match n {
        TileLang::Neg(a) => Some(*a),
        _ => None,
    })?;
    let r = add_reduce(eg, op, axis, t, a);
    Some(eg.add(TileLang::Neg(r)))
}

fn rule(name: &str, op: ReduceOp, f: fn(&mut EG, Id, &Subst) -> Option<Id>) -> Rw {
    Rewrite::new(name, ReduceSearcher(op), Build(f)).expect("a well-formed rule")
}

pub fn rules() -> Vec<Rw> {
    vec![
        rule("max-of-splat", ReduceOp::Max, idempotent_of_splat),
        rule("min-of-splat", ReduceOp::Min, idempotent_of_splat),
        rule("and-of-splat", ReduceOp::And, idempotent_of_splat),
        rule("or-of-splat", ReduceOp::Or, idempotent_of_splat),
        rule("sum-of-splat-int", ReduceOp::Sum, int_sum_of_splat),
        rule("sum-mul-splat-int", ReduceOp::Sum, |eg, c, s| {
            factor_out(eg, c, s, mul_pair, DType::is_int, TileLang::Mul)
        }),
        rule("sum-neg-int", ReduceOp::Sum, int_sum_neg),
    ]
}

pub fn fast_math() -> Vec<Rw> {
    vec![
        rule("sum-mul-splat", ReduceOp::Sum, |eg, c, s| {
            factor_out(eg, c, s, mul_pair, DType::is_float, TileLang::Mul)
        }),
        rule("sum-div-splat", ReduceOp::Sum, |eg, c, s| {
            factor_out(eg, c, s, div_pair, DType::is_float, TileLang::Div)
        }),
    ]
}
