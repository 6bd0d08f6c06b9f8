//! Statements and control flow: `let`, assignment, `for` (with loop-carried values, or unrolled),
//! `if` (folded when the condition is a constant).

use std::collections::HashSet;

use super::expr::fmt_shape;
use super::*;
use crate::syntax::ast::{Block, Expr, ExprKind, ForLoop, Pattern, Stmt};

impl Cx<'_> {
    /// Checks a block in a new scope and returns the value of its tail expression.
    pub fn block(&mut self, b: &Block) -> R<Val> {
        self.push_scope(false);
        for s in &b.stmts {
            // An error in one statement is already reported; go on with the next.
            let _ = self.stmt(s);
        }
        let v = match &b.tail {
            Some(t) => self.expr(t),
            None => Ok(Val::Unit),
        };
        self.pop_scope();
        v
    }

    fn stmt(&mut self, s: &Stmt) -> R<()> {
        match s {
            Stmt::Let { pattern, ty, value, .. } => {
                let v = self.expr(value).and_then(|v| match ty {
                    Some(t) => self.annotate(v, t, value.span),
                    None => Ok(v),
                });
                match v {
                    Ok(v) => self.bind_pattern(pattern, v, value.span),
                    Err(r) => {
                        self.poison_pattern(pattern);
                        Err(r)
                    }
                }
            }
            Stmt::Assign {
                target,
                op,
                value,
                span,
            } => self.assign(target, *op, value, *span),
            Stmt::For(f) => self.for_loop(f),
            Stmt::Expr { expr, .. } => self.expr(expr).map(|_| ()),
        }
    }

    /// `let x: T = v`: a literal takes the type; a typed value must already have it.
    fn annotate(&mut self, v: Val, t: &ast::TypeExpr, span: Span) -> R<Val> {
        let elem = self.resolve_type(t)?;
        match (&v, elem) {
            (Val::Lit(_), Elem::Scalar(d)) => Ok(Val::V(self.lit_value(v, d, span)?)),
            (Val::V(id), _) if self.ty(*id).elem == elem => Ok(v),
            (Val::V(id), _) => {
                let found = self.ty(*id).clone();
                self.fail(
                    Diagnostic::error(span, "mismatched types")
                        .label(format!("this is {found}, not {elem}"))
                        .with(t.span(), "expected because of this annotation")
                        .help(format!("convert it with `.to({elem})`")),
                )
            }
            _ => self.fail(Diagnostic::error(span, "mismatched types").label(format!("expected {elem}"))),
        }
    }

    fn bind_pattern(&mut self, p: &Pattern, v: Val, span: Span) -> R<()> {
        match p {
            Pattern::Wildcard(_) => Ok(()),
            Pattern::Bind { name, mutable } => {
                // A mutable variable gets a fixed type now, so later assignments can be checked.
                let v = match (&v, mutable) {
                    (Val::Lit(_), true) => Val::V(self.value(v, name.span, None)?),
                    _ => v,
                };
                if *mutable && !matches!(v, Val::V(_) | Val::Poison) {
                    self.bind(&name.name, Val::Poison, true);
                    return self.fail(
                        Diagnostic::error(name.span, "only tiles and scalars can be mutable").label("cannot be `mut`"),
                    );
                }
                self.bind(&name.name, v, *mutable);
                Ok(())
            }
            Pattern::Tuple { items, span: pspan } => match v {
                Val::Tuple(vals) if vals.len() == items.len() => {
                    for (p, v) in items.iter().zip(vals) {
                        self.bind_pattern(p, v, span)?;
                    }
                    Ok(())
                }
                Val::Tuple(vals) => {
                    self.poison_pattern(p);
                    self.fail(
                        Diagnostic::error(
                            *pspan,
                            format!(
                                "pattern has {} names but the value has {} parts",
                                items.len(),
                                vals.len()
                            ),
                        )
                        .label("wrong number of names"),
                    )
                }
                Val::Poison => {
                    self.poison_pattern(p);
                    Err(Reported)
                }
                other => {
                    self.poison_pattern(p);
                    let l = format!("{}, not a tuple", self.describe(&other));
                    self.fail(
                        Diagnostic::error(*pspan, "cannot destructure a value that is not a tuple")
                            .label("tuple pattern")
                            .with(span, l)
                            .note("tuples come from `split(..)` and from `(a, b)` expressions"),
                    )
                }
            },
        }
    }

    fn poison_pattern(&mut self, p: &Pattern) {
        match p {
            Pattern::Wildcard(_) => {}
            Pattern::Bind { name, mutable } => self.bind(&name.name, Val::Poison, *mutable),
            Pattern::Tuple { items, .. } => items.iter().for_each(|p| self.poison_pattern(p)),
        }
    }

    fn assign(&mut self, target: &ast::Ident, op: Option<ast::BinOp>, value: &Expr, span: Span) -> R<()> {
        let Some((scope, b)) = self.lookup(&target.name).map(|(i, b)| (i, b.clone())) else {
            let _ = self.expr(value);
            return self.fail(
                Diagnostic::error(target.span, format!("cannot find variable `{}`", target.name))
                    .label("not declared")
                    .help(format!("declare it first: `let mut {} = ...;`", target.name)),
            );
        };
        if !b.mutable {
            let _ = self.expr(value);
            return self.fail(
                Diagnostic::error(
                    target.span,
                    format!("cannot assign twice to immutable variable `{}`", target.name),
                )
                .label("assigned here")
                .help(format!("declare it with `let mut {}`", target.name)),
            );
        }
        let Val::V(old) = b.val else {
            let _ = self.expr(value);
            return Err(Reported);
        };
        let new = match op {
            None => self.expr(value)?,
            Some(op) => {
                let rhs = self.expr(value)?;
                let r = self.binary(op, Val::V(old), target.span, rhs, value.span, span)?;
                // `x op= y` keeps x's dtype, like C.
                let want = self.ty(old).clone();
                match r {
                    Val::V(v)
                        if self.ty(v).shape == want.shape && self.ty(v).elem != want.elem && !want.elem.is_ptr() =>
                    {
                        Val::V(self.cast(v, want.elem.dtype().unwrap(), span)?)
                    }
                    r => r,
                }
            }
        };
        let new = self.coerce_to(new, &self.ty(old).clone(), value.span, &target.name, "variable")?;
        self.scopes[scope].names.get_mut(&target.name).unwrap().val = Val::V(new);
        Ok(())
    }

    /// A value for a slot of type `want`: literals take the type, tiles must already have it.
    pub fn coerce_to(&mut self, v: Val, want: &Type, span: Span, name: &str, what: &str) -> R<ValueId> {
        match v {
            Val::Lit(_) if want.is_scalar() && !want.elem.is_ptr() => self.lit_value(v, want.dtype().unwrap(), span),
            Val::V(id) if self.ty(id) == want => Ok(id),
            Val::V(id) => {
                let found = self.ty(id).clone();
                let change = if found.elem == want.elem { "shape" } else { "type" };
                let mut d = Diagnostic::error(span, format!("{what} `{name}` changes {change}"))
                    .label(format!("this is {found}, but `{name}` is {want}"));
                if found.shape == want.shape && !found.elem.is_ptr() && !want.elem.is_ptr() {
                    d = d.help(format!("convert it with `.to({})`", want.elem));
                }
                if found.shape != want.shape {
                    d = d.help(format!(
                        "declare it with its final shape, e.g. `zeros({})` or `full({}, value)`",
                        fmt_shape(&found.shape),
                        fmt_shape(&found.shape)
                    ));
                }
                if what == "variable" {
                    d = d.note("a `let mut` variable keeps the dtype and shape it was declared with, also across loop iterations");
                }
                self.fail(d)
            }
            Val::Poison => Err(Reported),
            _ => self.fail(
                Diagnostic::error(span, format!("cannot assign this to `{name}`")).label(format!("expected {want}")),
            ),
        }
    }

    // ---- loops --------------------------------------------------------------------------------

    /// The one value of loop attribute `a` as `read` takes it; `None` (reported: the attribute
    /// takes `want`, `label` under the value) when it does not.
    fn loop_attr_value<T>(
        &mut self,
        a: &crate::syntax::ast::Attribute,
        read: impl Fn(&Self, &Val) -> Option<T>,
        want: &str,
        label: &str,
    ) -> R<Option<T>> {
        let v = self.expr(&a.args[0])?;
        let got = read(self, &v);
        if got.is_none() {
            self.error(
                Diagnostic::error(a.args[0].span, format!("`#[{}(..)]` takes {want}", a.name.name)).label(label),
            );
        }
        Ok(got)
    }

    /// Reports loop attribute `a` given more values than it takes (`takes`).
    fn loop_attr_arity(&mut self, a: &crate::syntax::ast::Attribute, takes: &str, help: &str) {
        self.error(
            Diagnostic::error(a.span, format!("`#[{}(..)]` takes {takes}", a.name.name))
                .label(format!("{} values given", a.args.len()))
                .help(help),
        );
    }

    /// A loop attribute that asks for something when written bare (`#[pingpong]`) and takes at
    /// most one constant bool (`#[pingpong(false)]` forbids it); `None` after an error.
    fn loop_flag(&mut self, a: &crate::syntax::ast::Attribute) -> R<Option<bool>> {
        match a.args.len() {
            0 => Ok(Some(true)),
            1 => self.loop_attr_value(
                a,
                |cx, v| cx.const_bool(v),
                "a constant `true` or `false`",
                "not a constant bool",
            ),
            _ => {
                let n = &a.name.name;
                let help = format!("write `#[{n}]`, or `#[{n}(false)]` to forbid it");
                self.loop_attr_arity(a, "at most one value", &help);
                Ok(None)
            }
        }
    }

    fn for_loop(&mut self, f: &ForLoop) -> R<()> {
        let mut unroll = false;
        let mut stages = None;
        let mut warp_specialize = None;
        let mut pingpong = None;
        // A bad attribute is reported and ignored, so the loop body is still checked.
        let mut bad_attr = false;
        for a in &f.attrs {
            match a.name.name.as_str() {
                "unroll" if a.args.is_empty() => unroll = true,
                "unroll" => {
                    self.error(Diagnostic::error(a.span, "`#[unroll]` takes no arguments")
                        .label("unrolls the whole loop")
                        .help("write `#[unroll]`; to unroll part of a loop, unroll an inner loop with constant bounds"));
                    bad_attr = true;
                }
                "stages" if a.args.len() == 1 => {
                    let max = crate::ir::MAX_STAGES as i64;
                    let read =
                        move |cx: &Self, v: &Val| cx.const_int(v).filter(|n| (1..=max).contains(n)).map(|n| n as u32);
                    let valid = format!("a constant between 1 and {max}");
                    stages = self.loop_attr_value(a, read, &valid, "not a valid stage count")?;
                    bad_attr |= stages.is_none();
                }
                "stages" => {
                    self.loop_attr_arity(a, "one value", "e.g. `#[stages(3)]`");
                    bad_attr = true;
                }
                name @ ("warp_specialize" | "pingpong") => {
                    let flag = self.loop_flag(a)?;
                    bad_attr |= flag.is_none();
                    *if name == "pingpong" {
                        &mut pingpong
                    } else {
                        &mut warp_specialize
                    } = flag;
                }
                _ => {
                    self.error(
                        Diagnostic::error(a.name.span, format!("unknown loop attribute `{}`", a.name.name))
                            .label("not a loop attribute")
                            .help(
                                "loops take `#[unroll]`, `#[stages(N)]`, `#[warp_specialize(..)]` or `#[pingpong(..)]`",
                            ),
                    );
                    bad_attr = true;
                }
            }
        }
        if bad_attr && unroll {
            // Checking the body once as a run-time loop still finds the errors inside it.
            unroll = false;
        }
        let start = self.expr(&f.start)?;
        let end = self.expr(&f.end)?;
        let step = match &f.step {
            Some(s) => self.expr(s)?,
            None => Val::Lit(Lit::Int(1)),
        };
        if unroll {
            return self.unrolled(f, start, end, step);
        }
        // Bounds share one integer type.
        let mut d = None;
        for (v, e) in [
            (&start, &f.start),
            (&end, &f.end),
            (&step, f.step.as_ref().unwrap_or(&f.end)),
        ] {
            match v {
                Val::V(id) if self.ty(*id).is_scalar() && self.ty(*id).dtype().is_some_and(|x| x.is_int()) => {
                    let x = self.ty(*id).dtype().unwrap();
                    d = Some(d.map_or(x, |y| DType::promote(x, y)));
                }
                Val::Lit(Lit::Int(_)) => {}
                _ => {
                    return self.fail(
                        Diagnostic::error(e.span, "loop bounds must be integer scalars").label(self.describe(v)),
                    );
                }
            }
        }
        let d = d.unwrap_or(DType::I32);
        let bounds: Vec<ValueId> = [
            (start, &f.start),
            (end, &f.end),
            (step.clone(), f.step.as_ref().unwrap_or(&f.end)),
        ]
        .into_iter()
        .map(|(v, e)| self.value(v, e.span, Some(d)).and_then(|id| self.cast(id, d, e.span)))
        .collect::<R<_>>()?;
        if let Val::Lit(Lit::Int(s)) = step
            && s <= 0
        {
            return self.fail(
                Diagnostic::error(f.step.as_ref().unwrap().span, "loop step must be positive")
                    .label(format!("step is {s}")),
            );
        }
        let carried = self.carried_names(&f.body, Some(&f.var.name));
        let mut inits = Vec::new();
        let mut kept = Vec::new();
        for (name, _) in &carried {
            // Not a tile: the assignment inside reports it. A poisoned variable stays poisoned
            // (its uses report nothing), and the rest of the body is still checked.
            if let Some(Val::V(id)) = self.lookup(name).map(|(_, b)| b.val.clone()) {
                inits.push(id);
                kept.push(name.clone());
            }
        }
        let types: Vec<Type> = inits.iter().map(|v| self.ty(*v).clone()).collect();
        let iv = self.new_value(Type::scalar(d));
        let args: Vec<ValueId> = types.iter().map(|t| self.new_value(t.clone())).collect();
        self.push_scope(false);
        self.bind(&f.var.name, Val::V(iv), false);
        for (name, a) in kept.iter().zip(&args) {
            let mutable = self.lookup(name).is_some_and(|(_, b)| b.mutable);
            self.bind(name, Val::V(*a), mutable);
        }
        self.regions.push(Vec::new());
        let body = self.block(&f.body);
        let mut yields = Vec::new();
        for name in &kept {
            if let Some((_, b)) = self.lookup(name)
                && let Val::V(v) = b.val
            {
                yields.push(v);
            }
        }
        let ok = body.is_ok() && yields.len() == kept.len();
        if ok {
            self.emit(OpKind::Yield, yields, vec![], vec![], f.span)?;
        }
        let ops = self.regions.pop().unwrap();
        self.pop_scope();
        if !ok || bad_attr {
            return Err(Reported);
        }
        let mut operands = bounds;
        operands.extend(&inits);
        let mut region_args = vec![iv];
        region_args.extend(&args);
        let results = self.emit(
            OpKind::For {
                stages,
                warp_specialize,
                pingpong,
            },
            operands,
            types,
            vec![Region { args: region_args, ops }],
            f.span,
        )?;
        for (name, r) in kept.iter().zip(results) {
            self.set_var(name, Val::V(r));
        }
        Ok(())
    }

    fn unrolled(&mut self, f: &ForLoop, start: Val, end: Val, step: Val) -> R<()> {
        let (Some(s), Some(e), Some(st)) = (self.const_int(&start), self.const_int(&end), self.const_int(&step)) else {
            return self.fail(
                Diagnostic::error(f.start.span.to(f.end.span), "an `#[unroll]` loop needs constant bounds")
                    .label("not known at compile time")
                    .help("remove `#[unroll]` to loop at run time"),
            );
        };
        if st <= 0 {
            return self.fail(Diagnostic::error(f.span, "loop step must be positive").label(format!("step is {st}")));
        }
        let count = if e > s { (e - s + st - 1) / st } else { 0 };
        if count > MAX_UNROLL {
            return self.fail(
                Diagnostic::error(f.start.span.to(f.end.span), format!("cannot unroll {count} iterations"))
                    .label(format!("the limit is {MAX_UNROLL}"))
                    .help("remove `#[unroll]` to loop at run time"),
            );
        }
        let d = match &start {
            Val::V(id) => self.ty(*id).dtype().unwrap_or(DType::I32),
            _ => DType::I32,
        };
        let mut i = s;
        while i < e {
            self.count_op(f.span)?;
            self.push_scope(false);
            let c = self.constant(ConstValue::Int(i), d);
            self.bind(&f.var.name, Val::V(c), false);
            let r = self.block(&f.body);
            self.pop_scope();
            r?;
            i += st;
        }
        Ok(())
    }

    /// Sets a variable in the scope that declared it.
    fn set_var(&mut self, name: &str, v: Val) {
        if let Some((i, _)) = self.lookup(name) {
            self.scopes[i].names.get_mut(name).unwrap().val = v;
        }
    }

    /// Names assigned in `b` that are declared outside it, in first-assignment order.
    pub fn carried_names(&self, b: &Block, bound: Option<&str>) -> Vec<(String, Span)> {
        let mut out: Vec<(String, Span)> = Vec::new();
        let mut locals: Vec<HashSet<String>> = vec![bound.into_iter().map(String::from).collect()];
        walk_block(b, &mut locals, &mut out);
        out.retain(|(n, _)| self.lookup(n).is_some());
        out
    }

    // ---- if -----------------------------------------------------------------------------------

    pub fn if_expr(&mut self, cond: &Expr, then: &Block, els: Option<&Expr>, span: Span, want_value: bool) -> R<Val> {
        let c = self.expr(cond)?;
        if let Some(b) = self.const_bool(&c) {
            return match (b, els) {
                (true, _) => self.block(then),
                (false, Some(e)) => self.expr(e),
                (false, None) => Ok(Val::Unit),
            };
        }
        let cv = match c {
            Val::V(id) if *self.ty(id) == Type::scalar(DType::Bool) => id,
            Val::Poison => return Err(Reported),
            other => {
                let mut d =
                    Diagnostic::error(cond.span, "`if` needs a scalar bool condition").label(self.describe(&other));
                if matches!(other, Val::V(id) if !self.ty(id).is_scalar()) {
                    d = d.help("use `where(cond, a, b)` to choose element by element");
                }
                return self.fail(d);
            }
        };
        let mut names = self.carried_names(then, None);
        if let Some(e) = els {
            let mut locals = vec![HashSet::new()];
            walk_expr(e, &mut locals, &mut names);
            names.retain(|(n, _)| self.lookup(n).is_some());
            let mut seen = HashSet::new();
            names.retain(|(n, _)| seen.insert(n.clone()));
        }
        let mut kept = Vec::new();
        for (n, _) in &names {
            // A poisoned variable stays poisoned; the branches are still checked.
            if let Some(Val::V(id)) = self.lookup(n).map(|(_, b)| b.val.clone()) {
                kept.push((n.clone(), id));
            }
        }
        // Each branch runs in a scope holding copies of the assigned variables.
        #[allow(clippy::type_complexity)]
        let branch = |cx: &mut Self, body: Option<&dyn Fn(&mut Self) -> R<Val>>| -> R<(Vec<Op>, Vec<ValueId>, Val)> {
            cx.push_scope(false);
            for (n, id) in &kept {
                let mutable = cx.lookup(n).is_some_and(|(_, b)| b.mutable);
                cx.bind(n, Val::V(*id), mutable);
            }
            cx.regions.push(Vec::new());
            let v = match body {
                Some(f) => f(cx),
                None => Ok(Val::Unit),
            };
            let vals: Vec<ValueId> = kept
                .iter()
                .map(|(n, id)| match cx.lookup(n).map(|(_, b)| b.val.clone()) {
                    Some(Val::V(v)) => v,
                    _ => *id,
                })
                .collect();
            let ops = cx.regions.pop().unwrap();
            cx.pop_scope();
            Ok((ops, vals, v?))
        };
        let (mut t_ops, t_vals, t_val) = branch(self, Some(&|cx: &mut Self| cx.block(then)))?;
        let (mut e_ops, e_vals, e_val) = match els {
            Some(e) => branch(self, Some(&|cx: &mut Self| cx.expr(e)))?,
            None => branch(self, None)?,
        };
        let mut types: Vec<Type> = t_vals.iter().map(|v| self.ty(*v).clone()).collect();
        let (mut t_yield, mut e_yield) = (t_vals, e_vals);
        let has_value = want_value && !matches!(t_val, Val::Unit);
        if has_value {
            if els.is_none() {
                return self.fail(
                    Diagnostic::error(span, "`if` without `else` has no value")
                        .label("used as a value")
                        .help("add an `else` branch"),
                );
            }
            // Literals adapt to the other branch; the values then need one type.
            let (tv, ev) = self.unify_branches(t_val, e_val, then.span, els.unwrap().span, &mut t_ops, &mut e_ops)?;
            types.push(self.ty(tv).clone());
            t_yield.push(tv);
            e_yield.push(ev);
        }
        t_ops.push(Op {
            kind: OpKind::Yield,
            operands: t_yield,
            results: vec![],
            regions: vec![],
            loc: self.loc(then.span),
        });
        e_ops.push(Op {
            kind: OpKind::Yield,
            operands: e_yield,
            results: vec![],
            regions: vec![],
            loc: self.loc(span),
        });
        let regions = vec![
            Region {
                args: vec![],
                ops: t_ops,
            },
            Region {
                args: vec![],
                ops: e_ops,
            },
        ];
        let results = self.emit(OpKind::If, vec![cv], types, regions, span)?;
        for ((n, _), r) in kept.iter().zip(&results) {
            self.set_var(n, Val::V(*r));
        }
        Ok(if has_value {
            Val::V(*results.last().unwrap())
        } else {
            Val::Unit
        })
    }

    /// Gives both branch values one type, materialising literals inside their branch.
    fn unify_branches(
        &mut self,
        a: Val,
        b: Val,
        sa: Span,
        sb: Span,
        ops_a: &mut Vec<Op>,
        ops_b: &mut Vec<Op>,
    ) -> R<(ValueId, ValueId)> {
        let in_region = |cx: &mut Self, ops: &mut Vec<Op>, v: Val, span: Span, d: Option<DType>| -> R<ValueId> {
            cx.regions.push(std::mem::take(ops));
            let r = cx.value(v, span, d);
            *ops = cx.regions.pop().unwrap();
            r
        };
        let da = match &a {
            Val::V(id) => self.ty(*id).dtype(),
            _ => None,
        };
        let db = match &b {
            Val::V(id) => self.ty(*id).dtype(),
            _ => None,
        };
        let va = in_region(self, ops_a, a, sa, db)?;
        let vb = in_region(
            self,
            ops_b,
            b,
            sb,
            da.or(Some(self.ty(va).dtype().unwrap_or(DType::I32))),
        )?;
        if self.ty(va) != self.ty(vb) {
            let (ta, tb) = (self.ty(va).clone(), self.ty(vb).clone());
            return self.fail(
                Diagnostic::error(sb, "`if` and `else` have different types")
                    .label(format!("this is {tb}"))
                    .with(sa, format!("this is {ta}"))
                    .help(if ta.shape == tb.shape && !ta.elem.is_ptr() && !tb.elem.is_ptr() {
                        format!("convert one branch, e.g. `.to({})`", ta.elem)
                    } else {
                        "both branches need the same dtype and shape".to_string()
                    }),
            );
        }
        Ok((va, vb))
    }
}

fn walk_block(b: &Block, locals: &mut Vec<HashSet<String>>, out: &mut Vec<(String, Span)>) {
    locals.push(HashSet::new());
    for s in &b.stmts {
        match s {
            Stmt::Let { pattern, value, .. } => {
                walk_expr(value, locals, out);
                declare(pattern, locals.last_mut().unwrap());
            }
            Stmt::Assign { target, value, .. } => {
                walk_expr(value, locals, out);
                if !locals.iter().any(|l| l.contains(&target.name)) && !out.iter().any(|(n, _)| n == &target.name) {
                    out.push((target.name.clone(), target.span));
                }
            }
            Stmt::For(f) => {
                let inner = vec![HashSet::from([f.var.name.clone()])];
                locals.extend(inner);
                walk_block(&f.body, locals, out);
                locals.pop();
            }
            Stmt::Expr { expr, .. } => walk_expr(expr, locals, out),
        }
    }
    if let Some(t) = &b.tail {
        walk_expr(t, locals, out);
    }
    locals.pop();
}

fn walk_expr(e: &Expr, locals: &mut Vec<HashSet<String>>, out: &mut Vec<(String, Span)>) {
    match &e.kind {
        ExprKind::If { cond, then, els } => {
            walk_expr(cond, locals, out);
            walk_block(then, locals, out);
            if let Some(e) = els {
                walk_expr(e, locals, out);
            }
        }
        ExprKind::Block(b) => walk_block(b, locals, out),
        ExprKind::Unary(_, x) | ExprKind::Paren(x) => walk_expr(x, locals, out),
        ExprKind::Index { base, .. } => walk_expr(base, locals, out),
        ExprKind::Binary(_, a, b) => {
            walk_expr(a, locals, out);
            walk_expr(b, locals, out);
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|a| walk_expr(&a.value, locals, out)),
        ExprKind::Method { recv, args, .. } => {
            walk_expr(recv, locals, out);
            args.iter().for_each(|a| walk_expr(&a.value, locals, out));
        }
        ExprKind::Tuple(xs) | ExprKind::List(xs) => xs.iter().for_each(|x| walk_expr(x, locals, out)),
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Str(_) | ExprKind::Name(_) => {}
    }
}

fn declare(p: &Pattern, set: &mut HashSet<String>) {
    match p {
        Pattern::Bind { name, .. } => {
            set.insert(name.name.clone());
        }
        Pattern::Tuple { items, .. } => items.iter().for_each(|p| declare(p, set)),
        Pattern::Wildcard(_) => {}
    }
}
