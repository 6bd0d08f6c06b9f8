//! IR region ⇄ e-graph. Each region becomes one e-graph: pure ops become nodes, constants
//! become typed constant leaves (wherever in the kernel they were defined), and everything
//! with an effect or a region — loads, stores, atomics, print, assert, `for`, `if`,
//! `reduce_with`, `scan_with`, `split`, `yield` — stays an op in program order whose operands
//! are e-classes and whose results are opaque leaves. Values from enclosing regions (and the
//! region's own arguments) are opaque leaves too. Back from the e-graph, the ops with effects
//! are emitted in their original order, each preceded by the cheapest form of the pure values
//! it needs; pure values nothing needs disappear.

use std::collections::{HashMap, HashSet};

use egg::{Extractor, Id, Language};
use tile_lang::ir::Scalar;
use tile_lang::ir::{ConstValue, Kernel, Loc, Op, OpKind, Region, Type, ValueId};

use super::OptError;
use super::analysis::{EG, TileAnalysis};
use super::cost::TileCost;
use super::lang::{Konst, NodeClass, OpaqueKey, PureKey, TileLang, TyLit};

/// An op kept in program order.
pub struct Effect {
    pub index: usize,
    pub operands: Vec<Id>,
    /// Values from outside the op that its regions use, and their classes.
    pub captured: Vec<(ValueId, Id)>,
    pub results: Vec<Id>,
}

/// A region as an e-graph.
pub struct RegionGraph {
    pub egraph: EG,
    /// Leaves for values defined outside the region (and its arguments).
    pub outer: Vec<(ValueId, Id)>,
    pub effects: Vec<Effect>,
    pub locs: Vec<(Id, Loc)>,
}

fn is_pure(kind: &OpKind) -> bool {
    use OpKind::*;
    matches!(
        kind,
        ProgramId(_)
            | NumPrograms(_)
            | Arange { .. }
            | ExpandDims(_)
            | Reshape
            | Permute(_)
            | Join
            | PtrAdd
            | Dot(_)
            | Reduce { .. }
            | ArgReduce { .. }
            | Scan { .. }
            | Bitcast
            | MultipleOf(_)
            | MaxContiguous(_)
    )
}

/// The kernel's constants, wherever they are defined.
pub fn constants(k: &Kernel) -> HashMap<ValueId, ConstValue> {
    let mut m = HashMap::new();
    k.walk(&mut |op| {
        if let OpKind::Const(c) = &op.kind {
            m.insert(op.results[0], *c);
        }
    });
    m
}

/// Values a region uses but does not define, in order of first use (constants left out:
/// they are rebuilt where they are used).
pub fn free_vars(regions: &[Region], consts: &HashMap<ValueId, ConstValue>) -> Vec<ValueId> {
    fn defs(r: &Region, d: &mut HashSet<ValueId>) {
        d.extend(&r.args);
        for op in &r.ops {
            d.extend(&op.results);
            op.regions.iter().for_each(|s| defs(s, d));
        }
    }
    fn uses(r: &Region, d: &HashSet<ValueId>, seen: &mut HashSet<ValueId>, out: &mut Vec<ValueId>) {
        for op in &r.ops {
            for v in &op.operands {
                if !d.contains(v) && seen.insert(*v) {
                    out.push(*v);
                }
            }
            op.regions.iter().for_each(|s| uses(s, d, seen, out));
        }
    }
    let mut d = HashSet::new();
    regions.iter().for_each(|r| defs(r, &mut d));
    let (mut seen, mut out) = (HashSet::new(), Vec::new());
    regions.iter().for_each(|r| uses(r, &d, &mut seen, &mut out));
    out.retain(|v| !consts.contains_key(v));
    out
}

impl RegionGraph {
    pub fn build(k: &Kernel, r: &Region, consts: &HashMap<ValueId, ConstValue>) -> RegionGraph {
        let mut g = RegionGraph {
            egraph: EG::new(TileAnalysis::default()),
            outer: Vec::new(),
            effects: Vec::new(),
            locs: Vec::new(),
        };
        let mut map: HashMap<ValueId, Id> = HashMap::new();
        for a in &r.args {
            g.value(k, *a, consts, &mut map);
        }
        for (index, op) in r.ops.iter().enumerate() {
            let ids: Vec<Id> = op.operands.iter().map(|v| g.value(k, *v, consts, &mut map)).collect();
            let ty = |i: usize| k.ty(op.results[i]).clone();
            let tyleaf = |g: &mut RegionGraph| g.egraph.add(TileLang::Ty(TyLit(ty(0))));
            let node = match &op.kind {
                OpKind::Const(_) => continue, // rebuilt at each use
                OpKind::Unary(u) => Some(TileLang::unary(*u, ids[0])),
                OpKind::Binary(b) => Some(TileLang::binary(*b, [ids[0], ids[1]])),
                OpKind::Cmp(c) => Some(TileLang::cmp(*c, [ids[0], ids[1]])),
                OpKind::Fma => Some(TileLang::Fma([ids[0], ids[1], ids[2]])),
                OpKind::Select => Some(TileLang::Select([ids[0], ids[1], ids[2]])),
                OpKind::Cast(rm) => {
                    let t = tyleaf(&mut g);
                    Some(match rm {
                        tile_lang::ir::Rounding::Rne => TileLang::Cast([t, ids[0]]),
                        tile_lang::ir::Rounding::Rtz => TileLang::CastRtz([t, ids[0]]),
                    })
                }
                OpKind::Broadcast => Some(TileLang::Broadcast([tyleaf(&mut g), ids[0]])),
                kind if is_pure(kind) && op.results.len() == 1 && op.regions.is_empty() => {
                    let key = g.pure_key(kind, ty(0));
                    Some(TileLang::Pure(key, ids.clone()))
                }
                _ => None,
            };
            match node {
                Some(n) => {
                    let id = g.egraph.add(n);
                    g.locs.push((id, op.loc));
                    map.insert(op.results[0], id);
                }
                None => {
                    let captured = free_vars(&op.regions, consts)
                        .into_iter()
                        .map(|v| (v, g.value(k, v, consts, &mut map)))
                        .collect();
                    let results = (0..op.results.len())
                        .map(|i| {
                            let id = g.opaque(ty(i));
                            map.insert(op.results[i], id);
                            id
                        })
                        .collect();
                    g.effects.push(Effect {
                        index,
                        operands: ids,
                        captured,
                        results,
                    });
                }
            }
        }
        g
    }

    fn pure_key(&mut self, kind: &OpKind, ty: Type) -> PureKey {
        let table = &mut self.egraph.analysis.pure;
        let i = table
            .iter()
            .position(|(k, t)| k == kind && *t == ty)
            .unwrap_or_else(|| {
                table.push((kind.clone(), ty));
                table.len() - 1
            });
        PureKey(i as u32)
    }

    fn opaque(&mut self, ty: Type) -> Id {
        let table = &mut self.egraph.analysis.opaque;
        table.push(Some(ty));
        let key = OpaqueKey(table.len() as u32 - 1);
        self.egraph.add(TileLang::Opaque(key, vec![]))
    }

    /// The class of an operand: its node if defined here, a constant, or an outer leaf.
    fn value(
        &mut self,
        k: &Kernel,
        v: ValueId,
        consts: &HashMap<ValueId, ConstValue>,
        map: &mut HashMap<ValueId, Id>,
    ) -> Id {
        if let Some(id) = map.get(&v) {
            return *id;
        }
        let ty = k.ty(v).clone();
        let id = match (consts.get(&v), ty.dtype()) {
            (Some(c), Some(d)) => {
                self.egraph
                    .add(TileLang::Const(Konst::new(d, ty.shape.clone(), Scalar::from_const(*c))))
            }
            _ => {
                let id = self.opaque(ty);
                self.outer.push((v, id));
                id
            }
        };
        map.insert(v, id);
        id
    }
}

/// Emits the ops of one region from its e-graph after the rewrites.
pub struct Emitter<'a> {
    pub egraph: &'a EG,
    pub extractor: Extractor<'a, TileCost<'a>, TileLang, TileAnalysis>,
    pub memo: HashMap<Id, ValueId>,
    pub locs: HashMap<Id, Loc>,
}

impl<'a> Emitter<'a> {
    pub fn new(egraph: &'a EG, locs: &[(Id, Loc)]) -> Self {
        let extractor = Extractor::new(egraph, TileCost { egraph });
        let mut l = HashMap::new();
        for (id, loc) in locs {
            l.entry(egraph.find(*id)).or_insert(*loc);
        }
        Emitter {
            egraph,
            extractor,
            memo: HashMap::new(),
            locs: l,
        }
    }

    pub fn bind(&mut self, id: Id, v: ValueId) {
        self.memo.insert(self.egraph.find(id), v);
    }

    /// The value of class `id`, emitting the ops of its cheapest form not emitted yet.
    pub fn value(&mut self, id: Id, values: &mut Vec<Type>, ops: &mut Vec<Op>) -> Result<ValueId, OptError> {
        let root = self.egraph.find(id);
        // Post-order without recursion: tile expressions can be long chains.
        let mut stack = vec![(root, false)];
        while let Some((c, expanded)) = stack.pop() {
            if self.memo.contains_key(&c) {
                continue;
            }
            let node = self.extractor.find_best_node(c).clone();
            let kids: Vec<Id> = node
                .children()
                .iter()
                .map(|k| self.egraph.find(*k))
                .filter(|k| !matches!(self.egraph[*k].nodes[0], TileLang::Ty(_)))
                .collect();
            if !expanded {
                stack.push((c, true));
                for k in kids.iter().rev() {
                    if !self.memo.contains_key(k) {
                        stack.push((*k, false));
                    }
                }
                continue;
            }
            let ty = self.egraph[c]
                .data
                .ty
                .clone()
                .ok_or_else(|| OptError::Internal(format!("class {c} has no type")))?;
            let loc = self.locs.get(&c).copied().unwrap_or_default();
            let operands: Vec<ValueId> = kids.iter().map(|k| self.memo[k]).collect();
            let kind = match node.class() {
                NodeClass::Binary(b, _) => OpKind::Binary(b),
                NodeClass::Cmp(o, _) => OpKind::Cmp(o),
                NodeClass::Unary(u, _) => OpKind::Unary(u),
                NodeClass::Fma(_) => OpKind::Fma,
                NodeClass::Select(_) => OpKind::Select,
                NodeClass::Cast(rtz, _, _) => OpKind::Cast(if rtz {
                    tile_lang::ir::Rounding::Rtz
                } else {
                    tile_lang::ir::Rounding::Rne
                }),
                NodeClass::Broadcast(..) => OpKind::Broadcast,
                NodeClass::Pure(k) => self.egraph.analysis.pure[k.0 as usize].0.clone(),
                NodeClass::Const => {
                    let TileLang::Const(k) = &node else { unreachable!() };
                    let s = new_value(values, Type::scalar(k.dtype));
                    ops.push(op(OpKind::Const(k.value().to_const()), vec![], s, Loc::default()));
                    let v = if k.shape.is_empty() {
                        s
                    } else {
                        let b = new_value(values, ty);
                        ops.push(op(OpKind::Broadcast, vec![s], b, loc));
                        b
                    };
                    self.memo.insert(c, v);
                    continue;
                }
                NodeClass::Ty | NodeClass::Opaque(_) => {
                    return Err(OptError::Internal(format!(
                        "class {c} ({node}) is used before the op that defines it"
                    )));
                }
            };
            let r = new_value(values, ty);
            ops.push(op(kind, operands, r, loc));
            self.memo.insert(c, r);
        }
        Ok(self.memo[&root])
    }
}

pub fn new_value(values: &mut Vec<Type>, t: Type) -> ValueId {
    values.push(t);
    ValueId(values.len() as u32 - 1)
}

fn op(kind: OpKind, operands: Vec<ValueId>, r: ValueId, loc: Loc) -> Op {
    Op {
        kind,
        operands,
        results: vec![r],
        regions: vec![],
        loc,
    }
}
