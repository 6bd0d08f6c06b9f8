//! Mask fusion into loads and stores, on the IR after extraction (loads and stores are ops
//! with effects, kept in program order, so the e-graph does not see through them). Both
//! rules are exact:
//!
//! - `store-select-mask`: `store(p, where(m, v, w), m)` stores `v`: the lanes where `m` is
//!   false are not written, so `w` never matters.
//! - `load-select-other`: `where(m, load(p, m, other: o), w)`, the load used only there, is
//!   `load(p, m, other: w)`: a masked load already yields its `other` where `m` is false.

use std::collections::HashMap;

use tile_lang::ir::{Kernel, OpKind, Region, ValueId};

/// Applies the rules `allowed` names; counts each application in `applied`.
pub fn fuse(k: &mut Kernel, allowed: &dyn Fn(&str) -> bool, applied: &mut std::collections::BTreeMap<String, usize>) {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    k.walk(&mut |op| {
        for v in &op.operands {
            *uses.entry(*v).or_default() += 1;
        }
    });
    let mut body = std::mem::take(&mut k.body);
    region(&mut body, &uses, allowed, applied);
    k.body = body;
}

fn region(
    r: &mut Region,
    uses: &HashMap<ValueId, usize>,
    allowed: &dyn Fn(&str) -> bool,
    applied: &mut std::collections::BTreeMap<String, usize>,
) {
    for op in &mut r.ops {
        for sub in &mut op.regions {
            region(sub, uses, allowed, applied);
        }
    }
    // Where each value of this region is defined.
    let def: HashMap<ValueId, usize> = r
        .ops
        .iter()
        .enumerate()
        .flat_map(|(i, op)| op.results.iter().map(move |v| (*v, i)))
        .collect();
    let select_of = |v: ValueId, ops: &[tile_lang::ir::Op]| {
        def.get(&v)
            .map(|&i| &ops[i])
            .filter(|op| op.kind == OpKind::Select)
            .map(|op| (op.operands[0], op.operands[1], op.operands[2]))
    };

    if allowed("store-select-mask") {
        for i in 0..r.ops.len() {
            if let OpKind::Store { mask: true, .. } = r.ops[i].kind {
                let (value, m) = (r.ops[i].operands[1], r.ops[i].operands[2]);
                if let Some((c, a, _)) = select_of(value, &r.ops)
                    && c == m
                {
                    r.ops[i].operands[1] = a;
                    *applied.entry("store-select-mask".into()).or_default() += 1;
                }
            }
        }
    }

    if allowed("load-select-other") {
        let mut renames: HashMap<ValueId, ValueId> = HashMap::new();
        let mut dead = Vec::new();
        for s in 0..r.ops.len() {
            if r.ops[s].kind != OpKind::Select {
                continue;
            }
            let (c, a, w) = (r.ops[s].operands[0], r.ops[s].operands[1], r.ops[s].operands[2]);
            let Some(&l) = def.get(&a) else { continue };
            let load = &r.ops[l];
            let OpKind::Load {
                mask: true,
                other,
                evict,
            } = load.kind
            else {
                continue;
            };
            // The new `other` must exist before the load; the load's result must have no
            // other reader.
            let w_ready = def.get(&w).is_none_or(|&d| d < l);
            if load.operands[1] != c || uses.get(&a) != Some(&1) || !w_ready {
                continue;
            }
            let load = &mut r.ops[l];
            if other {
                load.operands[2] = w;
            } else {
                load.operands.push(w);
                load.kind = OpKind::Load {
                    mask: true,
                    other: true,
                    evict,
                };
            }
            renames.insert(r.ops[s].results[0], a);
            dead.push(s);
            *applied.entry("load-select-other".into()).or_default() += 1;
        }
        if !renames.is_empty() {
            for s in dead.into_iter().rev() {
                r.ops.remove(s);
            }
            rename(r, &renames);
        }
    }
}

fn rename(r: &mut Region, m: &HashMap<ValueId, ValueId>) {
    for op in &mut r.ops {
        for v in &mut op.operands {
            if let Some(n) = m.get(v) {
                *v = *n;
            }
        }
        for sub in &mut op.regions {
            rename(sub, m);
        }
    }
}
