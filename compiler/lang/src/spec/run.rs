//! Turning a run spec into launches: the cases (size and constant combinations), inputs made
//! from seeded generators, and the comparison of outputs with a reference under dtype-aware
//! tolerances. The executor (the interpreter here, the GPU elsewhere) is the caller's.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

use super::{ArgSpec, ConstSpec, Init, Num, RunSpec, eval};
use crate::diag::Diagnostic;
use crate::interp::{Arg, Buffer};
use crate::ir::{ConstValue, DType, Elem, Kernel};
use crate::ir::{Scalar, scalar};

/// One combination of sizes and compile-time values.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub sizes: Vec<(String, i64)>,
    pub consts: Vec<(String, ConstValue)>,
}

impl Case {
    /// `rows=37 cols=781 BLOCK=1024`
    pub fn label(&self) -> String {
        let mut parts: Vec<String> = self.sizes.iter().map(|(n, v)| format!("{n}={v}")).collect();
        parts.extend(self.consts.iter().map(|(n, v)| format!("{n}={v}")));
        parts.join(" ")
    }
}

/// The cases of a spec: sizes zipped (a one-value list repeats), constants crossed.
/// A spec with only `bench(..)` sizes has none: it is for `tilec bench`.
pub fn cases(spec: &RunSpec) -> Result<Vec<Case>, Diagnostic> {
    if spec.sizes.is_empty() && !spec.bench.is_empty() {
        return Ok(vec![]);
    }
    cases_of(spec, &spec.sizes)
}

/// The benchmark cases of a spec (its `bench(..)` sizes); empty when it has none.
pub fn bench_cases(spec: &RunSpec) -> Result<Vec<Case>, Diagnostic> {
    if spec.bench.is_empty() {
        return Ok(vec![]);
    }
    cases_of(spec, &spec.bench)
}

fn cases_of(spec: &RunSpec, sizes: &[(String, Vec<i64>)]) -> Result<Vec<Case>, Diagnostic> {
    let n = sizes.iter().map(|(_, v)| v.len()).max().unwrap_or(1);
    if let Some((name, v)) = sizes.iter().find(|(_, v)| v.len() != 1 && v.len() != n) {
        return Err(Diagnostic::error(
            spec.span,
            format!("size `{name}` has {} values but others have {n}", v.len()),
        )
        .label("in this run spec")
        .note("size lists are zipped: give each the same number of values, or one"));
    }
    // Counted before any is built (`parse_specs` reports this at `consts(..)`).
    let count = spec
        .consts
        .iter()
        .try_fold(n as u64, |c, (_, v)| c.checked_mul(v.len() as u64));
    if count.is_none_or(|c| c > super::MAX_CASES) {
        return Err(Diagnostic::error(
            spec.span,
            format!("this run spec has more than {} cases", super::MAX_CASES),
        )
        .label("its sizes and constants give too many")
        .help("split it into several run specs, or give fewer values"));
    }
    let mut out = Vec::new();
    for i in 0..n {
        let sizes: Vec<(String, i64)> = sizes
            .iter()
            .map(|(name, v)| (name.clone(), if v.len() == 1 { v[0] } else { v[i] }))
            .collect();
        let env = |name: &str| sizes.iter().find(|(n, _)| n == name).map(|(_, v)| Num::I(*v));
        let mut const_sets: Vec<Vec<(String, ConstValue)>> = vec![vec![]];
        for (name, specs) in &spec.consts {
            let mut values = Vec::new();
            for c in specs {
                values.push(match c {
                    ConstSpec::Value(v) => *v,
                    ConstSpec::Expr(e) => match eval(e, &env)? {
                        Num::I(v) => ConstValue::Int(v),
                        Num::F(v) => ConstValue::Float(v),
                    },
                });
            }
            const_sets = const_sets
                .into_iter()
                .flat_map(|set| {
                    values.iter().map(move |v| {
                        let mut s = set.clone();
                        s.push((name.clone(), *v));
                        s
                    })
                })
                .collect();
        }
        for consts in const_sets {
            out.push(Case {
                sizes: sizes.clone(),
                consts,
            });
        }
    }
    Ok(out)
}

/// An argument as a reference function sees it: buffers as f64 (already rounded to their dtype).
#[derive(Clone, Debug, PartialEq)]
pub enum RefArg {
    Buffer {
        data: Vec<f64>,
        shape: Vec<usize>,
        dtype: DType,
    },
    Scalar(f64),
}

/// Everything a reference function needs for one case.
#[derive(Clone, Debug, Default)]
pub struct RefCase {
    pub sizes: BTreeMap<String, i64>,
    pub consts: BTreeMap<String, ConstValue>,
    pub args: BTreeMap<String, RefArg>,
}

/// A name a reference reads that the run spec does not provide (the spec names its sizes,
/// buffers or constants otherwise), or a buffer shorter than its sizes say: the case's error,
/// not a crash.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("the reference does not match this run spec: {0}")]
pub struct RefError(pub String);

impl RefCase {
    fn missing<T>(&self, what: &str, name: &str, have: Vec<&String>) -> Result<T, RefError> {
        let have = if have.is_empty() {
            "none".to_string()
        } else {
            crate::diag::quoted_list(have)
        };
        Err(RefError(format!(
            "it reads the {what} `{name}`, which the spec does not give (its {what}s: {have})"
        )))
    }

    pub fn size(&self, name: &str) -> Result<usize, RefError> {
        match self.sizes.get(name) {
            Some(v) => Ok(*v as usize),
            None => self.missing("size", name, self.sizes.keys().collect()),
        }
    }

    pub fn buffer(&self, name: &str) -> Result<&[f64], RefError> {
        match self.args.get(name) {
            Some(RefArg::Buffer { data, .. }) => Ok(data),
            _ => self.missing("buffer", name, self.buffer_names(true)),
        }
    }

    /// Buffer `name`, which the reference reads `len` values of (a shorter one is the run
    /// spec's mistake: sizes that do not match the buffer's shape).
    pub fn buffer_of(&self, name: &str, len: usize) -> Result<&[f64], RefError> {
        let b = self.buffer(name)?;
        if b.len() < len {
            return Err(RefError(format!(
                "it reads {len} values of the buffer `{name}` (from the sizes), which holds {}",
                b.len()
            )));
        }
        Ok(b)
    }

    pub fn dtype(&self, name: &str) -> Result<DType, RefError> {
        match self.args.get(name) {
            Some(RefArg::Buffer { dtype, .. }) => Ok(*dtype),
            _ => self.missing("buffer", name, self.buffer_names(true)),
        }
    }

    pub fn scalar(&self, name: &str) -> Result<f64, RefError> {
        match self.args.get(name) {
            Some(RefArg::Scalar(v)) => Ok(*v),
            _ => self.missing("scalar", name, self.buffer_names(false)),
        }
    }

    pub fn const_int(&self, name: &str) -> Result<i64, RefError> {
        match self.consts.get(name) {
            Some(ConstValue::Int(i)) => Ok(*i),
            _ => self.missing("integer constant", name, self.consts.keys().collect()),
        }
    }

    pub fn const_bool(&self, name: &str) -> Result<bool, RefError> {
        match self.consts.get(name) {
            Some(ConstValue::Bool(b)) => Ok(*b),
            _ => self.missing("bool constant", name, self.consts.keys().collect()),
        }
    }

    /// The names of the buffer (or scalar) arguments.
    fn buffer_names(&self, buffers: bool) -> Vec<&String> {
        self.args
            .iter()
            .filter(|(_, a)| matches!(a, RefArg::Buffer { .. }) == buffers)
            .map(|(n, _)| n)
            .collect()
    }
}

/// A reference: expected contents of each output buffer, by parameter name.
pub type Reference = fn(&RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError>;

/// A case made ready to launch.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub grid: [u32; 3],
    pub args: Vec<Arg>,
    pub buffers: Vec<Buffer>,
    /// Output parameters and their buffer indices.
    pub outputs: Vec<(String, usize)>,
    pub reference_input: RefCase,
}

/// The poison an output starts with (NaN for floats, a pattern for integers).
pub fn poison(d: DType) -> Scalar {
    if d.is_float() {
        Scalar::F(f64::NAN)
    } else if d.is_bool() {
        Scalar::B(true)
    } else {
        Scalar::I(scalar::wrap(d, 0x5A5A_5A5A_5A5A_5A5A))
    }
}

/// A case's launch without its data: the grid, and each argument's value or buffer shape.
#[derive(Clone, Debug)]
pub struct Plan {
    pub grid: [u32; 3],
    pub args: Vec<PlanArg>,
}

#[derive(Clone, Debug)]
pub enum PlanArg {
    Buffer {
        name: String,
        dtype: DType,
        shape: Vec<usize>,
        init: Init,
        output: bool,
    },
    Scalar {
        name: String,
        dtype: DType,
        value: Scalar,
    },
}

impl PlanArg {
    /// Elements of a buffer (0 for a scalar).
    pub fn len(&self) -> usize {
        match self {
            PlanArg::Buffer { shape, .. } => shape.iter().product(),
            PlanArg::Scalar { .. } => 0,
        }
    }
}

/// Evaluates a spec expression in a case: its sizes, its compile-time values, then the kernel's.
pub fn eval_in_case(e: &crate::syntax::ast::Expr, case: &Case, kernel: &Kernel) -> Result<Num, Diagnostic> {
    let env = |name: &str| -> Option<Num> {
        if let Some((_, v)) = case.sizes.iter().find(|(n, _)| n == name) {
            return Some(Num::I(*v));
        }
        match case
            .consts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .or_else(|| kernel.consts.iter().find(|(n, _)| n == name).map(|(_, v)| *v))
        {
            Some(ConstValue::Int(i)) => Some(Num::I(i)),
            Some(ConstValue::Float(f)) => Some(Num::F(f)),
            Some(ConstValue::Bool(b)) => Some(Num::I(b as i64)),
            _ => None,
        }
    };
    eval(e, &env)
}

/// The integer arguments a case gives its kernel, by parameter name: each scalar argument of
/// `args(..)` that evaluates to an integer from the case's sizes and compile-time values (one
/// that reads a value the case does not bind, the kernel's default say, is left out). What the
/// kernel's computed compile-time values and `#[requires(..)]` read for this case.
pub fn case_sizes(spec: &RunSpec, case: &Case) -> crate::check::Sizes {
    let env = |name: &str| -> Option<Num> {
        if let Some((_, v)) = case.sizes.iter().find(|(n, _)| n == name) {
            return Some(Num::I(*v));
        }
        match case.consts.iter().find(|(n, _)| n == name).map(|(_, v)| *v) {
            Some(ConstValue::Int(i)) => Some(Num::I(i)),
            Some(ConstValue::Bool(b)) => Some(Num::I(b as i64)),
            Some(ConstValue::Float(f)) => Some(Num::F(f)),
            _ => None,
        }
    };
    crate::check::Sizes(
        spec.args
            .iter()
            .filter_map(|(name, a, _)| match a {
                super::ArgSpec::Scalar(e) => match eval(e, &env) {
                    Ok(Num::I(v)) => Some((name.clone(), v)),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
    )
}

/// The integer scalar arguments of a prepared launch of `kernel`, by parameter name.
pub fn launch_sizes(kernel: &Kernel, args: &[Arg]) -> crate::check::Sizes {
    crate::check::Sizes(
        kernel
            .params
            .iter()
            .zip(args)
            .filter_map(|(p, a)| match a {
                Arg::Scalar(Scalar::I(v)) if p.elem.dtype().is_some_and(|d| d.is_int()) => Some((p.name.clone(), *v)),
                _ => None,
            })
            .collect(),
    )
}

/// Whether a prepared launch of `kernel` (of `file`) satisfies its `#[requires(..)]` clauses:
/// the first one broken is an error at the clause.
pub fn check_launch_requirements(
    file: &crate::syntax::ast::File,
    kernel: &Kernel,
    args: &[Arg],
) -> Result<(), Diagnostic> {
    let Some(def) = crate::check::find_kernel(file, &kernel.name) else {
        return Ok(());
    };
    let reqs = crate::check::launch::requirements(def);
    if reqs.is_empty() {
        return Ok(());
    }
    let sizes = launch_sizes(kernel, args);
    crate::check::launch::check_requirements(&reqs, &kernel.consts, &|n| sizes.get(n))
}

/// The launch of `kernel` (already specialised for `case.consts`) for one case, without data.
pub fn plan(spec: &RunSpec, case: &Case, kernel: &Kernel) -> Result<Plan, Diagnostic> {
    let mut grid = [1u32; 3];
    for (i, g) in spec.grid.iter().enumerate() {
        match eval_in_case(g, case, kernel)? {
            Num::I(v) if v >= 1 && v <= super::MAX_GRID[i] as i64 => grid[i] = v as u32,
            v => {
                let shown = match v {
                    Num::I(i) => i.to_string(),
                    Num::F(f) => f.to_string(),
                };
                let axis = ["x", "y", "z"][i];
                return Err(Diagnostic::error(
                    g.span,
                    format!(
                        "grid extent {shown} is not a positive integer (1 to {})",
                        super::MAX_GRID[i]
                    ),
                )
                .label(format!("{axis} in this case"))
                .note("a GPU grid has 1 to 2^31 - 1 programs along x, and 1 to 65535 along y and z"));
            }
        }
    }
    if let Err(m) = kernel.check_cluster_grid(grid[0]) {
        let at = spec.grid.first().map_or(spec.span, |g| g.span);
        return Err(Diagnostic::error(at, format!("`{}` {m}", kernel.name)).label("in this case"));
    }
    for (name, _, span) in &spec.args {
        if !kernel.params.iter().any(|p| &p.name == name) {
            let names: Vec<&str> = kernel.params.iter().map(|p| p.name.as_str()).collect();
            return Err(
                Diagnostic::error(*span, format!("`{}` has no parameter `{name}`", kernel.name))
                    .label("unknown argument")
                    .note(format!("its parameters are: {}", crate::diag::list(names))),
            );
        }
    }
    let mut args = Vec::new();
    for param in &kernel.params {
        let Some((_, spec_arg, span)) = spec.args.iter().find(|(n, ..)| n == &param.name) else {
            return Err(
                Diagnostic::error(spec.span, format!("the run spec gives no argument `{}`", param.name))
                    .label("in this run spec")
                    .help(format!("add `{}: ...` to `args(..)`", param.name)),
            );
        };
        args.push(match (param.elem, spec_arg) {
            (Elem::Ptr { pointee, .. }, ArgSpec::Buffer { shape, init, output }) => {
                let mut dims = Vec::new();
                for s in shape {
                    match eval_in_case(s, case, kernel)? {
                        Num::I(v) if v >= 0 => dims.push(v as usize),
                        v => {
                            return Err(Diagnostic::error(
                                s.span,
                                format!("buffer dimension {v:?} is not a non-negative integer"),
                            )
                            .label("here"));
                        }
                    }
                }
                if dims
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .is_none_or(|n| n > 1 << 34)
                {
                    return Err(Diagnostic::error(*span, "buffer too large").label("more than 2^34 elements"));
                }
                PlanArg::Buffer {
                    name: param.name.clone(),
                    dtype: pointee,
                    shape: dims,
                    init: init.resolve(&|e| eval_in_case(e, case, kernel), *span)?,
                    output: *output,
                }
            }
            (Elem::Scalar(d), ArgSpec::Scalar(e)) => {
                let v = eval_in_case(e, case, kernel)?;
                let value = match (v, d) {
                    (Num::I(i), d) if d.is_int() => {
                        let (lo, hi) = scalar::int_range(d);
                        if !(lo..=hi).contains(&(i as i128)) {
                            return Err(Diagnostic::error(
                                e.span,
                                format!("`{}` is {d}, which holds {lo} to {hi}; this value is {i}", param.name),
                            )
                            .label("does not fit")
                            .help(format!("declare `{}` with a wider type, e.g. i64", param.name)));
                        }
                        Scalar::I(i)
                    }
                    (Num::I(i), DType::Bool) => Scalar::B(i != 0),
                    (v, d) if d.is_float() => Scalar::F(scalar::round_float(d, v.as_f64())),
                    _ => {
                        return Err(
                            Diagnostic::error(e.span, format!("`{}` is {d}; this value is not", param.name))
                                .label("mismatched argument"),
                        );
                    }
                };
                PlanArg::Scalar {
                    name: param.name.clone(),
                    dtype: d,
                    value,
                }
            }
            (Elem::Ptr { .. }, ArgSpec::Scalar(e)) => {
                return Err(
                    Diagnostic::error(e.span, format!("`{}` is a pointer; give it a buffer", param.name))
                        .label("not a buffer")
                        .help("e.g. `randn([n])`, `zeros([n])`, `output([n])`"),
                );
            }
            (Elem::Scalar(d), ArgSpec::Buffer { .. }) => {
                return Err(
                    Diagnostic::error(*span, format!("`{}` is a scalar {d}, not a buffer", param.name))
                        .label("a buffer"),
                );
            }
        });
    }
    Ok(Plan { grid, args })
}

/// Builds the launch of `kernel` (already specialised for `case.consts`) for one case, with its
/// inputs generated from `seed` and its outputs poisoned.
pub fn prepare(spec: &RunSpec, case: &Case, kernel: &Kernel, seed: u64) -> Result<Prepared, Diagnostic> {
    let plan = plan(spec, case, kernel)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut p = Prepared {
        grid: plan.grid,
        args: vec![],
        buffers: vec![],
        outputs: vec![],
        reference_input: RefCase::default(),
    };
    p.reference_input.sizes = case.sizes.iter().cloned().collect();
    p.reference_input.consts = kernel.consts.iter().cloned().collect();
    check_case_elements(spec, &plan)?;
    for a in plan.args {
        match a {
            PlanArg::Buffer {
                name,
                dtype,
                shape,
                init,
                output,
            } => {
                let n: usize = shape.iter().product();
                let data: Vec<Scalar> = (0..n).map(|i| generate(&init, dtype, i, &mut rng)).collect();
                let buf = Buffer::new(name.clone(), dtype, data);
                p.reference_input.args.insert(
                    name.clone(),
                    RefArg::Buffer {
                        data: buf.to_f64(),
                        shape,
                        dtype,
                    },
                );
                if output {
                    p.outputs.push((name, p.buffers.len()));
                }
                p.args.push(Arg::Buffer(p.buffers.len()));
                p.buffers.push(buf);
            }
            PlanArg::Scalar { name, dtype, value } => {
                p.reference_input.args.insert(name, RefArg::Scalar(value.as_f64(dtype)));
                p.args.push(Arg::Scalar(value));
            }
        }
    }
    Ok(p)
}

/// The most elements all buffers of one prepared case may hold together. Each element is
/// held several times over (as a `Scalar` of 16 bytes for the interpreter, as f64 for the
/// reference, again for a reference kernel and for the comparison: about 56 bytes in all), so
/// this keeps one case under a gigabyte of host memory.
pub const MAX_CASE_ELEMENTS: u64 = 1 << 24;

/// Refuses a case whose buffers hold more than [`MAX_CASE_ELEMENTS`] in all, before any is made
/// (`prepare` asks it; the suite asks it of every GPU test file's cases, which run on the GPU
/// only through `tilec verify`).
pub fn check_case_elements(spec: &RunSpec, plan: &Plan) -> Result<(), Diagnostic> {
    let total = plan.args.iter().fold(0u64, |t, a| t.saturating_add(a.len() as u64));
    if total <= MAX_CASE_ELEMENTS {
        return Ok(());
    }
    let largest = plan.args.iter().max_by_key(|a| a.len()).and_then(|a| match a {
        PlanArg::Buffer { name, shape, .. } => Some((name, shape)),
        PlanArg::Scalar { .. } => None,
    });
    let mut d = Diagnostic::error(
        spec.span,
        format!("this case's buffers hold {total} elements in all; at most {MAX_CASE_ELEMENTS} (2^24) are allowed"),
    )
    .label("in this case")
    .help("give this run spec smaller sizes (`bench(..)` sizes, for `tilec bench`, have no such limit)");
    if let Some((name, shape)) = largest
        && let Some((.., span)) = spec.args.iter().find(|(a, ..)| a == name)
    {
        d = d.with(*span, format!("the largest, {shape:?}"));
    }
    Err(d)
}

fn generate(init: &Init, d: DType, i: usize, rng: &mut rand::rngs::StdRng) -> Scalar {
    let v = match init {
        Init::Poison => return poison(d),
        Init::Randn => rng.sample::<f64, _>(StandardNormal),
        Init::Rand(lo, hi) => lo + (hi - lo) * rng.random::<f64>(),
        // `Init::resolve` gives lo < hi; any other pair takes lo rather than panic.
        Init::Randint(lo, hi) if lo < hi => rng.random_range(*lo..*hi) as f64,
        Init::Randint(lo, _) => *lo as f64,
        Init::Full(v) => *v,
        Init::Arange => i as f64,
    };
    scalar::cast(DType::F64, d, Scalar::F(v), false)
}

/// The bytes of `n` elements of `dtype` for a benchmark buffer: values in the generator's range
/// from a xorshift generator (fast enough for gigabytes; benchmarks need realistic values, not
/// the reference's), never all zeros.
pub fn fill_bytes(dtype: DType, init: &Init, n: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let w = dtype.bytes();
    let mut out = Vec::with_capacity(n * w);
    for i in 0..n {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let u = (state >> 11) as f64 / (1u64 << 53) as f64;
        let v = match init {
            Init::Full(v) => *v,
            Init::Arange => i as f64,
            // In f64: `hi - lo` overflows i64 for the widest ranges.
            Init::Randint(lo, hi) => *lo as f64 + (u * (*hi as f64 - *lo as f64).max(1.0)).floor(),
            Init::Rand(lo, hi) => lo + (hi - lo) * u,
            Init::Randn | Init::Poison => 2.0 * u - 1.0,
        };
        let e = scalar::cast(DType::F64, dtype, Scalar::F(v), false);
        out.extend_from_slice(&scalar::to_bits(dtype, e).to_le_bytes()[..w]);
    }
    out
}

/// PyTorch's default tolerances per dtype: `(rtol, atol)`.
pub fn default_tolerance(d: DType) -> (f64, f64) {
    match d {
        DType::F16 => (1e-3, 1e-5),
        DType::BF16 => (1.6e-2, 1e-5),
        DType::F32 => (1.3e-6, 1e-5),
        DType::F64 => (1e-7, 1e-7),
        DType::F8E4M3 => (1.25e-1, 1e-2),
        DType::F8E5M2 => (2.5e-1, 1e-2),
        _ => (0.0, 0.0),
    }
}

/// How one output compared with its expected values.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub name: String,
    pub dtype: DType,
    /// Elements of the output.
    pub len: usize,
    /// Elements expected; when it differs from `len`, no element was compared.
    pub expected_len: usize,
    pub max_abs: f64,
    pub max_rel: f64,
    pub mismatches: usize,
    /// The first element out of tolerance: index, got, expected.
    pub first_bad: Option<(usize, f64, f64)>,
    pub rtol: f64,
    pub atol: f64,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.mismatches == 0 && self.len == self.expected_len
    }

    pub fn lengths_differ(&self) -> bool {
        self.len != self.expected_len
    }
}

/// What the expected values are, which decides how NaN is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareMode {
    /// An independent reference: NaN never passes, since a NaN in either is a bug to report.
    AgainstReference,
    /// Another execution of the same kernel (the GPU against the interpreter): both giving NaN
    /// at an element is agreement, since the kernel itself produced it.
    AgainstInterpreter,
}

/// Compares `got` with `want`: `|got - want| <= atol + rtol * |want|`; equal infinities pass;
/// NaN never passes, except where both are NaN under [`CompareMode::AgainstInterpreter`].
pub fn compare(
    name: &str,
    dtype: DType,
    got: &[f64],
    want: &[f64],
    (rtol, atol): (f64, f64),
    mode: CompareMode,
) -> Comparison {
    let mut c = Comparison {
        name: name.into(),
        dtype,
        len: got.len(),
        expected_len: want.len(),
        max_abs: 0.0,
        max_rel: 0.0,
        mismatches: 0,
        first_bad: None,
        rtol,
        atol,
    };
    if c.lengths_differ() {
        return c;
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if mode == CompareMode::AgainstInterpreter && g.is_nan() && w.is_nan() {
            continue;
        }
        let abs = (g - w).abs();
        let same_inf = g.is_infinite() && g == w;
        let ok = !g.is_nan() && !w.is_nan() && (same_inf || abs <= atol + rtol * w.abs());
        if !same_inf && !abs.is_nan() {
            c.max_abs = c.max_abs.max(abs);
            if w != 0.0 {
                c.max_rel = c.max_rel.max(abs / w.abs());
            }
        }
        if !ok {
            if g.is_nan() || w.is_nan() {
                c.max_abs = f64::NAN;
            }
            c.mismatches += 1;
            if c.first_bad.is_none() {
                c.first_bad = Some((i, g, w));
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXACT: (f64, f64) = (0.0, 0.0);

    /// `spec` for a one-buffer-in, one-out kernel: the spec, its first case and the kernel.
    fn case_of(spec: &str) -> (RunSpec, Case, Kernel, String) {
        let src = format!(
            "kernel k<const BLOCK: i32 = 64>(x: *f32, out: *mut f32, n: i32) {{\n    let o = arange(0, BLOCK);\n    store(out + o, load(x + o, o < n), o < n);\n}}\n{spec}"
        );
        let ast = crate::syntax::parse(&src).unwrap();
        let (mut specs, diags) = super::super::parse_specs(&ast);
        assert!(diags.is_empty(), "{diags:?}");
        let spec = specs.remove(0);
        let case = cases(&spec).unwrap().remove(0);
        let kernel = crate::check::check_kernel(&src, &ast, "k", &vec![]).unwrap();
        (spec, case, kernel, src)
    }

    /// Grid extents are what a GPU launch takes: x up to 2^31 - 1, y and z up to 65535.
    #[test]
    fn grid_extents_are_what_a_gpu_takes() {
        for (grid, ok, at) in [
            ("2147483647, 65535, 65535", true, ""),
            ("2147483648", false, "2147483648"),
            ("1, 65536", false, "65536"),
            ("1, 1, 4294967295", false, "4294967295"),
            ("1, 0", false, "0"),
        ] {
            let (spec, case, kernel, src) = case_of(&format!(
                "run k {{ sizes(n: [4]); grid({grid}); args(x: randn([n]), out: output([n]), n: n); }}"
            ));
            match plan(&spec, &case, &kernel) {
                Ok(p) => assert!(ok, "{grid}: {:?}", p.grid),
                Err(d) => {
                    assert!(!ok && d.message.starts_with("grid extent"), "{grid}: {d:?}");
                    assert_eq!(&src[d.span.range()], at);
                }
            }
        }
    }

    /// The buffers of one case are bounded in all, before any is made.
    #[test]
    fn a_case_holds_a_bounded_number_of_elements() {
        let spec =
            |n: u64| format!("run k {{ sizes(n: [{n}]); grid(1); args(x: randn([n]), out: output([n]), n: n); }}");
        let (s, case, kernel, _) = case_of(&spec(MAX_CASE_ELEMENTS / 2 + 1));
        let d = prepare(&s, &case, &kernel, 0).unwrap_err();
        assert!(
            d.message.contains(&format!(
                "hold {} elements in all; at most 16777216",
                MAX_CASE_ELEMENTS + 2
            )),
            "{d:?}"
        );
        assert_eq!(d.span, s.span);
        let (s, case, kernel, _) = case_of(&spec(1000));
        assert_eq!(prepare(&s, &case, &kernel, 0).unwrap().buffers[0].data.len(), 1000);
    }

    /// A `randint` range at the ends of i64 is sampled without overflow.
    #[test]
    fn randint_at_the_ends_of_i64_does_not_panic() {
        let (s, case, kernel, _) = case_of(
            "run k { sizes(n: [64]); grid(1); args(x: randint([n], -9223372036854775807 - 1, 9223372036854775807), out: output([n]), n: n); }",
        );
        prepare(&s, &case, &kernel, 0).unwrap();
        let (s, case, kernel, _) =
            case_of("run k { sizes(n: [4]); grid(1); args(x: randint([n], 9.3e18, 1e19), out: output([n]), n: n); }");
        assert!(
            prepare(&s, &case, &kernel, 0)
                .unwrap_err()
                .message
                .contains("`randint` needs integers lo < hi")
        );
        assert!(!fill_bytes(DType::F32, &Init::Randint(i64::MIN, i64::MAX), 16, 1).is_empty());
        assert!(!fill_bytes(DType::F32, &Init::Randint(5, 5), 16, 1).is_empty());
    }

    #[test]
    fn nan_agrees_only_against_the_interpreter() {
        let (got, want) = ([f64::NAN, 1.0], [f64::NAN, 1.0]);
        let vs_reference = compare("y", DType::F32, &got, &want, EXACT, CompareMode::AgainstReference);
        assert_eq!(
            (vs_reference.mismatches, vs_reference.first_bad.map(|b| b.0)),
            (1, Some(0))
        );
        let vs_interpreter = compare("y", DType::F32, &got, &want, EXACT, CompareMode::AgainstInterpreter);
        assert!(vs_interpreter.passed(), "{vs_interpreter:?}");
        // NaN on one side only is still a mismatch.
        let one_sided = compare(
            "y",
            DType::F32,
            &[f64::NAN],
            &[1.0],
            EXACT,
            CompareMode::AgainstInterpreter,
        );
        assert_eq!(one_sided.mismatches, 1);
    }

    #[test]
    fn different_lengths_fail_without_comparing_elements() {
        let c = compare(
            "y",
            DType::I32,
            &[1.0, 2.0],
            &[1.0],
            EXACT,
            CompareMode::AgainstReference,
        );
        assert!(!c.passed() && c.lengths_differ());
        assert_eq!((c.len, c.expected_len, c.first_bad), (2, 1, None));
    }
}

/// The expected outputs from a reference written in the language: kernel `name` of the same
/// file, checked with the compile-time values of the kernel under test for the constants it
/// declares (its `dtype` constants bound to f64) and run by the interpreter on the case's grid, with the case's
/// arguments by name — float buffers as f64 (their values already rounded to the dtype the
/// kernel under test sees), other buffers and scalars in their own types. Its pointer parameters
/// must say so (`*f64` or a `dtype` constant for float buffers). Its outputs of the names the
/// kernel under test writes are the expected values.
pub fn run_reference_kernel(
    text: &str,
    file: &crate::syntax::ast::File,
    name: &str,
    p: &Prepared,
    limits: &crate::interp::Limits,
) -> Result<BTreeMap<String, Vec<f64>>, String> {
    use crate::syntax::ast::TypeExpr;
    let def = crate::check::find_kernel(file, name).ok_or_else(|| format!("no kernel named `{name}`"))?;
    let mut bindings: crate::check::Bindings = Vec::new();
    for c in &def.consts {
        let is_dtype = matches!(&c.ty, TypeExpr::Named(t) if t.name == "dtype");
        if is_dtype {
            bindings.push((c.name.name.clone(), ConstValue::DType(DType::F64)));
        } else if let Some(v) = p.reference_input.consts.get(&c.name.name) {
            bindings.push((c.name.name.clone(), *v));
        }
    }
    // Its own computed compile-time values follow the case's integer arguments.
    let sizes = crate::check::Sizes(
        p.reference_input
            .args
            .iter()
            .filter_map(|(n, a)| match a {
                RefArg::Scalar(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => Some((n.clone(), *v as i64)),
                _ => None,
            })
            .collect(),
    );
    let kernel = crate::check::check_kernel_at(text, file, name, &bindings, &sizes).map_err(|d| {
        let msgs: Vec<String> = d.iter().map(|d| d.message.clone()).collect();
        format!("reference kernel `{name}` does not check: {}", msgs.join("; "))
    })?;
    let (mut args, mut buffers) = (Vec::new(), Vec::new());
    for param in &kernel.params {
        let given = p.reference_input.args.get(&param.name).ok_or_else(|| {
            format!(
                "reference kernel `{name}` takes `{}`, which the run spec's `args(..)` does not name",
                param.name
            )
        })?;
        match (given, param.elem) {
            (RefArg::Buffer { data, dtype, .. }, Elem::Ptr { pointee, .. }) => {
                let want = if dtype.is_float() { DType::F64 } else { *dtype };
                if pointee != want {
                    return Err(format!(
                        "reference kernel `{name}`: `{}` must point to {want} (the case's buffer holds {dtype}; a reference computes float values in f64), not {pointee}",
                        param.name
                    ));
                }
                let values = data
                    .iter()
                    .map(|v| scalar::cast(DType::F64, want, Scalar::F(*v), false))
                    .collect();
                args.push(Arg::Buffer(buffers.len()));
                buffers.push(Buffer::new(param.name.clone(), want, values));
            }
            (RefArg::Scalar(v), Elem::Scalar(d)) => {
                args.push(Arg::Scalar(scalar::cast(DType::F64, d, Scalar::F(*v), false)))
            }
            _ => {
                return Err(format!(
                    "reference kernel `{name}`: `{}` is a buffer in one kernel and a scalar in the other",
                    param.name
                ));
            }
        }
    }
    crate::interp::run_limited(&kernel, p.grid, &args, &mut buffers, limits)
        .map_err(|e| format!("reference kernel `{name}`: {e}"))?;
    let mut out = BTreeMap::new();
    for (output, _) in &p.outputs {
        let b = buffers.iter().find(|b| b.name == *output).ok_or_else(|| {
            format!("reference kernel `{name}` has no parameter `{output}` to give its expected values")
        })?;
        out.insert(output.clone(), b.to_f64());
    }
    Ok(out)
}
