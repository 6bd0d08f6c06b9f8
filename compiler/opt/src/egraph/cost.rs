//! The cost model: estimated instructions per element times the number of elements, so a
//! scalar op before a broadcast is much cheaper than the same op on the whole tile.

use egg::{CostFunction, Id, Language};
use tile_lang::ir::{OpKind, UnaryOp};

use super::analysis::{EG, node_type};
use super::lang::{NodeClass, TileLang};

pub struct TileCost<'a> {
    pub egraph: &'a EG,
}

/// Per-element cost of one node (rough SASS instruction counts).
fn per_element(eg: &EG, n: &TileLang) -> f64 {
    use tile_lang::ir::BinaryOp::*;
    let float = |id: Id| super::analysis::dtype(eg, id).is_some_and(|d| d.is_float());
    match n.class() {
        NodeClass::Binary(Div | Rem, [a, _]) => {
            if float(a) {
                8.0
            } else {
                20.0
            }
        }
        // An integer multiply is an IMAD; a shift or an add is cheaper.
        NodeClass::Binary(Mul, [a, _]) if !float(a) => 2.0,
        NodeClass::Binary(..) | NodeClass::Cmp(..) | NodeClass::Select(_) => 1.0,
        NodeClass::Fma(_) => 1.0,
        NodeClass::Unary(op, _) => match op {
            UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil => 1.0,
            UnaryOp::Exp2 | UnaryOp::Log2 | UnaryOp::Rsqrt => 2.0,
            UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Sin | UnaryOp::Cos => 4.0,
            UnaryOp::Tanh | UnaryOp::Erf | UnaryOp::Sigmoid => 8.0,
        },
        NodeClass::Cast(..) => 1.0,
        // Broadcasting a scalar is a register copy; broadcasting a tile moves data through
        // shared memory.
        NodeClass::Broadcast(_, x) => match super::analysis::ty(eg, x) {
            Some(t) if t.is_scalar() => 0.05,
            _ => 4.0,
        },
        NodeClass::Const | NodeClass::Ty => 0.0,
        NodeClass::Pure(_) => 1.0,
        NodeClass::Opaque(_) => 1.0,
    }
}

impl CostFunction<TileLang> for TileCost<'_> {
    type Cost = f64;

    fn cost<C>(&mut self, n: &TileLang, mut costs: C) -> f64
    where
        C: FnMut(Id) -> f64,
    {
        let mut numel = node_type(self.egraph, n).map_or(1, |t| t.numel()) as f64;
        // A reduction, scan or dot does work for every element of its (first) operand.
        if let TileLang::Pure(k, kids) = n
            && !kids.is_empty()
            && matches!(
                self.egraph.analysis.pure[k.0 as usize].0,
                OpKind::Reduce { .. } | OpKind::ArgReduce { .. } | OpKind::Scan { .. } | OpKind::Dot(_)
            )
        {
            numel = numel.max(super::analysis::ty(self.egraph, kids[0]).map_or(1, |t| t.numel()) as f64);
        }
        // A tile constant is materialised as a scalar constant and a broadcast.
        let own = match n {
            TileLang::Const(k) if !k.shape.is_empty() => 0.05 * numel,
            _ => per_element(self.egraph, n) * numel,
        };
        n.fold(own, |sum, id| sum + costs(id))
    }
}
