//! The one compiler pipeline. Every caller — `tilec compile/verify/bench/tune/explain`, the JIT,
//! the tuner and the tests — compiles through this crate; nothing else calls the code generator
//! or ptxas. [`compile`] reads top to bottom as the pipeline:
//!
//! ```text
//! Source::parse      text → AST (once per file)
//! choose_config      pins + defaults, the static model, or a given (tuned) configuration
//! check              AST + configuration → tile IR
//! rewrite            e-graph rewriter (optional)
//! lower              tile IR → LLVM IR → PTX   (tile-codegen)
//! assemble           PTX → cubin + resources    (ptxas, optional)
//! ```
//!
//! and returns every stage it ran in a [`Compilation`], so that `tilec compile --emit` can print
//! each one and the callers that time or load the result take it from there. Callers that
//! already hold a checked kernel (the tuner's candidates, the JIT's per-launch
//! specialisations) enter at [`lower`], the back half.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tile_lang::check::Sizes;
use tile_lang::diag::{self, Diagnostic};
use tile_lang::ir::Kernel;
use tile_lang::spec::{Case, RunSpec};
use tile_lang::{check, syntax};

pub use tile_codegen::ptxas::Resources;
pub use tile_codegen::{
    ArgSpec, CodegenError, CodegenTimes, CompileOptions, Compiled, TARGETS, Target, llvm_ir, target,
};
pub use tile_gir::assign::GpuPlan;
pub use tile_gir::split::{self, MAX_SPLIT};
pub use tile_gir::tma;
pub use tile_gir::{GpuStage, Refusal};
pub use tile_opt::config::{Choice, Config, ConfigError, LaunchProblem, Pins, TargetDesc, Verdict};
pub use tile_opt::egraph::{OptError, OptOptions, Report};

/// A parsed `.tile` file: parsed once, compiled as often as needed.
#[derive(Clone, Debug)]
pub struct Source {
    /// The file's name, for diagnostics.
    pub name: String,
    pub text: String,
    pub ast: syntax::ast::File,
    /// How long parsing took.
    pub parse_time: Duration,
}

impl Source {
    /// Parses `text` and runs the file-level checks (names defined twice, attributes on helpers).
    pub fn parse(name: impl Into<String>, text: impl Into<String>) -> Result<Source, DriverError> {
        let (name, text) = (name.into(), text.into());
        let started = Instant::now();
        let ast = syntax::parse(&text).map_err(DriverError::Parse)?;
        // File-level mistakes (two kernels named `k`) stop every command and the JIT alike.
        let items = check::item_diagnostics(&ast);
        if !items.is_empty() {
            return Err(DriverError::Parse(items));
        }
        Ok(Source {
            name,
            text,
            ast,
            parse_time: started.elapsed(),
        })
    }

    /// The kernels of the file, in source order.
    pub fn kernel_names(&self) -> Vec<String> {
        check::kernel_names(&self.ast)
    }

    /// The diagnostics of an error, rendered against this file (codespan, no colour).
    pub fn render(&self, e: &DriverError) -> String {
        match e.diagnostics() {
            Some(d) => diag::render(&self.name, &self.text, d),
            None => e.to_string(),
        }
    }
}

/// Where a kernel's configuration (compile-time values, warps, stages) comes from. Pins always
/// win: a pinned value is never changed.
#[derive(Clone, Debug)]
pub enum ConfigSource {
    /// Each unpinned tunable takes its first candidate; warps the first `#[warps(..)]`
    /// candidate, else 4; stages the first `#[stages(..)]` candidate, else 1.
    Defaults,
    /// The static model's choice (`tilec explain`), estimated on the given problem. Targets the
    /// model has no description of fall back to the defaults (the compilation says so).
    Model(Planned),
    /// A configuration chosen elsewhere (the tuner's winner).
    Given(Config),
}

/// What the static model plans a kernel for.
#[derive(Clone, Debug)]
pub enum Planned {
    /// The kernel's largest `bench(..)` case, else its run specs' largest case, else the
    /// model's default problem (every integer argument 4096).
    File,
    /// A run spec's case.
    Case(RunSpec, Case),
    /// A launch: the request's `sizes`, and the grid it is launched on when the kernel has no
    /// `#[grid(..)]` (the JIT's shape bucket, `tilec compile --size`).
    Launch { grid: Option<[u32; 3]> },
}

/// How far to run the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Choose the configuration and check the kernel with it (the tile IR).
    Ir,
    /// ... and rewrite it, when the request asks for it.
    Rewrite,
    /// ... and lower it to LLVM IR and PTX.
    Ptx,
    /// ... and assemble the PTX with ptxas, when the request names one.
    Cubin,
}

/// One kernel to compile, and every choice the pipeline makes for it.
#[derive(Clone, Debug)]
pub struct Request {
    pub kernel: String,
    /// Values fixed by the caller: `-D` bindings, a run-spec case's values, the JIT's bindings;
    /// `num_warps`/`num_stages` overrides.
    pub pins: Pins,
    pub config: ConfigSource,
    pub target: Target,
    /// The e-graph rewriter's options; `None` leaves the IR as checked.
    pub rewrite: Option<OptOptions>,
    /// What the launch's arguments are known to satisfy (one per parameter, or empty).
    pub specialization: Vec<ArgSpec>,
    /// The launch's integer arguments, by parameter name: what computed compile-time values
    /// (`const BLOCK: i32 = next_pow2(n)`) are evaluated with, and what `Planned::Launch` plans
    /// for (empty: every integer argument counts as 4096).
    pub sizes: Sizes,
    /// ptxas, for a cubin and its resources; `None` stops at PTX.
    pub ptxas: Option<PathBuf>,
}

impl Request {
    /// A request with the defaults: no pins, default configuration, no rewrite, nothing
    /// assumed of the arguments, no ptxas.
    pub fn new(kernel: impl Into<String>, target: Target) -> Request {
        Request {
            kernel: kernel.into(),
            pins: Pins::default(),
            config: ConfigSource::Defaults,
            target,
            rewrite: None,
            specialization: Vec::new(),
            sizes: Sizes::default(),
            ptxas: None,
        }
    }
}

/// Wall time of each stage that ran.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    pub config: Option<Duration>,
    pub check: Option<Duration>,
    pub rewrite: Option<Duration>,
    pub codegen: Option<Duration>,
    pub ptxas: Option<Duration>,
}

/// The back half's output: PTX (and LLVM IR), and the cubin with its resources when ptxas ran.
#[derive(Clone, Debug)]
pub struct Lowered {
    pub options: CompileOptions,
    pub compiled: Compiled,
    pub cubin: Option<(Vec<u8>, Resources)>,
    pub codegen_time: Duration,
    pub ptxas_time: Option<Duration>,
}

/// Every stage [`compile`] ran.
#[derive(Clone, Debug)]
pub struct Compilation {
    /// The configuration the kernel was compiled with (every compile-time value, warps,
    /// stages).
    pub config: Config,
    /// The static model's choice, with every candidate and the reason it was rejected, when
    /// the configuration came from the model.
    pub choice: Option<Choice>,
    /// Why the model was not used although it was asked for (a target it does not describe).
    pub config_note: Option<String>,
    /// The tile IR as checked.
    pub ir: Kernel,
    /// The rewritten IR and what the rewriter did, when the request asked for it.
    pub rewritten: Option<(Kernel, Report)>,
    /// The GPU stage the back half lowered by (block accesses decided, the plan), when the
    /// pipeline ran that far.
    pub stage: Option<GpuStage>,
    /// PTX and what follows, when the pipeline ran that far.
    pub lowered: Option<Lowered>,
    pub timings: Timings,
    /// Fast paths the source asked for (`#[warp_specialize]`) that the plan refused, and why:
    /// `tilec compile` prints them as warnings at the loop.
    pub refused: Vec<tile_gir::Refusal>,
}

impl Compilation {
    /// The kernel the back half compiles: the rewritten IR if there is one, else the IR.
    pub fn kernel(&self) -> &Kernel {
        self.rewritten.as_ref().map_or(&self.ir, |(k, _)| k)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("the file does not parse or check as a whole ({} diagnostic(s))", .0.len())]
    Parse(Vec<Diagnostic>),
    #[error("kernel `{kernel}` does not check ({} diagnostic(s))", diags.len())]
    Check { kernel: String, diags: Vec<Diagnostic> },
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("rewriter: {0}")]
    Rewrite(#[from] OptError),
    #[error("{0}")]
    Codegen(#[from] CodegenError),
    #[error("ptxas: {0}")]
    Ptxas(String),
}

impl DriverError {
    /// The source diagnostics of a parse or check error.
    pub fn diagnostics(&self) -> Option<&[Diagnostic]> {
        match self {
            DriverError::Parse(d) | DriverError::Check { diags: d, .. } => Some(d),
            _ => None,
        }
    }
}

/// PTX as snapshot tests record it: without LLVM's leading `// Generated by LLVM NVPTX Back-End`
/// comment block (and the blank lines around it), trailing spaces trimmed; the `.version` and
/// `.target` lines stay.
pub fn normalise_ptx(ptx: &str) -> String {
    ptx.lines()
        .skip_while(|l| l.trim().is_empty() || l.trim_start().starts_with("//"))
        .map(|l| format!("{}\n", l.trim_end()))
        .collect()
}

/// Runs the pipeline for one kernel of `src` up to `until`.
pub fn compile(src: &Source, req: &Request, until: Stage) -> Result<Compilation, DriverError> {
    let mut timings = Timings::default();
    let started = Instant::now();
    let (mut config, choice, config_note, checked) = choose_config(src, req)?;
    timings.config = Some(started.elapsed());
    let started = Instant::now();
    let ir = match checked {
        Some(k) => k,
        None => check(src, &req.kernel, &config, &req.sizes)?,
    };
    // Values computed from the launch (`const BLOCK: i32 = next_pow2(n)`) are part of the
    // configuration, whoever chose the rest: caches key on it.
    if let Some(def) = check::find_kernel(&src.ast, &req.kernel) {
        for name in check::launch::computed_names(def) {
            if !config.consts.iter().any(|(n, _)| *n == name)
                && let Some(b) = ir.consts.iter().find(|(n, _)| *n == name)
            {
                config.consts.push(b.clone());
            }
        }
    }
    timings.check = Some(started.elapsed());
    let mut c = Compilation {
        config,
        choice,
        config_note,
        ir,
        rewritten: None,
        stage: None,
        lowered: None,
        timings,
        refused: Vec::new(),
    };
    if until < Stage::Rewrite {
        return Ok(c);
    }
    if let Some(o) = &req.rewrite {
        let started = Instant::now();
        c.rewritten = Some(tile_opt::egraph::optimize(&c.ir, o)?);
        c.timings.rewrite = Some(started.elapsed());
    }
    if until < Stage::Ptx {
        return Ok(c);
    }
    let options = CompileOptions {
        target: req.target.clone(),
        num_warps: c.config.num_warps,
        num_stages: c.config.num_stages,
        specialization: req.specialization.clone(),
        split: c.config.split,
        debug: false,
    };
    let started = Instant::now();
    let stage = gpu_stage(c.kernel(), &options);
    let stage_time = started.elapsed();
    c.refused = asked_but_refused(&stage);
    let ptxas = if until >= Stage::Cubin {
        req.ptxas.as_deref()
    } else {
        None
    };
    let lowered = lower_stage(&stage, &options, ptxas)?;
    // The stage is the back half's first step: its time is codegen's.
    c.timings.codegen = Some(stage_time + lowered.codegen_time);
    c.timings.ptxas = lowered.ptxas_time;
    c.lowered = Some(lowered);
    c.stage = Some(stage);
    Ok(c)
}

/// The GPU stage of `kernel` under `options` (its warps, stages, target and facts): block loads
/// the TMA engine copies kept with their tensor maps, every other block access expanded, and the
/// plan of that kernel. Made once per compile; [`lower_stage`] lowers by it and `--emit gir`
/// prints it.
pub fn gpu_stage(kernel: &Kernel, options: &CompileOptions) -> GpuStage {
    GpuStage::new(
        kernel,
        options.num_warps,
        options.num_stages,
        options.split,
        &options.target,
        &options.specialization,
    )
}

/// The back half: a checked (or rewritten) kernel to PTX, and to a cubin when `ptxas` is given
/// (its GPU stage made here).
pub fn lower(kernel: &Kernel, options: &CompileOptions, ptxas: Option<&Path>) -> Result<Lowered, DriverError> {
    lower_stage(&gpu_stage(kernel, options), options, ptxas)
}

/// The back half from a GPU stage made for `options` ([`gpu_stage`]).
pub fn lower_stage(stage: &GpuStage, options: &CompileOptions, ptxas: Option<&Path>) -> Result<Lowered, DriverError> {
    let started = Instant::now();
    let compiled = tile_codegen::compile_stage(stage, options)?;
    let codegen_time = started.elapsed();
    let (cubin, ptxas_time) = match ptxas {
        Some(p) => {
            let started = Instant::now();
            let r = tile_codegen::ptxas::assemble(p, &compiled.ptx, options.target.sm).map_err(DriverError::Ptxas)?;
            (Some(r), Some(started.elapsed()))
        }
        None => (None, None),
    };
    Ok(Lowered {
        options: options.clone(),
        compiled,
        cubin,
        codegen_time,
        ptxas_time,
    })
}

/// The fast paths the source asks for (a loop's `#[warp_specialize]`) that `stage`'s plan
/// refuses.
pub fn asked_but_refused(stage: &GpuStage) -> Vec<tile_gir::Refusal> {
    stage.plan.refusals.iter().filter(|r| r.asked).cloned().collect()
}

/// ptxas: `TILE_PTXAS`, the project's `.tools/`, else `PATH`.
pub fn find_ptxas() -> Option<PathBuf> {
    tile_codegen::ptxas::find()
}

/// The version line of a ptxas (`Build cuda_13.0.r13.0/...`), asked once per path in a process;
/// "unknown" when it does not say. Caches of cubins key on it.
pub fn ptxas_version(ptxas: &Path) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(v) = seen.lock().unwrap_or_else(|e| e.into_inner()).get(ptxas) {
        return v.clone();
    }
    let v = std::process::Command::new(ptxas)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into());
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ptxas.to_path_buf(), v.clone());
    v
}

/// The warps a kernel gets when nothing chooses them: its first `#[warps(..)]` candidate, else 4.
pub fn default_warps(k: &Kernel) -> u32 {
    k.warps.first().copied().unwrap_or(4)
}

/// The stages a kernel gets when nothing chooses them: its first `#[stages(..)]` candidate,
/// else 1 (no pipelining).
pub fn default_stages(k: &Kernel) -> u32 {
    k.stages.first().copied().unwrap_or(1)
}

fn check(src: &Source, kernel: &str, config: &Config, sizes: &Sizes) -> Result<Kernel, DriverError> {
    check::check_kernel_at(&src.text, &src.ast, kernel, &config.consts, sizes).map_err(|diags| DriverError::Check {
        kernel: kernel.to_string(),
        diags,
    })
}

type Chosen = (Config, Option<Choice>, Option<String>, Option<Kernel>);

/// The configuration, the model's choice when it made it, a note when it was asked for but
/// could not be used, and the checked kernel when choosing already produced it.
fn choose_config(src: &Source, req: &Request) -> Result<Chosen, DriverError> {
    let pins = &req.pins;
    let defaults = || -> Result<Chosen, DriverError> {
        let k =
            check::check_kernel_at(&src.text, &src.ast, &req.kernel, &pins.consts, &req.sizes).map_err(|diags| {
                DriverError::Check {
                    kernel: req.kernel.clone(),
                    diags,
                }
            })?;
        let config = Config {
            consts: k.consts.clone(),
            num_warps: pins.num_warps.unwrap_or_else(|| default_warps(&k)),
            num_stages: pins.num_stages.unwrap_or_else(|| default_stages(&k)),
            split: pins.split.unwrap_or(1),
        };
        Ok((config, None, None, Some(k)))
    };
    match &req.config {
        ConfigSource::Defaults => defaults(),
        ConfigSource::Given(c) => Ok((c.clone(), None, None, None)),
        ConfigSource::Model(on) => {
            let Some(desc) = TargetDesc::for_target(&req.target) else {
                let (c, _, _, k) = defaults()?;
                let note = format!("the model has no description of {}: defaults used", req.target.sm);
                return Ok((c, None, Some(note), k));
            };
            let launch;
            let on = match on {
                Planned::File => tile_opt::config::On::File,
                Planned::Case(s, c) => tile_opt::config::On::Case(s, c),
                Planned::Launch { grid } => {
                    launch = LaunchProblem {
                        sizes: req.sizes.clone(),
                        grid: *grid,
                    };
                    tile_opt::config::On::Launch(&launch)
                }
            };
            let choice = match tile_opt::config::choose_with(
                &src.text,
                &src.ast,
                &req.kernel,
                pins,
                &desc,
                on,
                &req.specialization,
            ) {
                Ok(c) => c,
                // No such kernel, or it does not check with the pins: report the checker's
                // diagnostics, not a summary.
                Err(e @ (ConfigError::Check(_) | ConfigError::NoKernel(_))) => {
                    defaults()?;
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            };
            let best = choice.best();
            let (config, kernel) = (best.config.clone(), best.kernel.clone());
            Ok((config, Some(choice), None, kernel))
        }
    }
}

/// One PTX module holding the entries of several modules compiled for the same target: the
/// first module's header (`.version`, `.target`, `.address_size`), then every module's body,
/// with module-level declarations that several modules make (the dynamic shared-memory array)
/// declared once.
pub fn merge_ptx(modules: &[String]) -> String {
    let mut out = String::new();
    let mut declared = std::collections::HashSet::new();
    for (i, m) in modules.iter().enumerate() {
        let mut lines = m.lines();
        // The header, through `.address_size`: kept from the first module only.
        for line in lines.by_ref() {
            if i == 0 {
                out.push_str(line);
                out.push('\n');
            }
            if line.starts_with(".address_size") {
                break;
            }
        }
        for line in lines {
            let declaration = [".extern", ".global", ".shared", ".const"]
                .iter()
                .any(|d| line.starts_with(d));
            if declaration && !declared.insert(line.to_string()) {
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
