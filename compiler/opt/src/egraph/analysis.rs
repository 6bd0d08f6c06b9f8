//! The analysis: every e-class knows its type (element type and shape) and, when all its
//! elements are one known value, that constant. Constants fold with the interpreter's own
//! element semantics (`ir::scalar`), so a folded value is bit for bit what the op computes.

use egg::{Analysis, DidMerge, EGraph, Id};
use tile_lang::ir::{DType, OpKind, Type};
use tile_lang::ir::{Scalar, scalar};

use super::lang::{Konst, NodeClass, TileLang};

pub type EG = EGraph<TileLang, TileAnalysis>;

/// The side tables that `Pure` and `Opaque` keys index.
#[derive(Default)]
pub struct TileAnalysis {
    pub pure: Vec<(OpKind, Type)>,
    /// The result type of each opaque node (`None`: an op with no results).
    pub opaque: Vec<Option<Type>>,
}

#[derive(Clone, Debug)]
pub struct Data {
    pub ty: Option<Type>,
    /// The value of every element, when known.
    pub konst: Option<Scalar>,
}

fn same(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F(x), Scalar::F(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

impl Analysis<TileLang> for TileAnalysis {
    type Data = Data;

    fn make(eg: &mut EG, n: &TileLang) -> Data {
        let ty = node_type(eg, n);
        let konst = ty.as_ref().and_then(|t| fold(eg, n, t));
        Data { ty, konst }
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        if a.ty.is_none() && b.ty.is_some() {
            a.ty = b.ty.clone();
        }
        match (a.konst, b.konst) {
            (None, Some(k)) => {
                a.konst = Some(k);
                DidMerge(true, false)
            }
            (Some(x), Some(y)) => {
                debug_assert!(same(x, y), "a rule merged the constants {x:?} and {y:?}");
                DidMerge(false, false)
            }
            (Some(_), None) => DidMerge(false, true),
            (None, None) => DidMerge(false, false),
        }
    }

    // A class with a known value also holds the constant node, so extraction can pick it.
    fn modify(eg: &mut EG, id: Id) {
        let d = &eg[id].data;
        if let (Some(k), Some(ty)) = (d.konst, d.ty.clone())
            && let Some(dt) = ty.dtype()
        {
            let c = eg.add(TileLang::Const(Konst::new(dt, ty.shape.clone(), k)));
            eg.union(id, c);
        }
    }
}

/// The result type of a node, from its children's types or its own data.
pub fn node_type(eg: &EG, n: &TileLang) -> Option<Type> {
    let t = |id: Id| eg[id].data.ty.clone();
    match n.class() {
        NodeClass::Binary(_, [a, _]) | NodeClass::Unary(_, a) | NodeClass::Fma([a, _, _]) => t(a),
        NodeClass::Cmp(_, [a, _]) => t(a).map(|t| t.with_dtype(DType::Bool)),
        NodeClass::Select([_, a, _]) => t(a),
        NodeClass::Cast(_, ty, _) | NodeClass::Broadcast(ty, _) => t(ty),
        NodeClass::Const => match n {
            TileLang::Const(k) => Some(k.ty()),
            _ => None,
        },
        NodeClass::Ty => match n {
            TileLang::Ty(l) => Some(l.0.clone()),
            _ => None,
        },
        NodeClass::Pure(k) => Some(eg.analysis.pure[k.0 as usize].1.clone()),
        NodeClass::Opaque(k) => eg.analysis.opaque[k.0 as usize].clone(),
    }
}

/// The constant value of a node whose operands are constants (`None`: not folded — an
/// integer division by zero, for instance, stays an op so the interpreter reports it).
fn fold(eg: &EG, n: &TileLang, ty: &Type) -> Option<Scalar> {
    let k = |id: Id| eg[id].data.konst;
    let d = |id: Id| eg[id].data.ty.as_ref().and_then(|t| t.dtype());
    match n.class() {
        NodeClass::Const => match n {
            TileLang::Const(c) => Some(c.value()),
            _ => None,
        },
        NodeClass::Binary(op, [a, b]) => scalar::binary(op, d(a)?, k(a)?, k(b)?).ok(),
        NodeClass::Cmp(op, [a, b]) => Some(Scalar::B(scalar::compare(op, d(a)?, k(a)?, k(b)?))),
        NodeClass::Unary(op, a) => Some(scalar::unary(op, d(a)?, k(a)?)),
        NodeClass::Select([c, a, b]) => match k(c)? {
            Scalar::B(true) => k(a),
            Scalar::B(false) => k(b),
            _ => None,
        },
        NodeClass::Cast(rtz, _, x) => Some(scalar::cast(d(x)?, ty.dtype()?, k(x)?, rtz)),
        NodeClass::Broadcast(_, x) => k(x),
        _ => None,
    }
}

/// The dtype of a value class.
pub fn dtype(eg: &EG, id: Id) -> Option<DType> {
    eg[id].data.ty.as_ref().and_then(|t| t.dtype())
}

/// The type of a value class.
pub fn ty(eg: &EG, id: Id) -> Option<Type> {
    eg[id].data.ty.clone()
}

/// Adds a constant of `ty` (uniform tile) to the graph.
pub fn add_const(eg: &mut EG, ty: &Type, v: Scalar) -> Option<Id> {
    let d = ty.dtype()?;
    Some(eg.add(TileLang::Const(Konst::new(d, ty.shape.clone(), v))))
}
