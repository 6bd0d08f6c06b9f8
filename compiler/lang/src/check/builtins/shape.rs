//! Built-ins that change a tile's shape: `broadcast`, `expand_dims`, `reshape`, `trans`,
//! `permute`, `join`, `split`.

use super::*;

/// `broadcast(x, shape)` and `broadcast_to(x, shape)`.
pub(super) fn broadcast(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let x = cx.tile_arg(a.req(0), "the tile")?;
    let shape = cx.shape_arg(a.req(1))?;
    let from = cx.ty(x).shape.clone();
    if ir::broadcast_shapes(&from, &shape).as_deref() != Some(&shape[..]) {
        return cx.fail(
            Diagnostic::error(
                span,
                format!("cannot broadcast shape {} to {}", fmt_shape(&from), fmt_shape(&shape)),
            )
            .label("shape mismatch"),
        );
    }
    Ok(Val::V(cx.broadcast_to(x, &shape, span)?))
}

/// `expand_dims(x, axis)`: inserts an axis of size 1.
pub(super) fn expand_dims(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let x = cx.tile_arg(a.req(0), "the tile")?;
    let rank = cx.ty(x).shape.len();
    let axis = cx.axis_arg(a.req(1), rank + 1)?;
    let mut shape = cx.ty(x).shape.clone();
    shape.insert(axis, 1);
    let t = cx.ty(x).with_shape(shape);
    Ok(Val::V(cx.emit1(OpKind::ExpandDims(axis), vec![x], t, span)?))
}

/// `reshape(x, shape)`: the same elements in a new shape.
pub(super) fn reshape(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let x = cx.tile_arg(a.req(0), "the tile")?;
    let shape = cx.shape_arg(a.req(1))?;
    let t = cx.ty(x).clone();
    if t.numel() != shape.iter().product::<usize>() {
        return cx.fail(
            Diagnostic::error(
                span,
                format!(
                    "cannot reshape {} elements to {}, which holds {}",
                    t.numel(),
                    fmt_shape(&shape),
                    shape.iter().product::<usize>()
                ),
            )
            .label(format!("the tile is {t}"))
            .note("`reshape` keeps every element, so the new shape must hold the same number"),
        );
    }
    if t.shape == shape {
        return Ok(Val::V(x));
    }
    Ok(Val::V(cx.emit1(OpKind::Reshape, vec![x], t.with_shape(shape), span)?))
}

/// `trans(x)` of a 2-D tile and `permute(x, dims)`: reorders the axes.
pub(super) fn permute(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let x = cx.tile_arg(a.req(0), "the tile")?;
    let rank = cx.ty(x).shape.len();
    let perm: Vec<usize> = if name == "trans" {
        if rank != 2 {
            let mut perm: Vec<usize> = (0..rank).collect();
            if rank >= 2 {
                perm.swap(rank - 1, rank - 2);
            }
            let perm = perm.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
            return cx.fail(
                Diagnostic::error(
                    span,
                    format!(
                        "`trans` needs a 2-D tile; this has {rank} ax{}",
                        if rank == 1 { "is" } else { "es" }
                    ),
                )
                .label(format!("this is {}", cx.ty(x)))
                .help(if rank > 2 {
                    format!("to swap the last two axes, use `permute(x, [{perm}])`")
                } else {
                    "a tile with fewer than 2 axes has nothing to transpose; add an axis with `x[:, None]`".to_string()
                }),
            );
        }
        vec![1, 0]
    } else {
        let (pv, ps) = a.req(1);
        let Val::List(items) = pv else {
            return cx.fail(Diagnostic::error(ps, "`permute` takes a list of axes").label("expected `[..]`"));
        };
        let mut p = Vec::new();
        for it in items {
            p.push(cx.axis_arg((it, ps), rank)?);
        }
        let mut sorted = p.clone();
        sorted.sort();
        if sorted != (0..rank).collect::<Vec<_>>() {
            return cx.fail(
                Diagnostic::error(ps, format!("{p:?} is not a permutation of the {rank} axes"))
                    .label("each axis exactly once"),
            );
        }
        p
    };
    let shape = perm.iter().map(|&i| cx.ty(x).shape[i]).collect();
    let t = cx.ty(x).with_shape(shape);
    Ok(Val::V(cx.emit1(OpKind::Permute(perm), vec![x], t, span)?))
}

/// `join(a, b)`: stacks two tiles along a new last axis of size 2.
pub(super) fn join(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let parts = vec![a.req(0), a.req(1)];
    let d = cx.meet(&parts);
    let ids = cx.unify(parts, d, span)?;
    let mut shape = cx.ty(ids[0]).shape.clone();
    shape.push(2);
    let t = cx.ty(ids[0]).with_shape(shape);
    Ok(Val::V(cx.emit1(OpKind::Join, ids, t, span)?))
}

/// `split(x)`: the two halves of a last axis of size 2.
pub(super) fn split(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let x = cx.tile_arg(a.req(0), "the tile")?;
    let mut shape = cx.ty(x).shape.clone();
    if shape.last() != Some(&2) {
        return cx.fail(Diagnostic::error(span, "`split` needs a last axis of size 2").label(format!("this is {}", cx.ty(x)))
            .note("`split(x)` takes x[.., 2] and returns the two halves x[..]; `reshape` first to get a last axis of 2"));
    }
    shape.pop();
    let t = cx.ty(x).with_shape(shape);
    let r = cx.emit(OpKind::Split, vec![x], vec![t.clone(), t], vec![], span)?;
    Ok(Val::Tuple(vec![Val::V(r[0]), Val::V(r[1])]))
}
