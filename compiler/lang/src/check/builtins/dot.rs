//! `dot(a, b, acc, out, precision)`: matrix multiplication of 2-D tiles.

use super::*;
use crate::ir::Precision;

pub(super) fn dot(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let (av, as_) = a.req(0);
    let (bv, bs) = a.req(1);
    let x = cx.number_arg((av, as_), "the left operand of `dot`")?;
    let y = cx.number_arg((bv, bs), "the right operand of `dot`")?;
    let (tx, ty) = (cx.ty(x).clone(), cx.ty(y).clone());
    for (t, s) in [(&tx, as_), (&ty, bs)] {
        if t.shape.len() != 2 {
            let mut e = Diagnostic::error(
                s,
                format!(
                    "`dot` takes 2-D tiles; this has {} ax{}",
                    t.shape.len(),
                    if t.shape.len() == 1 { "is" } else { "es" }
                ),
            )
            .label(format!("this is {t}"));
            if tx.shape.len() == 1 && ty.shape.len() == 1 {
                e = e.help("for an inner product of 1-D tiles, use `sum(a * b)`");
            }
            return cx.fail(e);
        }
    }
    if tx.shape[1] != ty.shape[0] {
        return cx.fail(
            Diagnostic::error(
                bs,
                format!(
                    "dot shape mismatch: {} @ {}",
                    fmt_shape(&tx.shape),
                    fmt_shape(&ty.shape)
                ),
            )
            .label(format!("this is {ty}, with {} rows", ty.shape[0]))
            .with(as_, format!("this is {tx}, with {} columns", tx.shape[1]))
            .help("`dot(a, b)` multiplies [M, K] by [K, N]; use `trans(b)` if b is [N, K]"),
        );
    }
    let (dx, dy) = (tx.dtype().unwrap(), ty.dtype().unwrap());
    if dx != dy {
        return cx.fail(
            Diagnostic::error(bs, format!("`dot` operands have different dtypes: {dx} and {dy}"))
                .label(format!("this is {ty}"))
                .with(as_, format!("this is {tx}"))
                .help(format!("convert one side, e.g. `.to({dx})`")),
        );
    }
    if dx.is_bool() || (dx.is_int() && dx.bits() != 8) {
        return cx.fail(
            Diagnostic::error(as_, format!("`dot` does not take {dx} operands"))
                .label(format!("this is {dx}"))
                .note("dot takes f16, bf16, f32, f64, fp8 or 8-bit integer tiles"),
        );
    }
    let default_out = if dx.is_int() {
        DType::I32
    } else if dx == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let acc_ok = |d: DType| {
        if dx.is_int() {
            d == DType::I32
        } else {
            matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
        }
    };
    let out = match a.get(3) {
        Some(o) => Some((cx.dtype_arg(o.clone())?, o.1)),
        None => None,
    };
    if let Some((o, os)) = out
        && !acc_ok(o)
    {
        return cx.fail(
            Diagnostic::error(os, format!("`dot` of {dx} tiles cannot accumulate in {o}"))
                .label("not an accumulator dtype")
                .note(if dx.is_int() {
                    "8-bit integer products accumulate in i32"
                } else {
                    "float products accumulate in f16, bf16, f32 or f64"
                }),
        );
    }
    let (m, n) = (tx.shape[0], ty.shape[1]);
    let acc = match a.get(2) {
        Some((cv, cs)) => {
            let c = cx.number_arg((cv, cs), "the accumulator")?;
            let tc = cx.ty(c).clone();
            if !acc_ok(tc.dtype().unwrap()) {
                return cx.fail(
                    Diagnostic::error(
                        cs,
                        format!("`dot` of {dx} tiles cannot accumulate in {}", tc.dtype().unwrap()),
                    )
                    .label(format!("this is {tc}"))
                    .note(if dx.is_int() {
                        "8-bit integer products accumulate in i32"
                    } else {
                        "float products accumulate in f16, bf16, f32 or f64"
                    }),
                );
            }
            if tc.shape != [m, n] {
                return cx.fail(
                    Diagnostic::error(
                        cs,
                        format!(
                            "the accumulator must be {}; found {}",
                            fmt_shape(&[m, n]),
                            fmt_shape(&tc.shape)
                        ),
                    )
                    .label(format!("this is {tc}")),
                );
            }
            if let Some((o, os)) = out
                && Some(o) != tc.dtype()
            {
                return cx.fail(
                    Diagnostic::error(
                        os,
                        format!(
                            "`out: {o}` differs from the accumulator's dtype {}",
                            tc.dtype().unwrap()
                        ),
                    )
                    .label("conflicting dtype"),
                );
            }
            c
        }
        None => {
            let d = out.map_or(default_out, |(o, _)| o);
            let z = cx.constant(
                if d.is_float() {
                    ConstValue::Float(0.0)
                } else {
                    ConstValue::Int(0)
                },
                d,
            );
            cx.broadcast_to(z, &[m, n], span)?
        }
    };
    let prec = cx.str_arg(a.get(4), "precision", "ieee", &["ieee", "tf32"])?;
    let prec = Precision::from_name(&prec).unwrap();
    if prec == Precision::Tf32 && dx != DType::F32 {
        return cx.fail(
            Diagnostic::error(a.get(4).unwrap().1, "`precision: \"tf32\"` applies to f32 operands")
                .label(format!("operands are {dx}")),
        );
    }
    let t = cx.ty(acc).clone();
    Ok(Val::V(cx.emit1(OpKind::Dot(prec), vec![x, y, acc], t, span)?))
}
