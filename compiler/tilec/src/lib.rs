//! `tilec`: check, compile and verify `.tile` kernels.
//!
//! The binary is a thin shell over [`run`], which tests call directly with in-memory writers.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};

mod bench;
// The pure part of `--rounds`, for tests/suite.
pub use bench::{BenchResult, ConfigSource, Record, median_rounds};
use tile_lang::check::{self, Bindings, Sizes};
use tile_lang::codespan_reporting::term::termcolor::WriteColor;
use tile_lang::diag::{self, Diagnostic};
use tile_lang::interp;
use tile_lang::ir::{ConstValue, DType, Kernel};
use tile_lang::spec::{self, Case, RunSpec};
use tile_lang::syntax;

mod explain;
pub mod npy;
mod run;
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
        /// Stages to print, comma-separated (default: `ir`, or nothing when `-o` is given).
        #[arg(long, value_delimiter = ',')]
        emit: Vec<Stage>,
        /// Bind a compile-time parameter (repeatable): -D BLOCK=1024, -D T=bf16.
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        defines: Vec<String>,
        /// Only this kernel (default: every kernel in the file).
        #[arg(long)]
        kernel: Option<String>,
        /// GPU target: 80, 86, 89, 90 or 90a.
        #[arg(long, default_value = "90a")]
        sm: String,
        /// Pin warps per block.
        #[arg(long)]
        num_warps: Option<u32>,
        /// Pin pipeline stages (1 to 8, as `#[stages(..)]`; 1: no pipelining).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=tile_lang::ir::MAX_STAGES as i64))]
        num_stages: Option<u32>,
        /// Pin the split: the programs of a thread-block cluster that share the kernel's loop
        /// (2, 4 or 8; 1: none; docs/language.md, "Split loops"). A kernel whose loop cannot be
        /// split compiles unsplit, with a note saying why.
        #[arg(long, value_parser = split_arg)]
        split: Option<u32>,
        /// Where unpinned compile-time values, warps and stages come from: the static model
        /// (`tilec explain`; the JIT's default too) or each one's first candidate.
        #[arg(long, value_enum, default_value = "model")]
        config: ConfigArg,
        #[command(flatten)]
        launch: LaunchArgs,
        /// Write the PTX here instead of printing it: one module with every kernel's entry (or
        /// the one `--kernel` names); an existing directory, or a path ending in `/`, gets one
        /// NAME.ptx per kernel.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Print each kernel's parse, check, codegen and ptxas wall times to stderr.
        #[arg(long)]
        timings: bool,
        #[command(flatten)]
        opt: OptArgs,
        /// A debug build: every mbarrier wait (TMA pipelines) gives up after 10 s and traps
        /// with a message naming the block, thread, loop, stage and phase it waited for.
        #[arg(long)]
        debug: bool,
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
        /// GPU target to compile for: 80, 86, 89, 90 or 90a.
        #[arg(long, default_value = "90a")]
        sm: String,
        #[command(flatten)]
        opt: OptArgs,
        /// The interpreter's budget in element operations (2e7 to 4e7 a second), per kernel run.
        #[arg(long, value_name = "N", default_value_t = interp::Limits::DEFAULT_MAX_STEPS)]
        max_steps: u64,
        /// Write each case's buffers to DIR/KERNEL-caseN.npz: the inputs, every output as run
        /// (on the GPU, or the interpreter), `OUT.initial` (before the kernel),
        /// `OUT.interpreter` beside a GPU run's and `OUT.expected` from the reference.
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
        /// Run debug builds on the GPU: a pipeline wait that never completes ends the launch
        /// after 10 s with a message naming what it waited for (`tilec compile --debug`).
        #[arg(long)]
        debug: bool,
        /// On the GPU, split the loop of every kernel that allows it over clusters of this many
        /// programs (2, 4 or 8; `tilec compile --split`), to check the split against the
        /// references.
        #[arg(long, value_parser = split_arg)]
        split: Option<u32>,
    },
    /// Run one case of a kernel's run spec on the GPU (or with `--interpret` on the interpreter),
    /// with buffer arguments from NumPy `.npy` files instead of their generators, and write every
    /// output to `DIR/NAME.npy`.
    Run {
        file: PathBuf,
        /// The kernel whose run spec to use (default: the file's first run spec).
        #[arg(long)]
        kernel: Option<String>,
        /// Which case of the run spec, as `tilec verify` lists them (0-based).
        #[arg(long, default_value_t = 0)]
        case: usize,
        /// `NAME=FILE.npy`: buffer argument NAME from a NumPy file (same number of elements;
        /// floats into float buffers, integers into integer buffers); `FILE.npz`: every array of
        /// the archive into the buffer of its name. Repeatable.
        #[arg(long = "input", value_name = "NAME=FILE.npy|FILE.npz")]
        inputs: Vec<String>,
        /// Write every output to DIR/NAME.npy, or to one FILE.npz (f16 and bf16 as f32, exactly).
        #[arg(long, value_name = "DIR|FILE.npz")]
        save: Option<PathBuf>,
        /// Run on the reference interpreter (the CPU) instead of the GPU.
        #[arg(long)]
        interpret: bool,
        /// GPU target to compile for: 80, 86, 89, 90 or 90a.
        #[arg(long, default_value = "90a")]
        sm: String,
        /// The interpreter's budget in element operations (2e7 to 4e7 a second).
        #[arg(long, value_name = "N", default_value_t = interp::Limits::DEFAULT_MAX_STEPS)]
        max_steps: u64,
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
        /// Times through the whole list of cases, alternating them; each case reports its
        /// median round (for comparisons on a GPU whose speed drifts within a call). Each case
        /// is compiled and its buffers filled once: they stay on the GPU between rounds.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Write the results as JSON here (the format bench/report.py reads), again after each case
        #[arg(long)]
        json: Option<PathBuf>,
        /// GPU target to compile for: 80, 86, 89, 90 or 90a.
        #[arg(long, default_value = "90a")]
        sm: String,
        /// Where each case's configuration comes from: `tuned` (the autotuner's winner among
        /// the model's top candidates on that case, cached on disk), `model` (the static
        /// choice, as `tilec explain` prints it) or `spec` (the run spec's values, else the
        /// first candidates).
        #[arg(long, value_enum, default_value_t = bench::ConfigSource::Tuned)]
        config: bench::ConfigSource,
        /// With `--config tuned`: candidates timed per case (the model's best, and those it ties with the last of them).
        #[arg(long, default_value_t = 4)]
        top_k: usize,
        /// Only this kernel's run specs (repeatable; default: every run spec with `bench(..)`
        /// sizes).
        #[arg(long)]
        kernel: Vec<String>,
        /// Pin the split of every kernel whose loop allows one (2, 4 or 8; 1: none; `tilec
        /// compile --split`): the model's choice or the spec's values with that split.
        #[arg(long, value_parser = split_arg)]
        split: Option<u32>,
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
        /// GPU target: 80, 86, 89, 90 or 90a (sm_90: the H200 measured; the others from published figures).
        #[arg(long, default_value = "90a")]
        sm: String,
        /// Pin warps per block.
        #[arg(long)]
        num_warps: Option<u32>,
        /// Pin pipeline stages (1 to 8, as `#[stages(..)]`; 1: no pipelining).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=tile_lang::ir::MAX_STAGES as i64))]
        num_stages: Option<u32>,
        /// Plan for the `bench(..)` case whose label (as `tilec bench` and `tilec tune` print it,
        /// e.g. `M=1 K=4096 N=4096`) contains this text, with the values its run spec computes,
        /// as `tilec tune --case` does (default: `--size` values, else the largest case).
        #[arg(long, value_name = "TEXT", conflicts_with = "sizes")]
        case: Option<String>,
        #[command(flatten)]
        launch: LaunchArgs,
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

/// Where `tilec compile` takes a kernel's configuration from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ConfigArg {
    /// The static model's choice (falls back to the defaults on targets it does not describe).
    Model,
    /// Each tunable's first candidate, the first `#[warps]` (else 4), the first `#[stages]` (else 1).
    Defaults,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Stage {
    Ast,
    /// The configuration and, when the model chose it, every candidate with its verdict.
    Config,
    Ir,
    /// The IR after the e-graph optimizer (exact rules only).
    Opt,
    /// The GPU stage's decisions: each `dot`'s tensor-core plan, pipelined loops and their
    /// stage buffers, and every tile not in the blocked layout.
    Gir,
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
            num_stages,
            split,
            config,
            output,
            timings,
            launch,
            opt,
            debug,
        } => cmd_compile(
            &file,
            &CompileArgs {
                emit,
                defines,
                kernel,
                sm,
                pins: (num_warps, num_stages),
                split,
                config,
                launch,
                rewrite: opt.options(),
                output,
                timings,
                debug,
            },
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
            case,
            launch,
        } => explain::cmd_explain(
            &file,
            (&launch, case.as_deref()),
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
            max_steps,
            save,
            debug,
            split,
        } => if all { all_examples() } else { Ok(Vec::new()) }.and_then(|more| {
            files.extend(more);
            let limits = interp::Limits { max_steps };
            cmd_verify(
                &files,
                (interpret, opt.options(), limits, save),
                (&sm, debug, split),
                out,
                err,
            )
        }),
        Command::Run {
            file,
            kernel,
            case,
            inputs,
            save,
            interpret,
            sm,
            max_steps,
        } => cmd_run(
            &file,
            run::RunOptions {
                kernel,
                case,
                inputs: Vec::new(),
                save,
                limits: interp::Limits { max_steps },
            },
            &inputs,
            (interpret, &sm),
            out,
            err,
        ),
        Command::Bench {
            mut files,
            all,
            runs,
            rounds,
            json,
            sm,
            config,
            top_k,
            kernel,
            split,
            opt,
        } => if all { all_examples() } else { Ok(Vec::new()) }.and_then(|more| {
            files.extend(more);
            let opts = bench::BenchOptions {
                split,
                json,
                config,
                top_k,
                rewrite: opt.options(),
                timing: tile_jit::TimingOptions {
                    runs,
                    ..Default::default()
                },
                kernels: kernel,
                rounds: rounds as usize,
            };
            if !bench::preflight(&files, &opts, err)? {
                return Ok(1);
            }
            let backend = gpu_backend(&sm, out, "`tilec bench` times kernels on a GPU")?;
            bench::run(&files, &backend, &opts, out)
        }),
        Command::Tune(args) => tune::cmd_tune(&args, out, err),
    };
    match r {
        Ok(code) => code,
        // The reader went away (`tilec explain .. | head`): nothing more to say, as for any
        // command-line tool whose output is cut short.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            0
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e:#}");
            if e.downcast_ref::<BadInput>().is_some() { 1 } else { 2 }
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

/// A source file that cannot be a `.tile` file: not UTF-8 text (with where its first bad byte
/// is), or larger than the parser's limit. A problem of the input (exit 1, like a diagnostic),
/// not of the command line.
#[derive(Debug)]
struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

fn read(path: &Path) -> anyhow::Result<Source> {
    let text = syntax::read_source(path).map_err(|e| match e {
        syntax::ReadError::Io { .. } => anyhow::Error::from(e),
        e => BadInput(e.to_string()).into(),
    })?;
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
    // A set for the lookups: a file of thousands of kernels and specs stays linear.
    let known: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    for s in &specs {
        if !known.contains(s.kernel.as_str()) {
            diags.push(
                Diagnostic::error(s.span, format!("run spec for unknown kernel `{}`", s.kernel))
                    .label("no kernel of that name"),
            );
        }
        match &s.reference {
            Some(r) if r.kernel && (!known.contains(r.name.as_str()) || r.name == s.kernel) => {
                diags.push(
                    Diagnostic::error(r.span, format!("no other kernel named `{}` in this file", r.name))
                        .label("unknown reference kernel")
                        .note(format!("the file's kernels: {}", diag::list(&names)))
                        .help("write the expected computation plainly as another kernel of this file"),
                );
            }
            Some(r) if !r.kernel && tile_examples::reference(&r.name).is_none() => {
                let kernel_hint = known.contains(r.name.as_str()) && r.name != s.kernel;
                let mut d = Diagnostic::error(r.span, format!("no built-in reference named `{}`", r.name))
                    .label("unknown reference")
                    .note(format!(
                        "built-in references: {}",
                        tile_examples::REFERENCES
                            .iter()
                            .map(|r| r.0)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                d = if kernel_hint {
                    d.help(format!(
                        "to compare with the kernel `{0}` of this file: `reference(interpret: {0})`",
                        r.name
                    ))
                } else {
                    d.help("`reference(interpret: NAME)` names a kernel of this file; leave `reference(..)` out to compare the GPU with the interpreter only")
                };
                diags.push(d);
            }
            _ => {}
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

/// What `tilec compile` was asked for.
/// `--split N`: 1 (none), 2, 4 or 8.
fn split_arg(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if tile_driver::split::is_valid(n) => Ok(n),
        _ => Err(format!("`{s}` is not a split; a split is 1 (none), 2, 4 or 8 programs")),
    }
}

struct CompileArgs {
    emit: Vec<Stage>,
    defines: Vec<String>,
    kernel: Option<String>,
    sm: String,
    /// `--num-warps`, `--num-stages`.
    pins: (Option<u32>, Option<u32>),
    split: Option<u32>,
    config: ConfigArg,
    launch: LaunchArgs,
    rewrite: Option<tile_opt::egraph::OptOptions>,
    output: Option<PathBuf>,
    timings: bool,
    debug: bool,
}

/// The launch `tilec compile` and `tilec explain` plan and compile for.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LaunchArgs {
    /// Compile as for launches whose pointers are 16-byte aligned and whose integer arguments
    /// not given by `--size` are multiples of 16 (what the JIT specialises on).
    #[arg(long)]
    pub assume_aligned: bool,
    /// Plan and compile as for a launch with this integer argument (repeatable): the static
    /// model estimates the candidates at these sizes (others count as 4096), computed
    /// compile-time values (`const BLOCK: i32 = next_pow2(n)`) are evaluated with them, and the
    /// code assumes what the JIT would of them (equal to 1, a multiple of 16), e.g. `--size
    /// M=8192 --size stride_ak=1`.
    #[arg(long = "size", visible_alias = "arg", value_name = "NAME=VALUE")]
    pub sizes: Vec<String>,
}

impl LaunchArgs {
    /// What a launch of `def` is assumed to satisfy (one fact per parameter: nothing unless
    /// `--assume-aligned` or `--size` says so) and its sizes.
    pub fn facts(&self, def: &tile_lang::syntax::ast::FnDef) -> anyhow::Result<(Vec<tile_driver::ArgSpec>, Sizes)> {
        use tile_lang::syntax::ast::TypeExpr;
        let is_int = |p: &tile_lang::syntax::ast::Param| tile_lang::check::launch::is_int_param(p);
        let mut spec: Vec<tile_driver::ArgSpec> = def
            .params
            .iter()
            .map(|p| match (&p.ty, self.assume_aligned) {
                (Some(TypeExpr::Ptr { .. }), true) => tile_driver::ArgSpec::of_ptr(0),
                (Some(_), true) if is_int(p) => tile_driver::ArgSpec::of_int(16),
                _ => tile_driver::ArgSpec::default(),
            })
            .collect();
        let ints: Vec<&str> = def
            .params
            .iter()
            .filter(|p| is_int(p))
            .map(|p| p.name.name.as_str())
            .collect();
        let mut sizes = Vec::new();
        for a in &self.sizes {
            let (name, value) = a
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("`--size {a}`: expected NAME=VALUE, e.g. `--size M=8192`"))?;
            let name = name.trim();
            let value: i64 = value
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("`--size {a}`: `{}` is not an integer", value.trim()))?;
            let i = def.params.iter().position(|p| p.name.name == name).ok_or_else(|| {
                anyhow::anyhow!(
                    "`--size {a}`: kernel `{}` has no parameter `{name}`; its integer parameters are: {}",
                    def.name.name,
                    ints.join(", ")
                )
            })?;
            if !ints.contains(&name) {
                anyhow::bail!(
                    "`--size {a}`: `{name}` is not an integer parameter; integer parameters are: {}",
                    ints.join(", ")
                );
            }
            spec[i] = tile_driver::ArgSpec::of_int(value);
            sizes.retain(|(n, _): &(String, i64)| n != name);
            sizes.push((name.to_string(), value));
        }
        Ok((spec, Sizes(sizes)))
    }
}

fn cmd_compile(file: &Path, a: &CompileArgs, out: &mut dyn Write, err: &mut dyn WriteColor) -> anyhow::Result<i32> {
    use tile_driver::Stage as Until;
    let emit: Vec<Stage> = match (a.emit.is_empty(), &a.output) {
        (true, None) => vec![Stage::Ir],
        _ => a.emit.clone(),
    };
    let pins = tile_driver::Pins {
        consts: parse_defines(&a.defines)?,
        num_warps: a.pins.0,
        num_stages: a.pins.1,
        split: a.split,
    };
    let target = tile_driver::target(&a.sm)?;
    let Some(src) = parse_or_report(file, err)? else {
        return Ok(1);
    };
    if emit.contains(&Stage::Ast) {
        write!(out, "{}", src.ast)?;
    }
    let until = if emit.contains(&Stage::Resources) {
        Until::Cubin
    } else if a.output.is_some() || emit.iter().any(|s| matches!(s, Stage::LlvmIr | Stage::Ptx)) {
        Until::Ptx
    } else {
        Until::Rewrite
    };
    let ptxas =
        match until {
            Until::Cubin => Some(tile_driver::find_ptxas().ok_or_else(|| {
                anyhow::anyhow!("`--emit resources` needs ptxas: run tests/setup.sh, or set TILE_PTXAS")
            })?),
            _ => None,
        };
    // `--emit opt` prints the rewritten IR, so it puts the rewriter in the pipeline.
    let rewrite = match (&a.rewrite, emit.contains(&Stage::Opt)) {
        (Some(o), _) => Some(o.clone()),
        (None, true) => Some(tile_opt::egraph::OptOptions::default()),
        (None, false) => None,
    };
    let names = match &a.kernel {
        Some(k) => vec![k.clone()],
        None => src.kernel_names(),
    };
    let mut failed = false;
    let mut modules: Vec<(String, String)> = Vec::new();
    for name in names {
        let (facts, sizes) = match tile_lang::check::find_kernel(&src.ast, &name) {
            Some(def) => a.launch.facts(def)?,
            None => (Vec::new(), Sizes::default()),
        };
        let req = tile_driver::Request {
            pins: pins.clone(),
            config: match a.config {
                // Planned for the sizes given, else for the file's largest bench case; always
                // with the facts the code is compiled with.
                ConfigArg::Model if sizes.is_empty() => tile_driver::ConfigSource::Model(tile_driver::Planned::File),
                ConfigArg::Model => tile_driver::ConfigSource::Model(tile_driver::Planned::Launch { grid: None }),
                ConfigArg::Defaults => tile_driver::ConfigSource::Defaults,
            },
            rewrite: rewrite.clone(),
            specialization: facts.clone(),
            sizes,
            ..tile_driver::Request::new(&name, target.clone())
        };
        // The front half (configuration, IR, rewrite), printed before anything can fail later.
        let mut c = match tile_driver::compile(&src, &req, Until::Rewrite) {
            Ok(c) => c,
            Err(e) => {
                report_error(err, &src, &name, &e)?;
                failed = true;
                continue;
            }
        };
        if emit.contains(&Stage::Config) {
            write_config(out, &c, &target)?;
        }
        // The GPU stage, made once: its refusals, `--emit gir` and the back half read it.
        let options = tile_driver::CompileOptions {
            target: target.clone(),
            num_warps: c.config.num_warps,
            num_stages: c.config.num_stages,
            specialization: facts,
            split: c.config.split,
            debug: a.debug,
        };
        let started = std::time::Instant::now();
        let stage = tile_driver::gpu_stage(c.kernel(), &options);
        let stage_time = started.elapsed();
        // What the source asked for and did not get: a warning at the loop.
        for r in tile_driver::asked_but_refused(&stage) {
            writeln!(err, "warning: {}: `{name}`: {r}", src.name)?;
        }
        if emit.contains(&Stage::Ir) {
            write!(out, "{}", c.ir)?;
        }
        if let Some((k, report)) = &c.rewritten
            && emit.contains(&Stage::Opt)
        {
            write!(out, "{k}")?;
            writeln!(
                err,
                "{}: optimized in {:.2?}: {} -> {} ops, rules {:?}",
                k.name, report.time, report.ops_before, report.ops_after, report.applied
            )?;
        }
        if emit.contains(&Stage::Gir) {
            // The plan the lowering follows: after the choice of TMA block loads.
            let (p, plan) = (&stage.prepared, &stage.plan);
            write!(out, "{}", plan.render(&p.kernel))?;
            // Fast paths not taken, and the rule that refused each.
            for r in stage.refusals() {
                writeln!(out, "  note: {r}")?;
            }
            // What goes through each map: block loads by result, block stores by stored tile.
            let mut uses: Vec<Vec<String>> = vec![Vec::new(); p.maps.len()];
            p.kernel.walk(&mut |op| {
                let (v, what) = match op.kind {
                    tile_lang::ir::OpKind::LoadBlock { .. } => (op.results[0], "load"),
                    tile_lang::ir::OpKind::StoreBlock { .. } => {
                        (*op.operands.last().expect("a stored tile"), "store of")
                    }
                    _ => return,
                };
                if let Some(&i) = p.map_of.get(&v) {
                    uses[i].push(format!("{what} %{}", v.0));
                }
            });
            for (i, m) in p.maps.iter().enumerate() {
                writeln!(
                    out,
                    "  tensor map {i} (parameter after the kernel's own): {m}; {}",
                    uses[i].join(", ")
                )?;
            }
        }
        // The back half, when a later stage is asked for.
        if until >= Until::Ptx {
            let ptxas = if until == Until::Cubin { ptxas.as_deref() } else { None };
            match tile_driver::lower_stage(&stage, &options, ptxas) {
                Ok(l) => {
                    // The stage is the back half's first step: its time is codegen's.
                    c.timings.codegen = Some(stage_time + l.codegen_time);
                    c.timings.ptxas = l.ptxas_time;
                    c.lowered = Some(l);
                    c.stage = Some(stage);
                }
                Err(e) => {
                    report_error(err, &src, &name, &e)?;
                    failed = true;
                    continue;
                }
            }
        }
        if let Some(l) = &c.lowered {
            if let (true, Some(stage)) = (emit.contains(&Stage::LlvmIr), &c.stage) {
                write!(out, "{}", tile_driver::llvm_ir(stage, &l.options)?)?;
            }
            // With `-o`, the PTX goes to the file only.
            if emit.contains(&Stage::Ptx) && a.output.is_none() {
                write!(out, "{}", l.compiled.ptx)?;
            }
            if let Some((_, r)) = &l.cubin
                && emit.contains(&Stage::Resources)
            {
                writeln!(
                    out,
                    "{}: {r}, dynamic shared {} B, {} threads",
                    name, l.compiled.smem_bytes, l.compiled.threads_per_block
                )?;
            }
            modules.push((name.clone(), l.compiled.ptx.clone()));
        }
        if a.timings {
            let ms = |d: Option<std::time::Duration>| {
                d.map_or("-".to_string(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3))
            };
            let t = &c.timings;
            writeln!(
                err,
                "timings: {name}: parse {}, config {}, check {}, rewrite {}, codegen {}{}, ptxas {}",
                ms(Some(src.parse_time)),
                ms(t.config),
                ms(t.check),
                ms(t.rewrite),
                ms(t.codegen),
                c.lowered.as_ref().map_or(String::new(), |l| {
                    let p = l.compiled.times;
                    format!(
                        " (lower {}, LLVM opt {}, LLVM PTX {})",
                        ms(Some(p.lower)),
                        ms(Some(p.optimize)),
                        ms(Some(p.emit))
                    )
                }),
                ms(t.ptxas)
            )?;
        }
    }
    if let Some(o) = &a.output
        && !modules.is_empty()
    {
        write_ptx_output(o, &modules)?;
    }
    Ok(if failed { 1 } else { 0 })
}

/// Reads and parses `file` through the driver (file-level checks included); prints the
/// diagnostics and gives `None` when it does not parse.
fn parse_or_report(file: &Path, err: &mut dyn WriteColor) -> anyhow::Result<Option<tile_driver::Source>> {
    let text = read(file)?;
    match tile_driver::Source::parse(text.name.clone(), text.text.clone()) {
        Ok(s) => Ok(Some(s)),
        Err(e) => {
            diag::emit(err, &text.name, &text.text, e.diagnostics().unwrap_or(&[]));
            Ok(None)
        }
    }
}

/// Prints a driver error: the source diagnostics when it has them, else one line.
fn report_error(
    err: &mut dyn WriteColor,
    src: &tile_driver::Source,
    kernel: &str,
    e: &tile_driver::DriverError,
) -> anyhow::Result<()> {
    match e.diagnostics() {
        Some(d) => diag::emit(err, &src.name, &src.text, d),
        None => writeln!(err, "error: {}: kernel `{kernel}`: {e}", src.name)?,
    }
    Ok(())
}

/// `--emit config`: the configuration, and the model's whole choice when it made one.
fn write_config(out: &mut dyn Write, c: &tile_driver::Compilation, target: &tile_driver::Target) -> anyhow::Result<()> {
    match (&c.choice, tile_driver::TargetDesc::for_target(target)) {
        (Some(choice), Some(desc)) => explain::write_choice(out, choice, &desc)?,
        _ => {
            writeln!(out, "kernel {} on {}", c.ir.name, target.sm)?;
            writeln!(out, "chosen: {}", c.config)?;
            if let Some(n) = &c.config_note {
                writeln!(out, "  ({n})")?;
            } else {
                writeln!(out, "  (defaults: first candidates, pins applied)")?;
            }
        }
    }
    Ok(())
}

/// Writes `-o`: one PTX module holding every kernel's entry, or one NAME.ptx per kernel into a
/// directory (an existing one, or a path ending in `/`, created if missing).
fn write_ptx_output(o: &Path, modules: &[(String, String)]) -> anyhow::Result<()> {
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    };
    if o.is_dir() || o.to_string_lossy().ends_with('/') {
        std::fs::create_dir_all(o).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", o.display()))?;
        for (name, ptx) in modules {
            write(&o.join(format!("{name}.ptx")), ptx)?;
        }
        return Ok(());
    }
    let ptx: Vec<String> = modules.iter().map(|(_, p)| p.clone()).collect();
    write(o, &tile_driver::merge_ptx(&ptx))
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
    verify(text, &VerifyOptions::default())
}

/// How [`verify`] runs each case.
#[derive(Default)]
pub struct VerifyOptions<'a> {
    /// The GPU to run on (each case is also run on the interpreter and compared); `None`: the
    /// interpreter alone.
    pub gpu: Option<&'a GpuBackend>,
    /// Each checked kernel goes through the e-graph optimizer first.
    pub rewrite: Option<tile_opt::egraph::OptOptions>,
    /// The interpreter's budget, for the kernel and for an in-file reference kernel each.
    pub limits: interp::Limits,
    /// A directory for each case's buffers, `KERNEL-caseN.npz` (created if missing).
    pub save: Option<PathBuf>,
    /// The file's name, for the locations of diagnostics (`None`: `<source>`).
    pub file_name: Option<String>,
    /// Split the loop of every kernel that allows it over clusters of this many programs
    /// (`verify --split`), on the GPU and in the interpreter alike.
    pub split: Option<u32>,
}

/// Opens GPU 0 for `sm` and says which GPU it is.
/// The GPU and its target; without one, an error that ends with `instead` (what to do).
fn gpu_backend(sm: &str, out: &mut dyn Write, instead: &str) -> anyhow::Result<GpuBackend> {
    let gpu = tile_jit::Gpu::new(0).map_err(|e| anyhow::anyhow!("{e}; {instead}"))?;
    let target = tile_driver::target(sm)?;
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
        ptxas: tile_driver::find_ptxas(),
        debug: false,
    })
}

/// Where the GPU runs: the device and how to compile for it.
pub struct GpuBackend {
    pub gpu: tile_jit::Gpu,
    pub target: tile_driver::Target,
    pub ptxas: Option<PathBuf>,
    /// Compile debug builds (`CompileOptions::debug`).
    pub debug: bool,
}

/// Runs every case of every run spec in `text`: on the GPU when one is given (comparing with
/// the reference, if the spec names one, and with the interpreter), else on the interpreter
/// (comparing with the reference, if any: without one, a case passes when it runs without error).
pub fn verify(text: &str, opts: &VerifyOptions) -> Result<Vec<CaseResult>, Vec<Diagnostic>> {
    let mut results = Vec::new();
    verify_each(text, opts, &mut |r| results.push(r))?;
    Ok(results)
}

/// [`verify`], handing each case's result to `each` as soon as it is known (what `tilec
/// verify` prints while the next case runs).
pub fn verify_each(text: &str, opts: &VerifyOptions, each: &mut dyn FnMut(CaseResult)) -> Result<(), Vec<Diagnostic>> {
    let c = check_source(text, &vec![]);
    if !c.diags.is_empty() {
        return Err(c.diags);
    }
    let ast = c.ast.expect("no diagnostics means the file parsed");
    let src = tile_driver::Source {
        name: opts.file_name.clone().unwrap_or_else(|| "<source>".into()),
        text: text.into(),
        ast,
        parse_time: Default::default(),
    };
    // Cases are numbered per kernel across its run specs, so that saved files never collide.
    let mut numbered: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for s in &c.specs {
        // check_source reported unknown references.
        let reference = s.reference.as_ref().and_then(|r| {
            if r.kernel {
                Some(Reference::Kernel(r.name.clone()))
            } else {
                tile_examples::reference(&r.name).map(Reference::Rust)
            }
        });
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
            let number = numbered.entry(s.kernel.as_str()).or_insert(0);
            let save = opts
                .save
                .as_ref()
                .map(|d| d.join(format!("{}-case{number}.npz", s.kernel)));
            *number += 1;
            match run_case(&src, s, case, (seed(&s.kernel, i), save), reference.as_ref(), opts) {
                Ok((c, printed)) => {
                    r.comparisons = c;
                    r.printed = printed;
                }
                Err(e) => r.error = Some(e),
            }
            r.millis = started.elapsed().as_secs_f64() * 1e3;
            each(r);
        }
    }
    Ok(())
}

type CaseOutcome = (Vec<spec::Comparison>, Vec<String>);

/// The front half of the pipeline for one run-spec case: the case's values pinned, the rest the
/// kernel's defaults (what the run spec says is what is run), rewritten when asked.
fn case_kernel(
    src: &tile_driver::Source,
    s: &RunSpec,
    case: &Case,
    opts: &VerifyOptions,
) -> Result<tile_driver::Compilation, String> {
    let target = opts.gpu.map_or_else(
        || tile_driver::target("sm_90a").expect("a known target"),
        |g| g.target.clone(),
    );
    let req = tile_driver::Request {
        pins: tile_driver::Pins {
            consts: case.consts.clone(),
            split: opts.split,
            ..Default::default()
        },
        rewrite: opts.rewrite.clone(),
        // Computed compile-time values (`const BLOCK: i32 = next_pow2(n)`) follow the case.
        sizes: spec::case_sizes(s, case),
        ..tile_driver::Request::new(&s.kernel, target)
    };
    tile_driver::compile(src, &req, tile_driver::Stage::Rewrite).map_err(|e| src.render(&e))
}

/// Where a run spec's expected values come from.
enum Reference {
    /// A function compiled into tilec (dsl-examples/src/lib.rs).
    Rust(spec::Reference),
    /// Another kernel of the same file, run by the interpreter in f64.
    Kernel(String),
}

fn run_case(
    src: &tile_driver::Source,
    s: &RunSpec,
    case: &Case,
    (seed, save): (u64, Option<PathBuf>),
    reference: Option<&Reference>,
    opts: &VerifyOptions,
) -> Result<CaseOutcome, String> {
    let render = |d: Vec<Diagnostic>| diag::render(&src.name, &src.text, &d);
    let compiled = case_kernel(src, s, case, opts)?;
    let kernel = compiled.kernel();
    let mut p = spec::prepare(s, case, kernel, seed).map_err(|d| render(vec![d]))?;
    // A case the kernel's `#[requires(..)]` refuses is the run spec's mistake: run nothing.
    spec::check_launch_requirements(&src.ast, kernel, &p.args).map_err(|d| render(vec![d]))?;
    // A reference reads the sizes, constants and buffers it expects by name; a run spec that names
    // them otherwise is the run spec's mistake, reported as the case's error (`spec::RefError`).
    let expected = match reference {
        Some(Reference::Kernel(name)) => Some(spec::run_reference_kernel(&src.text, &src.ast, name, &p, &opts.limits)?),
        Some(Reference::Rust(r)) => Some(r(&p.reference_input).map_err(|e| e.to_string())?),
        None => None,
    };
    let initial = p.buffers.clone();
    // A split kernel runs as the GPU runs it: `s` programs of a cluster for each of the grid's.
    let split = opts
        .split
        .and_then(|s| tile_driver::split::split(kernel, s).ok().map(|k| (k, s)));
    let (interpreted, grid) = match &split {
        Some((k, s)) => (
            k,
            tile_jit::split_grid(p.grid, *s).ok_or_else(|| {
                format!(
                    "a split of {s} runs {} x {s} programs along axis 0, past the 2^31 - 1 a launch may have",
                    p.grid[0]
                )
            })?,
        ),
        None => (kernel, p.grid),
    };
    let printed = interp::run_limited(interpreted, grid, &p.args, &mut p.buffers, &opts.limits)
        .map_err(|e| format!("interpreter: {e}"))?;
    let gpu_out = match opts.gpu {
        Some(g) => Some(run_on_gpu(g, kernel, &compiled.config, &p, initial.clone())?),
        None => None,
    };
    if let Some(path) = save {
        save_case(&path, kernel, &p, &initial, gpu_out.as_deref(), expected.as_ref())?;
    }
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

/// Whether `k` has an `assert` (which only debug builds check on the GPU).
fn asserts(k: &tile_lang::ir::Kernel) -> bool {
    let mut found = false;
    k.walk(&mut |op| found |= matches!(op.kind, tile_lang::ir::OpKind::Assert(_)));
    found
}

/// Writes one case's buffers as an `.npz`: inputs as generated; each output as run (the GPU's,
/// else the interpreter's), its contents before the kernel as `NAME.initial`, the interpreter's
/// beside a GPU run's as `NAME.interpreter`, and the reference's as `NAME.expected` (f64).
fn save_case(
    path: &Path,
    kernel: &tile_lang::ir::Kernel,
    p: &spec::Prepared,
    initial: &[interp::Buffer],
    gpu: Option<&[interp::Buffer]>,
    expected: Option<&std::collections::BTreeMap<String, Vec<f64>>>,
) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    struct Owned {
        name: String,
        dtype: tile_lang::ir::DType,
        shape: Vec<usize>,
        data: Vec<tile_lang::ir::Scalar>,
    }
    let mut arrays = Vec::new();
    for (param, arg) in kernel.params.iter().zip(&p.args) {
        let interp::Arg::Buffer(idx) = arg else { continue };
        let name = &param.name;
        let shape = match p.reference_input.args.get(name) {
            Some(spec::RefArg::Buffer { shape, .. }) => shape.clone(),
            _ => vec![initial[*idx].data.len()],
        };
        let array = |name: String, b: &interp::Buffer| Owned {
            name,
            dtype: b.dtype,
            shape: shape.clone(),
            data: b.data.clone(),
        };
        if !p.outputs.iter().any(|(o, _)| o == name) {
            arrays.push(array(name.clone(), &initial[*idx]));
            continue;
        }
        match gpu {
            Some(g) => {
                arrays.push(array(name.clone(), &g[*idx]));
                arrays.push(array(format!("{name}.interpreter"), &p.buffers[*idx]));
            }
            None => arrays.push(array(name.clone(), &p.buffers[*idx])),
        }
        // What the kernel found there (`tilec run` loads it, so that the archive replays the case).
        arrays.push(array(format!("{name}.initial"), &initial[*idx]));
        if let Some(want) = expected.and_then(|e| e.get(name)) {
            arrays.push(Owned {
                name: format!("{name}.expected"),
                dtype: tile_lang::ir::DType::F64,
                shape: shape.clone(),
                data: want.iter().map(|v| tile_lang::ir::Scalar::F(*v)).collect(),
            });
        }
    }
    let views: Vec<npy::Array> = arrays
        .iter()
        .map(|a| npy::Array {
            name: &a.name,
            dtype: a.dtype,
            shape: &a.shape,
            data: &a.data,
        })
        .collect();
    npy::write_npz(path, &views)
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
    config: &tile_driver::Config,
    p: &spec::Prepared,
    initial: Vec<interp::Buffer>,
) -> Result<Vec<interp::Buffer>, String> {
    use tile_jit::KernelArg;
    // Specialise as a launch would: integers by value, buffers as the driver allocates them
    // (aligned to at least 256 bytes).
    let specialization = p
        .args
        .iter()
        .map(|a| match a {
            interp::Arg::Buffer(_) => tile_driver::ArgSpec::of_ptr(0),
            interp::Arg::Scalar(tile_lang::ir::Scalar::I(v)) => tile_driver::ArgSpec::of_int(*v),
            interp::Arg::Scalar(_) => tile_driver::ArgSpec::default(),
        })
        .collect();
    let opts = tile_driver::CompileOptions {
        target: g.target.clone(),
        num_warps: config.num_warps,
        num_stages: config.num_stages,
        specialization,
        split: config.split,
        // A kernel that asserts runs as a debug build, so that its assertions are checked on
        // the GPU as the interpreter checks them.
        debug: g.debug || asserts(kernel),
    };
    let (c, f) = tile_jit::tune::build(&g.gpu, kernel, &opts, g.ptxas.as_deref()).map_err(|e| e.to_string())?;
    let dev: Vec<_> = initial
        .iter()
        .map(|b| g.gpu.upload(&to_bytes(b)))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut args = Vec::new();
    for (param, a) in kernel.params.iter().zip(&p.args) {
        args.push(match (a, param.elem) {
            (interp::Arg::Buffer(i), _) => KernelArg::Buffer(&dev[*i]),
            (interp::Arg::Scalar(v), tile_lang::ir::Elem::Scalar(d)) => tile_jit::scalar_arg(d, *v),
            _ => {
                return Err(format!("argument for `{}` does not match its type", param.name));
            }
        });
    }
    let maps = tile_jit::tune::launch_maps(&g.gpu, kernel, &c, &args).map_err(|e| e.to_string())?;
    args.extend(maps.iter().map(KernelArg::TensorMap));
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
        .flat_map(|v| {
            tile_lang::ir::scalar::to_bits(b.dtype, *v)
                .to_le_bytes()
                .into_iter()
                .take(w)
        })
        .collect()
}

fn from_bytes(name: &str, d: DType, bytes: &[u8]) -> interp::Buffer {
    let w = d.bytes();
    let data = bytes.chunks(w).map(|c| {
        let mut x = [0u8; 8];
        x[..w].copy_from_slice(c);
        tile_lang::ir::scalar::from_bits(d, u64::from_le_bytes(x))
    });
    interp::Buffer::new(name, d, data.collect())
}

fn cmd_run(
    file: &Path,
    mut opts: run::RunOptions,
    inputs: &[String],
    (interpret, sm): (bool, &str),
    out: &mut dyn Write,
    err: &mut dyn WriteColor,
) -> anyhow::Result<i32> {
    for i in inputs {
        let input = match i.split_once('=') {
            Some((name, path)) => run::Input::Npy {
                name: name.to_string(),
                path: PathBuf::from(path),
            },
            None if run::is_npz(Path::new(i)) => run::Input::Npz(PathBuf::from(i)),
            None => {
                writeln!(err, "error: --input {i}: expected NAME=FILE.npy or FILE.npz")?;
                return Ok(2);
            }
        };
        opts.inputs.push(input);
    }
    match &opts.save {
        Some(dir) if !run::is_npz(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?
        }
        _ => {}
    }
    let src = read(file)?;
    let backend = if interpret {
        None
    } else {
        Some(gpu_backend(
            sm,
            out,
            "pass --interpret to run on the reference interpreter instead",
        )?)
    };
    match run::run_file(&src.name, &src.text, &opts, backend.as_ref()) {
        Err(e) => {
            writeln!(err, "error: {}: {e}", src.name)?;
            Ok(1)
        }
        Ok(outputs) => {
            let on = if interpret { "the interpreter" } else { "the GPU" };
            writeln!(out, "{}: case {} on {on}", src.name, opts.case)?;
            for (name, dtype, shape, _) in &outputs {
                match &opts.save {
                    Some(file) if run::is_npz(file) => writeln!(
                        out,
                        "  {name}: {dtype} {shape:?} -> {} (array `{name}`)",
                        file.display()
                    )?,
                    Some(dir) => writeln!(
                        out,
                        "  {name}: {dtype} {shape:?} -> {}",
                        dir.join(format!("{name}.npy")).display()
                    )?,
                    None => writeln!(out, "  {name}: {dtype} {shape:?} (not saved: pass --save DIR)")?,
                }
            }
            Ok(0)
        }
    }
}

fn cmd_verify(
    files: &[PathBuf],
    (interpret, rewrite, limits, save): (
        bool,
        Option<tile_opt::egraph::OptOptions>,
        interp::Limits,
        Option<PathBuf>,
    ),
    (sm, debug, split): (&str, bool, Option<u32>),
    out: &mut dyn Write,
    err: &mut dyn WriteColor,
) -> anyhow::Result<i32> {
    // A file that does not read is reported before a GPU is looked for.
    for f in files {
        read(f)?;
    }
    let backend = match interpret {
        true => None,
        false => Some(GpuBackend {
            debug,
            ..gpu_backend(
                sm,
                out,
                "pass --interpret to verify on the reference interpreter instead",
            )?
        }),
    };
    let (mut passed, mut failed) = (0, 0);
    for f in files {
        let src = read(f)?;
        let opts = VerifyOptions {
            gpu: backend.as_ref(),
            rewrite: rewrite.clone(),
            limits,
            save: save.clone(),
            file_name: Some(src.name.clone()),
            split,
        };
        // Each case is printed as soon as it is verified (the file's name before its first).
        let (mut cases, mut written) = (0usize, Ok(()));
        let outcome = verify_each(&src.text, &opts, &mut |r| {
            if written.is_ok() {
                let header = if cases == 0 {
                    writeln!(out, "{}", src.name)
                } else {
                    Ok(())
                };
                written = header.and_then(|_| print_case(out, &r, interpret));
            }
            cases += 1;
            if r.passed() { passed += 1 } else { failed += 1 }
        });
        written?;
        match outcome {
            Err(d) => {
                diag::emit(err, &src.name, &src.text, &d);
                failed += 1;
            }
            Ok(()) if cases == 0 => {
                writeln!(err, "{}: no `run` spec; nothing to verify", src.name)?;
                failed += 1;
            }
            Ok(()) => {}
        }
    }
    writeln!(out, "verify: {passed} passed, {failed} failed")?;
    Ok(if failed > 0 { 1 } else { 0 })
}

/// One case of `tilec verify`: its status line, what it printed, its error or comparisons.
fn print_case(out: &mut dyn Write, r: &CaseResult, interpret: bool) -> std::io::Result<()> {
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
    Ok(())
}
