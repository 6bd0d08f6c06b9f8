//! Expressions: names, literals, operators with broadcasting and type promotion, indexing.

use super::*;
use crate::ir::scalar;
use crate::ir::{BinaryOp, CmpOp, UnaryOp};
use crate::syntax::ast::{BinOp, Expr, ExprKind, IndexItem, UnOp};

/// Names a kernel may use without declaring them, for "did you mean" hints.
pub(crate) const BUILTIN_NAMES: &[&str] = &["inf", "nan"];

impl Cx<'_> {
    pub fn expr(&mut self, e: &Expr) -> R<Val> {
        match &e.kind {
            ExprKind::Int(v) => {
                if *v > u64::MAX as u128 {
                    return self
                        .fail(Diagnostic::error(e.span, "integer literal too large").label("does not fit in 64 bits"));
                }
                Ok(Val::Lit(Lit::Int(*v as i128)))
            }
            ExprKind::Float(v) => Ok(Val::Lit(Lit::Float(*v))),
            ExprKind::Bool(b) => Ok(Val::Lit(Lit::Bool(*b))),
            ExprKind::Str(s) => Ok(Val::Str(s.clone())),
            ExprKind::Name(n) => self.name(n, e.span),
            ExprKind::Paren(x) => self.expr(x),
            ExprKind::Unary(op, x) => {
                let v = self.expr(x)?;
                self.unary_op(*op, v, e.span)
            }
            ExprKind::Binary(op, a, b) => {
                let va = self.expr(a)?;
                let vb = self.expr(b)?;
                self.binary(*op, va, a.span, vb, b.span, e.span)
            }
            ExprKind::Call { func, args } => self.call(func, None, args, e.span),
            ExprKind::Method { recv, name, args } => self.call(name, Some(recv), args, e.span),
            ExprKind::Index { base, items } => {
                let v = self.expr(base)?;
                self.index(v, base.span, items, e.span)
            }
            ExprKind::Tuple(xs) => Ok(Val::Tuple(xs.iter().map(|x| self.expr(x)).collect::<R<_>>()?)),
            ExprKind::List(xs) => Ok(Val::List(xs.iter().map(|x| self.expr(x)).collect::<R<_>>()?)),
            ExprKind::If { cond, then, els } => self.if_expr(cond, then, els.as_deref(), e.span, true),
            ExprKind::Block(b) => self.block(b),
        }
    }

    fn name(&mut self, n: &str, span: Span) -> R<Val> {
        if let Some((_, b)) = self.lookup(n) {
            return match &b.val {
                Val::Poison => Err(Reported),
                v => Ok(v.clone()),
            };
        }
        if let Some(d) = DType::from_name(n) {
            return Ok(Val::DType(d));
        }
        match n {
            "inf" => return Ok(Val::Lit(Lit::Float(f64::INFINITY))),
            "nan" => return Ok(Val::Lit(Lit::Float(f64::NAN))),
            _ => {}
        }
        if self.helper(n).is_some() {
            return Ok(Val::Func(n.to_string()));
        }
        let mut d = Diagnostic::error(span, format!("cannot find `{n}` in this scope")).label("not found");
        let mut candidates: Vec<String> = Vec::new();
        for s in self.scopes[self.frame_base()..].iter() {
            candidates.extend(s.names.keys().cloned());
        }
        candidates.extend(BUILTIN_NAMES.iter().map(|s| s.to_string()));
        // A name of the caller (a kernel's constant, say) is out of a helper's sight.
        let callers = self.scopes[..self.frame_base()].iter().any(|s| s.names.contains_key(n));
        if callers {
            d = d.help(format!(
                "`{n}` belongs to the code that calls this helper; a helper sees only its parameters and the file's top-level names: pass `{n}` as an argument"
            ));
        } else if let Some(t) = super::suggest_dtype(n) {
            d = d.help(format!("for the dtype, write `{t}`"));
        } else if let Some(best) = closest(n, candidates.iter().map(|s| s.as_str())) {
            d = d.help(format!("a name with a similar spelling exists: `{best}`"));
        } else if super::builtins::is_builtin(n) {
            d = d.help(format!("`{n}` is a function: call it as `{n}(..)`"));
        }
        self.fail(d)
    }

    /// Describes a value for a label ("this is f32[128]").
    pub fn describe(&self, v: &Val) -> String {
        match v {
            Val::V(id) => format!("this is {}", self.ty(*id)),
            Val::Lit(Lit::Int(_)) => "this is an integer literal".into(),
            Val::Lit(Lit::Float(_)) => "this is a float literal".into(),
            Val::Lit(Lit::Bool(_)) => "this is a bool literal".into(),
            Val::DType(d) => format!("this is the type {d}"),
            Val::Str(_) => "this is a string".into(),
            Val::Tuple(_) => "this is a tuple".into(),
            Val::List(_) => "this is a list".into(),
            Val::Func(f) => format!("this is the function `{f}`"),
            Val::Desc(d) => format!("this is a tensor descriptor of {} blocks {:?}", d.pointee, d.block),
            Val::Unit => "this has no value".into(),
            Val::Poison => "this has an error".into(),
        }
    }

    // ---- constants ----------------------------------------------------------------------------

    pub fn const_int(&self, v: &Val) -> Option<i64> {
        match v {
            Val::Lit(Lit::Int(i)) => i64::try_from(*i).ok(),
            Val::V(id) => match self.known.get(id) {
                Some(ConstValue::Int(i)) => Some(*i),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn const_bool(&self, v: &Val) -> Option<bool> {
        match v {
            Val::Lit(Lit::Bool(b)) => Some(*b),
            Val::V(id) => match self.known.get(id) {
                Some(ConstValue::Bool(b)) => Some(*b),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn const_float(&self, v: &Val) -> Option<f64> {
        match v {
            Val::Lit(Lit::Float(f)) => Some(*f),
            Val::Lit(Lit::Int(i)) => Some(*i as f64),
            Val::V(id) => match self.known.get(id) {
                Some(ConstValue::Float(f)) => Some(*f),
                Some(ConstValue::Int(i)) => Some(*i as f64),
                _ => None,
            },
            _ => None,
        }
    }

    /// A literal as a constant of dtype `d`; integers must fit.
    pub fn lit_value(&mut self, v: Val, d: DType, span: Span) -> R<ValueId> {
        let Val::Lit(l) = v else {
            unreachable!("lit_value takes literals")
        };
        let c = match (l, d) {
            (Lit::Bool(b), DType::Bool) => ConstValue::Bool(b),
            (Lit::Bool(b), d) if d.is_int() => ConstValue::Int(b as i64),
            (Lit::Bool(b), _) => ConstValue::Float(b as u8 as f64),
            (Lit::Int(i), d) if d.is_int() => {
                let (lo, hi) = scalar::int_range(d);
                if i < lo || i > hi {
                    return self.fail(
                        Diagnostic::error(span, format!("literal {i} does not fit in {d}"))
                            .label(format!("{d} holds {lo}..={hi}")),
                    );
                }
                ConstValue::Int(if d == DType::U64 { i as u64 as i64 } else { i as i64 })
            }
            (Lit::Int(i), DType::Bool) => ConstValue::Bool(i != 0),
            (Lit::Int(i), _) => ConstValue::Float(scalar::round_float(d, i as f64)),
            (Lit::Float(f), d) if d.is_float() => ConstValue::Float(scalar::round_float(d, f)),
            (Lit::Float(_), d) => {
                return self.fail(
                    Diagnostic::error(span, format!("a float literal cannot become {d}"))
                        .label("float literal")
                        .help(format!("write an integer, or convert with `.to({d})`")),
                );
            }
        };
        Ok(self.constant(c, d))
    }

    /// Any value as an SSA value: literals take `hint` or their default type (i32, f32, bool).
    pub fn value(&mut self, v: Val, span: Span, hint: Option<DType>) -> R<ValueId> {
        match v {
            Val::V(id) => Ok(id),
            Val::Lit(l) => {
                let d = match (l, hint) {
                    (Lit::Float(_), Some(h)) if !h.is_float() => DType::F32,
                    (_, Some(h)) => h,
                    (Lit::Int(i), None) => {
                        if i32::try_from(i).is_ok() {
                            DType::I32
                        } else {
                            DType::I64
                        }
                    }
                    (Lit::Float(_), None) => DType::F32,
                    (Lit::Bool(_), None) => DType::Bool,
                };
                self.lit_value(v, d, span)
            }
            Val::Poison => Err(Reported),
            other => {
                let msg = self.describe(&other);
                self.fail(Diagnostic::error(span, "expected a tile or a scalar").label(msg))
            }
        }
    }

    // ---- conversions --------------------------------------------------------------------------

    pub fn cast(&mut self, v: ValueId, d: DType, span: Span) -> R<ValueId> {
        let t = self.ty(v).clone();
        if t.dtype() == Some(d) {
            return Ok(v);
        }
        if let Some(c) = self.known.get(&v).copied()
            && t.is_scalar()
        {
            let folded = scalar::cast_const(c, t.dtype().unwrap(), d);
            return Ok(self.constant(folded, d));
        }
        self.emit1(OpKind::Cast(ir::Rounding::Rne), vec![v], t.with_dtype(d), span)
    }

    pub fn broadcast_to(&mut self, v: ValueId, shape: &[usize], span: Span) -> R<ValueId> {
        let t = self.ty(v).clone();
        if t.shape == shape {
            return Ok(v);
        }
        self.emit1(OpKind::Broadcast, vec![v], t.with_shape(shape.to_vec()), span)
    }

    /// The common shape of operands, or a "shape mismatch" diagnostic.
    pub fn common_shape(&mut self, parts: &[(ValueId, Span)], _span: Span) -> R<Vec<usize>> {
        let mut shape: Vec<usize> = vec![];
        for (i, (v, s)) in parts.iter().enumerate() {
            let vs = self.ty(*v).shape.clone();
            match ir::broadcast_shapes(&shape, &vs) {
                Some(n) => shape = n,
                None => {
                    let (prev_v, prev_s) = parts[..i]
                        .iter()
                        .rev()
                        .find(|(p, _)| !self.ty(*p).shape.is_empty())
                        .copied()
                        .unwrap_or(parts[0]);
                    let prev = self.ty(prev_v).shape.clone();
                    // The operand that does not fit is the primary place; the whole operation
                    // would start where the first operand starts and blur the two labels.
                    return self.fail(Diagnostic::error(*s, format!("shape mismatch: {} and {} do not broadcast", fmt_shape(&prev), fmt_shape(&vs)))
                        .label(format!("this has shape {}", fmt_shape(&vs)))
                        .with(prev_s, format!("this has shape {}", fmt_shape(&prev)))
                        .note("dimensions broadcast when they are equal or one of them is 1; use `x[:, None]` to add an axis"));
                }
            }
        }
        Ok(shape)
    }

    /// Brings values (and literals) to one dtype `d` and one broadcast shape.
    pub fn unify(&mut self, parts: Vec<(Val, Span)>, d: DType, span: Span) -> R<Vec<ValueId>> {
        let mut ids = Vec::new();
        for (v, s) in &parts {
            let id = self.value(v.clone(), *s, Some(d))?;
            let id = self.cast(id, d, *s)?;
            ids.push((id, *s));
        }
        let shape = self.common_shape(&ids, span)?;
        ids.into_iter()
            .map(|(id, s)| self.broadcast_to(id, &shape, s))
            .collect()
    }

    /// The dtype operands meet in: typed operands promote; literals adapt.
    pub fn meet(&mut self, parts: &[(Val, Span)]) -> DType {
        let mut d: Option<DType> = None;
        for (v, _) in parts {
            if let Val::V(id) = v
                && let Some(x) = self.ty(*id).dtype()
            {
                d = Some(d.map_or(x, |y| DType::promote(x, y)));
            }
        }
        let has_float_lit = parts.iter().any(|(v, _)| matches!(v, Val::Lit(Lit::Float(_))));
        match d {
            Some(d) if has_float_lit && !d.is_float() => DType::F32,
            Some(d) => d,
            None if has_float_lit => DType::F32,
            None if parts.iter().all(|(v, _)| matches!(v, Val::Lit(Lit::Bool(_)))) => DType::Bool,
            None => {
                let big = parts
                    .iter()
                    .any(|(v, _)| matches!(v, Val::Lit(Lit::Int(i)) if i32::try_from(*i).is_err()));
                if big { DType::I64 } else { DType::I32 }
            }
        }
    }

    // ---- operators ----------------------------------------------------------------------------

    fn unary_op(&mut self, op: UnOp, v: Val, span: Span) -> R<Val> {
        match (op, &v) {
            (UnOp::Neg, Val::Lit(Lit::Int(i))) => return Ok(Val::Lit(Lit::Int(-i))),
            (UnOp::Neg, Val::Lit(Lit::Float(f))) => return Ok(Val::Lit(Lit::Float(-f))),
            (UnOp::Not, Val::Lit(Lit::Bool(b))) => return Ok(Val::Lit(Lit::Bool(!b))),
            (UnOp::Not, Val::Lit(Lit::Int(i))) => return Ok(Val::Lit(Lit::Int(!i))),
            _ => {}
        }
        let id = match v {
            Val::V(id) if !self.ty(id).elem.is_ptr() => id,
            Val::Poison => return Err(Reported),
            other => {
                let sym = if op == UnOp::Neg { "-" } else { "!" };
                let l = self.describe(&other);
                return self.fail(Diagnostic::error(span, format!("cannot apply `{sym}` to this value")).label(l));
            }
        };
        let d = self.ty(id).dtype().unwrap();
        let uop = match op {
            UnOp::Neg if d.is_bool() => {
                return self.fail(
                    Diagnostic::error(span, "cannot negate a bool")
                        .label("bool")
                        .help("use `!` for logical not"),
                );
            }
            UnOp::Neg => UnaryOp::Neg,
            UnOp::Not if d.is_float() => {
                return self.fail(
                    Diagnostic::error(span, format!("cannot apply `!` to {d}")).label("needs bool or an integer"),
                );
            }
            UnOp::Not => UnaryOp::Not,
        };
        Ok(Val::V(self.unary(uop, id, span)?))
    }

    /// Emits (or folds) a unary op on a value of any float/int dtype.
    pub fn unary(&mut self, op: UnaryOp, v: ValueId, span: Span) -> R<ValueId> {
        let t = self.ty(v).clone();
        if let Some(c) = self.known.get(&v).copied()
            && t.is_scalar()
            && let Some(f) = scalar::fold_unary(op, t.dtype().unwrap(), c)
        {
            return Ok(self.constant(f, t.dtype().unwrap()));
        }
        self.emit1(OpKind::Unary(op), vec![v], t, span)
    }

    pub fn binary(&mut self, op: BinOp, a: Val, sa: Span, b: Val, sb: Span, span: Span) -> R<Val> {
        if matches!(a, Val::Poison) || matches!(b, Val::Poison) {
            return Err(Reported);
        }
        if let (Val::Lit(x), Val::Lit(y)) = (&a, &b) {
            return match fold_lits(op, *x, *y) {
                Some(l) => Ok(Val::Lit(l)),
                None => self.fail(
                    Diagnostic::error(span, format!("cannot compute `{}` on these literals", op.symbol()))
                        .label("division by zero, overflow, or mismatched literal kinds"),
                ),
            };
        }
        for (v, s) in [(&a, sa), (&b, sb)] {
            if !matches!(v, Val::V(_) | Val::Lit(_)) {
                let l = self.describe(v);
                return self.fail(Diagnostic::error(s, format!("`{}` needs numbers or tiles", op.symbol())).label(l));
            }
        }
        let pa = matches!(a, Val::V(id) if self.ty(id).elem.is_ptr());
        let pb = matches!(b, Val::V(id) if self.ty(id).elem.is_ptr());
        if pa || pb {
            return self.pointer_arith(op, a, sa, b, sb, span, pa, pb);
        }
        let parts = vec![(a, sa), (b, sb)];
        let mut d = self.meet(&parts);
        use BinOp::*;
        let kind_err = |cx: &mut Self, needs: &str| -> R<Val> {
            let (da, db) = (cx.describe(&parts[0].0), cx.describe(&parts[1].0));
            let mut e = Diagnostic::error(span, format!("`{}` needs {needs}; found {d}", op.symbol()));
            e = if da == db {
                e.label(format!("both operands are {}", da.trim_start_matches("this is ")))
            } else {
                e.label(format!("operands are {d}")).with(sa, da).with(sb, db)
            };
            if matches!(op, BitAnd | BitOr | BitXor) && d.is_float() {
                e = e.help("to combine conditions, compare first: `(a > 0.0) & (b > 0.0)`; to work on the bits, `bitcast` to an integer type");
            }
            cx.fail(e)
        };
        match op {
            LogicAnd | LogicOr if !d.is_bool() => return kind_err(self, "bool operands"),
            BitAnd | BitOr | BitXor if d.is_float() => {
                return kind_err(self, "integer or bool operands");
            }
            Shl | Shr if !d.is_int() => return kind_err(self, "integer operands"),
            Add | Sub | Mul | Div | Rem if d.is_bool() => {
                return kind_err(self, "numbers (convert bools with `.to(i32)`)");
            }
            _ => {}
        }
        // fp8 values take part in arithmetic as f16, which holds both formats exactly.
        if d.is_fp8() {
            d = DType::F16;
        }
        let ids = self.unify(parts, d, span)?;
        let (x, y) = (ids[0], ids[1]);
        let cmp = |c| OpKind::Cmp(c);
        let kind = match op {
            Add => OpKind::Binary(BinaryOp::Add),
            Sub => OpKind::Binary(BinaryOp::Sub),
            Mul => OpKind::Binary(BinaryOp::Mul),
            Div => OpKind::Binary(BinaryOp::Div),
            Rem => OpKind::Binary(BinaryOp::Rem),
            Shl => OpKind::Binary(BinaryOp::Shl),
            Shr => OpKind::Binary(BinaryOp::Shr),
            BitAnd | LogicAnd => OpKind::Binary(BinaryOp::And),
            BitOr | LogicOr => OpKind::Binary(BinaryOp::Or),
            BitXor => OpKind::Binary(BinaryOp::Xor),
            Eq => cmp(CmpOp::Eq),
            Ne => cmp(CmpOp::Ne),
            Lt => cmp(CmpOp::Lt),
            Le => cmp(CmpOp::Le),
            Gt => cmp(CmpOp::Gt),
            Ge => cmp(CmpOp::Ge),
        };
        Ok(Val::V(self.binary_kind(kind, x, y, span)?))
    }

    /// Emits (or folds) a binary or comparison op on operands of one type.
    pub fn binary_kind(&mut self, kind: OpKind, x: ValueId, y: ValueId, span: Span) -> R<ValueId> {
        let t = self.ty(x).clone();
        let rt = if matches!(kind, OpKind::Cmp(_)) {
            t.with_dtype(DType::Bool)
        } else {
            t.clone()
        };
        if let (Some(cx), Some(cy)) = (self.known.get(&x).copied(), self.known.get(&y).copied())
            && t.is_scalar()
        {
            match scalar::fold_binary(&kind, t.dtype().unwrap(), cx, cy) {
                Ok(Some(c)) => return Ok(self.constant(c, rt.dtype().unwrap())),
                Ok(None) => {}
                Err(msg) => {
                    return self.fail(Diagnostic::error(span, msg).label("in this constant expression"));
                }
            }
        }
        self.emit1(kind, vec![x, y], rt, span)
    }

    #[allow(clippy::too_many_arguments)]
    fn pointer_arith(
        &mut self,
        op: BinOp,
        a: Val,
        sa: Span,
        b: Val,
        sb: Span,
        span: Span,
        pa: bool,
        pb: bool,
    ) -> R<Val> {
        let (p, ps, o, os) = match (op, pa, pb) {
            (BinOp::Add, true, false) | (BinOp::Sub, true, false) => (a, sa, b, sb),
            (BinOp::Add, false, true) => (b, sb, a, sa),
            _ => {
                let mut e = Diagnostic::error(span, format!("`{}` is not defined on pointers", op.symbol()))
                    .label("pointer arithmetic")
                    .note("a pointer can be offset by an integer: `ptr + offsets`, `ptr - n`");
                if op == BinOp::Mul {
                    e = e.help("scale the offsets instead: `ptr + offs * n`");
                }
                return self.fail(e);
            }
        };
        let od = match &o {
            Val::V(id) => self.ty(*id).dtype(),
            Val::Lit(Lit::Int(_)) => Some(DType::I32),
            _ => None,
        };
        let Some(od) = od.filter(|d| d.is_int()) else {
            let l = self.describe(&o);
            let mut e = Diagnostic::error(os, "a pointer offset must be an integer")
                .label(l)
                .with(ps, "pointer");
            if od.is_some_and(|d| d.is_float()) || matches!(o, Val::Lit(Lit::Float(_))) {
                e = e.help("offsets count elements; compute them with integers, or convert with `.to(i32)`");
            }
            return self.fail(e);
        };
        let Val::V(pid) = p else { unreachable!() };
        let mut off = self.value(o, os, Some(od))?;
        if op == BinOp::Sub {
            // Negate in 64 bits: an unsigned offset must move the pointer back, not forward.
            off = self.cast(off, DType::I64, os)?;
            off = self.unary(UnaryOp::Neg, off, os)?;
        }
        let shape = self.common_shape(&[(pid, ps), (off, os)], span)?;
        let pid = self.broadcast_to(pid, &shape, ps)?;
        let off = self.broadcast_to(off, &shape, os)?;
        let t = self.ty(pid).clone();
        Ok(Val::V(self.emit1(OpKind::PtrAdd, vec![pid, off], t, span)?))
    }

    fn index(&mut self, v: Val, vs: Span, items: &[IndexItem], span: Span) -> R<Val> {
        let id = match v {
            Val::V(id) => id,
            Val::Lit(_) => self.value(v, vs, None)?,
            Val::Poison => return Err(Reported),
            other => {
                let l = self.describe(&other);
                return self.fail(Diagnostic::error(vs, "only tiles can be indexed").label(l));
            }
        };
        let rank = self.ty(id).shape.len();
        let full = items.iter().filter(|i| matches!(i, IndexItem::Full(_))).count();
        if full != rank {
            return self.fail(
                Diagnostic::error(span, format!("index has {full} `:` but the tile has {rank} axes"))
                    .label(format!("the tile is {}", self.ty(id)))
                    .note(
                        "an index keeps every axis with `:` and adds one of size 1 with `None`; tiles cannot be sliced",
                    ),
            );
        }
        let mut cur = id;
        for (pos, item) in items.iter().enumerate() {
            if let IndexItem::NewAxis(s) = item {
                let mut shape = self.ty(cur).shape.clone();
                shape.insert(pos, 1);
                let t = self.ty(cur).with_shape(shape);
                cur = self.emit1(OpKind::ExpandDims(pos), vec![cur], t, *s)?;
            }
        }
        Ok(Val::V(cur))
    }
}

pub(crate) fn fmt_shape(s: &[usize]) -> String {
    format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

fn fold_lits(op: BinOp, a: Lit, b: Lit) -> Option<Lit> {
    use BinOp::*;
    use Lit::*;
    Some(match (a, b) {
        (Int(x), Int(y)) => match op {
            Add => Int(x.checked_add(y)?),
            Sub => Int(x.checked_sub(y)?),
            Mul => Int(x.checked_mul(y)?),
            Div => Int(x.checked_div(y)?),
            Rem => Int(x.checked_rem(y)?),
            Shl => Int(x.checked_shl(u32::try_from(y).ok().filter(|s| *s < 64)?)?),
            Shr => Int(x.checked_shr(u32::try_from(y).ok().filter(|s| *s < 64)?)?),
            BitAnd => Int(x & y),
            BitOr => Int(x | y),
            BitXor => Int(x ^ y),
            Eq => Bool(x == y),
            Ne => Bool(x != y),
            Lt => Bool(x < y),
            Le => Bool(x <= y),
            Gt => Bool(x > y),
            Ge => Bool(x >= y),
            LogicAnd | LogicOr => return None,
        }
        .clamp_int()?,
        (Bool(x), Bool(y)) => match op {
            LogicAnd | BitAnd => Bool(x && y),
            LogicOr | BitOr => Bool(x || y),
            BitXor | Ne => Bool(x != y),
            Eq => Bool(x == y),
            _ => return None,
        },
        (Float(_) | Int(_), Float(_) | Int(_)) => {
            let f = |l| match l {
                Float(f) => f,
                Int(i) => i as f64,
                Bool(_) => unreachable!(),
            };
            let (x, y) = (f(a), f(b));
            match op {
                Add => Float(x + y),
                Sub => Float(x - y),
                Mul => Float(x * y),
                Div => Float(x / y),
                Rem => Float(x % y),
                Eq => Bool(x == y),
                Ne => Bool(x != y),
                Lt => Bool(x < y),
                Le => Bool(x <= y),
                Gt => Bool(x > y),
                Ge => Bool(x >= y),
                _ => return None,
            }
        }
        _ => return None,
    })
}

impl Lit {
    /// Integer literals stay within 64 bits (signed or unsigned).
    fn clamp_int(self) -> Option<Lit> {
        match self {
            Lit::Int(i) if i < i64::MIN as i128 || i > u64::MAX as i128 => None,
            l => Some(l),
        }
    }
}

/// The candidate closest to `name` by edit distance, if close enough to be a likely typo.
pub(crate) fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    // Every one-letter name is one edit from every other: no suggestion is better than a guess.
    // A name past MAX_NAME_CHARS is no typo of a name anyone wrote, and comparing two such
    // names costs the product of their lengths.
    let len = name.chars().count();
    if !(2..=crate::diag::MAX_NAME_CHARS).contains(&len) {
        return None;
    }
    let most = (name.len().max(2) / 3).max(1);
    // A name whose length in bytes differs by more than 4 * `most` (a character is at most 4
    // bytes) is more than `most` edits away: not worth its quadratic comparison.
    for c in candidates.filter(|c| c.len().abs_diff(name.len()) <= 4 * most) {
        let d = edit_distance(name, c);
        if d <= most && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = if a[i - 1] == b[j - 1] { 0 } else { 1 };
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}
