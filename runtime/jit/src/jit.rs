//! The JIT: kernel handles that check, specialise, compile or fetch from the caches, and launch.
//!
//! Three caches, from hot to cold: each [`JitKernel`] keeps its loaded specialisations by packed
//! argument tags in write-once slots read without a lock (the launch path: no hashing, no
//! allocation); the [`Jit`] keeps every loaded module in a `HashMap` keyed by the full cache key (shared by
//! handles of the same kernel); the disk cache keeps compiled PTX and cubins across processes.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use tile_driver::tma::MAX_TENSOR_MAPS;
use tile_driver::{ArgSpec, Target};
use tile_lang::ir::ConstValue;

use crate::args::{self, Arg, MAX_PARAMS, ParamSig};
use crate::cache::{CacheKey, DiskCache};
use crate::compile::{self, JitError, Origin, Plan, Program, Source};
use tile_runtime::{Function, Gpu, Image, Stream};

/// How a [`Jit`] compiles and caches. `JitOptions::default()` reads the environment: the disk
/// cache's location (see [`default_cache_dir`](crate::cache::default_cache_dir)) and ptxas
/// (`TILE_PTXAS`, `.tools/`, `PATH`).
#[derive(Clone, Debug)]
pub struct JitOptions {
    /// The target to compile for; `None` picks the newest one the GPU runs.
    pub target: Option<Target>,
    /// The disk cache's directory; `None` turns the disk cache off.
    pub cache_dir: Option<PathBuf>,
    /// ptxas, to load cubins rather than PTX (the driver then skips its own PTX compile, and
    /// ptxas's errors are clearer); `None` loads PTX.
    pub ptxas: Option<PathBuf>,
    /// Called after each specialisation a launch (or `prepare`, a graph capture, a node update)
    /// had to compile or read from the disk cache, with what it was and how long it took: a
    /// decode loop that compiles after its warm-up shows here. The default: a line on stderr
    /// per event when `TILE_LOG_COMPILES` is set (to anything but `0`), else nothing.
    pub on_compile: Option<CompileHook>,
}

impl Default for JitOptions {
    fn default() -> JitOptions {
        let log = std::env::var_os("TILE_LOG_COMPILES").is_some_and(|v| !v.is_empty() && v != "0");
        JitOptions {
            target: None,
            cache_dir: crate::cache::default_cache_dir(),
            ptxas: tile_driver::find_ptxas(),
            on_compile: log.then(CompileHook::stderr),
        }
    }
}

/// A specialisation made ready for a launch: compiled in this process or read from the disk
/// cache (a specialisation already loaded makes no event).
#[derive(Clone, Debug, PartialEq)]
pub struct CompileEvent {
    pub kernel: String,
    /// The plan's compile-time values, warps and stages.
    pub consts: Vec<(String, ConstValue)>,
    pub num_warps: u32,
    pub num_stages: u32,
    /// The argument facts specialised on, one tag per parameter (`ArgSpec::tag`).
    pub specialization: String,
    pub origin: Origin,
    /// From the plan to the loaded module: compile (or cache read) and load.
    pub elapsed: std::time::Duration,
}

impl std::fmt::Display for CompileEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.origin {
            Origin::Compiled => "compiled",
            Origin::DiskCache => "read from the disk cache",
        };
        write!(f, "tile: {what} `{}` [", self.kernel)?;
        for (n, v) in &self.consts {
            write!(f, "{n}={v} ")?;
        }
        write!(
            f,
            "warps={} stages={}; args {}] in {:.1} ms",
            self.num_warps,
            self.num_stages,
            self.specialization,
            self.elapsed.as_secs_f64() * 1e3
        )
    }
}

/// What [`JitOptions::on_compile`] calls (from the launching thread).
#[derive(Clone)]
pub struct CompileHook(pub Arc<dyn Fn(&CompileEvent) + Send + Sync>);

impl CompileHook {
    pub fn new(f: impl Fn(&CompileEvent) + Send + Sync + 'static) -> CompileHook {
        CompileHook(Arc::new(f))
    }

    /// A line on stderr per event.
    pub fn stderr() -> CompileHook {
        CompileHook::new(|e| eprintln!("{e}"))
    }
}

impl std::fmt::Debug for CompileHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompileHook(..)")
    }
}

/// Per-kernel choices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelOptions {
    /// Warps per block; `None`: the tuner's cached winner, else the static model's choice.
    pub num_warps: Option<u32>,
    /// A debug build: every mbarrier wait of a TMA pipeline gives up after 10 s, prints what it
    /// waited for and traps (the launch fails instead of hanging); slower, same results.
    pub debug: bool,
}

/// Counters of what a [`Jit`] did, for tests, logs and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JitStats {
    /// Specialisations compiled in this process.
    pub compiled: u64,
    /// Specialisations read from the disk cache.
    pub disk_hits: u64,
    /// Disk cache entries found corrupt (and replaced by a fresh compile).
    pub disk_corrupt: u64,
    /// Failed writes to the disk cache (the kernel still ran).
    pub disk_write_errors: u64,
}

#[derive(Default)]
struct Counters {
    compiled: AtomicU64,
    disk_hits: AtomicU64,
    disk_corrupt: AtomicU64,
    disk_write_errors: AtomicU64,
}

/// A kernel specialisation loaded on the GPU.
pub(crate) struct Loaded {
    pub(crate) func: Function,
    pub(crate) threads_per_block: u32,
    pub(crate) smem_bytes: u32,
    /// Tensor maps each launch passes after the arguments.
    tensor_maps: Vec<tile_driver::tma::TensorMap>,
    specialization: String,
    origin: Origin,
    from_cubin: bool,
}

/// A loaded specialisation, as [`JitKernel::prepare`] returns it.
#[derive(Clone)]
pub struct LoadedKernel(Arc<Loaded>);

impl LoadedKernel {
    pub fn name(&self) -> &str {
        &self.0.func.name
    }
    pub fn threads_per_block(&self) -> u32 {
        self.0.threads_per_block
    }
    /// Dynamic shared memory per block, in bytes.
    pub fn smem_bytes(&self) -> u32 {
        self.0.smem_bytes
    }
    /// How many tensor maps each launch encodes (or finds already encoded) and passes: one per
    /// descriptor whose loads the TMA engine copies in this specialisation.
    pub fn tensor_maps(&self) -> usize {
        self.0.tensor_maps.len()
    }
    pub fn registers(&self) -> i32 {
        self.0.func.registers
    }
    /// Local memory per thread (spills and stack), in bytes.
    pub fn local_bytes(&self) -> i32 {
        self.0.func.local_bytes
    }
    /// The specialisation tags, one per argument (`d`: divisible by 16, `1`: equal to 1).
    pub fn specialization(&self) -> &str {
        &self.0.specialization
    }
    /// Programs the GPU runs for each program of a launch's grid along axis 0: more than 1
    /// where the loop is split over a thread-block cluster (every launch of the JIT multiplies
    /// the grid by it; a launch through [`cu_function`](Self::cu_function) must too).
    pub fn split(&self) -> u32 {
        self.0.func.split
    }
    /// Whether this process compiled it or read it from the disk cache.
    pub fn origin(&self) -> Origin {
        self.0.origin
    }
    /// Whether the driver loaded a cubin (else PTX, which the driver compiled).
    pub fn from_cubin(&self) -> bool {
        self.0.from_cubin
    }
    /// The driver's handle, for launching through the driver API directly (benchmarks,
    /// interop); valid while the [`Jit`] lives.
    pub fn cu_function(&self) -> tile_runtime::CuFunction {
        self.0.func.cu_function()
    }
}

struct JitInner {
    gpu: Gpu,
    compute_capability: (i32, i32),
    program: Program,
    target: Target,
    cache: Option<DiskCache>,
    ptxas: Option<PathBuf>,
    /// Every loaded specialisation, by full cache key.
    loaded: Mutex<HashMap<CacheKey, Arc<Loaded>>>,
    /// Kernel handles by plan key, so that asking twice does not check the kernel twice.
    kernels: Mutex<HashMap<[u8; 32], Arc<KernelInner>>>,
    /// Tensor maps encoded for launches, by request.
    tensor_maps: crate::tma::TensorMapCache,
    counters: Counters,
    on_compile: Option<CompileHook>,
}

/// Compiles one `.tile` source on first use of each kernel and caches the results.
/// Cloning is cheap: clones share the caches.
#[derive(Clone)]
pub struct Jit {
    inner: Arc<JitInner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding a cache lock leaves the cache consistent (every insert
    // is one call), so keep using it rather than propagating the panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Jit {
    /// A JIT for `source` on `gpu`. Reads a file source now; parses and compiles nothing until a
    /// kernel is asked for.
    pub fn new(gpu: &Gpu, source: Source, opts: JitOptions) -> Result<Jit, JitError> {
        if opts.cache_dir.is_some() {
            crate::cache::max_bytes_from_env().map_err(JitError::Environment)?;
        }
        let cc = gpu.compute_capability()?;
        let target = match opts.target {
            Some(t) => {
                if !compile::ptx_runs_on(t.sm, cc) {
                    return Err(JitError::TargetMismatch {
                        target: t.sm.into(),
                        major: cc.0,
                        minor: cc.1,
                    });
                }
                t
            }
            None => compile::target_for(cc)?,
        };
        Ok(Jit {
            inner: Arc::new(JitInner {
                gpu: gpu.clone(),
                compute_capability: cc,
                program: Program::load(source)?,
                cache: opts.cache_dir.map(|d| {
                    let c = DiskCache::new(d);
                    // What crashed writers left behind an hour or more ago.
                    c.prune_temporaries(std::time::Duration::from_secs(3600));
                    c
                }),
                // A cubin the GPU cannot run is useless: load PTX instead.
                ptxas: opts.ptxas.filter(|_| compile::cubin_runs_on(target.sm, cc)),
                target,
                loaded: Mutex::new(HashMap::new()),
                kernels: Mutex::new(HashMap::new()),
                tensor_maps: Default::default(),
                counters: Counters::default(),
                on_compile: opts.on_compile,
            }),
        })
    }

    /// The handle of kernel `name` with its compile-time parameters bound (`[("BLOCK",
    /// ConstValue::Int(1024))]`). Checks the kernel (reporting its diagnostics); compiles
    /// nothing yet: each specialisation compiles on its first launch or [`JitKernel::prepare`].
    pub fn kernel(&self, name: &str, bindings: &[(&str, ConstValue)]) -> Result<JitKernel, JitError> {
        self.kernel_with(name, bindings, &KernelOptions::default())
    }

    /// [`Jit::kernel`] with per-kernel options.
    pub fn kernel_with(
        &self,
        name: &str,
        bindings: &[(&str, ConstValue)],
        opts: &KernelOptions,
    ) -> Result<JitKernel, JitError> {
        let j = &self.inner;
        let bindings = compile::to_bindings(bindings);
        let pk = compile::plan_key(&j.program, name, &bindings, opts.num_warps, &j.target);
        let pk = crate::cache::debug_key(pk, opts.debug);
        if let Some(k) = lock(&j.kernels).get(&pk) {
            return Ok(JitKernel {
                jit: j.clone(),
                inner: k.clone(),
            });
        }
        // The tuner keeps its winners beside the kernels, in the disk cache's directory.
        let gpu_name = j.gpu.name();
        let tuned = j.cache.as_ref().map(|c| compile::TunedOn {
            gpu_name: &gpu_name,
            compute_capability: j.compute_capability,
            cache_dir: c.dir(),
        });
        let plan = compile::plan(&j.program, name, &bindings, opts.num_warps, &j.target, tuned.as_ref())?
            .with_debug(opts.debug);
        let inner = lock(&j.kernels)
            .entry(pk)
            .or_insert_with(|| {
                Arc::new(KernelInner {
                    plan: Arc::new(plan),
                    pins: tile_driver::Pins {
                        split: None,
                        consts: bindings,
                        num_warps: opts.num_warps,
                        num_stages: None,
                    },
                    plans: Mutex::new(HashMap::new()),
                    specs: Specs::default(),
                })
            })
            .clone();
        Ok(JitKernel { jit: j.clone(), inner })
    }

    pub fn target(&self) -> &Target {
        &self.inner.target
    }

    pub fn cache_dir(&self) -> Option<&Path> {
        self.inner.cache.as_ref().map(|c| c.dir())
    }

    /// Whether specialisations are assembled to cubins (ptxas found, and its output runs here).
    pub fn uses_ptxas(&self) -> bool {
        self.inner.ptxas.is_some()
    }

    pub fn gpu(&self) -> &Gpu {
        &self.inner.gpu
    }

    pub fn stats(&self) -> JitStats {
        let c = &self.inner.counters;
        JitStats {
            compiled: c.compiled.load(Ordering::Relaxed),
            disk_hits: c.disk_hits.load(Ordering::Relaxed),
            disk_corrupt: c.disk_corrupt.load(Ordering::Relaxed),
            disk_write_errors: c.disk_write_errors.load(Ordering::Relaxed),
        }
    }
}

struct KernelInner {
    /// The plan made without the launch's sizes (`JitKernel::consts`): a kernel without
    /// `#[grid(..)]`, or launched on a grid of the caller's that its launch's own plan does not
    /// give, keeps its tunable values, warps and stages.
    plan: Arc<Plan>,
    /// What the handle was asked for: its bindings and warps, which every plan honours.
    pins: tile_driver::Pins,
    /// Plans by launch key ([`LaunchKey`]) and specialisation tags, made on first use.
    plans: Mutex<HashMap<(Box<[i64]>, u128), Arc<Plan>>>,
    specs: Specs,
}

/// What selects a launch's plan, besides the specialisation tags: whether the plan follows the
/// launch (1: the kernel has `#[grid(..)]`, and then each integer argument's bucket follows) or
/// keeps the handle's tunable values (0), then the exact value of every parameter a computed
/// compile-time value reads. Built on the stack: the launch path allocates nothing.
struct LaunchKey {
    words: [i64; LaunchKey::MAX],
    len: usize,
}

impl LaunchKey {
    const MAX: usize = 1 + 2 * MAX_PARAMS;

    fn new(plan: &Plan, args: &[Arg<'_>], follows_launch: bool) -> LaunchKey {
        let mut k = LaunchKey {
            words: [0; LaunchKey::MAX],
            len: 0,
        };
        k.push(follows_launch as i64);
        if follows_launch {
            for (i, (p, a)) in plan.params.iter().zip(args).enumerate() {
                if is_int_param(p) && !unspecialized(plan, i) {
                    k.push(tile_lang::check::launch::bucket(args::int_arg(a).unwrap_or(0)));
                }
            }
        }
        for &i in &plan.computed_reads {
            k.push(args.get(i).and_then(args::int_arg).unwrap_or(0));
        }
        k
    }

    fn push(&mut self, w: i64) {
        if self.len < LaunchKey::MAX {
            self.words[self.len] = w;
            self.len += 1;
        }
    }

    fn words(&self) -> &[i64] {
        &self.words[..self.len]
    }

    fn follows_launch(&self) -> bool {
        self.words[0] == 1
    }

    /// FNV-1a over the words: the slots' first comparison.
    fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for w in self.words() {
            for b in w.to_le_bytes() {
                h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }
}

/// What a launch with `args` specialises `plan` on: each argument's facts, none for the
/// parameters `#[no_specialize(..)]` names.
fn facts(plan: &Plan, args: &[Arg<'_>]) -> Vec<ArgSpec> {
    args.iter()
        .enumerate()
        .map(|(i, a)| args::arg_spec_unless(a, i, plan.unspecialized))
        .collect()
}

/// Whether parameter `i` of `plan` is kept out of specialisation and planning.
fn unspecialized(plan: &Plan, i: usize) -> bool {
    i < 64 && plan.unspecialized >> i & 1 == 1
}

fn is_int_param(p: &ParamSig) -> bool {
    p.elem.dtype().is_some_and(|d| d.is_int()) && !p.elem.is_ptr()
}

/// How many specialisations a handle finds without taking a lock.
const SLOTS: usize = 16;

/// A loaded specialisation with the plan it was compiled from and the launch key and tags
/// that select it.
pub(crate) struct SpecEntry {
    fingerprint: u64,
    tag: u128,
    key: Box<[i64]>,
    pub(crate) plan: Arc<Plan>,
    pub(crate) loaded: Arc<Loaded>,
}

impl SpecEntry {
    fn is(&self, fingerprint: u64, tag: u128, key: &[i64]) -> bool {
        self.fingerprint == fingerprint && self.tag == tag && *self.key == *key
    }
}

/// A handle's loaded specialisations by launch key and tags: the first [`SLOTS`] in slots
/// that are written once and never cleared (a lookup is one atomic load per slot, no lock, no
/// reference count), the rest in a list behind a lock.
#[derive(Default)]
struct Specs {
    slots: [OnceLock<Arc<SpecEntry>>; SLOTS],
    more: Mutex<Vec<Arc<SpecEntry>>>,
}

/// A loaded specialisation found for a launch: borrowed from a slot, or shared from the list.
pub(crate) enum Spec<'a> {
    Slot(&'a Arc<SpecEntry>),
    Shared(Arc<SpecEntry>),
}

impl std::ops::Deref for Spec<'_> {
    type Target = SpecEntry;
    fn deref(&self) -> &SpecEntry {
        match self {
            Spec::Slot(l) => l,
            Spec::Shared(l) => l,
        }
    }
}

impl Specs {
    fn find(&self, key: &LaunchKey, tag: u128) -> Option<Spec<'_>> {
        let (fp, words) = (key.fingerprint(), key.words());
        for s in &self.slots {
            match s.get() {
                Some(e) if e.is(fp, tag, words) => return Some(Spec::Slot(e)),
                Some(_) => {}
                // Slots fill in order: past the first empty one there is nothing.
                None => return None,
            }
        }
        lock(&self.more)
            .iter()
            .find(|e| e.is(fp, tag, words))
            .map(|e| Spec::Shared(e.clone()))
    }

    /// Keeps `entry` (or what another thread kept for its key meanwhile).
    fn insert(&self, entry: SpecEntry) -> Spec<'_> {
        let entry = Arc::new(entry);
        for s in &self.slots {
            let e = s.get_or_init(|| entry.clone());
            if e.is(entry.fingerprint, entry.tag, &entry.key) {
                return Spec::Slot(e);
            }
        }
        let mut more = lock(&self.more);
        if let Some(e) = more.iter().find(|e| e.is(entry.fingerprint, entry.tag, &entry.key)) {
            return Spec::Shared(e.clone());
        }
        more.push(entry.clone());
        Spec::Shared(entry)
    }
}

/// The plan a launch runs with, as [`JitKernel::plan_for`] reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchPlan {
    /// Every compile-time value (bound, chosen, computed from the launch).
    pub consts: Vec<(String, ConstValue)>,
    pub num_warps: u32,
    pub num_stages: u32,
}

/// One kernel of a [`Jit`] with its compile-time parameters bound. Cheap to clone; launches
/// from several threads are fine.
#[derive(Clone)]
pub struct JitKernel {
    jit: Arc<JitInner>,
    inner: Arc<KernelInner>,
}

/// [`JitKernel::grid_for`] for checked `args`: a pure function of the plan and the arguments.
pub(crate) fn grid_of(plan: &Plan, program: &Program, args: &[Arg<'_>]) -> Result<Grid, JitError> {
    use tile_lang::spec::Num;
    let error = |message: String| JitError::Grid {
        kernel: plan.kernel.name.clone(),
        message,
    };
    if plan.grid.is_empty() {
        return Err(error(
            "has no `#[grid(..)]` attribute to compute its launch grid from; pass the grid to `launch`".into(),
        ));
    }
    let env = |name: &str| -> Option<Num> {
        if let Some((_, v)) = plan.kernel.consts.iter().find(|(n, _)| n == name) {
            return match v {
                ConstValue::Int(i) => Some(Num::I(*i)),
                ConstValue::Bool(b) => Some(Num::I(*b as i64)),
                _ => None,
            };
        }
        plan.params
            .iter()
            .zip(args)
            .find(|(p, _)| p.name == name)
            .and_then(|(_, a)| args::int_arg(a))
            .map(Num::I)
    };
    let render = |d: tile_lang::diag::Diagnostic| {
        error(
            tile_lang::diag::render(&program.name, &program.text, &[d])
                .trim_end()
                .to_string(),
        )
    };
    let mut grid = [1u32; 3];
    for (axis, e) in plan.grid.iter().enumerate() {
        let limit = if axis == 0 { i32::MAX as i64 } else { 65535 };
        match tile_lang::spec::eval(e, &env) {
            Ok(Num::I(v)) if (0..=limit).contains(&v) => grid[axis] = v as u32,
            Ok(v) => {
                let v = match v {
                    Num::I(i) => i.to_string(),
                    Num::F(f) => f.to_string(),
                };
                return Err(render(
                    tile_lang::diag::Diagnostic::error(
                        e.span,
                        format!("grid extent {axis} is {v}; it must be an integer from 0 to {limit}"),
                    )
                    .label("for these arguments"),
                ));
            }
            Err(d) => return Err(render(d)),
        }
    }
    Ok(Grid(grid))
}

/// The launch grid, in programs (blocks). `From` a `u32`, a pair, a triple or `[u32; 3]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid(pub [u32; 3]);

impl From<u32> for Grid {
    fn from(x: u32) -> Grid {
        Grid([x, 1, 1])
    }
}
impl From<(u32, u32)> for Grid {
    fn from((x, y): (u32, u32)) -> Grid {
        Grid([x, y, 1])
    }
}
impl From<(u32, u32, u32)> for Grid {
    fn from((x, y, z): (u32, u32, u32)) -> Grid {
        Grid([x, y, z])
    }
}
impl From<[u32; 3]> for Grid {
    fn from(g: [u32; 3]) -> Grid {
        Grid(g)
    }
}

/// The most values one [`JitKernel::prepare_range`] call walks.
pub const MAX_PREPARED_VALUES: u64 = 1 << 20;

impl JitKernel {
    pub fn name(&self) -> &str {
        &self.inner.plan.kernel.name
    }

    /// The kernel's parameters, in order.
    pub fn params(&self) -> &[ParamSig] {
        &self.inner.plan.params
    }

    /// Warps of the handle's plan (made without the launch's sizes; see [`JitKernel::consts`]).
    pub fn num_warps(&self) -> u32 {
        self.inner.plan.num_warps
    }

    /// Stages of the handle's plan (see [`JitKernel::consts`]).
    pub fn num_stages(&self) -> u32 {
        self.inner.plan.num_stages
    }

    /// The compile-time values of the handle's plan, made without the launch's sizes: the
    /// bindings given, and for the rest the tuner's cached winner on this GPU if `tilec tune` or
    /// `tilec bench` left one in the cache directory, else the static model's choice for the
    /// file's largest bench case (computed values as for integer arguments of 4096). A launch
    /// of a kernel with `#[grid(..)]` runs the plan made for its own sizes instead
    /// ([`JitKernel::plan_for`]); a launch of a kernel without one keeps these values, its
    /// computed values evaluated with its arguments. Read `BLOCK` here to size the grid of a
    /// kernel without `#[grid(..)]`.
    pub fn consts(&self) -> &[(String, ConstValue)] {
        &self.inner.plan.kernel.consts
    }

    /// The plan a launch with `args` (checked first) runs: for a kernel with `#[grid(..)]`, the
    /// one made for the bucket of its integer arguments (each rounded up to a power of two),
    /// else the handle's with its computed values evaluated for `args`. Plans nothing twice.
    pub fn plan_for(&self, args: &[Arg<'_>]) -> Result<LaunchPlan, JitError> {
        self.check(args)?;
        let plan = self.plan_of(args, None)?;
        Ok(LaunchPlan {
            consts: plan.kernel.consts.clone(),
            num_warps: plan.num_warps,
            num_stages: plan.num_stages,
        })
    }

    /// Whether `other` is a handle of the same kernel of the same JIT (its bindings may differ).
    pub fn same_kernel(&self, other: &JitKernel) -> bool {
        Arc::ptr_eq(&self.jit, &other.jit) && self.name() == other.name()
    }

    /// Checks `args` against the signature without launching.
    pub fn check(&self, args: &[Arg<'_>]) -> Result<(), args::ArgError> {
        args::check_args(self.name(), self.params(), args)
    }

    /// Whether the kernel declares its launch grid (`#[grid(..)]`), and so is planned for each
    /// launch's sizes.
    pub fn has_grid(&self) -> bool {
        !self.inner.plan.grid.is_empty()
    }

    /// The launch grid the kernel's `#[grid(..)]` gives for `args` (checked first) under the
    /// plan made for them: its expressions evaluated with the plan's constants and the integer
    /// scalar arguments. An extent past the hardware's limit (2^31 - 1 for x, 65535 for y and z)
    /// or negative is an error pointing at the expression.
    pub fn grid_for(&self, args: &[Arg<'_>]) -> Result<Grid, JitError> {
        self.check(args)?;
        let plan = self.plan_of(args, None)?;
        grid_of(&plan, &self.jit.program, args)
    }

    /// Checks `args`, then compiles (or fetches from a cache) and loads the specialisation they
    /// select, without launching: a way to take the compile out of the first launch.
    pub fn prepare(&self, args: &[Arg<'_>]) -> Result<LoadedKernel, JitError> {
        self.check(args)?;
        self.resolve(args, None).map(|s| LoadedKernel(s.loaded.clone()))
    }

    /// Prepares ([`JitKernel::prepare`]) every specialisation that launches with `args` select
    /// while the integer parameter `param` takes each value of `values`, the other arguments as
    /// given: a decode loop whose token count advances compiles all its variants before its
    /// first step instead of in the middle of generation. The variants are what the value
    /// decides: its specialisation facts (equal to 1, a multiple of 16 or of 8, neither) unless
    /// `#[no_specialize]` names the parameter, and for a kernel with `#[grid(..)]` the plan of
    /// each power-of-two bucket. Returns how many distinct kernels the range needs (each
    /// compiled once, or found in the caches). A value the parameter's dtype cannot hold, that
    /// breaks a `#[requires(..)]` clause or that the buffers given are too short for is an error
    /// naming it; at most [`MAX_PREPARED_VALUES`] values.
    ///
    /// ```no_run
    /// # use tile_jit::{Arg, DeviceTensor, JitError, JitKernel};
    /// # fn demo(k: &JitKernel, q: &DeviceTensor<f32>) -> Result<(), JitError> {
    /// // Every token count from 1 to 4096: compiled now, none during the decode loop.
    /// let variants = k.prepare_range(&[Arg::buf(q), Arg::i32(1)], "seq_len", 1..=4096)?;
    /// # let _ = variants;
    /// # Ok(())
    /// # }
    /// ```
    pub fn prepare_range(
        &self,
        args: &[Arg<'_>],
        param: &str,
        values: std::ops::RangeInclusive<i64>,
    ) -> Result<usize, JitError> {
        self.check(args)?;
        let bad = |message: String| JitError::PrepareRange {
            kernel: self.name().to_string(),
            message,
        };
        let params = self.params();
        let names = || {
            params
                .iter()
                .filter(|p| matches!(p.elem, tile_lang::ir::Elem::Scalar(d) if d.is_int()))
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (index, dtype) = params
            .iter()
            .enumerate()
            .find_map(|(i, p)| match p.elem {
                tile_lang::ir::Elem::Scalar(d) if p.name == param && d.is_int() => Some((i, d)),
                _ => None,
            })
            .ok_or_else(|| {
                bad(format!(
                    "no integer parameter `{param}`; its integer parameters are: {}",
                    names()
                ))
            })?;
        let count = (*values.end() as i128 - *values.start() as i128 + 1).max(0);
        if count > MAX_PREPARED_VALUES as i128 {
            return Err(bad(format!(
                "{}..={} is {count} values; prepare at most {MAX_PREPARED_VALUES} at once (split the range, or prepare the values used)",
                values.start(),
                values.end()
            )));
        }
        let (lo, hi) = tile_lang::ir::scalar::int_range(dtype);
        if (*values.start() as i128) < lo || *values.end() as i128 > hi {
            return Err(bad(format!(
                "`{param}: {dtype}` holds {lo}..={hi}; the range {}..={} does not fit",
                values.start(),
                values.end()
            )));
        }
        let mut args = args.to_vec();
        let mut seen = std::collections::HashSet::new();
        for v in values {
            args[index] = Arg::scalar_bits(dtype, v as u64);
            let spec = self
                .check(&args)
                .map_err(JitError::from)
                .and_then(|()| self.resolve(&args, None))
                .map_err(|e| bad(format!("with `{param}` = {v}: {e}")))?;
            seen.insert(Arc::as_ptr(&spec.loaded));
        }
        Ok(seen.len())
    }

    /// Launches on `grid` programs and waits for the kernel to finish.
    pub fn launch(&self, grid: impl Into<Grid>, args: &[Arg<'_>]) -> Result<(), JitError> {
        self.launch_async(grid, args)?;
        Ok(self.jit.gpu.synchronize()?)
    }

    /// Enqueues a launch on `grid` programs and returns without waiting; the kernel's own
    /// errors surface at the next synchronisation ([`Gpu::synchronize`], a download). A grid
    /// with no programs launches nothing. Tensors passed may be dropped at once: the stream
    /// frees them after the kernel.
    pub fn launch_async(&self, grid: impl Into<Grid>, args: &[Arg<'_>]) -> Result<(), JitError> {
        self.launch_on(self.jit.gpu.stream(), grid, args)
    }

    /// Whether `grid` can launch this kernel (see `Plan::check_grid`).
    pub(crate) fn check_grid(&self, grid: [u32; 3]) -> Result<(), JitError> {
        self.inner.plan.check_grid(grid)
    }

    /// Enqueues a launch on `stream` (see [`JitKernel::launch_async`]). The buffers passed are
    /// noted as used on `stream`, so that freeing them waits for this kernel.
    pub fn launch_on(&self, stream: &Stream, grid: impl Into<Grid>, args: &[Arg<'_>]) -> Result<(), JitError> {
        let Grid(grid) = grid.into();
        self.check(args)?;
        if grid.contains(&0) {
            return Ok(());
        }
        self.check_grid(grid)?;
        let spec = self.resolve(args, Some(grid))?;
        self.enqueue(stream, &spec.loaded, grid, args)
    }

    /// Enqueues a launch on `stream` on the grid the kernel's `#[grid(..)]` gives for `args`
    /// under the plan made for them: one lookup for the plan and the grid (what the typed
    /// launchers call). A kernel without `#[grid(..)]` is an error.
    pub fn launch_planned_on(&self, stream: &Stream, args: &[Arg<'_>]) -> Result<(), JitError> {
        self.check(args)?;
        let spec = self.resolve(args, None)?;
        let Grid(grid) = grid_of(&spec.plan, &self.jit.program, args)?;
        if grid.contains(&0) {
            return Ok(());
        }
        self.check_grid(grid)?;
        self.enqueue(stream, &spec.loaded, grid, args)
    }

    /// [`JitKernel::launch_planned_on`] on the default stream, waiting for the kernel.
    pub fn launch_planned(&self, args: &[Arg<'_>]) -> Result<(), JitError> {
        self.launch_planned_on(self.jit.gpu.stream(), args)?;
        Ok(self.jit.gpu.synchronize()?)
    }

    fn enqueue(&self, stream: &Stream, loaded: &Loaded, grid: [u32; 3], args: &[Arg<'_>]) -> Result<(), JitError> {
        for o in args.iter().filter_map(|a| a.owner) {
            o.used_on(stream)?;
        }
        self.with_params(loaded, args, |params| {
            // SAFETY: the arguments were checked against the kernel's signature: one value per
            // parameter, each as wide as the parameter or wider (the driver reads the parameter's
            // width from the slot's start: the low bytes on a little-endian host); device
            // addresses come from live tensors, which are freed only after the work on this
            // stream.
            unsafe {
                self.jit.gpu.launch_raw(
                    stream,
                    &loaded.func,
                    grid,
                    loaded.threads_per_block,
                    loaded.smem_bytes,
                    params,
                )
            }
        })??;
        Ok(())
    }

    /// Calls `f` with one pointer per parameter of a launch of `loaded` with checked `args`, each
    /// to its value: the arguments in 64-bit slots, then the tensor maps of descriptors the TMA
    /// engine reads. Everything lives on this stack frame (the maps, if any, on the heap); the
    /// driver copies the values during the call.
    pub(crate) fn with_params<R>(
        &self,
        loaded: &Loaded,
        args: &[Arg<'_>],
        f: impl FnOnce(&mut [*mut c_void]) -> R,
    ) -> Result<R, JitError> {
        use std::mem::MaybeUninit;
        let n = args.len();
        // Left uninitialised past what a launch uses (no zeroing of a kilobyte per launch).
        let mut values = [MaybeUninit::<u64>::uninit(); MAX_PARAMS];
        for (v, a) in values.iter_mut().zip(args) {
            v.write(args::value(a));
        }
        let mut maps = Vec::new();
        if !loaded.tensor_maps.is_empty() {
            let int = |i: usize| match args.get(i)?.kind {
                args::ArgKind::Scalar { dtype, bits } if dtype.is_int() => Some(args::int_value(dtype, bits)),
                _ => None,
            };
            let addr = |i: usize| match args.get(i)?.kind {
                args::ArgKind::Buffer { addr, bytes, .. } => Some((addr, bytes)),
                _ => None,
            };
            for m in &loaded.tensor_maps {
                let r = crate::tma::request(m, &int, &addr).map_err(tile_runtime::RuntimeError::TensorMap)?;
                maps.push(self.jit.tensor_maps.get(&self.jit.gpu, &r)?);
            }
        }
        let mut ptrs = [MaybeUninit::<*mut c_void>::uninit(); MAX_PARAMS + MAX_TENSOR_MAPS];
        for (p, v) in ptrs.iter_mut().zip(values.iter_mut()).take(n) {
            p.write(v.as_mut_ptr().cast());
        }
        for (p, m) in ptrs[n..].iter_mut().zip(&maps) {
            p.write(m.as_param());
        }
        let used = n + maps.len();
        // SAFETY: the first `used` pointers were written just above (`n` values, then one per map).
        let ptrs = unsafe { &mut *(&mut ptrs[..used] as *mut [MaybeUninit<*mut c_void>] as *mut [*mut c_void]) };
        Ok(f(ptrs))
    }

    /// The plan and loaded specialisation for checked `args` launched on `grid` (`None`: the
    /// grid the plan's `#[grid(..)]` gives): from this handle's slots, else planned (or found
    /// planned) and loaded from the JIT's map, the disk cache, or a fresh compile, in that
    /// order. A kernel with `#[grid(..)]` runs the plan made for the launch's buckets, unless the
    /// caller's grid is not the one that plan gives (a grid sized from [`JitKernel::consts`]):
    /// then the handle's plan. The launch must satisfy the kernel's `#[requires(..)]`.
    pub(crate) fn resolve(&self, args: &[Arg<'_>], grid: Option<[u32; 3]>) -> Result<Spec<'_>, JitError> {
        let base = &self.inner.plan;
        let tag = args::spec_key(args, base.unspecialized);
        let shaped = !base.grid.is_empty();
        let mut spec = self.find_or_load(&LaunchKey::new(base, args, shaped), tag, args)?;
        if shaped
            && let Some(g) = grid
            && grid_of(&spec.plan, &self.jit.program, args)?.0 != g
        {
            spec = self.find_or_load(&LaunchKey::new(base, args, false), tag, args)?;
        }
        self.check_requires(&spec.plan, args)?;
        Ok(spec)
    }

    /// The loaded specialisation for checked `args` with a graph node's grid (graphs update
    /// nodes through it).
    pub(crate) fn specialization(&self, args: &[Arg<'_>], grid: [u32; 3]) -> Result<Spec<'_>, JitError> {
        self.resolve(args, Some(grid))
    }

    /// The plan of a launch with `args` on `grid` (`None`: its own), without loading anything.
    fn plan_of(&self, args: &[Arg<'_>], grid: Option<[u32; 3]>) -> Result<Arc<Plan>, JitError> {
        let base = &self.inner.plan;
        let tag = args::spec_key(args, base.unspecialized);
        let shaped = !base.grid.is_empty();
        let mut plan = self.plan_for_key(&LaunchKey::new(base, args, shaped), tag, args)?;
        if shaped
            && let Some(g) = grid
            && grid_of(&plan, &self.jit.program, args)?.0 != g
        {
            plan = self.plan_for_key(&LaunchKey::new(base, args, false), tag, args)?;
        }
        self.check_requires(&plan, args)?;
        Ok(plan)
    }

    /// The kernel's `#[requires(..)]` clauses under `plan`'s constants and `args`, and its
    /// descriptors against the buffers they are made of.
    fn check_requires(&self, plan: &Plan, args: &[Arg<'_>]) -> Result<(), JitError> {
        args::check_extents(&plan.kernel.name, &plan.params, &plan.extents, args)?;
        if plan.requires.is_empty() {
            return Ok(());
        }
        let int_arg = |name: &str| {
            plan.params
                .iter()
                .zip(args)
                .find(|(p, _)| p.name == name)
                .and_then(|(_, a)| args::int_arg(a))
        };
        tile_lang::check::launch::check_requirements(&plan.requires, &plan.kernel.consts, &int_arg).map_err(|d| {
            let program = &self.jit.program;
            JitError::Requires {
                kernel: plan.kernel.name.clone(),
                rendered: tile_lang::diag::render(&program.name, &program.text, &[d])
                    .trim_end()
                    .to_string(),
            }
        })
    }

    fn find_or_load(&self, key: &LaunchKey, tag: u128, args: &[Arg<'_>]) -> Result<Spec<'_>, JitError> {
        if let Some(s) = self.inner.specs.find(key, tag) {
            return Ok(s);
        }
        let plan = self.plan_for_key(key, tag, args)?;
        let spec = facts(&plan, args);
        let loaded = self.load(&plan, &spec)?;
        Ok(self.inner.specs.insert(SpecEntry {
            fingerprint: key.fingerprint(),
            tag,
            key: key.words().into(),
            plan,
            loaded,
        }))
    }

    /// The plan for a launch key: the handle's own when nothing is computed from the launch
    /// and the plan does not follow it, else planned once per key and tags (no lock held while
    /// planning).
    fn plan_for_key(&self, key: &LaunchKey, tag: u128, args: &[Arg<'_>]) -> Result<Arc<Plan>, JitError> {
        let base = &self.inner.plan;
        if key.words() == [0] {
            return Ok(base.clone());
        }
        let map_key: (Box<[i64]>, u128) = (key.words().into(), tag);
        if let Some(p) = lock(&self.inner.plans).get(&map_key) {
            return Ok(p.clone());
        }
        let j = &self.jit;
        let name = &base.kernel.name;
        // Each integer argument by its bucket, except those a computed value reads exactly.
        let sizes = tile_lang::check::Sizes(
            base.params
                .iter()
                .zip(args)
                .enumerate()
                // A parameter kept out of planning counts as the planner's default size.
                .filter(|(i, (p, _))| is_int_param(p) && !unspecialized(base, *i))
                .map(|(i, (p, a))| {
                    let v = args::int_arg(a).unwrap_or(0);
                    let exact = base.computed_reads.contains(&i);
                    (
                        p.name.clone(),
                        if exact || !key.follows_launch() {
                            v
                        } else {
                            tile_lang::check::launch::bucket(v)
                        },
                    )
                })
                .filter(|(n, _)| key.follows_launch() || base.computed_reads.iter().any(|&i| base.params[i].name == *n))
                .collect(),
        );
        let plan = if key.follows_launch() {
            let gpu_name = j.gpu.name();
            let tuned = j.cache.as_ref().map(|c| compile::TunedOn {
                gpu_name: &gpu_name,
                compute_capability: j.compute_capability,
                cache_dir: c.dir(),
            });
            let facts = facts(base, args);
            compile::plan_for_launch(
                &j.program,
                name,
                &self.inner.pins,
                &j.target,
                sizes,
                facts,
                tuned.as_ref(),
            )?
            .with_debug(base.debug)
        } else {
            compile::plan_fixed(&j.program, name, base, &j.target, sizes)?
        };
        let plan = Arc::new(plan);
        Ok(lock(&self.inner.plans).entry(map_key).or_insert(plan).clone())
    }

    /// Slow path: no lock is held while compiling, so other kernels keep launching.
    fn load(&self, plan: &Plan, spec: &[ArgSpec]) -> Result<Arc<Loaded>, JitError> {
        let j = &self.jit;
        let key = crate::cache::specialize(&plan.base_key, spec);
        if let Some(l) = lock(&j.loaded).get(&key) {
            return Ok(l.clone());
        }
        let started = std::time::Instant::now();
        let (key, entry, origin, report) = compile::build(plan, spec, j.cache.as_ref(), j.ptxas.as_deref())?;
        let c = &j.counters;
        match origin {
            Origin::Compiled => c.compiled.fetch_add(1, Ordering::Relaxed),
            Origin::DiskCache => c.disk_hits.fetch_add(1, Ordering::Relaxed),
        };
        if report.corrupt.is_some() {
            c.disk_corrupt.fetch_add(1, Ordering::Relaxed);
        }
        if report.write_error.is_some() {
            c.disk_write_errors.fetch_add(1, Ordering::Relaxed);
        }
        let (func, from_cubin) = match &entry.cubin {
            Some(cubin) if compile::cubin_runs_on(&entry.target_sm, j.compute_capability) => {
                match j
                    .gpu
                    .load(Image::Cubin(cubin), &entry.kernel, entry.smem_bytes, entry.split)
                {
                    Ok(f) => (f, true),
                    // A cubin the driver refuses (another ptxas, say) still leaves the PTX.
                    Err(_) => (
                        j.gpu
                            .load(Image::Ptx(&entry.ptx), &entry.kernel, entry.smem_bytes, entry.split)?,
                        false,
                    ),
                }
            }
            _ => (
                j.gpu
                    .load(Image::Ptx(&entry.ptx), &entry.kernel, entry.smem_bytes, entry.split)?,
                false,
            ),
        };
        if let Some(hook) = &j.on_compile {
            hook.0(&CompileEvent {
                kernel: plan.kernel.name.clone(),
                consts: plan.kernel.consts.clone(),
                num_warps: plan.num_warps,
                num_stages: plan.num_stages,
                specialization: crate::args::spec_tags(spec),
                origin,
                elapsed: started.elapsed(),
            });
        }
        let loaded = Arc::new(Loaded {
            func,
            threads_per_block: entry.threads_per_block,
            smem_bytes: entry.smem_bytes,
            tensor_maps: entry.tensor_maps,
            specialization: entry.specialization,
            origin,
            from_cubin,
        });
        Ok(lock(&j.loaded).entry(key).or_insert(loaded).clone())
    }
}
