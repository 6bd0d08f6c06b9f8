//! The JIT's GPU-free half: source → checked kernel → (specialised) compiled entry, through the
//! disk cache. The GPU half (`jit.rs`) only loads and launches what this produces, so all of
//! the pipeline and the cache logic are testable on machines without a GPU.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tile_driver::{ArgSpec, CompileOptions, ConfigSource, DriverError, Pins, Planned, Request, Stage, Target};
use tile_lang::check::{Bindings, Sizes};
use tile_lang::diag;
use tile_lang::ir::{self, ConstValue};

use crate::args::{MAX_PARAMS, ParamSig, spec_tags};
use crate::cache::{self, CacheEntry, CacheKey, DiskCache, KeyParts, Lookup};

/// Where a JIT's source comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// Text compiled into the program, typically `include_str!("kernels/add.tile")`.
    Static(&'static str),
    /// Text built at run time, with a name for diagnostics.
    Text { name: String, text: String },
    /// A file, read once when the JIT is created.
    File(PathBuf),
}

/// Why the JIT could not produce or run a kernel.
#[derive(Debug, thiserror::Error)]
pub enum JitError {
    #[error("cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    /// Parse or check errors, rendered with the source lines they point at.
    #[error("{source_name}: kernel `{kernel}` does not compile:\n{rendered}")]
    Check {
        source_name: String,
        kernel: String,
        rendered: String,
    },
    #[error("kernel `{kernel}`: {error}")]
    Codegen {
        kernel: String,
        #[source]
        error: tile_driver::CodegenError,
    },
    #[error("kernel `{kernel}`: {message}")]
    Config { kernel: String, message: String },
    /// An environment variable the JIT reads holds something it cannot use (the message names
    /// the variable, the value and what would be valid).
    #[error("{0}")]
    Environment(String),
    /// The launch breaks one of the kernel's `#[requires(..)]` clauses (rendered with the
    /// clause's line and the values it read).
    #[error("kernel `{kernel}`: {rendered}")]
    Requires { kernel: String, rendered: String },
    /// The kernel's `#[grid(..)]` could not give a launch grid (or it has none).
    #[error("kernel `{kernel}`: {message}")]
    Grid { kernel: String, message: String },
    #[error("kernel `{kernel}`: ptxas: {message}")]
    Ptxas { kernel: String, message: String },
    /// [`crate::JitKernel::prepare_range`] was given a parameter or values it cannot walk, or
    /// one value's launch would fail (the message names the value and why).
    #[error("kernel `{kernel}`: prepare_range: {message}")]
    PrepareRange { kernel: String, message: String },
    #[error("the GPU has compute capability {major}.{minor}; tile kernels need 8.0 or newer")]
    UnsupportedGpu { major: i32, minor: i32 },
    #[error(
        "target {target} cannot run on this GPU (compute capability {major}.{minor}); leave `JitOptions::target` unset to pick one that does"
    )]
    TargetMismatch { target: String, major: i32, minor: i32 },
    #[error(transparent)]
    Arg(#[from] crate::args::ArgError),
    #[error(transparent)]
    Runtime(#[from] tile_runtime::RuntimeError),
}

/// A source text, parsed on first use.
pub(crate) struct Program {
    pub name: String,
    pub text: String,
    /// Hashed once: kernel keys reuse it.
    pub digest: [u8; 32],
    source: OnceLock<Result<tile_driver::Source, Vec<diag::Diagnostic>>>,
}

impl Program {
    pub fn load(source: Source) -> Result<Program, JitError> {
        let (name, text) = match source {
            Source::Static(t) => ("<embedded source>".to_string(), t.to_string()),
            Source::Text { name, text } => (name, text),
            Source::File(path) => {
                let text = tile_lang::syntax::read_source(&path).map_err(|e| JitError::Read {
                    path: path.clone(),
                    message: match e {
                        tile_lang::syntax::ReadError::Io { message, .. } => message,
                        e => e.to_string(),
                    },
                })?;
                (path.display().to_string(), text)
            }
        };
        Ok(Program {
            digest: cache::source_digest(&text),
            name,
            text,
            source: OnceLock::new(),
        })
    }

    fn check_error(&self, kernel: &str, diags: &[diag::Diagnostic]) -> JitError {
        JitError::Check {
            source_name: self.name.clone(),
            kernel: kernel.into(),
            rendered: diag::render(&self.name, &self.text, diags),
        }
    }

    /// The parsed source (parsed on first use).
    fn source(&self, kernel: &str) -> Result<&tile_driver::Source, JitError> {
        self.source
            .get_or_init(|| {
                tile_driver::Source::parse(&self.name, &self.text).map_err(|e| e.diagnostics().unwrap_or(&[]).to_vec())
            })
            .as_ref()
            .map_err(|d| self.check_error(kernel, d))
    }

    /// A driver error of kernel `name` as the JIT reports it.
    fn driver_error(&self, name: &str, e: DriverError) -> JitError {
        match e {
            DriverError::Parse(d) | DriverError::Check { diags: d, .. } => self.check_error(name, &d),
            DriverError::Codegen(error) => JitError::Codegen {
                kernel: name.into(),
                error,
            },
            DriverError::Ptxas(message) => JitError::Ptxas {
                kernel: name.into(),
                message,
            },
            e => JitError::Config {
                kernel: name.into(),
                message: e.to_string(),
            },
        }
    }
}

/// Where the JIT looks for the tuner's cached winners: this GPU and the cache directory.
pub(crate) struct TunedOn<'a> {
    pub gpu_name: &'a str,
    pub compute_capability: (i32, i32),
    pub cache_dir: &'a Path,
}

/// One kernel with one binding of its compile-time parameters, ready to be specialised: what a
/// JIT kernel handle holds. Its key covers everything but the specialisation.
pub(crate) struct Plan {
    pub kernel: ir::Kernel,
    pub params: Vec<ParamSig>,
    /// The kernel's `#[grid(..)]` extents (empty without one), checked by the checker.
    pub grid: Vec<tile_lang::syntax::ast::Expr>,
    /// The kernel's `#[requires(..)]` clauses, checked at every launch.
    pub requires: Vec<tile_lang::check::launch::Requirement>,
    /// The parameters (by index) that computed compile-time values read: their exact values
    /// select the plan, as a launch's buckets do.
    pub computed_reads: Vec<usize>,
    /// The parameters `#[no_specialize(..)]` names, bit `i` for parameter `i`: launches neither
    /// specialise on nor plan for their values.
    pub unspecialized: u64,
    /// The kernel's descriptor accesses the host can size: every launch checks its buffers
    /// against them (`args::check_extents`).
    pub extents: Vec<tile_driver::tma::BlockExtent>,
    pub num_warps: u32,
    pub num_stages: u32,
    /// Programs of a cluster that share the kernel's loop (`tile_driver::Config::split`).
    pub split: u32,
    pub target: Target,
    pub base_key: [u8; 32],
    /// A debug build (`KernelOptions::debug`).
    pub debug: bool,
}

impl Plan {
    /// Whether `grid` can launch the kernel: a kernel that runs in clusters (`#[cluster(N)]`)
    /// needs a first extent that is a multiple of `N` (the driver would refuse it otherwise).
    pub fn check_grid(&self, grid: [u32; 3]) -> Result<(), JitError> {
        self.kernel
            .check_cluster_grid(grid[0])
            .map_err(|message| JitError::Grid {
                kernel: self.kernel.name.clone(),
                message,
            })
    }

    /// The plan as a debug build (`CompileOptions::debug`) when `debug` holds: its own key.
    pub fn with_debug(mut self, debug: bool) -> Plan {
        self.base_key = cache::debug_key(self.base_key, debug);
        self.debug = debug;
        self
    }
}

/// The bindings as the checker takes them.
pub(crate) fn to_bindings(bindings: &[(&str, ConstValue)]) -> Bindings {
    bindings.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

/// The key of `(kernel, bindings, num_warps, target)` before checking: lets a JIT find a handle
/// it already made without checking the kernel again.
pub(crate) fn plan_key(
    program: &Program,
    name: &str,
    bindings: &Bindings,
    num_warps: Option<u32>,
    target: &Target,
) -> [u8; 32] {
    cache::base_key(
        &program.digest,
        &KeyParts {
            source: "",
            kernel: name,
            bindings,
            // 0 is never a valid warp count or stage count: it stands for "the model's choice".
            num_warps: num_warps.unwrap_or(0),
            num_stages: 0,
            split: 0,
            specialization: &[],
            target_sm: target.sm,
            compiler_version: cache::COMPILER_VERSION,
            llvm_version: cache::LLVM_VERSION,
        },
    )
}

/// The plan a handle makes without knowing its launches (what `JitKernel::consts` reports):
/// unbound compile-time values, warps and stages are the tuner's cached winner on this GPU when
/// there is one, else the static model's choice for the file's largest bench case (as `tilec
/// compile` makes it) with what launches typically satisfy, or `facts` when given.
pub(crate) fn plan(
    program: &Program,
    name: &str,
    bindings: &Bindings,
    num_warps: Option<u32>,
    target: &Target,
    tuned: Option<&TunedOn<'_>>,
) -> Result<Plan, JitError> {
    plan_with_facts(program, name, bindings, num_warps, target, tuned, Vec::new())
}

fn plan_with_facts(
    program: &Program,
    name: &str,
    bindings: &Bindings,
    num_warps: Option<u32>,
    target: &Target,
    tuned: Option<&TunedOn<'_>>,
    facts: Vec<ArgSpec>,
) -> Result<Plan, JitError> {
    let pins = Pins {
        consts: bindings.clone(),
        num_warps,
        num_stages: None,
        split: None,
    };
    let winner = tuned.and_then(|t| {
        crate::tune::cached_winner(
            &program.text,
            name,
            &pins,
            (t.gpu_name, t.compute_capability),
            target,
            t.cache_dir,
        )
    });
    let req = Request {
        pins,
        config: winner.map_or(ConfigSource::Model(Planned::File), ConfigSource::Given),
        specialization: facts,
        ..Request::new(name, target.clone())
    };
    make_plan(program, name, &req)
}

/// The plan for a launch with integer arguments `sizes` (bucketed by the caller) whose
/// arguments satisfy `facts`: the tuner's winner for that bucket on this GPU when there is one,
/// else the plan the disk cache kept for it, else the static model's choice for it (kept).
pub(crate) fn plan_for_launch(
    program: &Program,
    name: &str,
    pins: &Pins,
    target: &Target,
    sizes: Sizes,
    facts: Vec<ArgSpec>,
    tuned: Option<&TunedOn<'_>>,
) -> Result<Plan, JitError> {
    let winner = tuned.and_then(|t| {
        crate::tune::cached_winner_for(
            &program.text,
            name,
            pins,
            &sizes,
            (t.gpu_name, t.compute_capability),
            target,
            t.cache_dir,
        )
    });
    // A plan the model made for this bucket in an earlier process.
    let kept_key = tuned.map(|t| {
        (
            crate::tune::TuneCache::new(t.cache_dir),
            crate::tune::model_plan_key(&program.text, name, pins, &sizes, &facts, target),
        )
    });
    let kept = match (&winner, &kept_key) {
        (None, Some((cache, key))) => match cache.load(key) {
            crate::tune::TuneLookup::Hit(e) => Some(e.config),
            _ => None,
        },
        _ => None,
    };
    let modelled = winner.is_none() && kept.is_none();
    let req = Request {
        pins: pins.clone(),
        config: match winner.or(kept) {
            Some(c) => ConfigSource::Given(c),
            None => ConfigSource::Model(Planned::Launch { grid: None }),
        },
        specialization: facts,
        sizes: sizes.clone(),
        ..Request::new(name, target.clone())
    };
    let (plan, config) = make_plan_config(program, name, &req)?;
    if modelled && let Some((cache, key)) = &kept_key {
        // Best effort: a plan that is not kept is made again by the next process.
        let _ = cache.store(
            key,
            &crate::tune::TuneEntry {
                kernel: name.to_string(),
                config,
                median_ms: 0.0,
                gpu: String::new(),
                bucket: sizes.to_string(),
            },
        );
    }
    Ok(plan)
}

/// The plan of a launch whose tunable values, warps and stages are `fixed` (a handle's plan,
/// for a launch on a grid of the caller's) and whose computed compile-time values follow
/// `sizes`.
pub(crate) fn plan_fixed(
    program: &Program,
    name: &str,
    fixed: &Plan,
    target: &Target,
    sizes: Sizes,
) -> Result<Plan, JitError> {
    let src = program.source(name)?;
    let computed =
        tile_lang::check::find_kernel(&src.ast, name).map_or_else(Vec::new, tile_lang::check::launch::computed_names);
    let config = tile_driver::Config {
        consts: fixed
            .kernel
            .consts
            .iter()
            .filter(|(n, _)| !computed.contains(n))
            .cloned()
            .collect(),
        num_warps: fixed.num_warps,
        num_stages: fixed.num_stages,
        split: fixed.split,
    };
    let req = Request {
        config: ConfigSource::Given(config),
        sizes,
        ..Request::new(name, target.clone())
    };
    Ok(make_plan(program, name, &req)?.with_debug(fixed.debug))
}

fn make_plan(program: &Program, name: &str, req: &Request) -> Result<Plan, JitError> {
    make_plan_config(program, name, req).map(|(p, _)| p)
}

/// The driver's pipeline up to the tile IR for `req`, as a plan (and the configuration chosen).
fn make_plan_config(program: &Program, name: &str, req: &Request) -> Result<(Plan, tile_driver::Config), JitError> {
    let src = program.source(name)?;
    let target = &req.target;
    let c = tile_driver::compile(src, req, Stage::Ir).map_err(|e| program.driver_error(name, e))?;
    let (kernel, config) = (c.ir, c.config);
    let params: Vec<ParamSig> = kernel
        .params
        .iter()
        .zip(tile_lang::ir::reach::pointer_reach(&kernel))
        .map(|(p, reach)| ParamSig {
            name: p.name.clone(),
            elem: p.elem,
            reach,
        })
        .collect();
    if params.len() > MAX_PARAMS {
        return Err(crate::args::ArgError::TooManyParams {
            kernel: name.into(),
            count: params.len(),
            max: MAX_PARAMS,
        }
        .into());
    }
    let base_key = cache::base_key(
        &program.digest,
        &KeyParts {
            source: "",
            kernel: name,
            bindings: &config.consts,
            num_warps: config.num_warps,
            num_stages: config.num_stages,
            split: config.split,
            specialization: &[],
            target_sm: target.sm,
            compiler_version: cache::COMPILER_VERSION,
            llvm_version: cache::LLVM_VERSION,
        },
    );
    let def = tile_lang::check::find_kernel(&src.ast, name);
    let grid = def
        .and_then(|def| def.attrs.iter().find(|a| a.name.name == "grid"))
        .map_or_else(Vec::new, |a| a.args.clone());
    let requires = def.map_or_else(Vec::new, tile_lang::check::launch::requirements);
    let computed_reads = def.map_or_else(Vec::new, |def| {
        kernel
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| tile_lang::check::launch::computed_read(def, &p.name))
            .map(|(i, _)| i)
            .collect()
    });
    let unspecialized = kernel
        .params
        .iter()
        .enumerate()
        .filter(|(i, p)| *i < 64 && !p.specialize)
        .fold(0u64, |m, (i, _)| m | 1 << i);
    let num_warps = config.num_warps;
    let num_stages = config.num_stages;
    let split = config.split;
    let extents = tile_driver::tma::block_extents(&kernel);
    Ok((
        Plan {
            kernel,
            params,
            grid,
            requires,
            computed_reads,
            unspecialized,
            extents,
            num_warps,
            num_stages,
            split,
            target: target.clone(),
            base_key,
            debug: false,
        },
        config,
    ))
}

/// How a specialisation was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Compiled in this process (and stored in the disk cache when there is one).
    Compiled,
    /// Read from the disk cache.
    DiskCache,
}

/// What [`build`] did besides producing the entry, for the JIT's statistics.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct BuildReport {
    /// The cache held an entry for the key that could not be trusted.
    pub corrupt: Option<String>,
    /// Storing the new entry failed (the kernel still runs; the next process compiles again).
    pub write_error: Option<String>,
}

/// The compiled entry of `plan` specialised as `spec`: from the disk cache when it holds a sound
/// one, else compiled (to a cubin too when `ptxas` is given) and stored.
pub(crate) fn build(
    plan: &Plan,
    spec: &[ArgSpec],
    cache: Option<&DiskCache>,
    ptxas: Option<&Path>,
) -> Result<(CacheKey, CacheEntry, Origin, BuildReport), JitError> {
    let key = cache::specialize(&plan.base_key, spec);
    let key = match ptxas {
        Some(p) => cache::with_ptxas(&key, &tile_driver::ptxas_version(p)),
        None => key,
    };
    let mut report = BuildReport::default();
    if let Some(c) = cache {
        match c.load(&key) {
            Lookup::Hit(e) => return Ok((key, e, Origin::DiskCache, report)),
            Lookup::Miss => {}
            Lookup::Corrupt(why) => report.corrupt = Some(why),
        }
    }
    let lowered = lower_plan(plan, spec, ptxas)?;
    let (compiled, cubin) = (lowered.compiled, lowered.cubin.map(|(c, _)| c));
    let entry = CacheEntry {
        kernel: compiled.name,
        threads_per_block: compiled.threads_per_block,
        smem_bytes: compiled.smem_bytes,
        split: compiled.split,
        specialization: spec_tags(spec),
        target_sm: plan.target.sm.to_string(),
        ptx: compiled.ptx,
        cubin,
        tensor_maps: compiled.tensor_maps,
    };
    if let Some(c) = cache
        && let Err(e) = c.store(&key, &entry)
    {
        report.write_error = Some(e.to_string());
    }
    Ok((key, entry, Origin::Compiled, report))
}

/// The PTX the JIT compiles for kernel `name` of `source` with `bindings` and `opts`, specialised
/// as `spec` (one entry per parameter, or empty), for `target` — without a GPU and without the
/// disk cache: the same pipeline and choices as a launch, for tests and offline inspection.
pub fn jit_ptx(
    source: Source,
    name: &str,
    bindings: &[(&str, ConstValue)],
    opts: &crate::KernelOptions,
    target: &Target,
    spec: &[ArgSpec],
) -> Result<String, JitError> {
    let program = Program::load(source)?;
    let facts = compile_facts(&program, name, spec)?;
    let plan = plan_with_facts(
        &program,
        name,
        &to_bindings(bindings),
        opts.num_warps,
        target,
        None,
        facts,
    )?
    .with_debug(opts.debug);
    Ok(build(&plan, spec, None, None)?.1.ptx)
}

/// What a compile with specialisation `spec` (one per parameter, or empty: nothing assumed)
/// tells the model: one fact per parameter of kernel `name`.
fn compile_facts(program: &Program, name: &str, spec: &[ArgSpec]) -> Result<Vec<ArgSpec>, JitError> {
    if !spec.is_empty() {
        return Ok(spec.to_vec());
    }
    let src = program.source(name)?;
    Ok(tile_lang::check::find_kernel(&src.ast, name)
        .map_or_else(Vec::new, |def| vec![ArgSpec::default(); def.params.len()]))
}

/// The back half for `plan` specialised as `spec` (to a cubin too when `ptxas` is given).
fn lower_plan(plan: &Plan, spec: &[ArgSpec], ptxas: Option<&Path>) -> Result<tile_driver::Lowered, JitError> {
    let opts = CompileOptions {
        target: plan.target.clone(),
        num_warps: plan.num_warps,
        num_stages: plan.num_stages,
        specialization: spec.to_vec(),
        split: plan.split,
        debug: plan.debug,
    };
    let name = &plan.kernel.name;
    tile_driver::lower(&plan.kernel, &opts, ptxas).map_err(|e| match e {
        DriverError::Codegen(error) => JitError::Codegen {
            kernel: name.clone(),
            error,
        },
        e => JitError::Ptxas {
            kernel: name.clone(),
            message: e.to_string(),
        },
    })
}

/// What [`jit_snapshot`] compiles and records.
#[derive(Clone, Debug)]
pub struct SnapshotOptions {
    /// The target to compile for (no GPU is needed).
    pub target: Target,
    /// Warps, as for a launch (`None`: the static model's choice; no tuned winner is read).
    pub kernel: crate::KernelOptions,
    /// What the launch's arguments are known to satisfy, as the JIT specialises them (one per
    /// parameter, or empty: nothing assumed).
    pub specialization: Vec<ArgSpec>,
    /// Assemble with ptxas and record its resource report (registers, spills, its performance
    /// notes); ptxas must then be installed (`TILE_PTXAS`, `PATH`, or tests/setup.sh's copy).
    pub resources: bool,
}

impl SnapshotOptions {
    /// For `target`, with the model's warps, nothing assumed of the arguments, and resources.
    pub fn new(target: Target) -> SnapshotOptions {
        SnapshotOptions {
            target,
            kernel: crate::KernelOptions::default(),
            specialization: Vec::new(),
            resources: true,
        }
    }
}

/// The text a PTX snapshot test of a user's kernel records (`insta::assert_snapshot!` on it):
/// the configuration the JIT would launch kernel `name` of `source` with for `bindings` (the
/// same pipeline and choices as [`jit_ptx`]), the launch's needs, ptxas's resource report when
/// `opts.resources` asks for it, then the normalised PTX. A change to any of them shows in the
/// snapshot's diff.
pub fn jit_snapshot(
    source: Source,
    name: &str,
    bindings: &[(&str, ConstValue)],
    opts: &SnapshotOptions,
) -> Result<String, JitError> {
    use std::fmt::Write as _;
    let ptxas = if opts.resources {
        Some(tile_driver::find_ptxas().ok_or_else(|| {
            JitError::Ptxas {
                kernel: name.into(),
                message:
                    "not found, and the snapshot asks for its resource report: set TILE_PTXAS, put ptxas on PATH, \
                      or set SnapshotOptions::resources to false"
                        .into(),
            }
        })?)
    } else {
        None
    };
    let program = Program::load(source)?;
    let facts = compile_facts(&program, name, &opts.specialization)?;
    let plan = plan_with_facts(
        &program,
        name,
        &to_bindings(bindings),
        opts.kernel.num_warps,
        &opts.target,
        None,
        facts,
    )?
    .with_debug(opts.kernel.debug);
    let lowered = lower_plan(&plan, &opts.specialization, ptxas.as_deref())?;
    let mut out = String::new();
    let consts: Vec<String> = plan.kernel.consts.iter().map(|(n, v)| format!("{n}={v}")).collect();
    let _ = writeln!(
        out,
        "kernel {name} on {}: {} warps={} stages={} (arguments: {})",
        plan.target.sm,
        consts.join(" "),
        plan.num_warps,
        plan.num_stages,
        if opts.specialization.is_empty() {
            "nothing assumed".to_string()
        } else {
            spec_tags(&opts.specialization)
        }
    );
    let c = &lowered.compiled;
    let _ = writeln!(
        out,
        "threads per block {}, dynamic shared memory {} B",
        c.threads_per_block, c.smem_bytes
    );
    if let Some((_, r)) = &lowered.cubin {
        let _ = writeln!(out, "ptxas: {r}");
    }
    out.push_str("---- ptx ----\n");
    out.push_str(&tile_driver::normalise_ptx(&c.ptx));
    Ok(out)
}

/// `(major, minor, arch-specific)` of a target name: `sm_90a` → `(9, 0, true)`.
fn parse_sm(sm: &str) -> Option<(i32, i32, bool)> {
    let digits = sm.strip_prefix("sm_")?;
    let (digits, specific) = match digits.strip_suffix('a') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    let n: i32 = digits.parse().ok()?;
    Some((n / 10, n % 10, specific))
}

/// The target to compile for on a GPU of compute capability `cc`: the newest one it runs.
pub(crate) fn target_for(cc: (i32, i32)) -> Result<Target, JitError> {
    let name = match cc {
        (major, _) if major < 8 => {
            return Err(JitError::UnsupportedGpu {
                major: cc.0,
                minor: cc.1,
            });
        }
        (8, minor) if minor >= 9 => "sm_89",
        (8, minor) if minor >= 6 => "sm_86",
        (8, _) => "sm_80",
        // `a` targets (wgmma, setmaxnreg) run on exactly 9.0.
        (9, 0) => "sm_90a",
        // Newer GPUs run sm_90 PTX through the driver's JIT.
        _ => "sm_90",
    };
    tile_driver::target(name).map_err(|error| JitError::Codegen {
        kernel: String::new(),
        error: error.into(),
    })
}

/// Whether PTX for `sm` runs on a GPU of compute capability `cc` (the driver compiles PTX for
/// any newer GPU, except arch-specific `a` PTX, which runs on its own GPU only).
pub(crate) fn ptx_runs_on(sm: &str, cc: (i32, i32)) -> bool {
    match parse_sm(sm) {
        Some((major, minor, true)) => (major, minor) == cc,
        Some((major, minor, false)) => cc >= (major, minor),
        None => false,
    }
}

/// Whether a cubin for `sm` runs on `cc`: machine code only runs within its major version, on
/// the same or a newer minor one (and `a` code on its own GPU only).
pub(crate) fn cubin_runs_on(sm: &str, cc: (i32, i32)) -> bool {
    match parse_sm(sm) {
        Some((major, minor, true)) => (major, minor) == cc,
        Some((major, minor, false)) => major == cc.0 && minor <= cc.1,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::TempDir;

    const VECTOR_ADD: &str = include_str!("../../../dsl-examples/vector_add.tile");

    fn program() -> Program {
        Program::load(Source::Text {
            name: "vector_add.tile".into(),
            text: VECTOR_ADD.into(),
        })
        .unwrap()
    }

    fn target() -> Target {
        tile_driver::target("sm_90a").unwrap()
    }

    fn block(n: i64) -> Bindings {
        to_bindings(&[("BLOCK", ConstValue::Int(n))])
    }

    fn spec() -> Vec<ArgSpec> {
        vec![
            ArgSpec::of_ptr(0),
            ArgSpec::of_ptr(256),
            ArgSpec::of_ptr(512),
            ArgSpec::of_int(1000),
        ]
    }

    /// A debug build is another kernel under another key: matmul_tma's TMA ring, specialised
    /// as an aligned launch, has bounded waits (a printf and a trap each) only when asked.
    #[test]
    fn a_debug_build_has_its_own_key_and_bounded_waits() {
        let p = plan(&program(), "vector_add", &block(1024), None, &target(), None).unwrap();
        let base = p.base_key;
        assert_ne!(p.with_debug(true).base_key, base);
        let source = || Source::Static(include_str!("../../../dsl-examples/matmul.tile"));
        let bindings = [
            ("BM", ConstValue::Int(128)),
            ("BN", ConstValue::Int(256)),
            ("BK", ConstValue::Int(64)),
        ];
        // a, b, c aligned; M, N, K multiples of 16; unit innermost strides (TMA).
        let mut spec = vec![ArgSpec::of_ptr(0); 3];
        spec.extend([4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1].map(ArgSpec::of_int));
        let ptx = |debug| {
            let opts = crate::KernelOptions {
                num_warps: Some(8),
                debug,
            };
            jit_ptx(source(), "matmul_tma", &bindings, &opts, &target(), &spec).unwrap()
        };
        let (plain, debug) = (ptx(false), ptx(true));
        assert!(plain.contains("cp.async.bulk.tensor"), "not a TMA ring");
        assert!(!plain.contains("vprintf") && !plain.contains("trap;"));
        assert!(debug.contains("vprintf") && debug.contains("trap;") && debug.contains("%globaltimer"));
    }

    #[test]
    fn plan_reads_the_signature_and_default_warps() {
        let p = plan(&program(), "vector_add", &block(1024), None, &target(), None).unwrap();
        let sig: Vec<String> = p.params.iter().map(|p| p.to_string()).collect();
        assert_eq!(sig, ["x: *f32", "y: *f32", "out: *mut f32", "n: i32"]);
        assert_eq!(p.num_warps, 4);
        let p8 = plan(&program(), "vector_add", &block(1024), Some(8), &target(), None).unwrap();
        assert_eq!(p8.num_warps, 8);
        assert_ne!(p.base_key, p8.base_key);
    }

    #[test]
    fn the_grid_comes_from_the_kernels_grid_attribute() {
        use crate::args::Arg;
        use crate::jit::grid_of;
        let (prog, x) = (program(), Arg::fake_buffer(ir::DType::F32, true, 0));
        let p = plan(&prog, "vector_add", &block(1024), None, &target(), None).unwrap();
        let args = |n: i32| [x, x, x, Arg::i32(n)];
        assert_eq!(grid_of(&p, &prog, &args(1_000_000)).unwrap().0, [977, 1, 1]);
        assert_eq!(grid_of(&p, &prog, &args(0)).unwrap().0, [0, 1, 1]);
        let e = grid_of(&p, &prog, &args(-5000)).unwrap_err().to_string();
        assert!(
            e.contains("grid extent 0 is -4; it must be an integer from 0 to 2147483647"),
            "{e}"
        );
        assert!(e.contains("vector_add.tile:6:8"), "the expression's place: {e}");
        // A kernel without the attribute says so.
        let text = VECTOR_ADD.replace("#[grid(cdiv(n, BLOCK))]\n", "");
        let bare = Program::load(Source::Text {
            name: "v.tile".into(),
            text,
        })
        .unwrap();
        let p = plan(&bare, "vector_add", &block(1024), None, &target(), None).unwrap();
        let e = grid_of(&p, &bare, &args(10)).unwrap_err().to_string();
        assert!(e.contains("has no `#[grid(..)]` attribute"), "{e}");
    }

    #[test]
    fn a_cluster_kernel_needs_a_grid_of_whole_clusters() {
        let text = VECTOR_ADD.replace("#[grid(cdiv(n, BLOCK))]\n", "#[grid(cdiv(n, BLOCK))]\n#[cluster(4)]\n");
        let prog = Program::load(Source::Text {
            name: "v.tile".into(),
            text,
        })
        .unwrap();
        let p = plan(&prog, "vector_add", &block(1024), None, &target(), None).unwrap();
        assert!(p.check_grid([8, 1, 1]).is_ok());
        let e = p.check_grid([6, 1, 1]).unwrap_err().to_string();
        assert!(
            e.contains(
                "runs in clusters of 4 programs (`#[cluster(4)]`): the grid's first extent 6 is not a multiple of 4"
            ),
            "{e}"
        );
        // Programs that run alone take any grid.
        let p = plan(&program(), "vector_add", &block(1024), None, &target(), None).unwrap();
        assert!(p.check_grid([7, 1, 1]).is_ok());
    }

    #[test]
    fn check_errors_are_rendered_with_the_source() {
        let e = plan(&program(), "vector_add", &block(100), None, &target(), None)
            .err()
            .unwrap();
        let msg = e.to_string();
        assert!(matches!(e, JitError::Check { .. }), "{msg}");
        assert!(
            msg.starts_with("vector_add.tile: kernel `vector_add` does not compile:"),
            "{msg}"
        );
        assert!(msg.contains("BLOCK"), "{msg}");
        let e = plan(&program(), "nope", &block(256), None, &target(), None)
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("no kernel named `nope`; this file has vector_add"),
            "{e}"
        );
        let bad = Program::load(Source::Text {
            name: "bad.tile".into(),
            text: "kernel k( {".into(),
        })
        .unwrap();
        let e = plan(&bad, "k", &vec![], None, &target(), None).err().unwrap();
        assert!(
            e.to_string().starts_with("bad.tile: kernel `k` does not compile:"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_file_is_a_read_error() {
        let e = Program::load(Source::File("/nonexistent/k.tile".into())).err().unwrap();
        assert!(matches!(e, JitError::Read { .. }));
        assert!(e.to_string().starts_with("cannot read /nonexistent/k.tile:"), "{e}");
    }

    #[test]
    fn build_compiles_then_hits_the_disk_cache_then_recovers_from_corruption() {
        let dir = TempDir::new("build");
        let cache = DiskCache::new(&dir.0);
        let p = plan(&program(), "vector_add", &block(1024), None, &target(), None).unwrap();
        let (key, first, origin, report) = build(&p, &spec(), Some(&cache), None).unwrap();
        assert_eq!((origin, report), (Origin::Compiled, BuildReport::default()));
        assert!(first.ptx.contains(".entry vector_add"), "{}", first.ptx);
        assert_eq!(first.threads_per_block, 128);
        assert_eq!(first.specialization, "ddde");
        assert_eq!(first.cubin, None);

        // A second process (a fresh plan of the same source) reads what the first stored.
        let p2 = plan(&program(), "vector_add", &block(1024), None, &target(), None).unwrap();
        let (key2, second, origin, _) = build(&p2, &spec(), Some(&cache), None).unwrap();
        assert_eq!((key2, origin), (key, Origin::DiskCache));
        assert_eq!(second, first);

        // Truncate the PTX: detected, recompiled, stored again.
        let ptx_path = dir.0.join(format!("{}.ptx", key.hex()));
        std::fs::write(&ptx_path, &first.ptx[..10]).unwrap();
        let (_, third, origin, report) = build(&p2, &spec(), Some(&cache), None).unwrap();
        assert_eq!(origin, Origin::Compiled);
        assert!(report.corrupt.unwrap().contains("ptx has 10 bytes"));
        assert_eq!(third, first);
        assert_eq!(build(&p2, &spec(), Some(&cache), None).unwrap().2, Origin::DiskCache);

        // Another specialisation is another entry.
        let mut other = spec();
        other[3] = ArgSpec::of_int(1);
        let (key3, e3, origin, _) = build(&p2, &other, Some(&cache), None).unwrap();
        assert_ne!(key3, key);
        assert_eq!((origin, e3.specialization.as_str()), (Origin::Compiled, "ddd1"));
    }

    #[test]
    fn build_reports_an_unwritable_cache_and_still_compiles() {
        let dir = TempDir::new("unwritable");
        // A file where the cache directory should be.
        let blocker = dir.0.join("cache");
        std::fs::write(&blocker, "not a directory").unwrap();
        let p = plan(&program(), "vector_add", &block(256), None, &target(), None).unwrap();
        let (_, e, origin, report) = build(&p, &spec(), Some(&DiskCache::new(&blocker)), None).unwrap();
        assert_eq!(origin, Origin::Compiled);
        assert!(!e.ptx.is_empty());
        assert!(report.write_error.is_some());
    }

    #[test]
    fn build_assembles_a_cubin_when_ptxas_is_found() {
        let Some(ptxas) = tile_driver::find_ptxas() else {
            eprintln!("skipped: no ptxas (tests/setup.sh installs one)");
            return;
        };
        let dir = TempDir::new("cubin");
        let cache = DiskCache::new(&dir.0);
        let p = plan(&program(), "vector_add", &block(512), None, &target(), None).unwrap();
        let (_, e, _, _) = build(&p, &spec(), Some(&cache), Some(&ptxas)).unwrap();
        let cubin = e.cubin.clone().expect("a cubin");
        assert_eq!(&cubin[..4], b"\x7fELF");
        let (_, again, origin, _) = build(&p, &spec(), Some(&cache), Some(&ptxas)).unwrap();
        assert_eq!((origin, again.cubin), (Origin::DiskCache, Some(cubin)));
    }

    #[test]
    fn the_gpu_tests_mixed_kernel_compiles() {
        // tests/gpu.rs runs it on a GPU; make sure here that it checks and compiles.
        let mixed = Program::load(Source::Static(include_str!("../tests/kernels/mixed.tile"))).unwrap();
        let p = plan(&mixed, "mixed", &vec![], None, &target(), None).unwrap();
        let sig: Vec<String> = p.params.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            sig,
            ["x: *f16", "y: *bf16", "out: *mut f32", "s: f32", "b: i64", "n: i32"]
        );
        let spec = vec![ArgSpec::default(); 6];
        let (_, e, _, _) = build(&p, &spec, None, None).unwrap();
        assert!(e.ptx.contains(".entry mixed"));
    }

    #[test]
    fn targets_follow_the_compute_capability() {
        let sm = |cc| target_for(cc).map(|t| t.sm);
        assert_eq!(sm((9, 0)).unwrap(), "sm_90a");
        assert_eq!(sm((8, 0)).unwrap(), "sm_80");
        assert_eq!(sm((8, 6)).unwrap(), "sm_86");
        assert_eq!(sm((8, 7)).unwrap(), "sm_86");
        assert_eq!(sm((8, 9)).unwrap(), "sm_89");
        assert_eq!(sm((10, 0)).unwrap(), "sm_90");
        assert!(matches!(
            target_for((7, 5)),
            Err(JitError::UnsupportedGpu { major: 7, minor: 5 })
        ));
        assert!(ptx_runs_on("sm_90a", (9, 0)));
        assert!(!ptx_runs_on("sm_90a", (10, 0)));
        assert!(ptx_runs_on("sm_80", (9, 0)));
        assert!(!ptx_runs_on("sm_89", (8, 6)));
        assert!(cubin_runs_on("sm_80", (8, 9)));
        assert!(!cubin_runs_on("sm_80", (9, 0)));
        assert!(!cubin_runs_on("sm_90", (10, 0)));
        assert!(cubin_runs_on("sm_90a", (9, 0)));
    }

    #[test]
    fn a_cached_tuned_winner_replaces_the_models_choice_on_its_gpu() {
        use crate::tune::{self, Problem, TuneCache, TuneEntry, TuneKeyParts, TuneRequest};
        let dir = TempDir::new("tuned-winner");
        let gpu = ("Test GPU", (9, 0));
        // Store a winner as `tilec tune` would, for the largest bench case (n = 2^28).
        let src = tile_driver::Source::parse("vector_add.tile", VECTOR_ADD).unwrap();
        let (specs, _) = tile_lang::spec::parse_specs(&src.ast);
        let cases = tile_lang::spec::bench_cases(&specs[0]).unwrap();
        let case = cases.iter().max_by_key(|c| c.sizes[0].1).unwrap();
        let req = TuneRequest {
            source: VECTOR_ADD,
            kernel: "vector_add",
            pins: Pins::default(),
            problem: Problem::Case { spec: &specs[0], case },
        };
        let (choice, _) = tune::plan_choice(&req, &target()).unwrap();
        let file = tile_lang::syntax::parse(VECTOR_ADD).unwrap();
        let resolved = &choice.best().kernel.as_ref().unwrap().consts;
        let key = tune::tune_key(&TuneKeyParts {
            source: VECTOR_ADD,
            kernel: "vector_add",
            pins: &tune::key_pins(&file, "vector_add", resolved, &Pins::default()),
            bucket: &tune::problem_bucket(&req.problem).0,
            gpu_name: gpu.0,
            compute_capability: gpu.1,
            target_sm: target().sm,
            compiler_version: cache::COMPILER_VERSION,
        });
        let winner = tile_driver::Config {
            consts: block(256),
            num_warps: 2,
            num_stages: 1,
            split: 1,
        };
        let entry = TuneEntry {
            kernel: "vector_add".into(),
            config: winner.clone(),
            median_ms: 1.0,
            gpu: "Test GPU (9.0)".into(),
            bucket: String::new(),
        };
        TuneCache::new(&dir.0).store(&key, &entry).unwrap();
        let on = |name| TunedOn {
            gpu_name: name,
            compute_capability: gpu.1,
            cache_dir: &dir.0,
        };
        let p = plan(&program(), "vector_add", &vec![], None, &target(), Some(&on(gpu.0))).unwrap();
        assert_eq!((p.kernel.consts.clone(), p.num_warps), (winner.consts.clone(), 2));
        // Another GPU, or a binding the winner does not agree with: the model chooses.
        let model = plan(&program(), "vector_add", &vec![], None, &target(), None).unwrap();
        assert_ne!(
            (model.kernel.consts.clone(), model.num_warps),
            (winner.consts.clone(), 2)
        );
        let other = plan(
            &program(),
            "vector_add",
            &vec![],
            None,
            &target(),
            Some(&on("Other GPU")),
        )
        .unwrap();
        assert_eq!(other.base_key, model.base_key);
        let bound = plan(
            &program(),
            "vector_add",
            &block(1024),
            None,
            &target(),
            Some(&on(gpu.0)),
        )
        .unwrap();
        assert_eq!(bound.kernel.consts, block(1024));
    }

    const ROW_SCALE: &str = "#[grid(n_rows)]\n\
        #[requires(n_cols <= BLOCK)]\n\
        kernel row_scale<const BLOCK: i32 = next_pow2(n_cols), const R: i32 in [1, 2]>(x: *f32, out: *mut f32, n_rows: i32, n_cols: i32) {\n\
            let cols = arange(0, BLOCK);\n\
            let mask = cols < n_cols;\n\
            let row = program_id(0) * n_cols;\n\
            let v = load(x + row + cols, mask, other: 0.0);\n\
            store(out + row + cols, v * 2.0, mask);\n\
        }\n";

    fn row_scale() -> Program {
        Program::load(Source::Text {
            name: "row_scale.tile".into(),
            text: ROW_SCALE.into(),
        })
        .unwrap()
    }

    fn sizes(rows: i64, cols: i64) -> Sizes {
        Sizes(vec![("n_rows".into(), rows), ("n_cols".into(), cols)])
    }

    fn facts() -> Vec<ArgSpec> {
        vec![
            ArgSpec::of_ptr(0),
            ArgSpec::of_ptr(0),
            ArgSpec::of_int(4096),
            ArgSpec::of_int(1000),
        ]
    }

    fn value(p: &Plan, name: &str) -> Option<ConstValue> {
        p.kernel.consts.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// A launch's plan follows its sizes: the computed block follows the row, warps follow the
    /// work, and the parameter the computed value reads is known to the plan.
    #[test]
    fn plans_follow_the_launch() {
        let plan = |rows, cols| {
            plan_for_launch(
                &row_scale(),
                "row_scale",
                &Pins::default(),
                &target(),
                sizes(rows, cols),
                facts(),
                None,
            )
            .unwrap()
        };
        let (small, large) = (plan(4096, 1000), plan(4096, 30000));
        assert_eq!(value(&small, "BLOCK"), Some(ConstValue::Int(1024)));
        assert_eq!(value(&large, "BLOCK"), Some(ConstValue::Int(32768)));
        assert!(
            large.num_warps >= small.num_warps,
            "{} < {}",
            large.num_warps,
            small.num_warps
        );
        assert_ne!(small.base_key, large.base_key);
        assert_eq!(small.computed_reads, vec![3]);
        assert_eq!(small.requires.len(), 1);
        // The handle's own plan, without sizes: every integer counts as 4096.
        let fixed = plan_with_facts(&row_scale(), "row_scale", &vec![], None, &target(), None, Vec::new()).unwrap();
        assert_eq!(value(&fixed, "BLOCK"), Some(ConstValue::Int(4096)));
        // A launch on the caller's grid keeps the handle's choices, its block computed anew.
        let kept = plan_fixed(
            &row_scale(),
            "row_scale",
            &fixed,
            &target(),
            Sizes(vec![("n_cols".into(), 100)]),
        )
        .unwrap();
        assert_eq!(value(&kept, "BLOCK"), Some(ConstValue::Int(128)));
        assert_eq!(
            (kept.num_warps, value(&kept, "R")),
            (fixed.num_warps, value(&fixed, "R"))
        );
    }

    /// The model's plan for a bucket is kept in the cache directory and read back by the next
    /// process; a tuned winner for that bucket on this GPU replaces it.
    #[test]
    fn a_bucket_plan_is_kept_and_a_tuned_winner_wins() {
        let dir = TempDir::new("bucket-plan");
        let on = TunedOn {
            gpu_name: "Test GPU",
            compute_capability: (9, 0),
            cache_dir: &dir.0,
        };
        let pins = Pins::default();
        let first = plan_for_launch(
            &row_scale(),
            "row_scale",
            &pins,
            &target(),
            sizes(64, 1024),
            facts(),
            Some(&on),
        )
        .unwrap();
        let key = crate::tune::model_plan_key(ROW_SCALE, "row_scale", &pins, &sizes(64, 1024), &facts(), &target());
        let kept = match crate::tune::TuneCache::new(&dir.0).load(&key) {
            crate::tune::TuneLookup::Hit(e) => e.config,
            other => panic!("no plan kept: {other:?}"),
        };
        assert_eq!(
            (kept.num_warps, kept.consts.clone()),
            (first.num_warps, first.kernel.consts.clone())
        );
        // A winner `tilec tune` stored for the bucket (4 warps if the model chose otherwise).
        let warps = if first.num_warps == 4 { 2 } else { 4 };
        let file = tile_lang::syntax::parse(ROW_SCALE).unwrap();
        let tkey = crate::tune::tune_key(&crate::tune::TuneKeyParts {
            source: ROW_SCALE,
            kernel: "row_scale",
            pins: &crate::tune::key_pins(&file, "row_scale", &first.kernel.consts, &pins),
            bucket: &sizes(64, 1024).0,
            gpu_name: "Test GPU",
            compute_capability: (9, 0),
            target_sm: target().sm,
            compiler_version: cache::COMPILER_VERSION,
        });
        let winner = tile_driver::Config {
            consts: vec![("R".into(), ConstValue::Int(2))],
            num_warps: warps,
            num_stages: 1,
            split: 1,
        };
        crate::tune::TuneCache::new(&dir.0)
            .store(
                &tkey,
                &crate::tune::TuneEntry {
                    kernel: "row_scale".into(),
                    config: winner,
                    median_ms: 1.0,
                    gpu: "Test GPU (9.0)".into(),
                    bucket: String::new(),
                },
            )
            .unwrap();
        let tuned = plan_for_launch(
            &row_scale(),
            "row_scale",
            &pins,
            &target(),
            sizes(64, 1024),
            facts(),
            Some(&on),
        )
        .unwrap();
        assert_eq!(tuned.num_warps, warps);
        assert_eq!(value(&tuned, "R"), Some(ConstValue::Int(2)));
        assert_eq!(value(&tuned, "BLOCK"), Some(ConstValue::Int(1024)));
    }
}
