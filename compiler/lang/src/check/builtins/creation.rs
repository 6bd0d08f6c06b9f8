//! Built-ins that make values from the grid and from constants: `program_id`, `num_programs`,
//! `arange`, `zeros`, `full`, `cdiv`.

use super::*;
use crate::ir::BinaryOp;

/// `program_id(axis)` and `num_programs(axis)`: this block's index in the grid, and the grid's size.
pub(super) fn grid_index(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let axis = match a.get(0) {
        Some(x) => {
            let s = x.1;
            let i = cx.const_int_arg(x, "the axis")?;
            if !(0..=2).contains(&i) {
                return cx.fail(
                    Diagnostic::error(s, format!("grid axis {i} does not exist")).label("the grid has axes 0, 1 and 2"),
                );
            }
            i as u8
        }
        None => 0,
    };
    let k = if name == "program_id" {
        OpKind::ProgramId(axis)
    } else {
        OpKind::NumPrograms(axis)
    };
    Ok(Val::V(cx.emit1(k, vec![], Type::scalar(DType::I32), span)?))
}

/// `arange(start, end)`: the integers from `start` up to `end`, a power of two of them.
pub(super) fn arange(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    if let Some((Val::V(id), es)) = a.get(1)
        && !cx.known.contains_key(&id)
    {
        return cx.fail(Diagnostic::error(es, "the end of `arange` must be known at compile time")
            .label("this is only known at run time")
            .help("tile sizes are fixed: use a `const` parameter, e.g. `arange(0, BLOCK)`, and mask the elements past the end: `offs < n`"));
    }
    let start = cx.const_int_arg(a.req(0), "the start of `arange`")?;
    let end = cx.const_int_arg(a.req(1), "the end of `arange`")?;
    let n = end.saturating_sub(start);
    if n <= 0 || !(n as u64).is_power_of_two() {
        return cx.fail(
            Diagnostic::error(
                span,
                format!("`arange({start}, {end})` has {n} elements, not a power of two"),
            )
            .label("tile sizes are powers of two")
            .help(format!(
                "use `arange({start}, {})` and mask the extra elements",
                start + (n.max(1) as u64).next_power_of_two() as i64
            )),
        );
    }
    if start < i32::MIN as i64 || end > i32::MAX as i64 {
        return cx.fail(Diagnostic::error(span, "`arange` bounds must fit in i32").label("out of range"));
    }
    let t = Type::tile(DType::I32, vec![n as usize]);
    Ok(Val::V(cx.emit1(OpKind::Arange { start, end }, vec![], t, span)?))
}

/// `zeros(shape, dtype)` and `full(shape, value, dtype)`: a tile of one value.
pub(super) fn fill(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let shape = cx.shape_arg(a.req(0))?;
    let (value, dt_idx) = if name == "zeros" {
        ((Val::Lit(Lit::Int(0)), span), 1)
    } else {
        (a.req(1), 2)
    };
    let d = match a.get(dt_idx) {
        Some(x) => cx.dtype_arg(x)?,
        None => match &value.0 {
            Val::V(id) => cx.ty(*id).dtype().unwrap_or(DType::F32),
            Val::Lit(Lit::Int(_)) if name == "full" => DType::I32,
            Val::Lit(Lit::Bool(_)) => DType::Bool,
            _ => DType::F32,
        },
    };
    let id = cx.value_for(value, d, &[], "the fill value")?;
    Ok(Val::V(cx.broadcast_to(id, &shape, span)?))
}

/// `cdiv(a, b)`: division rounding up, folded when both are integer literals.
pub(super) fn cdiv(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let parts = vec![a.req(0), a.req(1)];
    if let (Val::Lit(Lit::Int(x)), Val::Lit(Lit::Int(y))) = (&parts[0].0, &parts[1].0) {
        if *y == 0 {
            return cx.fail(Diagnostic::error(parts[1].1, "division by zero").label("zero"));
        }
        return Ok(Val::Lit(Lit::Int((x + y - 1) / y)));
    }
    let d = cx.meet(&parts);
    if !d.is_int() {
        return cx.fail(Diagnostic::error(span, format!("`cdiv` needs integers; found {d}")).label("not integers"));
    }
    let ids = cx.unify(parts, d, span)?;
    let one = cx.constant(ConstValue::Int(1), d);
    let one = cx.broadcast_to(one, &cx.ty(ids[0]).shape.clone(), span)?;
    let s = cx.binary_kind(OpKind::Binary(BinaryOp::Add), ids[0], ids[1], span)?;
    let s = cx.binary_kind(OpKind::Binary(BinaryOp::Sub), s, one, span)?;
    Ok(Val::V(cx.binary_kind(
        OpKind::Binary(BinaryOp::Div),
        s,
        ids[1],
        span,
    )?))
}
