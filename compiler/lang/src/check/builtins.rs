//! Calls: the built-in operations of the language and inlined helper functions.

use super::expr::{closest, fmt_shape};
use super::*;
use crate::ir::{AtomicOp, BinaryOp, Precision, ReduceOp, Rounding, UnaryOp};
use crate::syntax::ast::{Arg, Expr};

/// Every built-in function with its parameter names; the first `required` must be given.
const BUILTINS: &[(&str, &[&str], usize)] = &[
    ("program_id", &["axis"], 0),
    ("num_programs", &["axis"], 0),
    ("arange", &["start", "end"], 2),
    ("zeros", &["shape", "dtype"], 1),
    ("full", &["shape", "value", "dtype"], 2),
    ("cdiv", &["a", "b"], 2),
    ("load", &["ptr", "mask", "other"], 1),
    ("store", &["ptr", "value", "mask"], 2),
    ("dot", &["a", "b", "acc", "out", "precision"], 2),
    ("sum", &["x", "axis", "keep_dims"], 1),
    ("prod", &["x", "axis", "keep_dims"], 1),
    ("max", &["x", "axis", "keep_dims"], 1),
    ("min", &["x", "axis", "keep_dims"], 1),
    ("xor_sum", &["x", "axis", "keep_dims"], 1),
    ("argmax", &["x", "axis", "keep_dims"], 1),
    ("argmin", &["x", "axis", "keep_dims"], 1),
    ("reduce", &["x", "axis", "combine", "keep_dims"], 3),
    ("cumsum", &["x", "axis", "reverse"], 1),
    ("cumprod", &["x", "axis", "reverse"], 1),
    ("scan", &["x", "axis", "combine", "reverse"], 3),
    ("where", &["cond", "a", "b"], 3),
    ("maximum", &["a", "b"], 2),
    ("minimum", &["a", "b"], 2),
    ("clamp", &["x", "lo", "hi"], 3),
    ("fma", &["a", "b", "c"], 3),
    ("abs", &["x"], 1),
    ("floor", &["x"], 1),
    ("ceil", &["x"], 1),
    ("exp", &["x"], 1),
    ("exp2", &["x"], 1),
    ("log", &["x"], 1),
    ("log2", &["x"], 1),
    ("sqrt", &["x"], 1),
    ("rsqrt", &["x"], 1),
    ("sin", &["x"], 1),
    ("cos", &["x"], 1),
    ("tanh", &["x"], 1),
    ("erf", &["x"], 1),
    ("sigmoid", &["x"], 1),
    ("broadcast", &["x", "shape"], 2),
    ("broadcast_to", &["x", "shape"], 2),
    ("expand_dims", &["x", "axis"], 2),
    ("reshape", &["x", "shape"], 2),
    ("trans", &["x"], 1),
    ("permute", &["x", "dims"], 2),
    ("join", &["a", "b"], 2),
    ("split", &["x"], 1),
    ("to", &["x", "dtype", "rounding"], 2),
    ("cast", &["x", "dtype", "rounding"], 2),
    ("bitcast", &["x", "dtype"], 2),
    ("atomic_add", &["ptr", "value", "mask"], 2),
    ("atomic_max", &["ptr", "value", "mask"], 2),
    ("atomic_min", &["ptr", "value", "mask"], 2),
    ("atomic_and", &["ptr", "value", "mask"], 2),
    ("atomic_or", &["ptr", "value", "mask"], 2),
    ("atomic_xor", &["ptr", "value", "mask"], 2),
    ("atomic_xchg", &["ptr", "value", "mask"], 2),
    ("atomic_cas", &["ptr", "cmp", "value", "mask"], 3),
    ("multiple_of", &["x", "n"], 2),
    ("max_contiguous", &["x", "n"], 2),
    ("static_assert", &["cond", "msg"], 1),
    ("assert", &["cond", "msg"], 1),
    ("print", &[], 0),
];

pub(crate) fn is_builtin(name: &str) -> bool {
    BUILTINS.iter().any(|(n, ..)| *n == name)
}

/// Evaluated arguments in parameter order (`None` where not given).
struct Args {
    vals: Vec<Option<(Val, Span)>>,
}

impl Args {
    fn get(&self, i: usize) -> Option<(Val, Span)> {
        self.vals.get(i).cloned().flatten()
    }
    fn req(&self, i: usize) -> (Val, Span) {
        self.get(i).expect("required arguments are checked when binding")
    }
}

impl<'a> Cx<'a> {
    pub fn call(&mut self, func: &ast::Ident, recv: Option<&Expr>, args: &[Arg], span: Span) -> R<Val> {
        let name = func.name.as_str();
        let mut evaluated: Vec<(Option<&ast::Ident>, Val, Span)> = Vec::new();
        let mut failed = false;
        // `tl.arange(..)`: Triton's module prefix.
        if let Some(r) = recv
            && let ast::ExprKind::Name(m) = &r.kind
            && matches!(m.as_str(), "tl" | "triton")
            && self.lookup(m).is_none()
        {
            for a in args {
                let _ = self.expr(&a.value);
            }
            return self.fail(
                Diagnostic::error(r.span.to(func.span), format!("there is no `{m}` module"))
                    .label("Triton-style prefix")
                    .help(format!("built-ins are called directly: `{name}(..)`")),
            );
        }
        if let Some(r) = recv {
            match self.expr(r) {
                Ok(v) => evaluated.push((None, v, r.span)),
                Err(_) => failed = true,
            }
        }
        for a in args {
            match self.expr(&a.value) {
                Ok(v) => evaluated.push((a.name.as_ref(), v, a.value.span)),
                Err(_) => failed = true,
            }
        }
        if failed || evaluated.iter().any(|(_, v, _)| matches!(v, Val::Poison)) {
            return Err(Reported);
        }
        if recv.is_none()
            && let Some(h) = self.helper(name)
        {
            return self.inline_call(h, evaluated, span);
        }
        if name == "print" {
            return self.print(evaluated, span);
        }
        let Some((_, params, required)) = BUILTINS.iter().find(|(n, ..)| *n == name).copied() else {
            let mut d = Diagnostic::error(func.span, format!("cannot find function `{name}`"))
                .label("not a built-in or a helper");
            let helpers: Vec<&str> = self
                .file
                .items
                .iter()
                .filter_map(|i| match i {
                    ast::Item::Function(f) => Some(f.name.name.as_str()),
                    _ => None,
                })
                .collect();
            if let Some(s) = closest(name, BUILTINS.iter().map(|b| b.0).chain(helpers)) {
                d = d.help(format!("a function with a similar name exists: `{s}`"));
            }
            return self.fail(d);
        };
        // `max(a, b)` with two positional values is the elementwise maximum.
        let positional = evaluated.iter().filter(|(n, ..)| n.is_none()).count();
        if matches!(name, "max" | "min") && positional == 2 && evaluated.len() == 2 {
            let op = if name == "max" { BinaryOp::Max } else { BinaryOp::Min };
            return self.elementwise_minmax(
                op,
                evaluated[0].1.clone(),
                evaluated[0].2,
                evaluated[1].1.clone(),
                evaluated[1].2,
                span,
            );
        }
        let a = self.bind_args(name, params, required, evaluated, func.span, span)?;
        self.builtin(name, a, span)
    }

    fn bind_args(
        &mut self,
        name: &str,
        params: &[&str],
        required: usize,
        evaluated: Vec<(Option<&ast::Ident>, Val, Span)>,
        _fspan: Span,
        span: Span,
    ) -> R<Args> {
        let mut vals: Vec<Option<(Val, Span)>> = vec![None; params.len()];
        let mut next = 0;
        let signature = format!(
            "{name}({})",
            params
                .iter()
                .enumerate()
                .map(|(i, p)| if i < required { p.to_string() } else { format!("{p}?") })
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (n, v, s) in evaluated {
            let slot = match n {
                None => {
                    if next >= params.len() {
                        return self.fail(
                            Diagnostic::error(s, format!("`{name}` takes at most {} arguments", params.len()))
                                .label("extra argument")
                                .note(format!("the signature is `{signature}`")),
                        );
                    }
                    next += 1;
                    next - 1
                }
                Some(id) => match params.iter().position(|p| *p == id.name) {
                    Some(i) => i,
                    None => {
                        return self.fail(
                            Diagnostic::error(id.span, format!("`{name}` has no parameter `{}`", id.name))
                                .label("unknown argument name")
                                .note(format!("the signature is `{signature}`")),
                        );
                    }
                },
            };
            if let Some((_, first)) = &vals[slot] {
                return self.fail(
                    Diagnostic::error(s, format!("argument `{}` given twice", params[slot]))
                        .label("again here")
                        .with(*first, "first given here")
                        .note(format!("the signature is `{signature}`")),
                );
            }
            vals[slot] = Some((v, s));
        }
        if let Some(missing) = (0..required).find(|i| vals[*i].is_none()) {
            let given = vals.iter().filter(|v| v.is_some()).count();
            return self.fail(
                Diagnostic::error(
                    span,
                    format!(
                        "`{name}` needs {required} argument{}, {given} given",
                        if required == 1 { "" } else { "s" }
                    ),
                )
                .label(format!("missing `{}`", params[missing]))
                .note(format!("the signature is `{signature}`")),
            );
        }
        Ok(Args { vals })
    }

    // ---- argument kinds -----------------------------------------------------------------------

    /// A tile or scalar argument (literals materialised with their default type).
    fn tile_arg(&mut self, (v, s): (Val, Span), what: &str) -> R<ValueId> {
        match v {
            Val::V(_) | Val::Lit(_) => self.value(v, s, None),
            other => {
                let l = self.describe(&other);
                self.fail(Diagnostic::error(s, format!("{what} must be a tile or a scalar")).label(l))
            }
        }
    }

    fn number_arg(&mut self, a: (Val, Span), what: &str) -> R<ValueId> {
        let s = a.1;
        let v = self.tile_arg(a, what)?;
        if self.ty(v).elem.is_ptr() {
            return self.fail(
                Diagnostic::error(s, format!("{what} must be numbers, not pointers"))
                    .label(format!("this is {}", self.ty(v))),
            );
        }
        Ok(v)
    }

    fn const_int_arg(&mut self, (v, s): (Val, Span), what: &str) -> R<i64> {
        match self.const_int(&v) {
            Some(i) => Ok(i),
            None if matches!(v, Val::V(_)) => self.fail(
                Diagnostic::error(s, format!("{what} must be known at compile time"))
                    .label("this is only known at run time")
                    .help("use a literal or a `const` parameter"),
            ),
            None => {
                let l = self.describe(&v);
                self.fail(Diagnostic::error(s, format!("{what} must be an integer constant")).label(l))
            }
        }
    }

    fn axis_arg(&mut self, a: (Val, Span), rank: usize) -> R<usize> {
        let s = a.1;
        let i = self.const_int_arg(a, "an axis")?;
        let r = rank as i64;
        if i >= r || i < -r {
            return self.fail(
                Diagnostic::error(
                    s,
                    format!(
                        "axis {i} is out of range for a tile with {rank} ax{}",
                        if rank == 1 { "is" } else { "es" }
                    ),
                )
                .label(match rank {
                    0 => "a scalar has no axes".to_string(),
                    1 => "the only axis is 0 (or -1)".to_string(),
                    _ => format!("valid axes are 0 to {} (or -{rank} to -1)", rank - 1),
                }),
            );
        }
        Ok(if i < 0 { (i + r) as usize } else { i as usize })
    }

    fn shape_arg(&mut self, (v, s): (Val, Span)) -> R<Vec<usize>> {
        let items = match v {
            Val::List(items) => items,
            other => vec![other],
        };
        let mut shape = Vec::new();
        for it in items {
            match self.const_int(&it) {
                Some(d) if d >= 1 && d <= MAX_TILE_ELEMENTS as i64 => shape.push(d as usize),
                Some(d) => {
                    return self.fail(
                        Diagnostic::error(s, format!("invalid tile dimension {d}"))
                            .label("dimensions are between 1 and 2^20"),
                    );
                }
                None => {
                    return self.fail(
                        Diagnostic::error(s, "tile shapes must be known at compile time")
                            .label("this shape depends on a run-time value")
                            .help("use literals or `const` parameters, and mask the part beyond the data"),
                    );
                }
            }
        }
        let t = Type::tile(DType::I32, shape.clone());
        self.check_tile_size(&t, s)?;
        Ok(shape)
    }

    fn dtype_arg(&mut self, (v, s): (Val, Span)) -> R<DType> {
        match v {
            Val::DType(d) => Ok(d),
            other => {
                let l = self.describe(&other);
                self.fail(
                    Diagnostic::error(s, "expected a dtype")
                        .label(l)
                        .note("dtypes are bool, i8..i64, u8..u64, f16, bf16, f32, f64, f8e4m3, f8e5m2"),
                )
            }
        }
    }

    fn bool_arg(&mut self, a: Option<(Val, Span)>, default: bool) -> R<bool> {
        let Some((v, s)) = a else { return Ok(default) };
        match self.const_bool(&v) {
            Some(b) => Ok(b),
            None => self.fail(Diagnostic::error(s, "expected `true` or `false`").label("must be a constant bool")),
        }
    }

    fn str_arg(&mut self, a: Option<(Val, Span)>, default: &str, valid: &[&str]) -> R<String> {
        let Some((v, s)) = a else {
            return Ok(default.to_string());
        };
        match v {
            Val::Str(t) if valid.contains(&t.as_str()) => Ok(t),
            _ => self.fail(
                Diagnostic::error(
                    s,
                    format!(
                        "expected one of {}",
                        valid.iter().map(|v| format!("\"{v}\"")).collect::<Vec<_>>().join(", ")
                    ),
                )
                .label("not a valid choice"),
            ),
        }
    }

    fn ptr_arg(&mut self, (v, s): (Val, Span), what: &str) -> R<(ValueId, DType, bool)> {
        if let Val::V(id) = v
            && let Elem::Ptr { pointee, mutable } = self.ty(id).elem
        {
            return Ok((id, pointee, mutable));
        }
        let l = self.describe(&v);
        self.fail(
            Diagnostic::error(s, format!("{what} needs a pointer or a tile of pointers"))
                .label(l)
                .help("pointers come from `*T` parameters: `ptr + offsets`"),
        )
    }

    /// A bool mask broadcast to `shape`.
    fn mask_arg(&mut self, (v, s): (Val, Span), shape: &[usize], ptr_span: Span) -> R<ValueId> {
        let id = self.tile_arg((v, s), "a mask")?;
        if self.ty(id).dtype() != Some(DType::Bool) {
            return self.fail(
                Diagnostic::error(s, "a mask must be bool")
                    .label(format!("this is {}", self.ty(id)))
                    .help("compare to get a mask: `offs < n`"),
            );
        }
        let ms = self.ty(id).shape.clone();
        match ir::broadcast_shapes(&ms, shape) {
            Some(b) if b == shape => self.broadcast_to(id, shape, s),
            _ => {
                let mut d = Diagnostic::error(
                    s,
                    format!(
                        "mask of shape {} does not fit pointers of shape {}",
                        fmt_shape(&ms),
                        fmt_shape(shape)
                    ),
                )
                .label(format!("shape {}", fmt_shape(&ms)))
                .with(ptr_span, format!("pointers have shape {}", fmt_shape(shape)))
                .note("a mask must have the pointers' shape or broadcast to it");
                if ms.len() < shape.len() && !ms.is_empty() {
                    d = d.help("add axes so the mask lines up with the pointers, e.g. `rows[:, None] < M`, and combine masks with `&`");
                }
                self.fail(d)
            }
        }
    }

    /// A value converted to `d` and broadcast to `shape` (for stores and `other`).
    fn value_for(&mut self, (v, s): (Val, Span), d: DType, shape: &[usize], what: &str) -> R<ValueId> {
        let id = match v {
            Val::Lit(_) => self.value(v, s, Some(d))?,
            Val::V(id) => id,
            other => {
                let l = self.describe(&other);
                return self.fail(Diagnostic::error(s, format!("{what} must be a tile or a scalar")).label(l));
            }
        };
        let t = self.ty(id).clone();
        if t.elem.is_ptr() {
            return self
                .fail(Diagnostic::error(s, format!("{what} cannot be a pointer")).label(format!("this is {t}")));
        }
        match ir::broadcast_shapes(&t.shape, shape) {
            Some(b) if b == shape => {}
            _ => {
                return self.fail(
                    Diagnostic::error(
                        s,
                        format!(
                            "{what} of shape {} does not fit pointers of shape {}",
                            fmt_shape(&t.shape),
                            fmt_shape(shape)
                        ),
                    )
                    .label(format!("this is {t}")),
                );
            }
        }
        let id = self.cast(id, d, s)?;
        self.broadcast_to(id, shape, s)
    }

    // ---- the built-ins ------------------------------------------------------------------------

    fn builtin(&mut self, name: &str, a: Args, span: Span) -> R<Val> {
        let v = |x: ValueId| Ok(Val::V(x));
        match name {
            "program_id" | "num_programs" => {
                let axis = match a.get(0) {
                    Some(x) => {
                        let s = x.1;
                        let i = self.const_int_arg(x, "the axis")?;
                        if !(0..=2).contains(&i) {
                            return self.fail(
                                Diagnostic::error(s, format!("grid axis {i} does not exist"))
                                    .label("the grid has axes 0, 1 and 2"),
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
                v(self.emit1(k, vec![], Type::scalar(DType::I32), span)?)
            }
            "arange" => {
                if let Some((Val::V(id), es)) = a.get(1)
                    && !self.known.contains_key(&id)
                {
                    return self.fail(Diagnostic::error(es, "the end of `arange` must be known at compile time")
                        .label("this is only known at run time")
                        .help("tile sizes are fixed: use a `const` parameter, e.g. `arange(0, BLOCK)`, and mask the elements past the end: `offs < n`"));
                }
                let start = self.const_int_arg(a.req(0), "the start of `arange`")?;
                let end = self.const_int_arg(a.req(1), "the end of `arange`")?;
                let n = end.saturating_sub(start);
                if n <= 0 || !(n as u64).is_power_of_two() {
                    return self.fail(
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
                    return self.fail(Diagnostic::error(span, "`arange` bounds must fit in i32").label("out of range"));
                }
                let t = Type::tile(DType::I32, vec![n as usize]);
                v(self.emit1(OpKind::Arange { start, end }, vec![], t, span)?)
            }
            "zeros" | "full" => {
                let shape = self.shape_arg(a.req(0))?;
                let (value, dt_idx) = if name == "zeros" {
                    ((Val::Lit(Lit::Int(0)), span), 1)
                } else {
                    (a.req(1), 2)
                };
                let d = match a.get(dt_idx) {
                    Some(x) => self.dtype_arg(x)?,
                    None => match &value.0 {
                        Val::V(id) => self.ty(*id).dtype().unwrap_or(DType::F32),
                        Val::Lit(Lit::Int(_)) if name == "full" => DType::I32,
                        Val::Lit(Lit::Bool(_)) => DType::Bool,
                        _ => DType::F32,
                    },
                };
                let id = self.value_for(value, d, &[], "the fill value")?;
                v(self.broadcast_to(id, &shape, span)?)
            }
            "cdiv" => {
                let parts = vec![a.req(0), a.req(1)];
                if let (Val::Lit(Lit::Int(x)), Val::Lit(Lit::Int(y))) = (&parts[0].0, &parts[1].0) {
                    if *y == 0 {
                        return self.fail(Diagnostic::error(parts[1].1, "division by zero").label("zero"));
                    }
                    return Ok(Val::Lit(Lit::Int((x + y - 1) / y)));
                }
                let d = self.meet(&parts);
                if !d.is_int() {
                    return self.fail(
                        Diagnostic::error(span, format!("`cdiv` needs integers; found {d}")).label("not integers"),
                    );
                }
                let ids = self.unify(parts, d, span)?;
                let one = self.constant(ConstValue::Int(1), d);
                let one = self.broadcast_to(one, &self.ty(ids[0]).shape.clone(), span)?;
                let s = self.binary_kind(OpKind::Binary(BinaryOp::Add), ids[0], ids[1], span)?;
                let s = self.binary_kind(OpKind::Binary(BinaryOp::Sub), s, one, span)?;
                v(self.binary_kind(OpKind::Binary(BinaryOp::Div), s, ids[1], span)?)
            }
            "load" => {
                let (pv, ps) = a.req(0);
                let (ptr, pointee, _) = self.ptr_arg((pv, ps), "`load`")?;
                let shape = self.ty(ptr).shape.clone();
                let mut ops = vec![ptr];
                let mask = a.get(1);
                if let Some(m) = mask.clone() {
                    ops.push(self.mask_arg(m, &shape, ps)?);
                }
                let other = a.get(2);
                if let Some(o) = other.clone() {
                    if mask.is_none() {
                        return self.fail(
                            Diagnostic::error(o.1, "`other` without a mask is never used")
                                .label("no mask given")
                                .help("pass a mask: `load(ptr, mask, other: ...)`"),
                        );
                    }
                    ops.push(self.value_for(o, pointee, &shape, "`other`")?);
                }
                let t = Type::tile(pointee, shape);
                v(self.emit1(
                    OpKind::Load {
                        mask: mask.is_some(),
                        other: other.is_some(),
                    },
                    ops,
                    t,
                    span,
                )?)
            }
            "store" => {
                let (pv, ps) = a.req(0);
                let (ptr, pointee, mutable) = self.ptr_arg((pv, ps), "`store`")?;
                if !mutable {
                    return self.fail(self.readonly(ptr, ps, "store through"));
                }
                let shape = self.ty(ptr).shape.clone();
                let mut ops = vec![ptr, self.value_for(a.req(1), pointee, &shape, "the stored value")?];
                if let Some(m) = a.get(2) {
                    ops.push(self.mask_arg(m, &shape, ps)?);
                }
                self.emit(
                    OpKind::Store {
                        mask: a.get(2).is_some(),
                    },
                    ops,
                    vec![],
                    vec![],
                    span,
                )?;
                Ok(Val::Unit)
            }
            "dot" => self.dot(a, span),
            "sum" | "prod" | "max" | "min" | "xor_sum" => {
                let op = match name {
                    "sum" => ReduceOp::Sum,
                    "prod" => ReduceOp::Prod,
                    "max" => ReduceOp::Max,
                    "min" => ReduceOp::Min,
                    _ => ReduceOp::Xor,
                };
                self.reduce(op, a, span)
            }
            "argmax" | "argmin" => {
                let (x, xs) = a.req(0);
                let mut x = self.number_arg((x, xs), "the argument")?;
                let (axis, keep) = self.reduce_axis(&mut x, a.get(1), a.get(2), xs)?;
                let mut shape = self.ty(x).shape.clone();
                shape.remove(axis);
                let r = self.emit1(
                    OpKind::ArgReduce {
                        max: name == "argmax",
                        axis,
                    },
                    vec![x],
                    Type::tile(DType::I32, shape),
                    span,
                )?;
                v(self.keep_dims(r, axis, keep, span)?)
            }
            "reduce" => self.reduce_with(a, span),
            "cumsum" | "cumprod" | "scan" => self.scan(name, a, span),
            "where" => {
                let c = self.tile_arg(a.req(0), "the condition")?;
                if self.ty(c).dtype() != Some(DType::Bool) {
                    return self.fail(
                        Diagnostic::error(a.req(0).1, "the condition of `where` must be bool")
                            .label(format!("this is {}", self.ty(c))),
                    );
                }
                let parts = vec![a.req(1), a.req(2)];
                let (pa, pb) = (self.is_ptr(&parts[0].0), self.is_ptr(&parts[1].0));
                let ids = if pa || pb {
                    let x = self.tile_arg(parts[0].clone(), "a branch")?;
                    let y = self.tile_arg(parts[1].clone(), "a branch")?;
                    if self.ty(x).elem != self.ty(y).elem {
                        return self.fail(
                            Diagnostic::error(span, "`where` branches must both be pointers of one type")
                                .label("mixed"),
                        );
                    }
                    let shape = self.common_shape(&[(x, parts[0].1), (y, parts[1].1)], span)?;
                    vec![self.broadcast_to(x, &shape, span)?, self.broadcast_to(y, &shape, span)?]
                } else {
                    let d = self.meet(&parts);
                    self.unify(parts, d, span)?
                };
                let shape = self.common_shape(&[(c, a.req(0).1), (ids[0], span)], span)?;
                let c = self.broadcast_to(c, &shape, span)?;
                let x = self.broadcast_to(ids[0], &shape, span)?;
                let y = self.broadcast_to(ids[1], &shape, span)?;
                let t = self.ty(x).clone();
                v(self.emit1(OpKind::Select, vec![c, x, y], t, span)?)
            }
            "maximum" | "minimum" => {
                let op = if name == "maximum" {
                    BinaryOp::Max
                } else {
                    BinaryOp::Min
                };
                let (x, y) = (a.req(0), a.req(1));
                self.elementwise_minmax(op, x.0, x.1, y.0, y.1, span)
            }
            "clamp" => {
                let parts = vec![a.req(0), a.req(1), a.req(2)];
                let d = self.meet(&parts);
                let ids = self.unify(parts, d, span)?;
                let lo = self.binary_kind(OpKind::Binary(BinaryOp::Max), ids[0], ids[1], span)?;
                v(self.binary_kind(OpKind::Binary(BinaryOp::Min), lo, ids[2], span)?)
            }
            "fma" => {
                let parts = vec![a.req(0), a.req(1), a.req(2)];
                let mut d = self.meet(&parts);
                if !d.is_float() {
                    d = DType::F32;
                }
                let ids = self.unify(parts, d, span)?;
                let t = self.ty(ids[0]).clone();
                v(self.emit1(OpKind::Fma, ids, t, span)?)
            }
            "abs" | "floor" | "ceil" | "exp" | "exp2" | "log" | "log2" | "sqrt" | "rsqrt" | "sin" | "cos" | "tanh"
            | "erf" | "sigmoid" => {
                let op = UnaryOp::from_name(name).unwrap();
                let x = self.number_arg(a.req(0), &format!("the argument of `{name}`"))?;
                v(self.math(op, x, span)?)
            }
            "broadcast" | "broadcast_to" => {
                let x = self.tile_arg(a.req(0), "the tile")?;
                let shape = self.shape_arg(a.req(1))?;
                let from = self.ty(x).shape.clone();
                if ir::broadcast_shapes(&from, &shape).as_deref() != Some(&shape[..]) {
                    return self.fail(
                        Diagnostic::error(
                            span,
                            format!("cannot broadcast shape {} to {}", fmt_shape(&from), fmt_shape(&shape)),
                        )
                        .label("shape mismatch"),
                    );
                }
                v(self.broadcast_to(x, &shape, span)?)
            }
            "expand_dims" => {
                let x = self.tile_arg(a.req(0), "the tile")?;
                let rank = self.ty(x).shape.len();
                let axis = self.axis_arg(a.req(1), rank + 1)?;
                let mut shape = self.ty(x).shape.clone();
                shape.insert(axis, 1);
                let t = self.ty(x).with_shape(shape);
                v(self.emit1(OpKind::ExpandDims(axis), vec![x], t, span)?)
            }
            "reshape" => {
                let x = self.tile_arg(a.req(0), "the tile")?;
                let shape = self.shape_arg(a.req(1))?;
                let t = self.ty(x).clone();
                if t.numel() != shape.iter().product::<usize>() {
                    return self.fail(
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
                    return v(x);
                }
                v(self.emit1(OpKind::Reshape, vec![x], t.with_shape(shape), span)?)
            }
            "trans" | "permute" => {
                let x = self.tile_arg(a.req(0), "the tile")?;
                let rank = self.ty(x).shape.len();
                let perm: Vec<usize> = if name == "trans" {
                    if rank != 2 {
                        let mut perm: Vec<usize> = (0..rank).collect();
                        if rank >= 2 {
                            perm.swap(rank - 1, rank - 2);
                        }
                        let perm = perm.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
                        return self.fail(
                            Diagnostic::error(
                                span,
                                format!(
                                    "`trans` needs a 2-D tile; this has {rank} ax{}",
                                    if rank == 1 { "is" } else { "es" }
                                ),
                            )
                            .label(format!("this is {}", self.ty(x)))
                            .help(if rank > 2 {
                                format!("to swap the last two axes, use `permute(x, [{perm}])`")
                            } else {
                                "a tile with fewer than 2 axes has nothing to transpose; add an axis with `x[:, None]`"
                                    .to_string()
                            }),
                        );
                    }
                    vec![1, 0]
                } else {
                    let (pv, ps) = a.req(1);
                    let Val::List(items) = pv else {
                        return self
                            .fail(Diagnostic::error(ps, "`permute` takes a list of axes").label("expected `[..]`"));
                    };
                    let mut p = Vec::new();
                    for it in items {
                        p.push(self.axis_arg((it, ps), rank)?);
                    }
                    let mut sorted = p.clone();
                    sorted.sort();
                    if sorted != (0..rank).collect::<Vec<_>>() {
                        return self.fail(
                            Diagnostic::error(ps, format!("{p:?} is not a permutation of the {rank} axes"))
                                .label("each axis exactly once"),
                        );
                    }
                    p
                };
                let shape = perm.iter().map(|&i| self.ty(x).shape[i]).collect();
                let t = self.ty(x).with_shape(shape);
                v(self.emit1(OpKind::Permute(perm), vec![x], t, span)?)
            }
            "join" => {
                let parts = vec![a.req(0), a.req(1)];
                let d = self.meet(&parts);
                let ids = self.unify(parts, d, span)?;
                let mut shape = self.ty(ids[0]).shape.clone();
                shape.push(2);
                let t = self.ty(ids[0]).with_shape(shape);
                v(self.emit1(OpKind::Join, ids, t, span)?)
            }
            "split" => {
                let x = self.tile_arg(a.req(0), "the tile")?;
                let mut shape = self.ty(x).shape.clone();
                if shape.last() != Some(&2) {
                    return self.fail(Diagnostic::error(span, "`split` needs a last axis of size 2").label(format!("this is {}", self.ty(x)))
                        .note("`split(x)` takes x[.., 2] and returns the two halves x[..]; `reshape` first to get a last axis of 2"));
                }
                shape.pop();
                let t = self.ty(x).with_shape(shape);
                let r = self.emit(OpKind::Split, vec![x], vec![t.clone(), t], vec![], span)?;
                Ok(Val::Tuple(vec![Val::V(r[0]), Val::V(r[1])]))
            }
            "to" | "cast" => {
                let (xv, xs) = a.req(0);
                let d = self.dtype_arg(a.req(1))?;
                let rounding = self.str_arg(a.get(2), "rne", &["rne", "rtz"])?;
                let x = self.number_arg((xv, xs), "the converted value")?;
                let from = self.ty(x).dtype().unwrap();
                if from == d {
                    return v(x);
                }
                let r = Rounding::from_name(&rounding).unwrap();
                if r == Rounding::Rtz && !(from.is_float() && d.is_float() && d.bits() < from.bits()) {
                    return self.fail(
                        Diagnostic::error(a.get(2).unwrap().1, "rounding applies to narrowing float conversions")
                            .label(format!("{from} to {d} is not one")),
                    );
                }
                if r == Rounding::Rne {
                    return v(self.cast(x, d, span)?);
                }
                let t = self.ty(x).with_dtype(d);
                v(self.emit1(OpKind::Cast(r), vec![x], t, span)?)
            }
            "bitcast" => {
                let x = self.number_arg(a.req(0), "the value")?;
                let d = self.dtype_arg(a.req(1))?;
                let from = self.ty(x).dtype().unwrap();
                if from.bits() != d.bits() || from.is_bool() || d.is_bool() {
                    return self.fail(Diagnostic::error(span, format!("cannot bitcast {from} to {d}"))
                        .label(format!("{from} has {} bits, {d} has {}", from.bits(), d.bits()))
                        .help("bitcast keeps the bits, so both types need the same width; use `.to(..)` to convert values"));
                }
                let t = self.ty(x).with_dtype(d);
                v(self.emit1(OpKind::Bitcast, vec![x], t, span)?)
            }
            "atomic_add" | "atomic_max" | "atomic_min" | "atomic_and" | "atomic_or" | "atomic_xor" | "atomic_xchg" => {
                let op = AtomicOp::from_name(&name["atomic_".len()..]).unwrap();
                let (pv, ps) = a.req(0);
                let (ptr, pointee, mutable) = self.ptr_arg((pv, ps), &format!("`{name}`"))?;
                if !mutable {
                    return self.fail(self.readonly(ptr, ps, "update"));
                }
                let ok = match op {
                    AtomicOp::Add => {
                        pointee.is_int() || matches!(pointee, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
                    }
                    AtomicOp::Max | AtomicOp::Min => pointee.is_int() || pointee == DType::F32,
                    AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => pointee.is_int() && pointee.bits() >= 32,
                    AtomicOp::Xchg => pointee.bits() >= 32,
                };
                if !ok || (pointee.is_int() && pointee.bits() < 32) {
                    return self.fail(Diagnostic::error(ps, format!("`{name}` does not support {pointee}")).label(format!("points to {pointee}"))
                        .note("atomics work on 32- and 64-bit integers; add also on f16, bf16, f32, f64; max/min also on f32"));
                }
                let shape = self.ty(ptr).shape.clone();
                let mut ops = vec![ptr, self.value_for(a.req(1), pointee, &shape, "the value")?];
                if let Some(m) = a.get(2) {
                    ops.push(self.mask_arg(m, &shape, ps)?);
                }
                let t = Type::tile(pointee, shape);
                v(self.emit1(
                    OpKind::Atomic {
                        op,
                        mask: a.get(2).is_some(),
                    },
                    ops,
                    t,
                    span,
                )?)
            }
            "atomic_cas" => {
                let (pv, ps) = a.req(0);
                let (ptr, pointee, mutable) = self.ptr_arg((pv, ps), "`atomic_cas`")?;
                if !mutable {
                    return self.fail(self.readonly(ptr, ps, "update"));
                }
                if !pointee.is_int() || pointee.bits() < 32 {
                    return self.fail(
                        Diagnostic::error(ps, format!("`atomic_cas` does not support {pointee}"))
                            .label("needs 32- or 64-bit integers"),
                    );
                }
                let shape = self.ty(ptr).shape.clone();
                let mut ops = vec![
                    ptr,
                    self.value_for(a.req(1), pointee, &shape, "the compared value")?,
                    self.value_for(a.req(2), pointee, &shape, "the new value")?,
                ];
                if let Some(m) = a.get(3) {
                    ops.push(self.mask_arg(m, &shape, ps)?);
                }
                let t = Type::tile(pointee, shape);
                v(self.emit1(
                    OpKind::AtomicCas {
                        mask: a.get(3).is_some(),
                    },
                    ops,
                    t,
                    span,
                )?)
            }
            "multiple_of" | "max_contiguous" => {
                let x = self.number_arg(a.req(0), "the hinted value")?;
                let n = self.const_int_arg(a.req(1), "the hint")?;
                if n < 1 {
                    return self.fail(Diagnostic::error(a.req(1).1, "a hint must be positive").label(format!("{n}")));
                }
                if !self.ty(x).dtype().is_some_and(|d| d.is_int()) {
                    return self.fail(
                        Diagnostic::error(a.req(0).1, "hints apply to integers")
                            .label(format!("this is {}", self.ty(x))),
                    );
                }
                let k = if name == "multiple_of" {
                    OpKind::MultipleOf(n as u64)
                } else {
                    OpKind::MaxContiguous(n as u64)
                };
                let t = self.ty(x).clone();
                v(self.emit1(k, vec![x], t, span)?)
            }
            "static_assert" => {
                let (c, cs) = a.req(0);
                let msg = match a.get(1) {
                    Some((Val::Str(m), _)) => m,
                    Some((_, s)) => {
                        return self.fail(Diagnostic::error(s, "the message must be a string").label("not a string"));
                    }
                    None => "the condition is false".to_string(),
                };
                match self.const_bool(&c) {
                    Some(true) => Ok(Val::Unit),
                    Some(false) => self.fail(
                        Diagnostic::error(cs, format!("static assertion failed: {msg}"))
                            .label("this is false at compile time"),
                    ),
                    None => self.fail(
                        Diagnostic::error(cs, "`static_assert` needs a condition known at compile time")
                            .label("depends on run-time values")
                            .help("use `assert(..)` to check at run time (debug builds)"),
                    ),
                }
            }
            "assert" => {
                let c = self.tile_arg(a.req(0), "the condition")?;
                if self.ty(c).dtype() != Some(DType::Bool) {
                    return self.fail(
                        Diagnostic::error(a.req(0).1, "`assert` needs a bool condition")
                            .label(format!("this is {}", self.ty(c))),
                    );
                }
                let msg = match a.get(1) {
                    Some((Val::Str(m), _)) => m,
                    Some((_, s)) => {
                        return self.fail(Diagnostic::error(s, "the message must be a string").label("not a string"));
                    }
                    None => "assertion failed".to_string(),
                };
                self.emit(OpKind::Assert(msg), vec![c], vec![], vec![], span)?;
                Ok(Val::Unit)
            }
            _ => unreachable!("builtin `{name}` has a signature but no lowering"),
        }
    }

    fn is_ptr(&self, v: &Val) -> bool {
        matches!(v, Val::V(id) if self.ty(*id).elem.is_ptr())
    }

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

    fn elementwise_minmax(&mut self, op: BinaryOp, x: Val, xs: Span, y: Val, ys: Span, span: Span) -> R<Val> {
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
            if matches!(d, DType::F8E4M3 | DType::F8E5M2) {
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

    fn reduce(&mut self, op: ReduceOp, a: Args, span: Span) -> R<Val> {
        let (xv, xs) = a.req(0);
        let mut x = self.number_arg((xv, xs), "the reduced value")?;
        let d = self.ty(x).dtype().unwrap();
        let bad = match op {
            ReduceOp::Xor | ReduceOp::And | ReduceOp::Or => !d.is_int(),
            ReduceOp::Max | ReduceOp::Min => d.is_bool(),
            _ => false,
        };
        if bad {
            return self.fail(
                Diagnostic::error(xs, format!("cannot reduce {d} with `{}`", op.name()))
                    .label(format!("this is {}", self.ty(x))),
            );
        }
        let (axis, keep) = self.reduce_axis(&mut x, a.get(1), a.get(2), xs)?;
        let acc = Self::accumulator(d, op);
        let x = self.cast(x, acc, span)?;
        let mut shape = self.ty(x).shape.clone();
        shape.remove(axis);
        let r = self.emit1(OpKind::Reduce { op, axis }, vec![x], Type::tile(acc, shape), span)?;
        // Floats come back to their dtype after accumulating wider; small ints stay i32.
        let r = if d.is_float() { self.cast(r, d, span)? } else { r };
        Ok(Val::V(self.keep_dims(r, axis, keep, span)?))
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

    /// Builds the combine region: two scalar arguments of `elem`, yielding one.
    fn combine_region(&mut self, f: &'a ast::FnDef, elem: Elem, span: Span) -> R<Region> {
        let scalar = Type { elem, shape: vec![] };
        let x = self.new_value(scalar.clone());
        let y = self.new_value(scalar.clone());
        self.regions.push(Vec::new());
        let r = self
            .inline_call(f, vec![(None, Val::V(x), span), (None, Val::V(y), span)], span)
            .and_then(|r| {
                self.coerce_to(
                    r,
                    &scalar,
                    f.body.tail.as_ref().map_or(f.span, |t| t.span),
                    &f.name.name,
                    "the result of",
                )
            });
        let r = match r {
            Ok(r) => self.emit(OpKind::Yield, vec![r], vec![], vec![], span).map(|_| ()),
            Err(e) => Err(e),
        };
        let ops = self.regions.pop().unwrap();
        r?;
        Ok(Region { args: vec![x, y], ops })
    }

    fn reduce_with(&mut self, a: Args, span: Span) -> R<Val> {
        let (xv, xs) = a.req(0);
        let mut x = self.number_arg((xv, xs), "the reduced value")?;
        let f = self.combine_fn(a.req(2))?;
        let (axis, keep) = self.reduce_axis(&mut x, a.get(1), a.get(3), xs)?;
        let region = self.combine_region(f, self.ty(x).elem, span)?;
        let mut shape = self.ty(x).shape.clone();
        shape.remove(axis);
        let t = self.ty(x).with_shape(shape);
        let r = self.emit(OpKind::ReduceWith { axis }, vec![x], vec![t], vec![region], span)?[0];
        Ok(Val::V(self.keep_dims(r, axis, keep, span)?))
    }

    fn scan(&mut self, name: &str, a: Args, span: Span) -> R<Val> {
        let (xv, xs) = a.req(0);
        let x = self.number_arg((xv, xs), "the scanned value")?;
        let rank = self.ty(x).shape.len();
        if rank == 0 {
            return self.fail(Diagnostic::error(xs, "cannot scan a scalar").label("this has no axes"));
        }
        let axis = match a.get(1) {
            Some(ax) => self.axis_arg(ax, rank)?,
            None => 0,
        };
        let reverse_idx = if name == "scan" { 3 } else { 2 };
        let reverse = self.bool_arg(a.get(reverse_idx), false)?;
        if name == "scan" {
            let f = self.combine_fn(a.req(2))?;
            let region = self.combine_region(f, self.ty(x).elem, span)?;
            let t = self.ty(x).clone();
            return Ok(Val::V(
                self.emit(OpKind::ScanWith { axis, reverse }, vec![x], vec![t], vec![region], span)?[0],
            ));
        }
        let op = if name == "cumsum" {
            ReduceOp::Sum
        } else {
            ReduceOp::Prod
        };
        let d = self.ty(x).dtype().unwrap();
        let acc = Self::accumulator(d, op);
        let xc = self.cast(x, acc, span)?;
        let t = self.ty(xc).clone();
        let r = self.emit1(OpKind::Scan { op, axis, reverse }, vec![xc], t, span)?;
        Ok(Val::V(if d.is_float() { self.cast(r, d, span)? } else { r }))
    }

    fn dot(&mut self, a: Args, span: Span) -> R<Val> {
        let (av, as_) = a.req(0);
        let (bv, bs) = a.req(1);
        let x = self.number_arg((av, as_), "the left operand of `dot`")?;
        let y = self.number_arg((bv, bs), "the right operand of `dot`")?;
        let (tx, ty) = (self.ty(x).clone(), self.ty(y).clone());
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
                return self.fail(e);
            }
        }
        if tx.shape[1] != ty.shape[0] {
            return self.fail(
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
            return self.fail(
                Diagnostic::error(bs, format!("`dot` operands have different dtypes: {dx} and {dy}"))
                    .label(format!("this is {ty}"))
                    .with(as_, format!("this is {tx}"))
                    .help(format!("convert one side, e.g. `.to({dx})`")),
            );
        }
        if dx.is_bool() || (dx.is_int() && dx.bits() != 8) {
            return self.fail(
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
            Some(o) => Some((self.dtype_arg(o.clone())?, o.1)),
            None => None,
        };
        if let Some((o, os)) = out
            && !acc_ok(o)
        {
            return self.fail(
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
                let c = self.number_arg((cv, cs), "the accumulator")?;
                let tc = self.ty(c).clone();
                if !acc_ok(tc.dtype().unwrap()) {
                    return self.fail(
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
                    return self.fail(
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
                    return self.fail(
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
                let z = self.constant(
                    if d.is_float() {
                        ConstValue::Float(0.0)
                    } else {
                        ConstValue::Int(0)
                    },
                    d,
                );
                self.broadcast_to(z, &[m, n], span)?
            }
        };
        let prec = self.str_arg(a.get(4), "ieee", &["ieee", "tf32"])?;
        let prec = Precision::from_name(&prec).unwrap();
        if prec == Precision::Tf32 && dx != DType::F32 {
            return self.fail(
                Diagnostic::error(a.get(4).unwrap().1, "`precision: \"tf32\"` applies to f32 operands")
                    .label(format!("operands are {dx}")),
            );
        }
        let t = self.ty(acc).clone();
        Ok(Val::V(self.emit1(OpKind::Dot(prec), vec![x, y, acc], t, span)?))
    }

    fn print(&mut self, args: Vec<(Option<&ast::Ident>, Val, Span)>, span: Span) -> R<Val> {
        let mut it = args.into_iter();
        let msg = match it.next() {
            Some((None, Val::Str(s), _)) => s,
            _ => {
                return self.fail(
                    Diagnostic::error(span, "`print` starts with a message string").label("e.g. `print(\"x =\", x)`"),
                );
            }
        };
        let mut ops = Vec::new();
        for (n, v, s) in it {
            if let Some(n) = n {
                return self
                    .fail(Diagnostic::error(n.span, "`print` takes no named arguments").label("named argument"));
            }
            ops.push(self.tile_arg((v, s), "a printed value")?);
        }
        self.emit(OpKind::Print(msg), ops, vec![], vec![], span)?;
        Ok(Val::Unit)
    }

    /// Inlines a helper function: its body is checked with the parameters bound to the arguments.
    pub fn inline_call(
        &mut self,
        f: &'a ast::FnDef,
        args: Vec<(Option<&ast::Ident>, Val, Span)>,
        span: Span,
    ) -> R<Val> {
        if self.inline_depth >= MAX_INLINE_DEPTH {
            return self.fail(
                Diagnostic::error(span, format!("helper calls nested more than {MAX_INLINE_DEPTH} deep"))
                    .label(format!("calling `{}`", f.name.name))
                    .with(f.name.span, "defined here")
                    .note("helpers are inlined, so they cannot be recursive; use a loop instead"),
            );
        }
        let mut slots: Vec<Option<(Val, Span)>> = vec![None; f.params.len()];
        let mut next = 0;
        for (n, v, s) in args {
            let i = match n {
                None => {
                    next += 1;
                    next - 1
                }
                Some(id) => match f.params.iter().position(|p| p.name.name == id.name) {
                    Some(i) => i,
                    None => {
                        return self.fail(
                            Diagnostic::error(id.span, format!("`{}` has no parameter `{}`", f.name.name, id.name))
                                .label("unknown argument name")
                                .with(f.name.span, "defined here"),
                        );
                    }
                },
            };
            if i >= f.params.len() {
                return self.fail(
                    Diagnostic::error(s, format!("`{}` takes {} arguments", f.name.name, f.params.len()))
                        .label("extra argument")
                        .with(f.name.span, "defined here"),
                );
            }
            slots[i] = Some((v, s));
        }
        if let Some(i) = slots.iter().position(|s| s.is_none()) {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!(
                        "`{}` needs {} arguments, {} given",
                        f.name.name,
                        f.params.len(),
                        slots.iter().filter(|s| s.is_some()).count()
                    ),
                )
                .label(format!("missing `{}`", f.params[i].name.name))
                .with(f.name.span, "defined here"),
            );
        }
        let mut bound = Vec::new();
        for (p, slot) in f.params.iter().zip(slots) {
            let (v, s) = slot.unwrap();
            let v = match &p.ty {
                Some(t) => {
                    let elem = self.resolve_type(t)?;
                    match v {
                        Val::Lit(_) if !elem.is_ptr() => Val::V(self.value(v, s, elem.dtype())?),
                        Val::V(id) if self.ty(id).elem == elem => v,
                        other => {
                            let l = self.describe(&other);
                            return self.fail(
                                Diagnostic::error(
                                    s,
                                    format!("argument `{}` of `{}` must be {elem}", p.name.name, f.name.name),
                                )
                                .label(l)
                                .with(t.span(), "declared here"),
                            );
                        }
                    }
                }
                None => v,
            };
            bound.push((p.name.name.clone(), v));
        }
        self.inline_depth += 1;
        self.push_scope(true);
        for (n, v) in bound {
            self.bind(&n, v, false);
        }
        let r = self.block(&f.body);
        self.pop_scope();
        self.inline_depth -= 1;
        let r = r?;
        if let (Some(t), Val::V(id)) = (&f.ret, &r) {
            let elem = self.resolve_type(t)?;
            if self.ty(*id).elem != elem {
                let found = self.ty(*id).clone();
                return self.fail(
                    Diagnostic::error(
                        f.body.tail.as_ref().map_or(f.span, |t| t.span),
                        format!("`{}` returns {found}, not {elem}", f.name.name),
                    )
                    .label("returned here")
                    .with(t.span(), "declared return type")
                    .help(format!(
                        "change the declared type to `{}`, or convert the value with `.to({elem})`",
                        found.elem
                    )),
                );
            }
        }
        Ok(r)
    }
}
