//! Calls: the built-in operations of the language and inlined helper functions.
//!
//! Each built-in is one row of `BUILTINS`: its name, its parameters, how many are required, and
//! the handler that checks it. Handlers live in one file per family; this file binds arguments to
//! parameters and holds the argument checks the families share.

mod convert;
mod creation;
mod debug;
mod dot;
mod inline;
mod math;
mod memory;
mod random;
mod reduce;
mod shape;

use super::expr::{closest, fmt_shape};
use super::*;
use crate::ir::BinaryOp;
use crate::syntax::ast::{Arg, Expr};

/// A built-in function: its parameter names, of which the first `required` must be given.
struct Builtin {
    name: &'static str,
    params: &'static [&'static str],
    required: usize,
    handler: Handler,
}

/// Checks a built-in whose arguments are bound to its parameters; it gets the name it was called
/// by, since one handler serves a family (`sum`, `prod`, ..).
type BoundHandler = fn(&mut Cx<'_>, &str, Args, Span) -> R<Val>;

/// Checks a built-in that takes its arguments as given (`print`: a message and any number of
/// values).
type VariadicHandler = fn(&mut Cx<'_>, Vec<(Option<&ast::Ident>, Val, Span)>, Span) -> R<Val>;

enum Handler {
    Bound(BoundHandler),
    Variadic(VariadicHandler),
}

impl Builtin {
    const fn new(
        name: &'static str,
        params: &'static [&'static str],
        required: usize,
        handler: BoundHandler,
    ) -> Builtin {
        Builtin {
            name,
            params,
            required,
            handler: Handler::Bound(handler),
        }
    }
}

/// Every built-in function, in the order "did you mean" suggestions consider them.
const BUILTINS: &[Builtin] = &[
    Builtin::new("program_id", &["axis"], 0, creation::grid_index),
    Builtin::new("num_programs", &["axis"], 0, creation::grid_index),
    Builtin::new("arange", &["start", "end"], 2, creation::arange),
    Builtin::new("zeros", &["shape", "dtype"], 1, creation::fill),
    Builtin::new("full", &["shape", "value", "dtype"], 2, creation::fill),
    Builtin::new("cdiv", &["a", "b"], 2, creation::cdiv),
    Builtin::new("load", &["ptr", "mask", "other", "evict"], 1, memory::load),
    Builtin::new("store", &["ptr", "value", "mask", "evict"], 2, memory::store),
    Builtin::new(
        "make_tensor_descriptor",
        &["base", "shape", "strides", "block_shape"],
        4,
        memory::tensor_descriptor,
    ),
    Builtin::new("dot", &["a", "b", "acc", "out", "precision"], 2, dot::dot),
    Builtin::new("sum", &["x", "axis", "keep_dims"], 1, reduce::reduction),
    Builtin::new("prod", &["x", "axis", "keep_dims"], 1, reduce::reduction),
    Builtin::new("max", &["x", "axis", "keep_dims"], 1, reduce::reduction),
    Builtin::new("min", &["x", "axis", "keep_dims"], 1, reduce::reduction),
    Builtin::new("xor_sum", &["x", "axis", "keep_dims"], 1, reduce::reduction),
    Builtin::new("argmax", &["x", "axis", "keep_dims"], 1, reduce::arg_reduction),
    Builtin::new("argmin", &["x", "axis", "keep_dims"], 1, reduce::arg_reduction),
    Builtin::new("reduce", &["x", "axis", "combine", "keep_dims"], 3, reduce::reduce_with),
    Builtin::new("cluster_sum", &["x"], 1, reduce::cluster_reduction),
    Builtin::new("cluster_max", &["x"], 1, reduce::cluster_reduction),
    Builtin::new("cluster_min", &["x"], 1, reduce::cluster_reduction),
    Builtin::new("cluster_reduce", &["x", "combine"], 2, reduce::cluster_reduce_with),
    Builtin::new("cumsum", &["x", "axis", "reverse"], 1, reduce::scan),
    Builtin::new("cumprod", &["x", "axis", "reverse"], 1, reduce::scan),
    Builtin::new("scan", &["x", "axis", "combine", "reverse"], 3, reduce::scan),
    Builtin::new("where", &["cond", "a", "b"], 3, math::select),
    Builtin::new("maximum", &["a", "b"], 2, math::min_max),
    Builtin::new("minimum", &["a", "b"], 2, math::min_max),
    Builtin::new("clamp", &["x", "lo", "hi"], 3, math::clamp),
    Builtin::new("fma", &["a", "b", "c"], 3, math::fma),
    Builtin::new("abs", &["x"], 1, math::unary_math),
    Builtin::new("floor", &["x"], 1, math::unary_math),
    Builtin::new("ceil", &["x"], 1, math::unary_math),
    Builtin::new("exp", &["x"], 1, math::unary_math),
    Builtin::new("exp2", &["x"], 1, math::unary_math),
    Builtin::new("log", &["x"], 1, math::unary_math),
    Builtin::new("log2", &["x"], 1, math::unary_math),
    Builtin::new("sqrt", &["x"], 1, math::unary_math),
    Builtin::new("rsqrt", &["x"], 1, math::unary_math),
    Builtin::new("sin", &["x"], 1, math::unary_math),
    Builtin::new("cos", &["x"], 1, math::unary_math),
    Builtin::new("tanh", &["x"], 1, math::unary_math),
    Builtin::new("erf", &["x"], 1, math::unary_math),
    Builtin::new("sigmoid", &["x"], 1, math::unary_math),
    Builtin::new("broadcast", &["x", "shape"], 2, shape::broadcast),
    Builtin::new("broadcast_to", &["x", "shape"], 2, shape::broadcast),
    Builtin::new("expand_dims", &["x", "axis"], 2, shape::expand_dims),
    Builtin::new("reshape", &["x", "shape"], 2, shape::reshape),
    Builtin::new("trans", &["x"], 1, shape::permute),
    Builtin::new("permute", &["x", "dims"], 2, shape::permute),
    Builtin::new("join", &["a", "b"], 2, shape::join),
    Builtin::new("split", &["x"], 1, shape::split),
    Builtin::new("to", &["x", "dtype", "rounding"], 2, convert::to_dtype),
    Builtin::new("cast", &["x", "dtype", "rounding"], 2, convert::to_dtype),
    Builtin::new("bitcast", &["x", "dtype"], 2, convert::bitcast),
    Builtin::new("atomic_add", &["ptr", "value", "mask"], 2, memory::atomic_rmw),
    Builtin::new("atomic_max", &["ptr", "value", "mask"], 2, memory::atomic_rmw),
    Builtin::new("atomic_min", &["ptr", "value", "mask"], 2, memory::atomic_rmw),
    Builtin::new("atomic_and", &["ptr", "value", "mask"], 2, memory::atomic_rmw),
    Builtin::new("atomic_or", &["ptr", "value", "mask"], 2, memory::atomic_rmw),
    Builtin::new("atomic_xor", &["ptr", "value", "mask"], 2, memory::atomic_rmw),
    Builtin::new("atomic_xchg", &["ptr", "value", "mask"], 2, memory::atomic_rmw),
    Builtin::new("atomic_cas", &["ptr", "cmp", "value", "mask"], 3, memory::atomic_cas),
    Builtin::new("randint", &["seed", "offset", "word"], 2, random::randint),
    Builtin::new("rand", &["seed", "offset"], 2, random::rand),
    Builtin::new("multiple_of", &["x", "n"], 2, memory::hint),
    Builtin::new("max_contiguous", &["x", "n"], 2, memory::hint),
    Builtin::new("static_assert", &["cond", "msg"], 1, debug::static_assert),
    Builtin::new("assert", &["cond", "msg"], 1, debug::assert),
    Builtin {
        name: "print",
        params: &[],
        required: 0,
        handler: Handler::Variadic(debug::print),
    },
];

pub(crate) fn is_builtin(name: &str) -> bool {
    BUILTINS.iter().any(|b| b.name == name)
}

/// The name of every built-in function, in table order.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|b| b.name)
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

impl Cx<'_> {
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
        let Some(builtin) = BUILTINS.iter().find(|b| b.name == name) else {
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
            if let Some(s) = closest(name, BUILTINS.iter().map(|b| b.name).chain(helpers)) {
                d = d.help(format!("a function with a similar name exists: `{s}`"));
            }
            return self.fail(d);
        };
        let handler = match builtin.handler {
            Handler::Variadic(handler) => return handler(self, evaluated, span),
            Handler::Bound(handler) => handler,
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
        let a = self.bind_args(name, builtin.params, builtin.required, evaluated, func.span, span)?;
        handler(self, name, a, span)
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

    /// A string option `param` (`rounding: "rtz"`): one of `valid`, `default` when absent.
    fn str_arg(&mut self, a: Option<(Val, Span)>, param: &str, default: &str, valid: &[&str]) -> R<String> {
        let Some((v, s)) = a else {
            return Ok(default.to_string());
        };
        match v {
            Val::Str(t) if valid.contains(&t.as_str()) => Ok(t),
            _ => self.fail(
                Diagnostic::error(
                    s,
                    format!(
                        "`{param}` takes one of {}",
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
}
