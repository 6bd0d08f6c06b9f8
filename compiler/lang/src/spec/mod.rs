//! Run specs: the `run KERNEL { .. }` items that tell `tilec verify` how to launch a kernel with
//! no Rust written by the user: sizes, compile-time values, grid, argument generators, the
//! reference to compare with, and tolerances.
//!
//! ```text
//! run softmax {
//!     sizes(rows: [1, 37], cols: [1, 781]);      // zipped: case i takes the i-th of each list
//!     consts(BLOCK: 1024);                       // a list gives one case per value
//!     grid(rows);                                // up to three extents
//!     args(out: output([rows, cols]), inp: randn([rows, cols]), stride: cols, n_cols: cols);
//!     reference(softmax);
//!     tolerance(rtol: 1e-5, atol: 1e-6);          // optional; dtype defaults otherwise
//! }
//! ```

mod run;

pub use run::*;

use crate::diag::{Diagnostic, Span};
use crate::ir::{ConstValue, DType};
use crate::syntax::ast::{self, Arg, BinOp, Expr, ExprKind, Stmt, UnOp};

/// The `reference(..)` of a run spec.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceName {
    pub name: String,
    pub span: Span,
    /// `reference(interpret: name)`: a kernel of the same file; else a built-in reference.
    pub kernel: bool,
}

/// A parsed run spec.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub kernel: String,
    pub sizes: Vec<(String, Vec<i64>)>,
    pub consts: Vec<(String, Vec<ConstSpec>)>,
    /// Sizes for `tilec bench` (zipped like `sizes`); empty: the kernel is not benchmarked.
    pub bench: Vec<(String, Vec<i64>)>,
    /// Floating-point operations of one launch, for TFLOP/s (`flops(2 * M * N * K)`).
    pub flops: Option<Expr>,
    pub grid: Vec<Expr>,
    pub args: Vec<(String, ArgSpec, Span)>,
    /// What outputs are compared with: `reference(name)`, a built-in (plain Rust) reference;
    /// `reference(interpret: name)`, another kernel of the file run by the interpreter in f64.
    pub reference: Option<ReferenceName>,
    pub tolerance: Option<(f64, f64)>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ArgSpec {
    /// A scalar argument computed from the sizes and constants.
    Scalar(Expr),
    /// A buffer of the given shape (flattened row-major), filled by `init`.
    Buffer {
        shape: Vec<Expr>,
        init: InitSpec,
        output: bool,
    },
}

/// A buffer's generator as written: its bounds and value may name sizes and compile-time
/// values (`randint([rows], 0, V)`), so they are evaluated per case (into an [`Init`]).
#[derive(Clone, Debug)]
pub enum InitSpec {
    Randn,
    /// `lo`, `hi`; absent: 0 and 1.
    Rand(Option<Expr>, Option<Expr>),
    /// `lo`, `hi`; absent: 0 and 100.
    Randint(Option<Expr>, Option<Expr>),
    /// The value; absent: 0.
    Full(Option<Expr>),
    /// `zeros` and `ones`.
    Constant(f64),
    Arange,
    Poison,
}

impl InitSpec {
    /// The generator of one case: its parameters evaluated by `eval`. `span` is the generator's,
    /// for an empty range.
    pub fn resolve(
        &self,
        eval: &dyn Fn(&Expr) -> Result<Num, Diagnostic>,
        span: crate::diag::Span,
    ) -> Result<Init, Diagnostic> {
        let num = |e: &Option<Expr>, default: f64| e.as_ref().map_or(Ok(default), |e| eval(e).map(Num::as_f64));
        Ok(match self {
            InitSpec::Randn => Init::Randn,
            InitSpec::Rand(lo, hi) => {
                let (lo, hi) = (num(lo, 0.0)?, num(hi, 1.0)?);
                if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
                    return Err(
                        Diagnostic::error(span, format!("`rand` needs lo < hi; got lo = {lo}, hi = {hi}"))
                            .label("an empty range"),
                    );
                }
                Init::Rand(lo, hi)
            }
            InitSpec::Randint(lo, hi) => {
                let (lo, hi) = (num(lo, 0.0)?, num(hi, 100.0)?);
                if lo.fract() != 0.0 || hi.fract() != 0.0 || lo >= hi {
                    return Err(Diagnostic::error(
                        span,
                        format!("`randint` needs integers lo < hi; got lo = {lo}, hi = {hi}"),
                    )
                    .label("not an integer range"));
                }
                Init::Randint(lo as i64, hi as i64)
            }
            InitSpec::Full(v) => Init::Full(num(v, 0.0)?),
            InitSpec::Constant(v) => Init::Full(*v),
            InitSpec::Arange => Init::Arange,
            InitSpec::Poison => Init::Poison,
        })
    }
}

/// How a buffer is filled before the launch.
#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    /// Standard normal samples.
    Randn,
    /// Uniform samples in `[lo, hi)`.
    Rand(f64, f64),
    /// Uniform integers in `[lo, hi)`.
    Randint(i64, i64),
    Full(f64),
    /// 0, 1, 2, ...
    Arange,
    /// A pattern no correct kernel leaves behind (NaN for floats): outputs start poisoned.
    Poison,
}

/// Parses every run spec in a file.
pub fn parse_specs(file: &ast::File) -> (Vec<RunSpec>, Vec<Diagnostic>) {
    let mut specs = Vec::new();
    let mut diags = Vec::new();
    let kernels = crate::check::kernel_names(file);
    for item in &file.items {
        if let ast::Item::Run(r) = item {
            // Reported here, at the name, so that the caller's whole-spec check never sees it.
            if !kernels.contains(&r.kernel.name) {
                let mut d = Diagnostic::error(
                    r.kernel.span,
                    format!("run spec for unknown kernel `{}`", r.kernel.name),
                )
                .label("no kernel of that name");
                d = match crate::check::closest_name(&r.kernel.name, kernels.iter().map(|k| k.as_str())) {
                    Some(k) => d.help(format!("a kernel with a similar name exists: `{k}`")),
                    None if kernels.is_empty() => d.note("this file defines no kernels"),
                    None => d.note(format!("this file defines: {}", kernels.join(", "))),
                };
                diags.push(d);
                continue;
            }
            match parse_spec(r) {
                Ok(s) => specs.push(s),
                Err(d) => diags.push(d),
            }
        }
    }
    (specs, diags)
}

fn parse_spec(r: &ast::RunSpec) -> Result<RunSpec, Diagnostic> {
    let mut spec = RunSpec {
        kernel: r.kernel.name.clone(),
        sizes: vec![],
        consts: vec![],
        bench: vec![],
        flops: None,
        grid: vec![],
        args: vec![],
        reference: None,
        tolerance: None,
        span: r.span,
    };
    let bad = |span: Span, m: &str| Diagnostic::error(span, m.to_string());
    let sections = "a run spec holds `sizes(..)`, `consts(..)`, `grid(..)`, `args(..)`, `reference(..)`, `tolerance(..)`, `bench(..)` and `flops(..)`";
    let mut stmts: Vec<&Expr> = Vec::new();
    for s in &r.body.stmts {
        match s {
            Stmt::Expr { expr, .. } => stmts.push(expr),
            other => {
                let span = match other {
                    Stmt::Let { span, .. } | Stmt::Assign { span, .. } => *span,
                    Stmt::For(f) => f.span,
                    Stmt::Expr { span, .. } => *span,
                };
                return Err(bad(span, "unexpected statement in a run spec")
                    .label("not a section")
                    .note(sections));
            }
        }
    }
    if let Some(t) = &r.body.tail {
        stmts.push(t);
    }
    for e in stmts {
        let ExprKind::Call { func, args } = &e.kind else {
            return Err(bad(e.span, "unexpected expression in a run spec")
                .label("not a section")
                .note(sections));
        };
        match func.name.as_str() {
            "sizes" | "bench" => {
                for a in args {
                    let name = named(a, "sizes")?;
                    let values = match &a.value.kind {
                        ExprKind::List(xs) => xs.iter().map(const_int).collect::<Result<Vec<_>, _>>()?,
                        _ => vec![const_int(&a.value)?],
                    };
                    if values.is_empty() || values.iter().any(|v| *v < 0) {
                        return Err(bad(a.value.span, "sizes must be non-negative integers").label("here"));
                    }
                    if func.name == "bench" {
                        spec.bench.push((name, values));
                    } else {
                        spec.sizes.push((name, values));
                    }
                }
            }
            "consts" => {
                for a in args {
                    let name = named(a, "consts")?;
                    let values = match &a.value.kind {
                        ExprKind::List(xs) => xs.iter().map(const_spec).collect::<Result<Vec<_>, _>>()?,
                        _ => vec![const_spec(&a.value)?],
                    };
                    spec.consts.push((name, values));
                }
            }
            "flops" => match args.as_slice() {
                [Arg { name: None, value }] => spec.flops = Some(value.clone()),
                _ => return Err(bad(e.span, "`flops` takes one expression").label("e.g. `flops(2 * M * N * K)`")),
            },
            "grid" => {
                if args.is_empty() || args.len() > 3 || args.iter().any(|a| a.name.is_some()) {
                    return Err(bad(e.span, "`grid` takes one to three extents").label("e.g. `grid(cdiv(n, BLOCK))`"));
                }
                spec.grid = args.iter().map(|a| a.value.clone()).collect();
            }
            "args" => {
                for a in args {
                    let name = named(a, "args")?;
                    spec.args.push((name, arg_spec(&a.value)?, a.value.span));
                }
            }
            "reference" => {
                let (kernel, n, span) = match args.as_slice() {
                    [
                        Arg {
                            name: None,
                            value:
                                Expr {
                                    kind: ExprKind::Name(n),
                                    span,
                                },
                        },
                    ] => (false, n, span),
                    [
                        Arg {
                            name: Some(k),
                            value:
                                Expr {
                                    kind: ExprKind::Name(n),
                                    span,
                                },
                        },
                    ] if k.name == "interpret" => (true, n, span),
                    _ => {
                        return Err(bad(
                            e.span,
                            "`reference` names one built-in reference or one kernel of the file",
                        )
                        .label("e.g. `reference(softmax)` or `reference(interpret: softmax_ref)`"));
                    }
                };
                spec.reference = Some(ReferenceName {
                    name: n.clone(),
                    span: *span,
                    kernel,
                });
            }
            "tolerance" => {
                let (mut rtol, mut atol) = (None, None);
                for a in args {
                    let v = const_float(&a.value)?;
                    match a.name.as_ref().map(|n| n.name.as_str()) {
                        Some("rtol") => rtol = Some(v),
                        Some("atol") => atol = Some(v),
                        _ => {
                            return Err(bad(a.value.span, "`tolerance` takes `rtol:` and `atol:`").label("here"));
                        }
                    }
                }
                spec.tolerance = Some((rtol.unwrap_or(0.0), atol.unwrap_or(0.0)));
            }
            other => {
                return Err(bad(func.span, &format!("unknown run-spec section `{other}`"))
                    .label("not a section")
                    .note(sections));
            }
        }
    }
    if spec.grid.is_empty() {
        return Err(bad(r.kernel.span, "the run spec has no `grid(..)`").label("needs a grid"));
    }
    Ok(spec)
}

fn named(a: &Arg, section: &str) -> Result<String, Diagnostic> {
    a.name.as_ref().map(|n| n.name.clone()).ok_or_else(|| {
        Diagnostic::error(a.value.span, format!("`{section}` entries are named: `name: value`")).label("unnamed")
    })
}

fn const_int(e: &Expr) -> Result<i64, Diagnostic> {
    match eval(e, &|_| None)? {
        Num::I(i) => Ok(i),
        Num::F(_) => Err(Diagnostic::error(e.span, "expected an integer").label("not an integer")),
    }
}

fn const_float(e: &Expr) -> Result<f64, Diagnostic> {
    Ok(eval(e, &|_| None)?.as_f64())
}

/// A compile-time value in a run spec: a constant, or an expression of the sizes evaluated per
/// case (`consts(BLOCK: next_pow2(cols))`).
#[derive(Clone, Debug)]
pub enum ConstSpec {
    Value(ConstValue),
    Expr(Expr),
}

fn const_spec(e: &Expr) -> Result<ConstSpec, Diagnostic> {
    match const_value(e) {
        Ok(v) => Ok(ConstSpec::Value(v)),
        Err(_) if mentions_name(e) => Ok(ConstSpec::Expr(e.clone())),
        Err(d) => Err(d),
    }
}

fn mentions_name(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Name(_) => true,
        ExprKind::Paren(x) | ExprKind::Unary(_, x) => mentions_name(x),
        ExprKind::Binary(_, a, b) => mentions_name(a) || mentions_name(b),
        ExprKind::Call { args, .. } => args.iter().any(|a| mentions_name(&a.value)),
        _ => false,
    }
}

fn const_value(e: &Expr) -> Result<ConstValue, Diagnostic> {
    match &e.kind {
        ExprKind::Name(n) if DType::from_name(n).is_some() => Ok(ConstValue::DType(DType::from_name(n).unwrap())),
        ExprKind::Bool(b) => Ok(ConstValue::Bool(*b)),
        _ => Ok(match eval(e, &|_| None)? {
            Num::I(i) => ConstValue::Int(i),
            Num::F(f) => ConstValue::Float(f),
        }),
    }
}

fn arg_spec(e: &Expr) -> Result<ArgSpec, Diagnostic> {
    let ExprKind::Call { func, args } = &e.kind else {
        return Ok(ArgSpec::Scalar(e.clone()));
    };
    let pos = |i: usize| args.iter().filter(|a| a.name.is_none()).nth(i).map(|a| &a.value);
    let kw = |k: &str| {
        args.iter()
            .find(|a| a.name.as_ref().is_some_and(|n| n.name == k))
            .map(|a| &a.value)
    };
    let shape_of = |x: Option<&Expr>| -> Result<Vec<Expr>, Diagnostic> {
        match x {
            Some(Expr {
                kind: ExprKind::List(items),
                ..
            }) => Ok(items.clone()),
            Some(other) => Ok(vec![other.clone()]),
            None => {
                Err(Diagnostic::error(e.span, format!("`{}` needs a shape", func.name)).label("e.g. `[rows, cols]`"))
            }
        }
    };
    let param = |i: usize, name: &str| pos(i).or(kw(name)).cloned();
    let init = match func.name.as_str() {
        "randn" => InitSpec::Randn,
        "rand" => InitSpec::Rand(param(1, "lo"), param(2, "hi")),
        "randint" => InitSpec::Randint(param(1, "lo"), param(2, "hi")),
        "zeros" => InitSpec::Constant(0.0),
        "ones" => InitSpec::Constant(1.0),
        "full" => InitSpec::Full(param(1, "value")),
        "arange" => InitSpec::Arange,
        "output" => {
            return match pos(0) {
                Some(
                    inner @ Expr {
                        kind: ExprKind::Call { .. },
                        ..
                    },
                ) => match arg_spec(inner)? {
                    ArgSpec::Buffer { shape, init, .. } => Ok(ArgSpec::Buffer {
                        shape,
                        init,
                        output: true,
                    }),
                    // A call that is no generator is a size (`output(cdiv(n, 4))`), checked
                    // when the case is evaluated like any other.
                    ArgSpec::Scalar(size) => Ok(ArgSpec::Buffer {
                        shape: vec![size],
                        init: InitSpec::Poison,
                        output: true,
                    }),
                },
                other => Ok(ArgSpec::Buffer {
                    shape: shape_of(other)?,
                    init: InitSpec::Poison,
                    output: true,
                }),
            };
        }
        _ => return Ok(ArgSpec::Scalar(e.clone())),
    };
    Ok(ArgSpec::Buffer {
        shape: shape_of(pos(0))?,
        init,
        output: false,
    })
}

/// A number in a spec expression.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    I(i64),
    F(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

/// Evaluates a spec expression: numbers, names from `env`, `+ - * / %`, `cdiv`, `min`, `max`,
/// `next_pow2`, comparisons (1 when they hold, else 0), `&&`, `||` and `!`. Kernels'
/// `#[grid(..)]` and `#[requires(..)]` expressions and computed compile-time values are the same
/// language.
pub fn eval(e: &Expr, env: &dyn Fn(&str) -> Option<Num>) -> Result<Num, Diagnostic> {
    eval_in(
        e,
        env,
        &Mode {
            strict: true,
            names: None,
        },
    )
}

/// Whether `e` is an expression [`eval`] accepts when `known` names have integer values: its
/// forms and names, not its arithmetic (which depends on the values). Gives the kind of number
/// it evaluates to. `names` says what the known names are, for the error on another one.
pub fn check_expr(e: &Expr, known: &dyn Fn(&str) -> bool, names: &str) -> Result<Num, Diagnostic> {
    eval_in(
        e,
        &|n| known(n).then_some(Num::I(1)),
        &Mode {
            strict: false,
            names: Some(names),
        },
    )
}

/// How [`eval_in`] evaluates: with `strict` false, arithmetic that fails (overflow, division by
/// zero, `cdiv` by a non-positive number, `next_pow2` out of range) gives 0 instead of an
/// error; `names` says what a name may be (`None`: a run spec's sizes or constants).
struct Mode<'a> {
    strict: bool,
    names: Option<&'a str>,
}

fn eval_in(e: &Expr, env: &dyn Fn(&str) -> Option<Num>, mode: &Mode) -> Result<Num, Diagnostic> {
    let err = |m: &str| Diagnostic::error(e.span, m.to_string());
    let arith = |m: &str| {
        if mode.strict {
            Err(err(m).label("here"))
        } else {
            Ok(Num::I(0))
        }
    };
    let eval = |e: &Expr, env: &dyn Fn(&str) -> Option<Num>| eval_in(e, env, mode);
    Ok(match &e.kind {
        ExprKind::Int(v) => Num::I(i64::try_from(*v).map_err(|_| err("integer too large").label("here"))?),
        ExprKind::Float(f) => Num::F(*f),
        ExprKind::Bool(b) => Num::I(*b as i64),
        ExprKind::Paren(x) => eval(x, env)?,
        ExprKind::Name(n) => match n.as_str() {
            "inf" => Num::F(f64::INFINITY),
            _ => env(n).ok_or_else(|| match mode.names {
                None => err(&format!("unknown size or constant `{n}`")).label("not defined in `sizes` or `consts`"),
                Some(names) => err(&format!("`{n}` is not {names}")).label("not usable here"),
            })?,
        },
        ExprKind::Unary(UnOp::Neg, x) => match eval(x, env)? {
            Num::I(i) => Num::I(i.wrapping_neg()),
            Num::F(f) => Num::F(-f),
        },
        ExprKind::Unary(UnOp::Not, x) => match eval(x, env)? {
            Num::I(i) => Num::I((i == 0) as i64),
            Num::F(_) => return Err(err("`!` takes a comparison or an integer").label("a float")),
        },
        ExprKind::Binary(op @ (BinOp::LogicAnd | BinOp::LogicOr), a, b) => {
            let truth = |v: Num| match v {
                Num::I(i) => Ok(i != 0),
                Num::F(_) => Err(err("`&&` and `||` take comparisons or integers").label("a float")),
            };
            let (x, y) = (truth(eval(a, env)?)?, truth(eval(b, env)?)?);
            Num::I(if *op == BinOp::LogicAnd { x && y } else { x || y } as i64)
        }
        ExprKind::Binary(op @ (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), a, b) => {
            let (x, y) = (eval(a, env)?, eval(b, env)?);
            let ord = match (x, y) {
                (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
                _ => x.as_f64().partial_cmp(&y.as_f64()),
            };
            use std::cmp::Ordering as O;
            let holds = match (op, ord) {
                (_, None) => *op == BinOp::Ne,
                (BinOp::Eq, Some(o)) => o == O::Equal,
                (BinOp::Ne, Some(o)) => o != O::Equal,
                (BinOp::Lt, Some(o)) => o == O::Less,
                (BinOp::Le, Some(o)) => o != O::Greater,
                (BinOp::Gt, Some(o)) => o == O::Greater,
                (_, Some(o)) => o != O::Less,
            };
            Num::I(holds as i64)
        }
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (eval(a, env)?, eval(b, env)?);
            match (x, y) {
                (Num::I(x), Num::I(y)) => {
                    let v = match op {
                        BinOp::Add => x.checked_add(y),
                        BinOp::Sub => x.checked_sub(y),
                        BinOp::Mul => x.checked_mul(y),
                        BinOp::Div => x.checked_div(y),
                        BinOp::Rem => x.checked_rem(y),
                        _ => {
                            return Err(err("unsupported operator").label("use + - * / %"));
                        }
                    };
                    match v {
                        Some(v) => Num::I(v),
                        None => arith("overflow or division by zero")?,
                    }
                }
                _ => {
                    let (x, y) = (x.as_f64(), y.as_f64());
                    Num::F(match op {
                        BinOp::Add => x + y,
                        BinOp::Sub => x - y,
                        BinOp::Mul => x * y,
                        BinOp::Div => x / y,
                        _ => return Err(err("unsupported operator on floats").label("here")),
                    })
                }
            }
        }
        ExprKind::Call { func, args } if func.name == "next_pow2" && args.len() == 1 => {
            match eval(&args[0].value, env)? {
                Num::I(x) if x >= 0 && x <= 1 << 40 => Num::I((x.max(1) as u64).next_power_of_two() as i64),
                Num::I(_) => arith("`next_pow2` takes an integer from 0 to 2^40")?,
                Num::F(_) => return Err(err("`next_pow2` takes an integer from 0 to 2^40").label("here")),
            }
        }
        ExprKind::Call { func, args } if matches!(func.name.as_str(), "cdiv" | "min" | "max") && args.len() == 2 => {
            let (x, y) = (eval(&args[0].value, env)?, eval(&args[1].value, env)?);
            let (Num::I(x), Num::I(y)) = (x, y) else {
                return Err(err("expects integers").label("here"));
            };
            match func.name.as_str() {
                "cdiv" if y > 0 => match x.checked_add(y - 1) {
                    Some(s) => Num::I(s.div_euclid(y)),
                    None => arith("overflow")?,
                },
                "cdiv" => arith("`cdiv` by a non-positive number")?,
                "min" => Num::I(x.min(y)),
                _ => Num::I(x.max(y)),
            }
        }
        _ => {
            let what = if mode.names.is_some() {
                "unsupported expression"
            } else {
                "unsupported expression in a run spec"
            };
            return Err(err(what)
                .label("use numbers, sizes, constants, + - * / %, comparisons, && || !, cdiv, min, max, next_pow2"));
        }
    })
}
