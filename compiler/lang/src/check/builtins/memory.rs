//! Built-ins that touch memory through pointers: `load`, `store`, the atomics, and the hints
//! `multiple_of` and `max_contiguous` that describe pointer offsets.

use super::*;
use crate::ir::{AtomicOp, Evict};

/// `load(ptr, mask, other, evict)`: reads a tile through pointers; `load(desc, coords)` reads a
/// block through a tensor descriptor.
pub(super) fn load(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let (pv, ps) = a.req(0);
    if let Val::Desc(d) = &pv {
        no_evict(cx, a.get(3), "load")?;
        if let Some((_, s)) = a.get(2) {
            return cx.fail(
                Diagnostic::error(s, "a descriptor load takes no `other`")
                    .label("out-of-bounds elements of a block always read 0"),
            );
        }
        let Some(coords) = a.get(1) else {
            return cx.fail(
                Diagnostic::error(span, "a descriptor load needs the block's coordinates")
                    .label("no coordinates given")
                    .help(format!("e.g. `load(desc, [{}])`", vec!["0"; d.block.len()].join(", "))),
            );
        };
        let (d, coords, index) = block_coords(cx, d, coords)?;
        let mut ops = block_operands(cx, &d, index, ps)?;
        ops.extend(coords);
        let t = Type::tile(d.pointee, d.block.clone());
        return Ok(Val::V(cx.emit1(
            OpKind::LoadBlock { rank: d.block.len() },
            ops,
            t,
            span,
        )?));
    }
    let (ptr, pointee, _) = cx.ptr_arg((pv, ps), "`load`")?;
    let shape = cx.ty(ptr).shape.clone();
    let mut ops = vec![ptr];
    let mask = a.get(1);
    if let Some(m) = mask.clone() {
        ops.push(cx.mask_arg(m, &shape, ps)?);
    }
    let other = a.get(2);
    if let Some(o) = other.clone() {
        if mask.is_none() {
            return cx.fail(
                Diagnostic::error(o.1, "`other` without a mask is never used")
                    .label("no mask given")
                    .help("pass a mask: `load(ptr, mask, other: ...)`"),
            );
        }
        ops.push(cx.value_for(o, pointee, &shape, "`other`")?);
    }
    let evict = evict_arg(cx, a.get(3))?;
    let t = Type::tile(pointee, shape);
    Ok(Val::V(cx.emit1(
        OpKind::Load {
            mask: mask.is_some(),
            other: other.is_some(),
            evict,
        },
        ops,
        t,
        span,
    )?))
}

/// `store(ptr, value, mask, evict)`: writes a tile through mutable pointers; `store(desc,
/// coords, value)` writes a block through a tensor descriptor.
pub(super) fn store(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let (pv, ps) = a.req(0);
    if let Val::Desc(d) = &pv {
        no_evict(cx, a.get(3), "store")?;
        if !d.mutable {
            return cx.fail(cx.readonly(d.ptr, ps, "store through"));
        }
        let Some(value) = a.get(2) else {
            return cx.fail(
                Diagnostic::error(span, "a descriptor store needs the coordinates and the value")
                    .label("expected `store(desc, coords, value)`"),
            );
        };
        let (d, coords, index) = block_coords(cx, d, a.req(1))?;
        let mut ops = block_operands(cx, &d, index, ps)?;
        ops.extend(coords);
        ops.push(cx.value_for(value, d.pointee, &d.block, "the stored value")?);
        cx.emit(OpKind::StoreBlock { rank: d.block.len() }, ops, vec![], vec![], span)?;
        return Ok(Val::Unit);
    }
    let (ptr, pointee, mutable) = cx.ptr_arg((pv, ps), "`store`")?;
    if !mutable {
        return cx.fail(cx.readonly(ptr, ps, "store through"));
    }
    let shape = cx.ty(ptr).shape.clone();
    let mut ops = vec![ptr, cx.value_for(a.req(1), pointee, &shape, "the stored value")?];
    if let Some(m) = a.get(2) {
        ops.push(cx.mask_arg(m, &shape, ps)?);
    }
    let evict = evict_arg(cx, a.get(3))?;
    cx.emit(
        OpKind::Store {
            mask: a.get(2).is_some(),
            evict,
        },
        ops,
        vec![],
        vec![],
        span,
    )?;
    Ok(Val::Unit)
}

/// The `evict` argument of a pointer load or store: `"normal"` (the default), `"first"` or
/// `"last"`.
fn evict_arg(cx: &mut Cx<'_>, a: Option<(Val, Span)>) -> R<Evict> {
    let names = [Evict::Normal, Evict::First, Evict::Last].map(|e| e.name());
    let name = cx.str_arg(a, "evict", "normal", &names)?;
    Ok(Evict::from_name(&name).unwrap())
}

/// Descriptor loads and stores move whole blocks through the TMA engine and take no hint.
fn no_evict(cx: &mut Cx<'_>, a: Option<(Val, Span)>, what: &str) -> R<()> {
    match a {
        None => Ok(()),
        Some((_, s)) => cx.fail(
            Diagnostic::error(s, format!("a descriptor {what} takes no `evict`"))
                .label("eviction hints apply to loads and stores through pointers"),
        ),
    }
}

/// `atomic_add`, `atomic_max`, ... `atomic_xchg`: atomic read-modify-write through pointers.
pub(super) fn atomic_rmw(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let op = AtomicOp::from_name(&name["atomic_".len()..]).unwrap();
    let (pv, ps) = a.req(0);
    let (ptr, pointee, mutable) = cx.ptr_arg((pv, ps), &format!("`{name}`"))?;
    if !mutable {
        return cx.fail(cx.readonly(ptr, ps, "update"));
    }
    let ok = match op {
        AtomicOp::Add => pointee.is_int() || matches!(pointee, DType::F16 | DType::BF16 | DType::F32 | DType::F64),
        AtomicOp::Max | AtomicOp::Min => pointee.is_int() || pointee == DType::F32,
        AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => pointee.is_int() && pointee.bits() >= 32,
        AtomicOp::Xchg => pointee.bits() >= 32,
    };
    if !ok || (pointee.is_int() && pointee.bits() < 32) {
        return cx.fail(
            Diagnostic::error(ps, format!("`{name}` does not support {pointee}"))
                .label(format!("points to {pointee}"))
                .note("atomics work on 32- and 64-bit integers; add also on f16, bf16, f32, f64; max/min also on f32"),
        );
    }
    let shape = cx.ty(ptr).shape.clone();
    let mut ops = vec![ptr, cx.value_for(a.req(1), pointee, &shape, "the value")?];
    if let Some(m) = a.get(2) {
        ops.push(cx.mask_arg(m, &shape, ps)?);
    }
    let t = Type::tile(pointee, shape);
    Ok(Val::V(cx.emit1(
        OpKind::Atomic {
            op,
            mask: a.get(2).is_some(),
        },
        ops,
        t,
        span,
    )?))
}

/// `atomic_cas(ptr, cmp, value, mask)`: atomic compare-and-swap through pointers.
pub(super) fn atomic_cas(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let (pv, ps) = a.req(0);
    let (ptr, pointee, mutable) = cx.ptr_arg((pv, ps), "`atomic_cas`")?;
    if !mutable {
        return cx.fail(cx.readonly(ptr, ps, "update"));
    }
    if !pointee.is_int() || pointee.bits() < 32 {
        return cx.fail(
            Diagnostic::error(ps, format!("`atomic_cas` does not support {pointee}"))
                .label("needs 32- or 64-bit integers"),
        );
    }
    let shape = cx.ty(ptr).shape.clone();
    let mut ops = vec![
        ptr,
        cx.value_for(a.req(1), pointee, &shape, "the compared value")?,
        cx.value_for(a.req(2), pointee, &shape, "the new value")?,
    ];
    if let Some(m) = a.get(3) {
        ops.push(cx.mask_arg(m, &shape, ps)?);
    }
    let t = Type::tile(pointee, shape);
    Ok(Val::V(cx.emit1(
        OpKind::AtomicCas {
            mask: a.get(3).is_some(),
        },
        ops,
        t,
        span,
    )?))
}

/// `multiple_of(x, n)` and `max_contiguous(x, n)`: hints about integer values.
pub(super) fn hint(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let x = cx.number_arg(a.req(0), "the hinted value")?;
    let n = cx.const_int_arg(a.req(1), "the hint")?;
    if n < 1 {
        return cx.fail(Diagnostic::error(a.req(1).1, "a hint must be positive").label(format!("{n}")));
    }
    if !cx.ty(x).dtype().is_some_and(|d| d.is_int()) {
        return cx
            .fail(Diagnostic::error(a.req(0).1, "hints apply to integers").label(format!("this is {}", cx.ty(x))));
    }
    let k = if name == "multiple_of" {
        OpKind::MultipleOf(n as u64)
    } else {
        OpKind::MaxContiguous(n as u64)
    };
    let t = cx.ty(x).clone();
    Ok(Val::V(cx.emit1(k, vec![x], t, span)?))
}

impl Cx<'_> {
    fn readonly(&self, ptr: ValueId, ps: Span, verb: &str) -> Diagnostic {
        let d = Diagnostic::error(ps, format!("cannot {verb} a read-only pointer"))
            .label(format!("this is {}", self.ty(ptr)));
        let pointee = match self.ty(ptr).elem {
            Elem::Ptr { pointee, .. } => pointee.to_string(),
            _ => "T".to_string(),
        };
        match self.ptr_param(ptr) {
            Some((name, decl)) => d
                .with(*decl, format!("`{name}` is declared read-only here"))
                .help(format!("declare it as `{name}: *mut {pointee}` to write through it")),
            None => d.help(format!(
                "declare the pointer parameter as `*mut {pointee}` to write through it"
            )),
        }
    }

    /// The kernel parameter a pointer value was computed from (through offsets and reshapes).
    fn ptr_param(&self, mut v: ValueId) -> Option<&(String, Span)> {
        for _ in 0..256 {
            if let Some(d) = self.param_decls.get(&v) {
                return Some(d);
            }
            let op = self.regions.iter().flatten().find(|op| op.results.contains(&v))?;
            v = match op.kind {
                OpKind::PtrAdd | OpKind::Broadcast | OpKind::ExpandDims(_) | OpKind::Reshape | OpKind::Permute(_) => {
                    op.operands[0]
                }
                OpKind::Select => op.operands[1],
                _ => return None,
            };
        }
        None
    }
}

/// `make_tensor_descriptor(base, shape, strides, block_shape)`: a view of the tensor at `base`
/// whose loads and stores move whole blocks (out-of-bounds elements read 0 and are not written).
pub(super) fn tensor_descriptor(cx: &mut Cx<'_>, _name: &str, a: Args, _span: Span) -> R<Val> {
    let (pv, ps) = a.req(0);
    let (ptr, pointee, mutable) = cx.ptr_arg((pv, ps), "`make_tensor_descriptor`")?;
    if !cx.ty(ptr).is_scalar() {
        return cx.fail(
            Diagnostic::error(ps, "the base of a tensor descriptor is one pointer, not a tile of them")
                .label(format!("this is {}", cx.ty(ptr)))
                .help("pass the tensor's base pointer (a `*T` parameter) and describe the rest with shape and strides"),
        );
    }
    let (bv, bs) = a.req(3);
    let block = cx.shape_arg((bv, bs))?;
    let rank = block.len();
    // The block ops (`ir::verify`) and the hardware's copies take 1 to 5 dimensions.
    if rank == 0 {
        return cx.fail(
            Diagnostic::error(
                bs,
                "a tensor descriptor's block needs 1 to 5 dimensions, this one has none",
            )
            .label("no dimensions")
            .help("describe a flat tensor as one dimension: `make_tensor_descriptor(x, [n], [1], [BLOCK])`"),
        );
    }
    if rank > 5 {
        return cx.fail(
            Diagnostic::error(bs, format!("a block has at most 5 dimensions, this one has {rank}"))
                .label("too many dimensions"),
        );
    }
    let shape = index_list(cx, a.req(1), rank, "`shape`")?;
    let strides = index_list(cx, a.req(2), rank, "`strides`")?;
    let wide = shape
        .iter()
        .chain(&strides)
        .any(|v| cx.ty(*v).dtype().is_some_and(|d| d.bits() > 32 || d == DType::U32));
    let index = if wide { DType::I64 } else { DType::I32 };
    let d = Desc {
        ptr,
        pointee,
        mutable,
        shape,
        strides,
        block,
        index,
    };
    Ok(Val::Desc(std::rc::Rc::new(d)))
}

/// A list of `rank` scalar integers (literals become i32 unless they need 64 bits).
fn index_list(cx: &mut Cx<'_>, (v, s): (Val, Span), rank: usize, what: &str) -> R<Vec<ValueId>> {
    let items = match v {
        Val::List(items) => items,
        other => vec![other],
    };
    if items.len() != rank {
        let n = items.len();
        return cx.fail(
            Diagnostic::error(
                s,
                format!(
                    "{what} has {n} entr{}, but the block has {rank} dimension{}",
                    if n == 1 { "y" } else { "ies" },
                    if rank == 1 { "" } else { "s" }
                ),
            )
            .label(format!("expected {rank} entries, one per dimension")),
        );
    }
    let mut out = Vec::with_capacity(rank);
    for it in items {
        let id = match it {
            Val::Lit(Lit::Int(i)) => {
                let d = if i32::try_from(i).is_ok() {
                    DType::I32
                } else {
                    DType::I64
                };
                cx.value(Val::Lit(Lit::Int(i)), s, Some(d))?
            }
            Val::V(id) => id,
            other => {
                let l = cx.describe(&other);
                return cx.fail(Diagnostic::error(s, format!("the entries of {what} must be integers")).label(l));
            }
        };
        let t = cx.ty(id).clone();
        if !t.is_scalar() || !t.dtype().is_some_and(|d| d.is_int()) {
            return cx.fail(
                Diagnostic::error(s, format!("the entries of {what} must be scalar integers"))
                    .label(format!("an entry is {t}")),
            );
        }
        out.push(id);
    }
    Ok(out)
}

/// The coordinates of a block access, and the descriptor and index dtype they are used with
/// (i64 when a coordinate needs it).
fn block_coords(cx: &mut Cx<'_>, d: &std::rc::Rc<Desc>, coords: (Val, Span)) -> R<(Desc, Vec<ValueId>, DType)> {
    let s = coords.1;
    let c = index_list(cx, coords, d.block.len(), "the coordinate list")?;
    let wide = c
        .iter()
        .any(|v| cx.ty(*v).dtype().is_some_and(|d| d.bits() > 32 || d == DType::U32));
    let index = if wide { DType::I64 } else { d.index };
    let mut out = Vec::with_capacity(c.len());
    for v in c {
        out.push(cx.cast(v, index, s)?);
    }
    Ok(((**d).clone(), out, index))
}

/// The base, shape and strides of a descriptor as block-op operands in `index`.
fn block_operands(cx: &mut Cx<'_>, d: &Desc, index: DType, span: Span) -> R<Vec<ValueId>> {
    let mut ops = vec![d.ptr];
    for v in d.shape.iter().chain(&d.strides) {
        ops.push(cx.cast(*v, index, span)?);
    }
    Ok(ops)
}
