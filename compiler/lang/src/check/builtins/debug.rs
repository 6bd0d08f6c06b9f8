//! Checks and output: `static_assert` at compile time, `assert` and `print` at run time.

use super::*;

/// `static_assert(cond, msg)`: fails the compile when `cond` is false.
pub(super) fn static_assert(cx: &mut Cx<'_>, _name: &str, a: Args, _span: Span) -> R<Val> {
    let (c, cs) = a.req(0);
    let msg = match a.get(1) {
        Some((Val::Str(m), _)) => m,
        Some((_, s)) => {
            return cx.fail(Diagnostic::error(s, "the message must be a string").label("not a string"));
        }
        None => "the condition is false".to_string(),
    };
    match cx.const_bool(&c) {
        Some(true) => Ok(Val::Unit),
        Some(false) => cx.fail(
            Diagnostic::error(cs, format!("static assertion failed: {msg}")).label("this is false at compile time"),
        ),
        None => cx.fail(
            Diagnostic::error(cs, "`static_assert` needs a condition known at compile time")
                .label("depends on run-time values")
                .help("use `assert(..)` to check at run time (debug builds)"),
        ),
    }
}

/// `assert(cond, msg)`: checks `cond` at run time (debug builds).
pub(super) fn assert(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let c = cx.tile_arg(a.req(0), "the condition")?;
    if cx.ty(c).dtype() != Some(DType::Bool) {
        return cx.fail(
            Diagnostic::error(a.req(0).1, "`assert` needs a bool condition").label(format!("this is {}", cx.ty(c))),
        );
    }
    let msg = match a.get(1) {
        Some((Val::Str(m), _)) => m,
        Some((_, s)) => {
            return cx.fail(Diagnostic::error(s, "the message must be a string").label("not a string"));
        }
        None => "assertion failed".to_string(),
    };
    cx.emit(OpKind::Assert(msg), vec![c], vec![], vec![], span)?;
    Ok(Val::Unit)
}

/// `print("msg", x, ..)`: a message and any number of values, so its arguments are not bound.
pub(super) fn print(cx: &mut Cx<'_>, args: Vec<(Option<&ast::Ident>, Val, Span)>, span: Span) -> R<Val> {
    let mut it = args.into_iter();
    let msg = match it.next() {
        Some((None, Val::Str(s), _)) => s,
        _ => {
            return cx.fail(
                Diagnostic::error(span, "`print` starts with a message string").label("e.g. `print(\"x =\", x)`"),
            );
        }
    };
    let mut ops = Vec::new();
    for (n, v, s) in it {
        if let Some(n) = n {
            return cx.fail(Diagnostic::error(n.span, "`print` takes no named arguments").label("named argument"));
        }
        ops.push(cx.tile_arg((v, s), "a printed value")?);
    }
    cx.emit(OpKind::Print(msg), ops, vec![], vec![], span)?;
    Ok(Val::Unit)
}
