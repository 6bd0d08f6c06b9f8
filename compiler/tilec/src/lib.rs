//! `tilec`: check, compile and verify `.tile` kernels.
//!
//! The binary is a thin shell over [`run`], which tests call directly with in-memory writers.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};

mod bench;
use tile_lang::check::{self, Bindings};
use tile_lang::codespan_reporting::term::termcolor::WriteColor;
use tile_lang::diag::{self, Diagnostic};
use tile_lang::interp;
use tile_lang::ir::{ConstValue, DType, Kernel};
use tile_lang::spec::{self, Case, RunSpec};
use tile_lang::syntax;

mod explain;
mod tune;

#[derive(Parser, Debug)]
#[command(name = "tilec", version, about = "The tile kernel compiler")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and type-check files; exit 0 when clean, 1 with diagnostics.
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Bind a compile-time parameter (repeatable): -D BLOCK=1024, -D T=bf16.
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        defines: Vec<String>,
    },
    /// Compile one file and print the requested stages.
    Compile {
        file: PathBuf,
        /// Stages to print, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "ir")]
        emit: Vec<Stage>,
        /// Bind a compile-time parameter (repeatable): -D BLOCK=1024, -D T=bf16.
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        defines: Vec<String>,
        /// Only this kernel (default: every kernel in the file).
        #[arg(long)]
        kernel: Option<String>,
        /// GPU target: 80, 89, 90 or 90a.
        #[arg(long, default_value = "90a")]
        sm: String,
        /// Warps per block (default: the kernel's first `#[warps(..)]` candidate, else 4).
        #[arg(long)]
        num_warps: Option<u32>,
        /// Compile as for launches whose pointers are 16-byte aligned and whose integer
        /// arguments are multiples of 16 (what the JIT specialises on).
        #[arg(long)]
        assume_aligned: bool,
        /// Write the PTX here (one kernel: the file; several: one file per kernel, NAME.ptx).
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Print each kernel's parse, check, codegen and ptxas wall times to stderr.
        #[arg(long)]
        timings: bool,
        #[command(flatten)]
        opt: OptArgs,
    },
    /// Run each file's `run` specs and compare with their references: on the GPU (and with
    /// the interpreter), or with `--interpret` on the interpreter alone. A spec without a
    /// reference is compared with the interpreter only (on the interpreter: just run).
    Verify {
        #[arg(required_unless_present = "all")]
        files: Vec<PathBuf>,
        /// Every `.tile` in dsl-examples/ (in the current directory or an ancestor).
        #[arg(long)]
        all: bool,
        /// Run on the reference interpreter (the CPU) only.
        #[arg(long)]
        interpret: bool,
        /// GPU target to compile for: 80, 89, 90 or 90a.
        #[arg(long, default_value = "90a")]
        sm: String,
        #[command(flatten)]
        opt: OptArgs,
    },
    /// Time each run spec's `bench(..)` cases on the GPU (CUDA events, L2 flushed between runs).
    Bench {
        #[arg(required_unless_present = "all")]
        files: Vec<PathBuf>,
        /// Every `.tile` in dsl-examples/ (in the current directory or an ancestor).
        #[arg(long)]
        all: bool,
        /// Timed runs per case (after warm-up).
        #[arg(long, default_value_t = 100)]
        runs: usize,
        /// Write the results as JSON here (the format bench/report.py reads).
        #[arg(long)]
        json: Option<PathBuf>,
        /// GPU target to compile for: 80, 89, 90 or 90a.
        #[arg(long, default_value = "90a")]
        sm: String,
        /// Where each case's configuration comes from: `tuned` (the autotuner's winner among
        /// the model's top candidates on that case, cached on disk), `model` (the static
        /// choice, as `tilec explain` prints it) or `spec` (the run spec's values, else the
        /// first candidates).
        #[arg(long, value_enum, default_value_t = bench::ConfigSource::Tuned)]
        config: bench::ConfigSource,
        /// With `--config tuned`: candidates timed per case.
        #[arg(long, default_value_t = 4)]
        top_k: usize,
        #[command(flatten)]
        opt: OptArgs,
    },
    /// Choose a kernel's configuration (tuned values, warps, stages) by the static model and
    /// show the estimates, the rewrites applied, and why every other candidate lost.
    Explain {
        file: PathBuf,
        /// Pin a compile-time parameter (repeatable): -D BLOCK=1024, -D T=bf16.
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        defines: Vec<String>,
        /// Only this kernel (default: every kernel in the file).
        #[arg(long)]
        kernel: Option<String>,
        /// GPU target: 90 or 90a (the targets the model has figures for).
        #[arg(long, default_value = "90a")]
        sm: String,
        /// Pin warps per block.
        #[arg(long)]
        num_warps: Option<u32>,
        /// Pin pipeline stages.
        #[arg(long)]
        num_stages: Option<u32>,
    },
    /// Time the static model's best candidates on the GPU (all with --all-candidates) on each
    /// run spec's largest `bench(..)` case, and cache the fastest on disk.
    Tune(tune::TuneArgs),
}

/// The e-graph rewriter between the checker and codegen (off by default: see docs/optimizer.md).
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct OptArgs {
    /// Rewrite the IR with the e-graph optimizer's exact rules before codegen (and, for
    /// `verify`, before the interpreter too).
    #[arg(long)]
    opt: bool,
    /// With --opt: also the fast-math rules, which change rounding (errors in docs/optimizer.md).
    #[arg(long, requires = "opt")]
    fast_math: bool,
}

impl OptArgs {
    pub fn options(&self) -> Option<tile_opt::egraph::OptOptions> {
        self.opt.then(|| tile_opt::egraph::OptOptions {
            fast_math: self.fast_math,
            ..Default::default()
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Stage {
    Ast,
    Ir,
    /// The IR after the e-graph optimizer (exact rules only).
    Opt,
    LlvmIr,
    Ptx,
    /// Registers, shared memory and spills as ptxas reports them (needs ptxas).
    Resources,
}

/// Runs the command line `args` (program name first); returns the exit code.
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn WriteColor) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render().to_string();
            let _ = if code == 0 {
                write!(out, "{text}")
            } else {
                write!(err, "{text}")
            };
            return code;
        }
    };
    let r = match cli.command {
        Command::Check { files, defines } => cmd_check(&files, &defines, out, err),
        Command::Compile {
            file,
            emit,
            defines,
            kernel,
            sm,
            num_warps,
            output,
            timings,
            assume_aligned,
            opt,
        } => cmd_compile(
            &file,
            &emit,
            &defines,
            kernel.as_deref(),
            &sm,
            (num_warps, assume_aligned, opt.options()),
            output.as_deref(),
            timings,
            out,
            err,
        ),
        Command::Explain {
            file,
            defines,
            kernel,
            sm,
            num_warps,
            num_stages,
        } => explain::cmd_explain(
            &file,
            &defines,
            kernel.as_deref(),
            &sm,
            (num_warps, num_stages),
            out,
            err,
        ),
        Command::Verify {
            mut files,
            all,
            interpret,
            sm,
            opt,
        } => if all { all_examples() } else { Ok(Vec::new()) }.and_then(|more| {
            files.extend(more);
            cmd_verify(&files, (interpret, opt.options()), &sm, out, err)
        }),
        Command::Bench {
            mut files,
            all,
            runs,
            json,
            sm,
            config,
            top_k,
            opt,
        } => if all { all_examples() } else { Ok(Vec::new()) }.and_then(|more| {
            files.extend(more);
            let backend = gpu_backend(&sm, out)?;
            let opts = bench::BenchOptions {
                json,
                config,
                top_k,
                rewrite: opt.options(),
                timing: tile_runtime::TimingOptions {
                    runs,
                    ..Default::default()
                },
            };
            bench::run(&files, &backend, &opts, out)
        }),
        Command::Tune(args) => tune::cmd_tune(&args, out, err),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "error: {e:#}");
            2
        }
    }
}

/// `NAME=VALUE` with VALUE an integer, float, bool or dtype name.
fn parse_defines(defines: &[String]) -> anyhow::Result<Bindings> {
    defines
        .iter()
        .map(|d| {
            let (name, value) = d
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("`-D {d}`: expected NAME=VALUE, e.g. -D BLOCK=1024"))?;
            let v = if let Ok(i) = value.parse::<i64>() {
                ConstValue::Int(i)
            } else if let Ok(f) = value.parse::<f64>() {
                ConstValue::Float(f)
            } else if value == "true" || value == "false" {
                ConstValue::Bool(value == "true")
            } else if let Some(t) = DType::from_name(value) {
                ConstValue::DType(t)
            } else {
                anyhow::bail!("`-D {d}`: `{value}` is not an integer, float, bool or dtype");
            };
            Ok((name.trim().to_string(), v))
        })
        .collect()
}

struct Source {
    name: String,
    text: String,
}

fn read(path: &Path) -> anyhow::Result<Source> {
    let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))?;
    Ok(Source {
        name: path.display().to_string(),
        text,
    })
}

/// Parses and checks a file: the AST, the IR of each kernel (with `bindings`), the run specs,
/// and every diagnostic found.
pub struct Checked {
    pub ast: Option<syntax::ast::File>,
    pub kernels: Vec<Kernel>,
    pub specs: Vec<RunSpec>,
    pub diags: Vec<Diagnostic>,
}

pub fn check_source(text: &str, bindings: &Bindings) -> Checked {
    let ast = match syntax::parse(text) {
        Ok(a) => a,
        Err(d) => {
            return Checked {
                ast: None,
                kernels: vec![],
                specs: vec![],
                diags: d,
            };
        }
    };
    let (kernels, mut diags) = check::check_file(text, &ast, bindings);
    let (specs, spec_diags) = spec::parse_specs(&ast);
    diags.extend(spec_diags);
    let names = check::kernel_names(&ast);
    for s in &specs {
        if !names.contains(&s.kernel) {
            diags.push(
                Diagnostic::error(s.span, format!("run spec for unknown kernel `{}`", s.kernel))
                    .label("no kernel of that name"),
            );
        }
    }
    Checked {
        ast: Some(ast),
        kernels,
        specs,
        diags,
    }
}

fn cmd_check(
    files: &[PathBuf],
    defines: &[String],
    out: &mut dyn Write,
    err: &mut dyn WriteColor,
) -> anyhow::Result<i32> {
    let bindings = parse_defines(defines)?;
    let mut failed = 0;
    for f in files {
        let src = read(f)?;
        let c = check_source(&src.text, &bindings);
        if c.diags.is_empty() {
            writeln!(
                out,
                "{}: ok ({} kernel{})",
                src.name,
                c.kernels.len(),
                if c.kernels.len() == 1 { "" } else { "s" }
            )?;
        } else {
            diag::emit(err, &src.name, &src.text, &c.diags);
            failed += 1;
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

#[allow(clippy::too_many_arguments)]
fn cmd_compile(
    file: &Path,
    emit: &[Stage],
    defines: &[String],
    kernel: Option<&str>,
    sm: &str,
    (num_warps, assume_aligned, rewrite): (Option<u32>, bool, Option<tile_opt::egraph::OptOptions>),
    output: Option<&Path>,
    timings: bool,
    out: &mut dyn Write,
    err: &mut dyn WriteColor,
) -> anyhow::Result<i32> {
    let bindings = parse_defines(defines)?;
    let target = tile_codegen::target(sm)?;
    let src = read(file)?;
    let ms = |t: Instant| Some(t.elapsed().as_secs_f64() * 1e3);
    let started = Instant::now();
    let parsed = syntax::parse(&src.text);
    let parse_ms = ms(started);
    let ast = match parsed {
        Ok(a) => a,
        Err(d) => {
            diag::emit(err, &src.name, &src.text, &d);
            return Ok(1);
        }
    };
    if emit.contains(&Stage::Ast) {
        write!(out, "{ast}")?;
    }
    let names = match kernel {
        Some(k) => vec![k.to_string()],
        None => check::kernel_names(&ast),
    };
    let mut failed = false;
    // Per kernel: parse, check, codegen, ptxas milliseconds (None: that stage did not run).
    let mut times: Vec<(String, [Option<f64>; 4])> = Vec::new();
    for name in names {
        let started = Instant::now();
        let checked = check::check_kernel(&src.text, &ast, &name, &bindings);
        times.push((name.clone(), [parse_ms, ms(started), None, None]));
        let t = &mut times.last_mut().expect("just pushed").1;
        match checked {
            Ok(k) => {
                let k = match &rewrite {
                    Some(o) => tile_opt::egraph::optimize(&k, o)?.0,
                    None => k,
                };
                if emit.contains(&Stage::Ir) {
                    write!(out, "{k}")?;
                }
                if emit.contains(&Stage::Opt) {
                    let opts = tile_opt::egraph::OptOptions::default();
                    let (o, report) = tile_opt::egraph::optimize(&k, &opts)?;
                    write!(out, "{o}")?;
                    writeln!(
                        err,
                        "{}: optimized in {:.2?}: {} -> {} ops, rules {:?}",
                        k.name, report.time, report.ops_before, report.ops_after, report.applied
                    )?;
                }
                let wants_gpu = output.is_some()
                    || emit
                        .iter()
                        .any(|s| matches!(s, Stage::LlvmIr | Stage::Ptx | Stage::Resources));
                if !wants_gpu {
                    continue;
                }
                let opts = tile_codegen::CompileOptions {
                    target: target.clone(),
                    num_warps: num_warps.unwrap_or_else(|| k.warps.first().copied().unwrap_or(4)),
                    specialization: if assume_aligned {
                        k.params
                            .iter()
                            .map(|_| tile_codegen::ArgSpec {
                                equals_one: false,
                                divisible_by_16: true,
                            })
                            .collect()
                    } else {
                        Vec::new()
                    },
                };
                let started = Instant::now();
                let compiled = tile_codegen::compile(&k, &opts);
                t[2] = ms(started);
                let c = match compiled {
                    Ok(c) => c,
                    Err(e) => {
                        writeln!(err, "error: {}: kernel `{}`: {e}", src.name, k.name)?;
                        failed = true;
                        continue;
                    }
                };
                if emit.contains(&Stage::LlvmIr) {
                    write!(out, "{}", c.llvm_ir)?;
                }
                if emit.contains(&Stage::Ptx) {
                    write!(out, "{}", c.ptx)?;
                }
                if emit.contains(&Stage::Resources) {
                    let ptxas = tile_codegen::ptxas::find().ok_or_else(|| {
                        anyhow::anyhow!("`--emit resources` needs ptxas: run tests/setup.sh, or set TILE_PTXAS")
                    })?;
                    let started = Instant::now();
                    let assembled = tile_codegen::ptxas::assemble(&ptxas, &c.ptx, target.sm);
                    t[3] = ms(started);
                    match assembled {
                        Ok((_, r)) => writeln!(
                            out,
                            "{}: {r}, dynamic shared {} B, {} threads",
                            k.name, c.smem_bytes, c.threads_per_block
                        )?,
                        Err(e) => {
                            writeln!(err, "error: {}: kernel `{}`: {e}", src.name, k.name)?;
                            failed = true;
                        }
                    }
                }
                if let Some(o) = output {
                    let path = if kernel.is_some() || check::kernel_names(&ast).len() == 1 {
                        o.to_path_buf()
                    } else {
                        o.join(format!("{}.ptx", k.name))
                    };
                    std::fs::write(&path, &c.ptx)
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                }
            }
            Err(d) => {
                diag::emit(err, &src.name, &src.text, &d);
                failed = true;
            }
        }
    }
    if timings {
        for (name, t) in times {
            let [p, c, g, x] = t.map(|t| t.map_or("-".to_string(), |t| format!("{t:.1} ms")));
            writeln!(err, "timings: {name}: parse {p}, check {c}, codegen {g}, ptxas {x}")?;
        }
    }
    Ok(if failed { 1 } else { 0 })
}

/// Every `.tile` in the first `dsl-examples/` found in the current directory or an ancestor.
fn all_examples() -> anyhow::Result<Vec<PathBuf>> {
    let cwd = std::env::current_dir()?;
    let dir = cwd
        .ancestors()
        .map(|d| d.join("dsl-examples"))
        .find(|d| d.is_dir())
        .ok_or_else(|| anyhow::anyhow!("--all: no dsl-examples/ in {} or its ancestors", cwd.display()))?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tile"))
        .collect();
    files.sort();
    anyhow::ensure!(!files.is_empty(), "--all: no .tile files in {}", dir.display());
    Ok(files)
}

/// The seed of one case's inputs: stable across runs and machines.
fn seed(kernel: &str, case: usize) -> u64 {
    kernel.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) ^ case as u64
}

/// One verified case, as printed.
pub struct CaseResult {
    pub kernel: String,
    pub case: String,
    pub comparisons: Vec<spec::Comparison>,
    pub error: Option<String>,
    pub millis: f64,
    /// What the kernel's `print`s wrote.
    pub printed: Vec<String>,
    /// Whether the run spec names a `reference(..)`. Without one, a case on the interpreter
    /// compares nothing (it passes when the kernel runs without error) and a case on the GPU
    /// compares with the interpreter only.
    pub has_reference: bool,
}

impl CaseResult {
    /// No error and every comparison within tolerance (a case with no comparisons passes).
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.comparisons.iter().all(|c| c.passed())
    }
}

/// Runs every case of every run spec in `text` on the interpreter.
pub fn verify_interpreted(text: &str) -> Result<Vec<CaseResult>, Vec<Diagnostic>> {
    verify(text, None, None)
}

/// Opens GPU 0 for `sm` and says which GPU it is.
fn gpu_backend(sm: &str, out: &mut dyn Write) -> anyhow::Result<GpuBackend> {
    let gpu = tile_runtime::Gpu::new(0)
        .map_err(|e| anyhow::anyhow!("{e}; pass --interpret to verify on the reference interpreter instead"))?;
    let target = tile_codegen::target(sm)?;
    writeln!(
        out,
        "GPU: {} (compute capability {:?}), target {}",
        gpu.name(),
        gpu.compute_capability()?,
        target.sm
    )?;
    Ok(GpuBackend {
        gpu,
        target,
        ptxas: tile_codegen::ptxas::find(),
    })
}

/// Where the GPU runs: the device and how to compile for it.
pub struct GpuBackend {
    pub gpu: tile_runtime::Gpu,
    pub target: tile_codegen::Target,
    pub ptxas: Option<PathBuf>,
}

/// Runs every case of every run spec in `text`: on the GPU when one is given (comparing with
/// the reference, if the spec names one, and with the interpreter), else on the interpreter
/// (comparing with the reference, if any: without one, a case passes when it runs without error).
/// With `rewrite`, each checked kernel goes through the e-graph optimizer first.
pub fn verify(
    text: &str,
    gpu: Option<&GpuBackend>,
    rewrite: Option<&tile_opt::egraph::OptOptions>,
) -> Result<Vec<CaseResult>, Vec<Diagnostic>> {
    let c = check_source(text, &vec![]);
    if !c.diags.is_empty() {
        return Err(c.diags);
    }
    let ast = c.ast.expect("no diagnostics means the file parsed");
    let mut results = Vec::new();
    for s in &c.specs {
        let reference = match &s.reference {
            Some((name, span)) => match tile_examples::reference(name) {
                Some(r) => Some(r),
                None => {
                    return Err(vec![
                        Diagnostic::error(*span, format!("no reference named `{name}`"))
                            .label("unknown reference")
                            .note(format!(
                                "known references: {}",
                                tile_examples::REFERENCES
                                    .iter()
                                    .map(|r| r.0)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )),
                    ]);
                }
            },
            None => None,
        };
        for (i, case) in spec::cases(s).map_err(|d| vec![d])?.iter().enumerate() {
            let started = Instant::now();
            let mut r = CaseResult {
                kernel: s.kernel.clone(),
                case: case.label(),
                comparisons: vec![],
                error: None,
                millis: 0.0,
                printed: vec![],
                has_reference: reference.is_some(),
            };
            match run_case(text, &ast, s, case, seed(&s.kernel, i), reference, (gpu, rewrite)) {
                Ok((c, printed)) => {
                    r.comparisons = c;
                    r.printed = printed;
                }
                Err(e) => r.error = Some(e),
            }
            r.millis = started.elapsed().as_secs_f64() * 1e3;
            results.push(r);
        }
    }
    Ok(results)
}

type CaseOutcome = (Vec<spec::Comparison>, Vec<String>);

fn run_case(
    text: &str,
    ast: &syntax::ast::File,
    s: &RunSpec,
    case: &Case,
    seed: u64,
    reference: Option<spec::Reference>,
    (gpu, rewrite): (Option<&GpuBackend>, Option<&tile_opt::egraph::OptOptions>),
) -> Result<CaseOutcome, String> {
    let render = |d: Vec<Diagnostic>| diag::render("spec", text, &d);
    let kernel = check::check_kernel(text, ast, &s.kernel, &case.consts).map_err(render)?;
    let kernel = match rewrite {
        Some(o) => {
            tile_opt::egraph::optimize(&kernel, o)
                .map_err(|e| format!("optimizer: {e}"))?
                .0
        }
        None => kernel,
    };
    let mut p = spec::prepare(s, case, &kernel, seed).map_err(|d| render(vec![d]))?;
    let expected = reference.map(|r| r(&p.reference_input));
    let initial = p.buffers.clone();
    let printed = interp::run(&kernel, p.grid, &p.args, &mut p.buffers).map_err(|e| format!("interpreter: {e}"))?;
    let gpu_out = match gpu {
        Some(g) => Some(run_on_gpu(g, &kernel, &p, initial)?),
        None => None,
    };
    let mut out = Vec::new();
    for (name, idx) in &p.outputs {
        let interpreted = &p.buffers[*idx];
        let want = match &expected {
            Some(e) => Some(
                e.get(name)
                    .ok_or_else(|| format!("the reference gives no values for output `{name}`"))?,
            ),
            None => None,
        };
        let tol = s
            .tolerance
            .unwrap_or_else(|| spec::default_tolerance(interpreted.dtype));
        let gpu_result = gpu_out.as_ref().map(|g| &g[*idx]);
        out.extend(compare_output(
            name,
            interpreted,
            gpu_result,
            want.map(|w| w.as_slice()),
            tol,
        ));
    }
    Ok((out, printed))
}

/// The comparisons of one output. On the interpreter alone: with the reference, if any (without
/// one there is nothing to compare; running without an error is the check). On the GPU: with
/// the reference, if any, and always with the interpreter's result.
fn compare_output(
    name: &str,
    interpreted: &interp::Buffer,
    gpu: Option<&interp::Buffer>,
    reference: Option<&[f64]>,
    tol: (f64, f64),
) -> Vec<spec::Comparison> {
    use spec::CompareMode::{AgainstInterpreter, AgainstReference};
    let (dtype, interpreted) = (interpreted.dtype, interpreted.to_f64());
    let Some(gpu) = gpu else {
        return reference
            .map(|want| spec::compare(name, dtype, &interpreted, want, tol, AgainstReference))
            .into_iter()
            .collect();
    };
    let got = gpu.to_f64();
    let mut out = Vec::new();
    if let Some(want) = reference {
        out.push(spec::compare(
            &format!("{name} vs reference"),
            dtype,
            &got,
            want,
            tol,
            AgainstReference,
        ));
    }
    out.push(spec::compare(
        &format!("{name} vs interpreter"),
        dtype,
        &got,
        &interpreted,
        tol,
        AgainstInterpreter,
    ));
    out
}

/// Compiles and launches one case on the GPU with the case's initial buffers (outputs
/// poisoned); returns the buffers as the GPU left them.
fn run_on_gpu(
    g: &GpuBackend,
    kernel: &Kernel,
    p: &spec::Prepared,
    initial: Vec<interp::Buffer>,
) -> Result<Vec<interp::Buffer>, String> {
    use tile_runtime::KernelArg;
    // Specialise as a launch would: integers by value, buffers as the driver allocates them
    // (aligned to at least 256 bytes).
    let specialization = p
        .args
        .iter()
        .map(|a| match a {
            interp::Arg::Buffer(_) => tile_codegen::ArgSpec::of_ptr(0),
            interp::Arg::Scalar(interp::Scalar::I(v)) => tile_codegen::ArgSpec::of_int(*v),
            interp::Arg::Scalar(_) => tile_codegen::ArgSpec::default(),
        })
        .collect();
    let opts = tile_codegen::CompileOptions {
        target: g.target.clone(),
        num_warps: kernel.warps.first().copied().unwrap_or(4),
        specialization,
    };
    let (c, f) = tile_runtime::tune::build(&g.gpu, kernel, &opts, g.ptxas.as_deref()).map_err(|e| e.to_string())?;
    let dev: Vec<_> = initial
        .iter()
        .map(|b| g.gpu.upload(&to_bytes(b)))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut args = Vec::new();
    for (param, a) in kernel.params.iter().zip(&p.args) {
        args.push(match (a, param.elem) {
            (interp::Arg::Buffer(i), _) => KernelArg::Buffer(&dev[*i]),
            (interp::Arg::Scalar(v), tile_lang::ir::Elem::Scalar(d)) => KernelArg::scalar(d, *v),
            _ => {
                return Err(format!("argument for `{}` does not match its type", param.name));
            }
        });
    }
    g.gpu
        .launch(&f, p.grid, c.threads_per_block, c.smem_bytes, &args)
        .map_err(|e| e.to_string())?;
    let mut result = initial;
    for (b, d) in result.iter_mut().zip(&dev) {
        let bytes = g.gpu.download(d).map_err(|e| e.to_string())?;
        *b = from_bytes(&b.name, b.dtype, &bytes);
    }
    Ok(result)
}

fn to_bytes(b: &interp::Buffer) -> Vec<u8> {
    let w = b.dtype.bytes();
    b.data
        .iter()
        .flat_map(|v| interp::scalar::to_bits(b.dtype, *v).to_le_bytes().into_iter().take(w))
        .collect()
}

fn from_bytes(name: &str, d: DType, bytes: &[u8]) -> interp::Buffer {
    let w = d.bytes();
    let data = bytes.chunks(w).map(|c| {
        let mut x = [0u8; 8];
        x[..w].copy_from_slice(c);
        interp::scalar::from_bits(d, u64::from_le_bytes(x))
    });
    interp::Buffer::new(name, d, data.collect())
}

fn cmd_verify(
    files: &[PathBuf],
    (interpret, rewrite): (bool, Option<tile_opt::egraph::OptOptions>),
    sm: &str,
    out: &mut dyn Write,
    err: &mut dyn WriteColor,
) -> anyhow::Result<i32> {
    let backend = if interpret { None } else { Some(gpu_backend(sm, out)?) };
    let (mut passed, mut failed) = (0, 0);
    for f in files {
        let src = read(f)?;
        match verify(&src.text, backend.as_ref(), rewrite.as_ref()) {
            Err(d) => {
                diag::emit(err, &src.name, &src.text, &d);
                failed += 1;
            }
            Ok(results) if results.is_empty() => {
                writeln!(err, "{}: no `run` spec; nothing to verify", src.name)?;
                failed += 1;
            }
            Ok(results) => {
                writeln!(out, "{}", src.name)?;
                for r in results {
                    let status = if r.passed() { "ok" } else { "FAILED" };
                    writeln!(out, "  {:<6} {} [{}]  ({:.0} ms)", status, r.kernel, r.case, r.millis)?;
                    const SHOWN: usize = 20;
                    for line in r.printed.iter().take(SHOWN) {
                        writeln!(out, "         print: {line}")?;
                    }
                    if r.printed.len() > SHOWN {
                        writeln!(out, "         print: ... {} more lines", r.printed.len() - SHOWN)?;
                    }
                    if let Some(e) = &r.error {
                        for line in e.lines() {
                            writeln!(out, "         {line}")?;
                        }
                    } else if !r.has_reference {
                        let what = if interpret {
                            "ran on the interpreter"
                        } else {
                            "compared with the interpreter"
                        };
                        writeln!(out, "         no reference: {what}")?;
                    }
                    let width = r.comparisons.iter().map(|c| c.name.len()).max().unwrap_or(0).max(8);
                    for c in &r.comparisons {
                        write!(
                            out,
                            "         {:<width$} {:>9} {:<6} max abs {:.2e}  max rel {:.2e}  (rtol {:.1e}, atol {:.1e})",
                            c.name,
                            c.len,
                            c.dtype.name(),
                            c.max_abs,
                            c.max_rel,
                            c.rtol,
                            c.atol
                        )?;
                        match c.first_bad {
                            _ if c.lengths_differ() => {
                                writeln!(out, "  lengths differ: {} elements, expected {}", c.len, c.expected_len)?
                            }
                            Some((i, g, w)) => writeln!(
                                out,
                                "  {} mismatches; first at [{i}]: got {g}, expected {w}",
                                c.mismatches
                            )?,
                            None => writeln!(out)?,
                        }
                    }
                    if r.passed() { passed += 1 } else { failed += 1 }
                }
            }
        }
    }
    writeln!(out, "verify: {passed} passed, {failed} failed")?;
    Ok(if failed > 0 { 1 } else { 0 })
}
