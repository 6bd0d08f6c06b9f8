//! Elementwise built-ins: `where`, `maximum`/`minimum` (and two-argument `max`/`min`), `clamp`,
//! `fma` and the unary math functions.

use super::*;
use crate::ir::{BinaryOp, UnaryOp};

/// `where(cond, a, b)`: `a` where `cond` holds, else `b`; the branches may be pointers.
pub(super) fn select(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let c = cx.tile_arg(a.req(0), "the condition")?;
    if cx.ty(c).dtype() != Some(DType::Bool) {
        return cx.fail(
            Diagnostic::error(a.req(0).1, "the condition of `where` must be bool")
                .label(format!("this is {}", cx.ty(c))),
        );
    }
    let parts = vec![a.req(1), a.req(2)];
    let (pa, pb) = (cx.is_ptr(&parts[0].0), cx.is_ptr(&parts[1].0));
    let ids = if pa || pb {
        let x = cx.tile_arg(parts[0].clone(), "a branch")?;
        let y = cx.tile_arg(parts[1].clone(), "a branch")?;
        if cx.ty(x).elem != cx.ty(y).elem {
            return cx
                .fail(Diagnostic::error(span, "`where` branches must both be pointers of one type").label("mixed"));
        }
        let shape = cx.common_shape(&[(x, parts[0].1), (y, parts[1].1)], span)?;
        vec![cx.broadcast_to(x, &shape, span)?, cx.broadcast_to(y, &shape, span)?]
    } else {
        let d = cx.meet(&parts);
        cx.unify(parts, d, span)?
    };
    let shape = cx.common_shape(&[(c, a.req(0).1), (ids[0], span)], span)?;
    let c = cx.broadcast_to(c, &shape, span)?;
    let x = cx.broadcast_to(ids[0], &shape, span)?;
    let y = cx.broadcast_to(ids[1], &shape, span)?;
    let t = cx.ty(x).clone();
    Ok(Val::V(cx.emit1(OpKind::Select, vec![c, x, y], t, span)?))
}

/// `maximum(a, b)` and `minimum(a, b)`.
pub(super) fn min_max(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let op = if name == "maximum" {
        BinaryOp::Max
    } else {
        BinaryOp::Min
    };
    let (x, y) = (a.req(0), a.req(1));
    cx.elementwise_minmax(op, x.0, x.1, y.0, y.1, span)
}

/// `clamp(x, lo, hi)`: `min(max(x, lo), hi)`.
pub(super) fn clamp(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let parts = vec![a.req(0), a.req(1), a.req(2)];
    let d = cx.meet(&parts);
    let ids = cx.unify(parts, d, span)?;
    let lo = cx.binary_kind(OpKind::Binary(BinaryOp::Max), ids[0], ids[1], span)?;
    Ok(Val::V(cx.binary_kind(
        OpKind::Binary(BinaryOp::Min),
        lo,
        ids[2],
        span,
    )?))
}

/// `fma(a, b, c)`: `a * b + c`, computed in a float dtype.
pub(super) fn fma(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let parts = vec![a.req(0), a.req(1), a.req(2)];
    let mut d = cx.meet(&parts);
    if !d.is_float() {
        d = DType::F32;
    }
    let ids = cx.unify(parts, d, span)?;
    let t = cx.ty(ids[0]).clone();
    Ok(Val::V(cx.emit1(OpKind::Fma, ids, t, span)?))
}

/// `abs`, `floor`, `exp`, `sqrt`, ... `sigmoid`: one-argument math functions.
pub(super) fn unary_math(cx: &mut Cx<'_>, name: &str, a: Args, span: Span) -> R<Val> {
    let op = UnaryOp::from_name(name).unwrap();
    let x = cx.number_arg(a.req(0), &format!("the argument of `{name}`"))?;
    Ok(Val::V(cx.math(op, x, span)?))
}

impl Cx<'_> {
    fn is_ptr(&self, v: &Val) -> bool {
        matches!(v, Val::V(id) if self.ty(*id).elem.is_ptr())
    }

    pub(super) fn elementwise_minmax(
        &mut self,
        op: BinaryOp,
        x: Val,
        xs: Span,
        y: Val,
        ys: Span,
        span: Span,
    ) -> R<Val> {
        let parts = vec![(x, xs), (y, ys)];
        let d = self.meet(&parts);
        if d.is_bool() {
            return self.fail(Diagnostic::error(span, "maximum/minimum need numbers").label("bool operands"));
        }
        let ids = self.unify(parts, d, span)?;
        Ok(Val::V(self.binary_kind(OpKind::Binary(op), ids[0], ids[1], span)?))
    }

    /// Transcendental functions of f16/bf16/fp8 compute in f32; integers become f32.
    fn math(&mut self, op: UnaryOp, x: ValueId, span: Span) -> R<ValueId> {
        let d = self.ty(x).dtype().unwrap();
        let exact = matches!(op, UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Neg);
        if d.is_bool() {
            return self.fail(Diagnostic::error(span, format!("`{}` needs numbers", op.name())).label("bool argument"));
        }
        if exact && (d.is_float() || op == UnaryOp::Abs) {
            if d.is_fp8() {
                let up = self.cast(x, DType::F16, span)?;
                let r = self.unary(op, up, span)?;
                return self.cast(r, d, span);
            }
            return self.unary(op, x, span);
        }
        if exact && d.is_int() {
            return Ok(x); // floor/ceil of an integer is itself
        }
        match d {
            DType::F32 | DType::F64 => self.unary(op, x, span),
            _ if d.is_float() => {
                let up = self.cast(x, DType::F32, span)?;
                let r = self.unary(op, up, span)?;
                self.cast(r, d, span)
            }
            _ => {
                let up = self.cast(x, DType::F32, span)?;
                self.unary(op, up, span)
            }
        }
    }
}
