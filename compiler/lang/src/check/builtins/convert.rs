//! Built-ins that change a value's dtype: `to`/`cast` convert values, `bitcast` keeps the bits.

use super::*;
use crate::ir::Rounding;

/// `to(x, dtype, rounding)` and its alias `cast`.
pub(super) fn to_dtype(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let (xv, xs) = a.req(0);
    let d = cx.dtype_arg(a.req(1))?;
    let rounding = cx.str_arg(a.get(2), "rounding", "rne", &["rne", "rtz"])?;
    let x = cx.number_arg((xv, xs), "the converted value")?;
    let from = cx.ty(x).dtype().unwrap();
    if from == d {
        return Ok(Val::V(x));
    }
    let r = Rounding::from_name(&rounding).unwrap();
    if r == Rounding::Rtz && !(from.is_float() && d.is_float() && d.bits() < from.bits()) {
        return cx.fail(
            Diagnostic::error(a.get(2).unwrap().1, "rounding applies to narrowing float conversions")
                .label(format!("{from} to {d} is not one")),
        );
    }
    if r == Rounding::Rne {
        return Ok(Val::V(cx.cast(x, d, span)?));
    }
    let t = cx.ty(x).with_dtype(d);
    Ok(Val::V(cx.emit1(OpKind::Cast(r), vec![x], t, span)?))
}

/// `bitcast(x, dtype)`: the same bits read as another type of the same width.
pub(super) fn bitcast(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let x = cx.number_arg(a.req(0), "the value")?;
    let d = cx.dtype_arg(a.req(1))?;
    let from = cx.ty(x).dtype().unwrap();
    if from.bits() != d.bits() || from.is_bool() || d.is_bool() {
        return cx.fail(
            Diagnostic::error(span, format!("cannot bitcast {from} to {d}"))
                .label(format!("{from} has {} bits, {d} has {}", from.bits(), d.bits()))
                .help("bitcast keeps the bits, so both types need the same width; use `.to(..)` to convert values"),
        );
    }
    let t = cx.ty(x).with_dtype(d);
    Ok(Val::V(cx.emit1(OpKind::Bitcast, vec![x], t, span)?))
}
