//! Block accesses through tensor descriptors (`load_block`, `store_block`): their operands, the
//! element semantics every executor shares, and their expansion into pointer arithmetic.
//!
//! A block op of rank `r` takes `(ptr, shape[r], strides[r], coords[r])` (and the stored value
//! last, for a store): scalar integers of one dtype `I` (i32 or i64) after the base pointer.
//! Element `idx` of the block is tensor element `pos = coords + idx`; it is in bounds when
//! `0 <= pos[a] < shape[a]` on every axis, and then lives at
//! `ptr + (pos[0] * strides[0] + .. + pos[r-1] * strides[r-1])`, with every product and sum
//! wrapping in `I` (as the same arithmetic written with pointers would). Out-of-bounds elements
//! load as zero and are not stored.
//!
//! [`expand_blocks`] rewrites block ops into exactly that arithmetic (`arange`, masks, `ptr_add`,
//! masked `load`/`store`), so a back end that has no faster way (the TMA engine) sees only
//! ordinary pointer accesses; the interpreter runs the block ops directly through [`position`].

use std::collections::HashSet;

use super::*;

/// The operands of a block op, split by role.
#[derive(Clone, Copy, Debug)]
pub struct BlockOperands<'a> {
    pub ptr: ValueId,
    pub shape: &'a [ValueId],
    pub strides: &'a [ValueId],
    pub coords: &'a [ValueId],
    /// The stored tile (`store_block` only).
    pub value: Option<ValueId>,
}

/// The operands of `op`, a `LoadBlock` or `StoreBlock`.
pub fn operands(op: &Op) -> BlockOperands<'_> {
    let (rank, store) = match op.kind {
        OpKind::LoadBlock { rank } => (rank, false),
        OpKind::StoreBlock { rank } => (rank, true),
        _ => panic!("not a block op: {}", op.kind.name()),
    };
    let o = &op.operands;
    BlockOperands {
        ptr: o[0],
        shape: &o[1..1 + rank],
        strides: &o[1 + rank..1 + 2 * rank],
        coords: &o[1 + 2 * rank..1 + 3 * rank],
        value: store.then(|| o[1 + 3 * rank]),
    }
}

/// Element `idx` of a block: its offset from the base pointer in elements (wrapped in `index`,
/// then widened), or `None` when it is out of bounds.
pub fn position(index: DType, shape: &[i64], strides: &[i64], coords: &[i64], idx: &[usize]) -> Option<i64> {
    let mut off = 0i64;
    for a in 0..idx.len() {
        let pos = scalar::wrap(index, coords[a].wrapping_add(idx[a] as i64));
        if pos < 0 || pos >= shape[a] {
            return None;
        }
        let term = scalar::wrap(index, pos.wrapping_mul(strides[a]));
        off = if a == 0 {
            term
        } else {
            scalar::wrap(index, off.wrapping_add(term))
        };
    }
    Some(off)
}

/// `k` with every block op expanded into pointer arithmetic, except the loads whose results are
/// in `loads` and the stores whose stored tiles are in `stores` (which a back end lowers
/// itself).
pub fn expand_blocks(k: &Kernel, loads: &HashSet<ValueId>, stores: &HashSet<ValueId>) -> Kernel {
    let mut out = k.clone();
    let mut values = std::mem::take(&mut out.values);
    expand_region(&mut out.body, &mut values, &(loads, stores));
    out.values = values;
    out
}

/// Whether `k` has block ops.
pub fn has_blocks(k: &Kernel) -> bool {
    let mut any = false;
    k.walk(&mut |op| any |= matches!(op.kind, OpKind::LoadBlock { .. } | OpKind::StoreBlock { .. }));
    any
}

fn expand_region(r: &mut Region, values: &mut Vec<Type>, keep: &(&HashSet<ValueId>, &HashSet<ValueId>)) {
    let ops = std::mem::take(&mut r.ops);
    for mut op in ops {
        for sub in &mut op.regions {
            expand_region(sub, values, keep);
        }
        let is_load = matches!(op.kind, OpKind::LoadBlock { .. });
        let is_store = matches!(op.kind, OpKind::StoreBlock { .. });
        let kept = if is_load {
            keep.0.contains(&op.results[0])
        } else {
            is_store && op.operands.last().is_some_and(|v| keep.1.contains(v))
        };
        if !(is_load || is_store) || kept {
            r.ops.push(op);
            continue;
        }
        let mut b = OpBuilder {
            values,
            ops: &mut r.ops,
            loc: op.loc,
        };
        let o = operands(&op);
        let shape = match o.value {
            Some(v) => b.values[v.0 as usize].shape.clone(),
            None => b.values[op.results[0].0 as usize].shape.clone(),
        };
        let (ptrs, mask) = b.addresses(&o, &shape);
        match o.value {
            None => b.ops.push(Op {
                kind: OpKind::Load {
                    mask: true,
                    other: false,
                    evict: Evict::Normal,
                },
                operands: vec![ptrs, mask],
                results: op.results.clone(),
                regions: vec![],
                loc: op.loc,
            }),
            Some(v) => b.ops.push(Op {
                kind: OpKind::Store {
                    mask: true,
                    evict: Evict::Normal,
                },
                operands: vec![ptrs, v, mask],
                results: vec![],
                regions: vec![],
                loc: op.loc,
            }),
        }
    }
}

/// Appends ops to a region under construction.
impl OpBuilder<'_> {
    /// The pointer tile and the in-bounds mask of a block of `shape`.
    fn addresses(&mut self, o: &BlockOperands<'_>, shape: &[usize]) -> (ValueId, ValueId) {
        let rank = shape.len();
        let index = self.ty(o.shape[0]).dtype().expect("verified: integer shape");
        let zero = self.op(OpKind::Const(ConstValue::Int(0)), vec![], Type::scalar(index));
        let mut off: Option<ValueId> = None;
        let mut ok: Option<ValueId> = None;
        for a in 0..rank {
            let n = shape[a];
            let line = [n];
            let mut idx = self.op(
                OpKind::Arange {
                    start: 0,
                    end: n as i64,
                },
                vec![],
                Type::tile(DType::I32, line.to_vec()),
            );
            if index != DType::I32 {
                idx = self.op(OpKind::Cast(Rounding::Rne), vec![idx], Type::tile(index, line.to_vec()));
            }
            let t = Type::tile(index, line.to_vec());
            let c = self.splat(o.coords[a], &line);
            let pos = self.op(OpKind::Binary(BinaryOp::Add), vec![idx, c], t.clone());
            let s = self.splat(o.strides[a], &line);
            let term = self.op(OpKind::Binary(BinaryOp::Mul), vec![pos, s], t.clone());
            let z = self.splat(zero, &line);
            let d = self.splat(o.shape[a], &line);
            let bools = t.with_dtype(DType::Bool);
            let ge = self.op(OpKind::Cmp(CmpOp::Ge), vec![pos, z], bools.clone());
            let lt = self.op(OpKind::Cmp(CmpOp::Lt), vec![pos, d], bools.clone());
            let inb = self.op(OpKind::Binary(BinaryOp::And), vec![ge, lt], bools);
            // [n] -> [1, .., n, .., 1] -> the block's shape.
            let (term, inb) = (self.along(term, a, shape), self.along(inb, a, shape));
            off = Some(match off {
                None => term,
                Some(prev) => {
                    let t = self.ty(term).clone();
                    self.op(OpKind::Binary(BinaryOp::Add), vec![prev, term], t)
                }
            });
            ok = Some(match ok {
                None => inb,
                Some(prev) => {
                    let t = self.ty(inb).clone();
                    self.op(OpKind::Binary(BinaryOp::And), vec![prev, inb], t)
                }
            });
        }
        let p = self.splat(o.ptr, shape);
        let pt = self.ty(p).clone();
        let ptrs = self.op(OpKind::PtrAdd, vec![p, off.expect("rank >= 1")], pt);
        (ptrs, ok.expect("rank >= 1"))
    }

    /// A line along axis `a` of `shape`, broadcast to `shape`.
    fn along(&mut self, x: ValueId, a: usize, shape: &[usize]) -> ValueId {
        let mut v = x;
        for _ in a + 1..shape.len() {
            let mut s = self.ty(v).shape.clone();
            s.push(1);
            let t = self.ty(v).with_shape(s.clone());
            v = self.op(OpKind::ExpandDims(s.len() - 1), vec![v], t);
        }
        for _ in 0..a {
            let mut s = self.ty(v).shape.clone();
            s.insert(0, 1);
            let t = self.ty(v).with_shape(s);
            v = self.op(OpKind::ExpandDims(0), vec![v], t);
        }
        if self.ty(v).shape == shape {
            return v;
        }
        let t = self.ty(v).with_shape(shape.to_vec());
        self.op(OpKind::Broadcast, vec![v], t)
    }
}
