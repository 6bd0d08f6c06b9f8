//! Reductions and scans: `sum`, `prod`, `max`, `min`, `xor_sum`, `argmax`/`argmin`, `reduce` with
//! a `combine` helper, `cumsum`, `cumprod` and `scan`.

use super::*;
use crate::ir::ReduceOp;

/// `sum`, `prod`, `max`, `min`, `xor_sum` over one axis (or all).
pub(super) fn reduction(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let op = match name {
        "sum" => ReduceOp::Sum,
        "prod" => ReduceOp::Prod,
        "max" => ReduceOp::Max,
        "min" => ReduceOp::Min,
        _ => ReduceOp::Xor,
    };
    let (xv, xs) = a.req(0);
    let mut x = cx.number_arg((xv, xs), "the reduced value")?;
    let d = cx.ty(x).dtype().unwrap();
    let bad = match op {
        ReduceOp::Xor | ReduceOp::And | ReduceOp::Or => !d.is_int(),
        ReduceOp::Max | ReduceOp::Min => d.is_bool(),
        _ => false,
    };
    if bad {
        return cx.fail(
            Diagnostic::error(xs, format!("cannot reduce {d} with `{}`", op.name()))
                .label(format!("this is {}", cx.ty(x))),
        );
    }
    let (axis, keep) = cx.reduce_axis(&mut x, a.get(1), a.get(2), xs)?;
    let acc = Cx::accumulator(d, op);
    let x = cx.cast(x, acc, span)?;
    let mut shape = cx.ty(x).shape.clone();
    shape.remove(axis);
    let r = cx.emit1(OpKind::Reduce { op, axis }, vec![x], Type::tile(acc, shape), span)?;
    // Floats come back to their dtype after accumulating wider; small ints stay i32.
    let r = if d.is_float() { cx.cast(r, d, span)? } else { r };
    Ok(Val::V(cx.keep_dims(r, axis, keep, span)?))
}

/// `cluster_sum(x)`, `cluster_max(x)`, `cluster_min(x)`: a scalar combined over the programs of
/// this program's cluster (`#[cluster(N)]`), in program-id order, the same in each of them.
pub(super) fn cluster_reduction(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let op = match name {
        "cluster_sum" => ReduceOp::Sum,
        "cluster_max" => ReduceOp::Max,
        _ => ReduceOp::Min,
    };
    let x = cluster_operand(cx, name, a.req(0), &format!("{}(x)", op.name()), span)?;
    let t = cx.ty(x).clone();
    let r = cx.emit1(OpKind::ClusterReduce(op), vec![x], t, span)?;
    cx.cluster_sites.push((r, span));
    Ok(Val::V(r))
}

/// `cluster_reduce(x, combine)`: scalars (one, or a tuple combined together) folded over the
/// programs of this program's cluster by a helper, as `reduce` folds along an axis: `fn
/// combine(a0, a1, b0, b1)` returns the pair for two. One exchange for several statistics.
pub(super) fn cluster_reduce_with(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let (xv, xs) = a.req(0);
    let (tuple, items) = match xv {
        Val::Tuple(items) if !items.is_empty() => (true, items),
        Val::Tuple(_) => {
            return cx
                .fail(Diagnostic::error(xs, "`cluster_reduce` needs at least one value").label("this tuple is empty"));
        }
        v => (false, vec![v]),
    };
    let mut ids = Vec::with_capacity(items.len());
    for v in items {
        ids.push(cluster_operand(
            cx,
            name,
            (v, xs),
            "(sum(x), max(x)), combine: f",
            span,
        )?);
    }
    let f = cx.combine_fn(a.req(1))?;
    let elems: Vec<Elem> = ids.iter().map(|x| cx.ty(*x).elem).collect();
    let region = cx.combine_region(f, &elems, span)?;
    let types: Vec<Type> = ids.iter().map(|x| cx.ty(*x).clone()).collect();
    let rs = cx.emit(OpKind::ClusterReduceWith, ids, types, vec![region], span)?;
    cx.cluster_sites.push((rs[0], span));
    Ok(if tuple {
        Val::Tuple(rs.into_iter().map(Val::V).collect())
    } else {
        Val::V(rs[0])
    })
}

/// An operand of a cluster reduction: a 32- or 64-bit number scalar, in a cluster kernel.
fn cluster_operand(cx: &mut Cx<'_>, name: &str, x: (Val, Span), reduce: &str, span: Span) -> R<ValueId> {
    if cx.cluster <= 1 {
        return cx.fail(
            Diagnostic::error(span, format!("`{name}` needs a kernel that runs in clusters"))
                .label("this kernel's programs run alone")
                .help("add `#[cluster(2)]` (or 4, 8) to the kernel: programs 2c and 2c + 1 then form cluster c"),
        );
    }
    let xs = x.1;
    let x = cx.number_arg(x, "the combined value")?;
    let t = cx.ty(x).clone();
    let d = t.dtype().unwrap();
    if !t.is_scalar() {
        return cx.fail(
            Diagnostic::error(xs, format!("`{name}` combines scalars, one per program"))
                .label(format!("this is {t}"))
                .help(format!("reduce the tile first, e.g. `{name}({reduce})`")),
        );
    }
    if !(d.is_float() || d.is_int()) || d.bytes() < 4 {
        return cx.fail(
            Diagnostic::error(xs, format!("`{name}` takes 32- or 64-bit numbers, not {d}"))
                .label(format!("this is {t}"))
                .help(if d.is_float() {
                    "convert it with `.to(f32)`"
                } else {
                    "convert it with `.to(i32)`"
                }),
        );
    }
    Ok(x)
}

/// `argmax(x, axis)` and `argmin(x, axis)`: the index of the extreme element.
pub(super) fn arg_reduction(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let (x, xs) = a.req(0);
    let mut x = cx.number_arg((x, xs), "the argument")?;
    let (axis, keep) = cx.reduce_axis(&mut x, a.get(1), a.get(2), xs)?;
    let mut shape = cx.ty(x).shape.clone();
    shape.remove(axis);
    let r = cx.emit1(
        OpKind::ArgReduce {
            max: name == "argmax",
            axis,
        },
        vec![x],
        Type::tile(DType::I32, shape),
        span,
    )?;
    Ok(Val::V(cx.keep_dims(r, axis, keep, span)?))
}

/// `reduce(x, axis, combine)`: a reduction with a helper function as the combiner. `x` may be a
/// tuple of tiles of one shape, reduced together (`fn combine(a0, a1, b0, b1)` returning a pair
/// for two): several statistics in one pass, such as Welford's mean and variance.
pub(super) fn reduce_with(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let (xv, xs) = a.req(0);
    let (tuple, items) = match xv {
        Val::Tuple(items) if !items.is_empty() => (true, items),
        Val::Tuple(_) => {
            return cx.fail(Diagnostic::error(xs, "`reduce` needs at least one tile").label("this tuple is empty"));
        }
        v => (false, vec![v]),
    };
    let mut xs_ids = Vec::with_capacity(items.len());
    for v in items {
        xs_ids.push(cx.number_arg((v, xs), "the reduced values")?);
    }
    let shape0 = cx.ty(xs_ids[0]).shape.clone();
    if let Some(other) = xs_ids.iter().find(|x| cx.ty(**x).shape != shape0) {
        let (t0, t1) = (cx.ty(xs_ids[0]).clone(), cx.ty(*other).clone());
        return cx.fail(
            Diagnostic::error(xs, "the tiles reduced together must have one shape")
                .label(format!("this holds {t0} and {t1}"))
                .help("broadcast them to one shape first"),
        );
    }
    let f = cx.combine_fn(a.req(2))?;
    let mut axis_keep = None;
    for x in xs_ids.iter_mut() {
        axis_keep = Some(cx.reduce_axis(x, a.get(1), a.get(3), xs)?);
    }
    let (axis, keep) = axis_keep.expect("at least one tile");
    let elems: Vec<Elem> = xs_ids.iter().map(|x| cx.ty(*x).elem).collect();
    let region = cx.combine_region(f, &elems, span)?;
    let mut shape = cx.ty(xs_ids[0]).shape.clone();
    shape.remove(axis);
    let types: Vec<Type> = xs_ids.iter().map(|x| cx.ty(*x).with_shape(shape.clone())).collect();
    let rs = cx.emit(OpKind::ReduceWith { axis }, xs_ids, types, vec![region], span)?;
    let mut out = Vec::with_capacity(rs.len());
    for r in rs {
        out.push(Val::V(cx.keep_dims(r, axis, keep, span)?));
    }
    Ok(if tuple { Val::Tuple(out) } else { out.pop().unwrap() })
}

/// `cumsum`, `cumprod`, and `scan(x, axis, combine)` with a helper function as the combiner.
pub(super) fn scan(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let (xv, xs) = a.req(0);
    let x = cx.number_arg((xv, xs), "the scanned value")?;
    let rank = cx.ty(x).shape.len();
    if rank == 0 {
        return cx.fail(Diagnostic::error(xs, "cannot scan a scalar").label("this has no axes"));
    }
    let axis = match a.get(1) {
        Some(ax) => cx.axis_arg(ax, rank)?,
        None => 0,
    };
    let reverse_idx = if name == "scan" { 3 } else { 2 };
    let reverse = cx.bool_arg(a.get(reverse_idx), false)?;
    if name == "scan" {
        let f = cx.combine_fn(a.req(2))?;
        let region = cx.combine_region(f, &[cx.ty(x).elem], span)?;
        let t = cx.ty(x).clone();
        return Ok(Val::V(
            cx.emit(OpKind::ScanWith { axis, reverse }, vec![x], vec![t], vec![region], span)?[0],
        ));
    }
    let op = if name == "cumsum" {
        ReduceOp::Sum
    } else {
        ReduceOp::Prod
    };
    let d = cx.ty(x).dtype().unwrap();
    let acc = Cx::accumulator(d, op);
    let xc = cx.cast(x, acc, span)?;
    let t = cx.ty(xc).clone();
    let r = cx.emit1(OpKind::Scan { op, axis, reverse }, vec![xc], t, span)?;
    Ok(Val::V(if d.is_float() { cx.cast(r, d, span)? } else { r }))
}

impl<'a> Cx<'a> {
    /// Resolves `axis` (None: all axes, by flattening) and `keep_dims` for a reduction.
    fn reduce_axis(
        &mut self,
        x: &mut ValueId,
        axis: Option<(Val, Span)>,
        keep: Option<(Val, Span)>,
        xs: Span,
    ) -> R<(usize, bool)> {
        let keep = self.bool_arg(keep, false)?;
        let rank = self.ty(*x).shape.len();
        if rank == 0 {
            return self.fail(Diagnostic::error(xs, "cannot reduce a scalar").label("this has no axes"));
        }
        match axis {
            Some(a) => Ok((self.axis_arg(a, rank)?, keep)),
            None => {
                if rank > 1 {
                    if keep {
                        return self
                            .fail(Diagnostic::error(xs, "`keep_dims` needs an `axis`").label("reducing every axis"));
                    }
                    let n = self.ty(*x).numel();
                    let t = self.ty(*x).with_shape(vec![n]);
                    *x = self.emit1(OpKind::Reshape, vec![*x], t, xs)?;
                }
                Ok((0, keep))
            }
        }
    }

    fn keep_dims(&mut self, r: ValueId, axis: usize, keep: bool, span: Span) -> R<ValueId> {
        if !keep {
            return Ok(r);
        }
        let mut shape = self.ty(r).shape.clone();
        shape.insert(axis, 1);
        let t = self.ty(r).with_shape(shape);
        self.emit1(OpKind::ExpandDims(axis), vec![r], t, span)
    }

    /// The dtype a sum or product accumulates in, if it differs from the input's.
    fn accumulator(d: DType, op: ReduceOp) -> DType {
        match op {
            ReduceOp::Sum | ReduceOp::Prod if d.is_bool() || (d.is_int() && d.bits() < 32) => {
                if d.is_unsigned() {
                    DType::U32
                } else {
                    DType::I32
                }
            }
            ReduceOp::Sum | ReduceOp::Prod if d.is_float() && d.bits() < 32 => DType::F32,
            _ => d,
        }
    }

    fn combine_fn(&mut self, c: (Val, Span)) -> R<&'a ast::FnDef> {
        match c.0 {
            Val::Func(name) => Ok(self.helper(&name).unwrap()),
            other => {
                let l = self.describe(&other);
                self.fail(
                    Diagnostic::error(c.1, "`combine` must name a helper function")
                        .label(l)
                        .help("define `fn combine(a, b) { .. }` and pass `combine: combine`"),
                )
            }
        }
    }

    /// Builds the combine region for values of `elems` (one per tile reduced together): the
    /// accumulated values then the next ones as scalar arguments (`a0, a1, .., b0, b1, ..`),
    /// yielding the combined values (a tuple when there are several).
    fn combine_region(&mut self, f: &'a ast::FnDef, elems: &[Elem], span: Span) -> R<Region> {
        let scalars: Vec<Type> = elems
            .iter()
            .map(|e| Type {
                elem: *e,
                shape: vec![],
            })
            .collect();
        let args: Vec<ValueId> = scalars
            .iter()
            .chain(&scalars)
            .map(|t| self.new_value(t.clone()))
            .collect();
        self.regions.push(Vec::new());
        let at = f.body.tail.as_ref().map_or(f.span, |t| t.span);
        let call: Vec<_> = args.iter().map(|a| (None, Val::V(*a), span)).collect();
        let r = self.inline_call(f, call, span).and_then(|r| match (r, scalars.len()) {
            (r, 1) => Ok(vec![self.coerce_to(
                r,
                &scalars[0],
                at,
                &f.name.name,
                "the result of",
            )?]),
            (Val::Tuple(items), n) if items.len() == n => items
                .into_iter()
                .zip(&scalars)
                .map(|(v, t)| self.coerce_to(v, t, at, &f.name.name, "the result of"))
                .collect(),
            (other, n) => {
                let l = self.describe(&other);
                self.fail(
                    Diagnostic::error(at, format!("`{}` must return a tuple of {n} values", f.name.name))
                        .label(l)
                        .help(format!(
                            "one combined value per tile reduced together, e.g. `({})`",
                            (0..n).map(|i| format!("x{i}")).collect::<Vec<_>>().join(", ")
                        )),
                )
            }
        });
        let r = match r {
            Ok(r) => self.emit(OpKind::Yield, r, vec![], vec![], span).map(|_| ()),
            Err(e) => Err(e),
        };
        let ops = self.regions.pop().unwrap();
        r?;
        Ok(Region { args, ops })
    }
}
