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

/// The most programs a grid may have along each axis (x, y, z): what a GPU launch accepts.
pub const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

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
        let value = |e: &Option<Expr>, default: Num| e.as_ref().map_or(Ok(default), |e| eval(e));
        let num = |e: &Option<Expr>, default: f64| value(e, Num::F(default)).map(Num::as_f64);
        Ok(match self {
            InitSpec::Randn => Init::Randn,
            InitSpec::Rand(lo, hi) => {
                let (lo, hi) = (num(lo, 0.0)?, num(hi, 1.0)?);
                // An infinite bound or width would make every sample infinite or NaN.
                if !(lo < hi && (hi - lo).is_finite()) {
                    return Err(Diagnostic::error(
                        span,
                        format!("`rand` needs finite bounds lo < hi; got lo = {lo}, hi = {hi}"),
                    )
                    .label(if lo.is_nan() || hi.is_nan() {
                        "a bound is not a number"
                    } else if lo < hi {
                        "an infinite range"
                    } else {
                        "an empty range"
                    })
                    .help("e.g. `rand([n], -1, 1)`"));
                }
                Init::Rand(lo, hi)
            }
            InitSpec::Randint(lo, hi) => {
                let (lo, hi) = (value(lo, Num::I(0))?, value(hi, Num::I(100))?);
                match (exact_i64(lo), exact_i64(hi)) {
                    (Some(l), Some(h)) if l < h => Init::Randint(l, h),
                    _ => {
                        return Err(Diagnostic::error(
                            span,
                            format!(
                                "`randint` needs integers lo < hi; got lo = {}, hi = {}",
                                shown(lo),
                                shown(hi)
                            ),
                        )
                        .label("not an integer range")
                        .note("each bound is an integer from -2^63 to 2^63 - 1"));
                    }
                }
            }
            InitSpec::Full(v) => Init::Full(num(v, 0.0)?),
            InitSpec::Constant(v) => Init::Full(*v),
            InitSpec::Arange => Init::Arange,
            InitSpec::Poison => Init::Poison,
        })
    }
}

/// `v` as an i64 when it is an integer that one holds exactly (a float bound past 2^63 would
/// saturate, and an empty range with it).
fn exact_i64(v: Num) -> Option<i64> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    match v {
        Num::I(i) => Some(i),
        Num::F(f) if f.fract() == 0.0 && (-TWO_63..TWO_63).contains(&f) => Some(f as i64),
        Num::F(_) => None,
    }
}

/// A number as a message shows it.
fn shown(v: Num) -> String {
    match v {
        Num::I(i) => i.to_string(),
        Num::F(f) => f.to_string(),
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
    // By name, the first of a name as `find_kernel` has it: a search per spec was quadratic.
    let mut defs = std::collections::HashMap::new();
    for item in &file.items {
        if let ast::Item::Kernel(k) = item {
            defs.entry(k.name.name.as_str()).or_insert(k);
        }
    }
    for item in &file.items {
        if let ast::Item::Run(r) = item {
            // Reported here, at the name, so that the caller's whole-spec check never sees it.
            let Some(def) = defs.get(r.kernel.name.as_str()) else {
                let mut d = Diagnostic::error(
                    r.kernel.span,
                    format!("run spec for unknown kernel `{}`", r.kernel.name),
                )
                .label("no kernel of that name");
                d = match crate::check::closest_name(&r.kernel.name, kernels.iter().map(|k| k.as_str())) {
                    Some(k) => d.help(format!("a kernel with a similar name exists: `{k}`")),
                    None if kernels.is_empty() => d.note("this file defines no kernels"),
                    None => d.note(format!("this file defines: {}", crate::diag::list(&kernels))),
                };
                diags.push(d);
                continue;
            };
            match parse_spec(r).and_then(|s| check_flops(&s, def).map(|()| s)) {
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
    // Where each size list and the `consts(..)` section are, for the errors that span several.
    let (mut size_spans, mut bench_spans, mut consts_at) = (Vec::new(), Vec::new(), None);
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
                        bench_spans.push(a.value.span);
                        spec.bench.push((name, values));
                    } else {
                        size_spans.push(a.value.span);
                        spec.sizes.push((name, values));
                    }
                }
            }
            "consts" => {
                consts_at.get_or_insert(e.span);
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
    zipped_count(&spec.sizes, &size_spans, "sizes")?;
    zipped_count(&spec.bench, &bench_spans, "bench")?;
    check_case_count(&spec, &size_spans, &bench_spans, consts_at)?;
    Ok(spec)
}

/// The most cases one run spec may have (its sizes zipped, crossed with its constants): eight
/// crossed lists of 40 values would be 6.5e12 cases, built before the first ran.
pub const MAX_CASES: u64 = 10_000;

/// The number of cases of zipped size lists: their common length (a one-value list repeats).
/// A list of another length is an error at it, with the longest as the one to match.
fn zipped_count(lists: &[(String, Vec<i64>)], spans: &[Span], section: &str) -> Result<u64, Diagnostic> {
    let Some(longest) = (0..lists.len()).max_by_key(|&i| (lists[i].1.len(), std::cmp::Reverse(i))) else {
        return Ok(1);
    };
    let n = lists[longest].1.len();
    if let Some(i) = (0..lists.len()).find(|&i| lists[i].1.len() != 1 && lists[i].1.len() != n) {
        let values = |k: usize| if k == 1 { "value" } else { "values" };
        let (name, len) = (&lists[i].0, lists[i].1.len());
        return Err(Diagnostic::error(
            spans[i],
            format!(
                "`{section}` list `{}` has {len} {} but `{}` has {n}",
                crate::diag::short(name),
                values(len),
                crate::diag::short(&lists[longest].0)
            ),
        )
        .label(format!("{len} {}", values(len)))
        .with(spans[longest], format!("{n} values"))
        .note(format!(
            "`{section}` lists are zipped (case i takes the i-th value of each): give each {n} values, or one"
        )));
    }
    Ok(n as u64)
}

/// Refuses a spec of more than [`MAX_CASES`] cases, counted before any is built.
fn check_case_count(
    spec: &RunSpec,
    size_spans: &[Span],
    bench_spans: &[Span],
    consts_at: Option<Span>,
) -> Result<(), Diagnostic> {
    let crossed = spec
        .consts
        .iter()
        .try_fold(1u64, |n, (_, values)| n.checked_mul(values.len() as u64));
    let sizes = [(&spec.sizes, size_spans), (&spec.bench, bench_spans)];
    for (lists, spans) in sizes {
        let zipped = lists.iter().map(|(_, v)| v.len() as u64).max().unwrap_or(1);
        let count = crossed.and_then(|c| c.checked_mul(zipped));
        if count.is_some_and(|c| c <= MAX_CASES) {
            continue;
        }
        let shown = count.map_or("more than 2^64".to_string(), |c| c.to_string());
        // At the constants when they are crossed, else at the longest size list.
        let longest = (0..lists.len()).max_by_key(|&i| lists[i].1.len());
        let at = match (consts_at, longest) {
            (Some(c), _) if crossed != Some(1) => c,
            (_, Some(i)) => spans[i],
            (Some(c), None) => c,
            (None, None) => spec.span,
        };
        let mut factors: Vec<String> = Vec::new();
        if zipped > 1 {
            factors.push(format!("{zipped} sizes"));
        }
        factors.extend(
            spec.consts
                .iter()
                .filter(|(_, v)| v.len() > 1)
                .take(crate::diag::MAX_LISTED)
                .map(|(n, v)| format!("{} `{}`", v.len(), crate::diag::short(n))),
        );
        return Err(Diagnostic::error(
            at,
            format!("this run spec has {shown} cases; at most {MAX_CASES} are allowed"),
        )
        .label(format!("{} crossed", factors.join(" × ")))
        .help("split it into several run specs, or give fewer values"));
    }
    Ok(())
}

/// Checks a parsed spec's `flops(..)` against the names it may read: the spec's sizes and
/// constants and the kernel's compile-time values; name-free arithmetic (`/ 0`) is evaluated.
fn check_flops(spec: &RunSpec, def: &ast::FnDef) -> Result<(), Diagnostic> {
    let Some(flops) = &spec.flops else {
        return Ok(());
    };
    let known = |n: &str| {
        spec.sizes.iter().chain(&spec.bench).any(|(s, _)| s == n)
            || spec.consts.iter().any(|(c, _)| c == n)
            || def.consts.iter().any(|c| c.name.name == n)
    };
    check_expr(
        flops,
        &known,
        "a size or compile-time value of this run spec or its kernel",
    )
    .map(|_| ())
    .map_err(|d| {
        d.help("`flops(..)` reads the sizes, the compile-time values, numbers, + - * / %, cdiv, min, max and next_pow2")
    })
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

/// Whether `e` reads a name (a size, a constant, a parameter; `inf` is a number).
pub(crate) fn mentions_name(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Name(n) => n != "inf",
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
/// forms and names, and the arithmetic of its parts that name nothing (`1 / 0`), not the rest
/// (which depends on the values). Gives the kind of number it evaluates to. `names` says what
/// the known names are, for the error on another one.
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

/// How [`eval_in`] evaluates: with `strict` false, arithmetic on names that fails (overflow,
/// division by zero, `cdiv` by a non-positive number, `next_pow2` out of range) gives 0 instead
/// of an error, since the names' values are not known; arithmetic that names nothing is always
/// strict. `names` says what a name may be (`None`: a run spec's sizes or constants).
struct Mode<'a> {
    strict: bool,
    names: Option<&'a str>,
}

fn eval_in(e: &Expr, env: &dyn Fn(&str) -> Option<Num>, mode: &Mode) -> Result<Num, Diagnostic> {
    let err = |m: &str| Diagnostic::error(e.span, m.to_string());
    // Arithmetic that fails whatever the names are (its `culprit` names none: `1 / 0`,
    // `n / 0`) fails in every evaluation: an error even when checking.
    let fails_on = |m: &str, culprit: &Expr| {
        if mode.strict || !mentions_name(culprit) {
            Err(err(m).label("here"))
        } else {
            Ok(Num::I(0))
        }
    };
    let arith = |m: &str| fails_on(m, e);
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
                        None if y == 0 => fails_on("integer division by zero", b)?,
                        None => arith("integer overflow: the result is outside the 64-bit range")?,
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
                "cdiv" => fails_on("`cdiv` by a non-positive number", &args[1].value)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "kernel k<const BLOCK: i32 = 64>(x: *f32, out: *mut f32, n: i32) {\n    let o = arange(0, BLOCK);\n    store(out + o, load(x + o, o < n), o < n);\n}\n";

    /// The specs of `KERNEL` followed by `spec`, and the diagnostics of reading them.
    fn specs(spec: &str) -> (Vec<RunSpec>, Vec<Diagnostic>) {
        let src = format!("{KERNEL}{spec}");
        let ast = crate::syntax::parse(&src).unwrap();
        parse_specs(&ast)
    }

    fn error(spec: &str) -> Diagnostic {
        let (specs, mut diags) = specs(spec);
        assert!(specs.is_empty() && diags.len() == 1, "{diags:?}");
        diags.remove(0)
    }

    /// The text `d` points at in `KERNEL` followed by `spec`.
    fn at(spec: &str, d: &Diagnostic) -> String {
        format!("{KERNEL}{spec}")[d.span.range()].to_string()
    }

    fn resolve(init: &str) -> Result<Init, Diagnostic> {
        let (specs, diags) = specs(&format!(
            "run k {{ sizes(n: [4]); grid(1); args(x: {init}, out: output([n]), n: n); }}"
        ));
        assert!(diags.is_empty(), "{diags:?}");
        let ArgSpec::Buffer { init, .. } = &specs[0].args[0].1 else {
            panic!("not a buffer")
        };
        init.resolve(&|e| eval(e, &|_| None), Span::default())
    }

    /// A bound past i64 no longer saturates into an empty range; an infinite or NaN `rand`
    /// bound is refused rather than giving infinite samples.
    #[test]
    fn generator_bounds_are_finite_ranges() {
        let d = resolve("randint([4], 9.3e18, 1e19)").unwrap_err();
        assert!(
            d.message
                .contains("`randint` needs integers lo < hi; got lo = 9300000000000000000, hi = 10000000000000000000"),
            "{d:?}"
        );
        assert!(resolve("randint([4], 1.5, 3)").is_err());
        assert_eq!(
            resolve("randint([4], -9.2e18, 9.2e18)").unwrap(),
            Init::Randint(-9_200_000_000_000_000_000, 9_200_000_000_000_000_000)
        );
        assert_eq!(
            resolve("randint([4], 0, 9223372036854775807)").unwrap(),
            Init::Randint(0, i64::MAX)
        );
        for bad in [
            "rand([4], 0, inf)",
            "rand([4], -inf, 0)",
            "rand([4], 0, inf - inf)",
            "rand([4], -1e308, 1e308)",
            "rand([4], 1, 1)",
        ] {
            let d = resolve(bad).unwrap_err();
            assert!(
                d.message.starts_with("`rand` needs finite bounds lo < hi"),
                "{bad}: {d:?}"
            );
        }
        assert_eq!(resolve("rand([4], -2, 2)").unwrap(), Init::Rand(-2.0, 2.0));
    }

    /// Crossed constants are counted before any case is built.
    #[test]
    fn too_many_cases_are_refused_at_consts() {
        let list = format!("[{}]", (0..40).map(|i| i.to_string()).collect::<Vec<_>>().join(", "));
        let consts: Vec<String> = (0..8).map(|i| format!("C{i}: {list}")).collect();
        let spec = format!(
            "run k {{ sizes(n: [4]); consts({}); grid(1); args(x: randn([n]), out: output([n]), n: n); }}",
            consts.join(", ")
        );
        let d = error(&spec);
        assert!(d.message.contains("6553600000000 cases; at most 10000"), "{d:?}");
        assert!(at(&spec, &d).starts_with("consts("), "{}", at(&spec, &d));
        // 100 sizes by 100 values is fine.
        let ok = format!(
            "run k {{ sizes(n: [{}]); consts(BLOCK: [{}]); grid(1); args(x: randn([n]), out: output([n]), n: n); }}",
            vec!["1"; 100].join(", "),
            vec!["64"; 100].join(", ")
        );
        let (mut parsed, diags) = specs(&ok);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(cases(&parsed[0]).unwrap().len(), 10_000);
        // `cases` counts before it builds, whoever made the spec.
        let values = vec![ConstSpec::Value(ConstValue::Int(64)); 40];
        parsed[0].consts = (0..8).map(|i| (format!("C{i}"), values.clone())).collect();
        assert!(cases(&parsed[0]).unwrap_err().message.contains("more than 10000 cases"));
    }

    /// Zipped lists of different lengths are an error at the list, when the spec is read.
    #[test]
    fn zipped_lists_of_other_lengths_are_located() {
        for section in ["sizes", "bench"] {
            let spec = format!(
                "run k {{ {section}(n: [1, 2], m: [1, 2, 3], q: [5]); grid(1); args(x: randn([n]), out: output([n]), n: n); }}"
            );
            let d = error(&spec);
            assert!(
                d.message
                    .contains(&format!("`{section}` list `n` has 2 values but `m` has 3")),
                "{d:?}"
            );
            assert_eq!(at(&spec, &d), "[1, 2]");
            assert_eq!(at(&spec, &Diagnostic::error(d.secondary[0].0, "")), "[1, 2, 3]");
        }
    }

    /// `flops(..)` reads only what a case defines, and its name-free arithmetic is evaluated.
    #[test]
    fn flops_is_checked_with_the_spec() {
        let spec = |f: &str| {
            format!(
                "run k {{ sizes(n: [4]); bench(m: [8]); consts(C: [1, 2]); grid(1); args(x: randn([n]), out: output([n]), n: n); flops({f}); }}"
            )
        };
        for good in ["2 * n", "m * C * BLOCK", "n / (n - 1)"] {
            assert!(specs(&spec(good)).1.is_empty(), "{good}");
        }
        for (bad, what, message) in [
            ("2 * nope", "nope", "`nope` is not a size or compile-time value"),
            ("n * (1 / 0)", "1 / 0", "integer division by zero"),
            (
                "n + 9223372036854775807 * 2",
                "9223372036854775807 * 2",
                "integer overflow",
            ),
        ] {
            let s = spec(bad);
            let d = error(&s);
            assert!(d.message.contains(message), "{bad}: {d:?}");
            assert_eq!(at(&s, &d), what);
        }
    }
}
