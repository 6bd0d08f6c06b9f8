//! The autotuner: for when the static model (`tile_opt::config`) is not enough.
//!
//! It takes the model's feasible candidates in the model's order (its choice first, then by
//! estimated time), times the first `top_k` of them on the GPU with CUDA events (the L2 flushed
//! before each run, as `tilec bench` does), and returns the fastest with every timing. The
//! winner is cached on disk, one small file per key, under the JIT's cache directory
//! (`DIR/tune/KEY.tune`, DIR as in [`crate::cache::default_cache_dir`]).
//!
//! The key is the SHA-256 of: the source text, the kernel, the pins (the user's and the
//! problem's fixed values, such as dtypes), the problem's sizes each rounded up to a power of
//! two (the *shape bucket*: timings of one size stand for nearby ones, and a cache keyed by
//! exact sizes would never hit for varying batch sizes), the GPU's name and compute capability,
//! the codegen target and the compiler's version. A corrupt or foreign entry (checksum, key or
//! format mismatch) is ignored and the kernel is re-tuned.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tile_driver::{ArgSpec, Target};
use tile_lang::check::{Bindings, Sizes};
use tile_lang::ir::Scalar;
use tile_lang::ir::{ConstValue, DType, Kernel};
use tile_lang::spec::{self, Case, PlanArg, RunSpec};
use tile_lang::syntax::{self, ast};
use tile_opt::config::{self, Choice, Config, ConfigError, Pins, TargetDesc};

use crate::cache::{self, COMPILER_VERSION, write_atomic};
use tile_runtime::TimingOptions;
use tile_runtime::{DeviceBuffer, Gpu, Image, KernelArg, RuntimeError};

/// Bump when the entry layout or the key's meaning changes: part of every key.
pub const TUNE_FORMAT: u32 = 2;

/// The problem the candidates are timed on.
pub enum Problem<'a> {
    /// A run spec's case (typically its largest `bench(..)` case): buffers shaped and filled as
    /// its `args(..)` say, the grid from its `grid(..)` evaluated with each candidate's values.
    Case { spec: &'a RunSpec, case: &'a Case },
    /// Explicit arguments, the same for every candidate, and the grid of each candidate.
    /// `sizes` name the problem for the cache key (bucketed like a case's sizes).
    Launch {
        args: &'a [KernelArg<'a>],
        grid: &'a dyn Fn(&Config) -> [u32; 3],
        sizes: &'a [(String, i64)],
    },
}

/// What to tune.
pub struct TuneRequest<'a> {
    pub source: &'a str,
    pub kernel: &'a str,
    pub pins: Pins,
    pub problem: Problem<'a>,
}

/// How to tune.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    pub target: Target,
    /// ptxas, to load cubins (else the driver JIT-compiles the PTX).
    pub ptxas: Option<PathBuf>,
    /// Candidates timed, in the model's order; `None`: every feasible or near-budget one (an exhaustive sweep).
    pub top_k: Option<usize>,
    pub timing: TimingOptions,
    /// Where winners are cached; `None`: no disk cache.
    pub cache_dir: Option<PathBuf>,
    /// Return a cached winner without timing anything (false: always time, then cache).
    pub read_cache: bool,
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
}

impl TuneOptions {
    /// Top 4, default timing, the JIT's cache directory, cache read, progress bar on.
    pub fn new(target: Target) -> TuneOptions {
        TuneOptions {
            target,
            ptxas: tile_driver::find_ptxas(),
            top_k: Some(4),
            timing: TimingOptions::default(),
            cache_dir: cache::default_cache_dir(),
            read_cache: true,
            progress: true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("the source does not parse: {0}")]
    Parse(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the cost model has no figures for {0}; tune for sm_90 or sm_90a")]
    NoModel(String),
    #[error("the run spec's case cannot be planned: {0}")]
    Spec(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("no candidate could be timed (first: {0})")]
    NothingTimed(String),
}

/// One timed (or failed) candidate.
#[derive(Clone, Debug)]
pub struct Timed {
    pub config: Config,
    /// Its index in [`Tuned::choice`]'s candidates.
    pub candidate: usize,
    /// The model's estimate, in seconds.
    pub estimate_s: f64,
    /// Median milliseconds, or why it could not be compiled, loaded or run.
    pub median_ms: Result<f64, String>,
    /// Registers per thread as the driver reports them (0 when not loaded).
    pub registers: i32,
}

/// The tuner's outcome.
#[derive(Clone, Debug)]
pub struct Tuned {
    /// The model's choice and every candidate.
    pub choice: Choice,
    /// The pins the candidates were enumerated with (the request's and the case's fixed values).
    pub pins: Pins,
    /// Timed candidates, in the model's order (the model's choice first); empty on a cache hit.
    pub timed: Vec<Timed>,
    pub winner: Config,
    pub winner_ms: f64,
    pub from_cache: bool,
    pub key: TuneKey,
    /// The cache file (absent without a cache directory).
    pub cache_path: Option<PathBuf>,
    /// Something about the cache worth telling (a corrupt entry ignored, a failed write).
    pub cache_note: Option<String>,
}

impl Tuned {
    /// The model's choice's time (absent on a cache hit or when it failed).
    pub fn static_ms(&self) -> Option<f64> {
        self.timed
            .iter()
            .find(|t| t.candidate == self.choice.chosen)
            .and_then(|t| t.median_ms.clone().ok())
    }
}

// ---------------------------------------------------------------------------------------------
// Keys, buckets and the cache file (pure: tested without a GPU).

/// Each size rounded up to a power of two (sizes below 1 count as 1).
pub fn shape_bucket(sizes: &[(String, i64)]) -> Vec<(String, i64)> {
    sizes
        .iter()
        .map(|(n, v)| (n.clone(), ((*v).max(1) as u64).next_power_of_two() as i64))
        .collect()
}

/// A tuning cache key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TuneKey(pub [u8; 32]);

impl TuneKey {
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

/// Everything a tuned winner depends on.
#[derive(Clone, Debug)]
pub struct TuneKeyParts<'a> {
    pub source: &'a str,
    pub kernel: &'a str,
    pub pins: &'a Pins,
    /// Already bucketed ([`shape_bucket`]).
    pub bucket: &'a [(String, i64)],
    pub gpu_name: &'a str,
    pub compute_capability: (i32, i32),
    pub target_sm: &'a str,
    pub compiler_version: &'a str,
}

fn put_str(h: &mut Sha256, s: &str) {
    // Length-prefixed, so that no two different field sequences hash the same bytes.
    h.update((s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

pub fn tune_key(p: &TuneKeyParts<'_>) -> TuneKey {
    let mut h = Sha256::new();
    h.update(b"tile-tune");
    h.update(TUNE_FORMAT.to_le_bytes());
    put_str(&mut h, p.compiler_version);
    h.update(cache::source_digest(p.source));
    put_str(&mut h, p.kernel);
    // Pins are a set: the order they were given in does not change the problem.
    let mut consts: Vec<&(String, ConstValue)> = p.pins.consts.iter().collect();
    consts.sort_by(|a, b| a.0.cmp(&b.0));
    h.update((consts.len() as u64).to_le_bytes());
    for (n, v) in consts {
        put_str(&mut h, n);
        put_str(&mut h, &encode_value(v));
    }
    for pin in [p.pins.num_warps, p.pins.num_stages] {
        match pin {
            Some(v) => {
                h.update([1]);
                h.update(v.to_le_bytes());
            }
            None => h.update([0]),
        }
    }
    let mut bucket: Vec<&(String, i64)> = p.bucket.iter().collect();
    bucket.sort_by(|a, b| a.0.cmp(&b.0));
    h.update((bucket.len() as u64).to_le_bytes());
    for (n, v) in bucket {
        put_str(&mut h, n);
        h.update(v.to_le_bytes());
    }
    put_str(&mut h, p.gpu_name);
    h.update(p.compute_capability.0.to_le_bytes());
    h.update(p.compute_capability.1.to_le_bytes());
    put_str(&mut h, p.target_sm);
    TuneKey(h.finalize().into())
}

/// A value as the cache file writes it, typed so that `1024` and `1024.0` stay apart.
fn encode_value(v: &ConstValue) -> String {
    match v {
        ConstValue::Int(i) => format!("i:{i}"),
        // Bits, so that the value reads back exactly.
        ConstValue::Float(f) => format!("f:{:016x}", f.to_bits()),
        ConstValue::Bool(b) => format!("b:{b}"),
        ConstValue::DType(d) => format!("t:{}", d.name()),
    }
}

fn decode_value(s: &str) -> Option<ConstValue> {
    let (tag, v) = s.split_once(':')?;
    match tag {
        "i" => v.parse().ok().map(ConstValue::Int),
        "f" => u64::from_str_radix(v, 16)
            .ok()
            .map(|b| ConstValue::Float(f64::from_bits(b))),
        "b" => v.parse().ok().map(ConstValue::Bool),
        "t" => DType::from_name(v).map(ConstValue::DType),
        _ => None,
    }
}

/// A cached winner.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneEntry {
    pub kernel: String,
    pub config: Config,
    pub median_ms: f64,
    /// For people reading the cache: the GPU and the bucket (not trusted: the key decides).
    pub gpu: String,
    pub bucket: String,
}

/// What a lookup found.
#[derive(Debug, PartialEq)]
pub enum TuneLookup {
    Hit(TuneEntry),
    Miss,
    /// Present but unusable (the reason); it is re-tuned and overwritten.
    Corrupt(String),
}

/// The winners' cache: `DIR/tune/KEY.tune`.
#[derive(Clone, Debug)]
pub struct TuneCache {
    dir: PathBuf,
}

impl TuneCache {
    /// The cache under a JIT cache directory (its `tune` subdirectory).
    pub fn new(cache_dir: impl AsRef<Path>) -> TuneCache {
        TuneCache {
            dir: cache_dir.as_ref().join("tune"),
        }
    }

    pub fn path(&self, key: &TuneKey) -> PathBuf {
        self.dir.join(format!("{}.tune", key.hex()))
    }

    pub fn load(&self, key: &TuneKey) -> TuneLookup {
        match cache::read_bounded(&self.path(key), 64 << 10) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TuneLookup::Miss,
            Err(e) => TuneLookup::Corrupt(format!("unreadable: {e}")),
            Ok(bytes) => match String::from_utf8(bytes) {
                Err(_) => TuneLookup::Corrupt("not UTF-8".into()),
                Ok(text) => parse_entry(key, &text).map_or_else(TuneLookup::Corrupt, TuneLookup::Hit),
            },
        }
    }

    pub fn store(&self, key: &TuneKey, e: &TuneEntry) -> Result<PathBuf, cache::CacheWriteError> {
        let path = self.path(key);
        std::fs::create_dir_all(&self.dir).map_err(|source| cache::CacheWriteError {
            path: self.dir.clone(),
            source,
        })?;
        write_atomic(&path, render_entry(key, e).as_bytes())?;
        Ok(path)
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

fn render_entry(key: &TuneKey, e: &TuneEntry) -> String {
    let mut body = String::new();
    let _ = writeln!(body, "format={TUNE_FORMAT}");
    let _ = writeln!(body, "key={}", key.hex());
    let _ = writeln!(body, "kernel={}", one_line(&e.kernel));
    let _ = writeln!(body, "gpu={}", one_line(&e.gpu));
    let _ = writeln!(body, "bucket={}", one_line(&e.bucket));
    for (n, v) in &e.config.consts {
        let _ = writeln!(body, "const {n}={}", encode_value(v));
    }
    let _ = writeln!(body, "num_warps={}", e.config.num_warps);
    let _ = writeln!(body, "num_stages={}", e.config.num_stages);
    if e.config.split > 1 {
        let _ = writeln!(body, "split={}", e.config.split);
    }
    let _ = writeln!(body, "median_ms={:016x}", e.median_ms.to_bits());
    // Last: the checksum of everything above, so that a torn or edited file reads as corrupt.
    let sum = hex(&Sha256::digest(body.as_bytes()));
    body + &format!("sha256={sum}\n")
}

fn parse_entry(key: &TuneKey, text: &str) -> Result<TuneEntry, String> {
    let body_end = text.rfind("sha256=").ok_or("no checksum")?;
    let (body, sum) = text.split_at(body_end);
    let sum = sum.trim_end().strip_prefix("sha256=").unwrap_or_default();
    if hex(&Sha256::digest(body.as_bytes())) != sum {
        return Err("checksum does not match".into());
    }
    let (mut format, mut k, mut kernel, mut gpu, mut bucket) = (None, None, None, None, None);
    let (mut warps, mut stages, mut ms) = (None, None, None);
    let mut split = 1;
    let mut consts = Vec::new();
    for line in body.lines() {
        if let Some(c) = line.strip_prefix("const ") {
            let (n, v) = c.split_once('=').ok_or("a `const` line without `=`")?;
            consts.push((
                n.to_string(),
                decode_value(v).ok_or_else(|| format!("bad value `{v}`"))?,
            ));
            continue;
        }
        let (n, v) = line.split_once('=').ok_or_else(|| format!("bad line `{line}`"))?;
        match n {
            "format" => format = Some(v),
            "key" => k = Some(v),
            "kernel" => kernel = Some(v.to_string()),
            "gpu" => gpu = Some(v.to_string()),
            "bucket" => bucket = Some(v.to_string()),
            "num_warps" => warps = Some(v.parse::<u32>().map_err(|_| "bad num_warps")?),
            "num_stages" => stages = Some(v.parse::<u32>().map_err(|_| "bad num_stages")?),
            "split" => {
                split = v
                    .parse::<u32>()
                    .ok()
                    .filter(|s| *s > 1 && tile_driver::split::is_valid(*s))
                    .ok_or("bad split")?
            }
            "median_ms" => ms = Some(f64::from_bits(u64::from_str_radix(v, 16).map_err(|_| "bad median_ms")?)),
            _ => return Err(format!("unknown field `{n}`")),
        }
    }
    if format != Some(&TUNE_FORMAT.to_string()[..]) {
        return Err("another format".into());
    }
    if k != Some(&key.hex()[..]) {
        return Err("the entry belongs to another key".into());
    }
    Ok(TuneEntry {
        kernel: kernel.ok_or("no `kernel`")?,
        config: Config {
            consts,
            num_warps: warps.ok_or("no `num_warps`")?,
            num_stages: stages.ok_or("no `num_stages`")?,
            split,
        },
        median_ms: ms.ok_or("no `median_ms`")?,
        gpu: gpu.unwrap_or_default(),
        bucket: bucket.unwrap_or_default(),
    })
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

// ---------------------------------------------------------------------------------------------
// The model's side (pure).

/// The request's pins plus the case's fixed values: every case value that is not a tuned
/// parameter (dtypes, `D`, `CAUSAL`, ...), unless the caller pinned it. A case's value for a
/// tunable parameter (`consts(BLOCK: 1024)` in a spec) is the spec's pick for verification,
/// not a constraint on the tuner, so it is dropped.
pub fn case_pins(file: &ast::File, kernel: &str, pins: &Pins, case: &Case) -> Pins {
    let tunable = |name: &str| {
        tile_lang::check::find_kernel(file, kernel).is_some_and(|k| {
            k.consts.iter().any(|c| {
                c.name.name == name
                    && matches!(c.value, ast::ConstValueSpec::Choices(_))
                    && !matches!(&c.ty, ast::TypeExpr::Named(n) if n.name == "dtype")
            })
        })
    };
    let mut out = pins.clone();
    for (n, v) in &case.consts {
        if !tunable(n) && !out.consts.iter().any(|(m, _)| m == n) {
            out.consts.push((n.clone(), *v));
        }
    }
    out
}

/// How far over the register budget the model may estimate a candidate that the tuner still
/// times: the estimate leans high (docs/optimizer.md's register table), and a candidate it puts
/// a few registers over may fit (softmax_staged bf16 32768 with 2 stages: ~134 against a budget
/// of 128, 128 in ptxas without spills, the fastest candidate on the H200).
pub const NEAR_BUDGET: f64 = 1.10;

/// Whether the model rejects `c` only for an estimate within [`NEAR_BUDGET`] of the budget.
fn near_budget(c: &config::Candidate) -> bool {
    matches!(c.verdict, config::Verdict::Spills { registers, budget } if registers as f64 <= budget as f64 * NEAR_BUDGET)
}

/// The candidates worth timing in the model's order: its choice first, then the feasible ones
/// by estimated time, ties as `choose` breaks them (fewer warps, fewer stages, enumeration
/// order), then those estimated just over the register budget ([`NEAR_BUDGET`]), the same way.
pub fn model_order(choice: &Choice) -> Vec<usize> {
    let mut rest: Vec<usize> = (0..choice.candidates.len())
        .filter(|&i| {
            let c = &choice.candidates[i];
            i != choice.chosen && (c.feasible() || near_budget(c))
        })
        .collect();
    let key = |i: usize| {
        let c = &choice.candidates[i];
        (estimated_s(c), c.config.num_warps, c.config.num_stages, i)
    };
    let over = |i: usize| !choice.candidates[i].feasible();
    rest.sort_by(|&a, &b| {
        let (ka, kb) = (key(a), key(b));
        over(a)
            .cmp(&over(b))
            .then(ka.0.total_cmp(&kb.0))
            .then((ka.1, ka.2, ka.3).cmp(&(kb.1, kb.2, kb.3)))
    });
    let mut order = vec![choice.chosen];
    order.extend(rest);
    order
}

/// The model's estimated time of `c` (infinite when it has none).
fn estimated_s(c: &config::Candidate) -> f64 {
    c.estimate.as_ref().map_or(f64::INFINITY, |e| e.time_s)
}

/// How close two estimates are for the model to call them a tie (the static choice's tie band):
/// [`shortlist`] never cuts between candidates the model cannot tell apart (layernorm_fixed f32
/// at 16384 columns: seven of eight candidates at one estimate, the fastest, 1.29x faster than
/// the first four, eighth in the model's order; docs/gpu.md, run 80).
pub use tile_opt::config::TIE;

/// The first `top_k` of [`model_order`] (all with `None`), and after them every feasible
/// candidate the model estimates within [`TIE`] of the last one taken.
pub fn shortlist(choice: &Choice, top_k: Option<usize>) -> Vec<usize> {
    let mut order = model_order(choice);
    if let Some(k) = top_k {
        let k = k.max(1);
        let time = |i: usize| estimated_s(&choice.candidates[i]);
        let last = order.get(k - 1).map(|&i| time(i));
        let mut n = k.min(order.len());
        while let Some(cut) = last
            && n < order.len()
            && choice.candidates[order[n]].feasible()
            && time(order[n]) <= cut * (1.0 + TIE)
        {
            n += 1;
        }
        order.truncate(n);
    }
    order
}

/// The model's choice for a request (no GPU): parses, applies the case's pins, chooses.
pub fn plan_choice(req: &TuneRequest<'_>, target: &Target) -> Result<(Choice, Pins), TuneError> {
    let file = syntax::parse(req.source)
        .map_err(|d| TuneError::Parse(d.first().map(|d| d.message.clone()).unwrap_or_default()))?;
    let desc = TargetDesc::for_target(target).ok_or_else(|| TuneError::NoModel(target.sm.to_string()))?;
    let pins = match &req.problem {
        Problem::Case { case, .. } => case_pins(&file, req.kernel, &req.pins, case),
        Problem::Launch { .. } => req.pins.clone(),
    };
    let on = match &req.problem {
        Problem::Case { spec, case } => config::On::Case(spec, case),
        Problem::Launch { .. } => config::On::File,
    };
    let choice = config::choose_on(req.source, &file, req.kernel, &pins, &desc, on)?;
    // The key must tell apart cases whose computed values (`BLOCK: next_pow2(cols)`) differ.
    let pins = choice.pins.clone();
    Ok((choice, pins))
}

/// The winner `tilec tune` or `tilec bench` cached for `kernel` of `source` on this GPU, if any:
/// the kernel's largest `bench(..)` cases whose compile-time values agree with `pins` are the
/// problems the static model chooses for; the first of them with a cached winner that honours the
/// pins gives it. The JIT compiles it in place of the model's choice.
pub fn cached_winner(
    source: &str,
    kernel: &str,
    pins: &Pins,
    (gpu_name, compute_capability): (&str, (i32, i32)),
    target: &Target,
    cache_dir: &Path,
) -> Option<Config> {
    let file = syntax::parse(source).ok()?;
    let (specs, _) = spec::parse_specs(&file);
    let cache = TuneCache::new(cache_dir);
    let agrees = |consts: &[(String, ConstValue)]| {
        consts
            .iter()
            .all(|(n, v)| pins.consts.iter().all(|(pn, pv)| pn != n || pv == v))
    };
    for s in specs.iter().filter(|s| s.kernel == kernel && !s.bench.is_empty()) {
        let cases = spec::bench_cases(s).ok()?;
        let size = |c: &Case| c.sizes.iter().map(|(_, v)| (*v).max(1) as f64).product::<f64>();
        let max = cases.iter().map(size).fold(0.0, f64::max);
        for case in cases.iter().filter(|c| size(c) == max && agrees(&c.consts)) {
            let req = TuneRequest {
                source,
                kernel,
                pins: pins.clone(),
                problem: Problem::Case { spec: s, case },
            };
            let Ok((choice, _)) = plan_choice(&req, target) else {
                continue;
            };
            let resolved = choice.best().kernel.as_ref().map_or(&[][..], |k| &k.consts[..]);
            let key = tune_key(&TuneKeyParts {
                source,
                kernel,
                pins: &key_pins(&file, kernel, resolved, pins),
                bucket: &problem_bucket(&req.problem).0,
                gpu_name,
                compute_capability,
                target_sm: target.sm,
                compiler_version: COMPILER_VERSION,
            });
            if let TuneLookup::Hit(e) = cache.load(&key)
                && agrees(&e.config.consts)
                && pins.num_warps.is_none_or(|w| w == e.config.num_warps)
                && pins.num_stages.is_none_or(|st| st == e.config.num_stages)
            {
                return Some(e.config);
            }
        }
    }
    None
}

/// The pins a winner is keyed by: the compile-time values of the checked kernel (`resolved`)
/// that are not the model's to choose (dtypes, fixed and required values; not tunable lists
/// and not values computed from the launch, which the bucket stands for), plus the values the
/// caller pinned, and warps and stages as pinned. A winner stored by `tilec tune` for a run
/// spec's case and a JIT launch of the same kernel in the same bucket agree on them, however
/// each was given its values.
pub fn key_pins(file: &ast::File, kernel: &str, resolved: &[(String, ConstValue)], pins: &Pins) -> Pins {
    let Some(def) = tile_lang::check::find_kernel(file, kernel) else {
        return pins.clone();
    };
    let chosen_by_model = |name: &str| {
        def.consts.iter().any(|c| {
            c.name.name == name
                && (tile_lang::check::launch::is_computed(def, c)
                    || (matches!(c.value, ast::ConstValueSpec::Choices(_))
                        && !matches!(&c.ty, ast::TypeExpr::Named(n) if n.name == "dtype")))
        })
    };
    let mut consts: Bindings = resolved
        .iter()
        .filter(|(n, _)| !chosen_by_model(n) || pins.consts.iter().any(|(m, _)| m == n))
        .cloned()
        .collect();
    consts.sort_by(|a, b| a.0.cmp(&b.0));
    Pins {
        consts,
        num_warps: pins.num_warps,
        num_stages: pins.num_stages,
        split: pins.split,
    }
}

/// The launch bucket a problem is keyed by: the kernel's integer arguments (a case's, through
/// its `args(..)`) each rounded to its bucket (`tile_lang::check::launch::bucket`).
pub fn problem_bucket(problem: &Problem<'_>) -> Sizes {
    match problem {
        Problem::Case { spec, case } => spec::case_sizes(spec, case).bucketed(),
        Problem::Launch { sizes, .. } => Sizes(sizes.to_vec()).bucketed(),
    }
}

/// The winner `tilec tune` or `tilec bench` cached for a launch of `kernel` with integer
/// arguments in bucket `sizes` (already bucketed) on this GPU, if any: what the JIT compiles
/// for such a launch in place of the model's choice.
pub fn cached_winner_for(
    source: &str,
    kernel: &str,
    pins: &Pins,
    sizes: &Sizes,
    (gpu_name, compute_capability): (&str, (i32, i32)),
    target: &Target,
    cache_dir: &Path,
) -> Option<Config> {
    let file = syntax::parse(source).ok()?;
    // The values the kernel is checked with at this launch, for the key's fixed values.
    let k = tile_lang::check::check_kernel_at(source, &file, kernel, &pins.consts, sizes).ok()?;
    let key = tune_key(&TuneKeyParts {
        source,
        kernel,
        pins: &key_pins(&file, kernel, &k.consts, pins),
        bucket: &sizes.0,
        gpu_name,
        compute_capability,
        target_sm: target.sm,
        compiler_version: COMPILER_VERSION,
    });
    match TuneCache::new(cache_dir).load(&key) {
        TuneLookup::Hit(e)
            if e.config
                .consts
                .iter()
                .all(|(n, v)| pins.consts.iter().all(|(pn, pv)| pn != n || pv == v))
                && pins.num_warps.is_none_or(|w| w == e.config.num_warps)
                && pins.num_stages.is_none_or(|st| st == e.config.num_stages) =>
        {
            Some(e.config)
        }
        _ => None,
    }
}

/// The key under which the JIT keeps the static model's plan for a launch bucket (beside the
/// tuner's winners, under another name): the source, the kernel, the pins as given, the
/// bucket, the facts the launch's arguments satisfy and the target. No GPU in it: the model
/// knows the target only.
pub fn model_plan_key(
    source: &str,
    kernel: &str,
    pins: &Pins,
    sizes: &Sizes,
    facts: &[ArgSpec],
    target: &Target,
) -> TuneKey {
    let mut h = Sha256::new();
    h.update(b"tile-plan");
    h.update(TUNE_FORMAT.to_le_bytes());
    put_str(&mut h, COMPILER_VERSION);
    h.update(cache::source_digest(source));
    put_str(&mut h, kernel);
    let mut consts: Vec<&(String, ConstValue)> = pins.consts.iter().collect();
    consts.sort_by(|a, b| a.0.cmp(&b.0));
    h.update((consts.len() as u64).to_le_bytes());
    for (n, v) in consts {
        put_str(&mut h, n);
        put_str(&mut h, &encode_value(v));
    }
    for pin in [pins.num_warps, pins.num_stages] {
        h.update(pin.map_or(0u32, |v| v + 1).to_le_bytes());
    }
    h.update((sizes.0.len() as u64).to_le_bytes());
    for (n, v) in &sizes.0 {
        put_str(&mut h, n);
        h.update(v.to_le_bytes());
    }
    put_str(&mut h, &facts.iter().map(ArgSpec::tag).collect::<String>());
    put_str(&mut h, target.sm);
    TuneKey(h.finalize().into())
}

/// `n=16384 m=8192`
pub fn sizes_label(sizes: &[(String, i64)]) -> String {
    sizes
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// The GPU's side.

/// Tunes `req` on `gpu`: the cached winner when there is one (and `opts.read_cache`), else the
/// fastest of the model's top-k candidates, which is then cached.
pub fn tune(gpu: &Gpu, req: &TuneRequest<'_>, opts: &TuneOptions) -> Result<Tuned, TuneError> {
    let (choice, pins) = plan_choice(req, &opts.target)?;
    let bucket = problem_bucket(&req.problem);
    let gpu_name = gpu.name();
    let cc = gpu.compute_capability()?;
    let file = syntax::parse(req.source)
        .map_err(|d| TuneError::Parse(d.first().map(|d| d.message.clone()).unwrap_or_default()))?;
    let resolved = choice.best().kernel.as_ref().map_or(&[][..], |k| &k.consts[..]);
    let key_pins = key_pins(&file, req.kernel, resolved, &req.pins);
    let key = tune_key(&TuneKeyParts {
        source: req.source,
        kernel: req.kernel,
        pins: &key_pins,
        bucket: &bucket.0,
        gpu_name: &gpu_name,
        compute_capability: cc,
        target_sm: opts.target.sm,
        compiler_version: COMPILER_VERSION,
    });
    let store = opts.cache_dir.as_ref().map(TuneCache::new);
    let mut cache_note = None;
    if let (Some(c), true) = (&store, opts.read_cache) {
        match c.load(&key) {
            TuneLookup::Hit(e) => {
                return Ok(Tuned {
                    choice,
                    pins,
                    timed: Vec::new(),
                    winner: e.config,
                    winner_ms: e.median_ms,
                    from_cache: true,
                    key,
                    cache_path: Some(c.path(&key)),
                    cache_note: None,
                });
            }
            TuneLookup::Corrupt(why) => cache_note = Some(format!("ignored a corrupt cache entry ({why})")),
            TuneLookup::Miss => {}
        }
    }
    let order = shortlist(&choice, opts.top_k);
    let bar = progress_bar(order.len() as u64, opts.progress);
    let mut buffers = Buffers::default();
    let mut timed = Vec::new();
    // Candidates that differ only in what the lowering ignores (stages, today) compile to the
    // same PTX: each distinct kernel and grid is timed once.
    let mut seen = TimedKernels::new();
    for &i in &order {
        let cand = &choice.candidates[i];
        bar.set_message(cand.config.to_string());
        let kernel = cand.kernel.as_ref().expect("feasible candidates are checked");
        let mut registers = 0;
        let median_ms = time_candidate(
            gpu,
            req,
            kernel,
            &cand.config,
            opts,
            (&mut buffers, &mut seen),
            &mut registers,
        );
        timed.push(Timed {
            config: cand.config.clone(),
            candidate: i,
            estimate_s: cand.estimate.as_ref().map_or(f64::NAN, |e| e.time_s),
            median_ms: median_ms.map_err(|e| e.to_string()),
            registers,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    // The fastest; a tie goes to the earlier in the model's order.
    let best = timed
        .iter()
        .filter_map(|t| t.median_ms.as_ref().ok().map(|ms| (t, *ms)))
        .fold(None::<(&Timed, f64)>, |b, (t, ms)| match b {
            Some((_, bms)) if bms <= ms => b,
            _ => Some((t, ms)),
        });
    let Some((best, winner_ms)) = best else {
        let first = timed
            .first()
            .and_then(|t| t.median_ms.clone().err())
            .unwrap_or_else(|| "no feasible candidate".into());
        return Err(TuneError::NothingTimed(first));
    };
    let winner = best.config.clone();
    let mut cache_path = None;
    if let Some(c) = &store {
        let entry = TuneEntry {
            kernel: req.kernel.to_string(),
            config: winner.clone(),
            median_ms: winner_ms,
            gpu: format!("{gpu_name} ({}.{})", cc.0, cc.1),
            bucket: bucket.to_string(),
        };
        match c.store(&key, &entry) {
            Ok(p) => cache_path = Some(p),
            Err(e) => cache_note = Some(format!("the winner was not cached: {e}")),
        }
    }
    Ok(Tuned {
        choice,
        pins,
        timed,
        winner,
        winner_ms,
        from_cache: false,
        key,
        cache_path,
        cache_note,
    })
}

/// A bar on stderr when asked for and stderr is a terminal; hidden otherwise (logs and pipes
/// get no control characters).
fn progress_bar(len: u64, wanted: bool) -> indicatif::ProgressBar {
    if !wanted || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(Some(len), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("tuning {bar:30} {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// Device buffers of a case, kept across candidates with the same buffer shapes (uploading
/// gigabytes per candidate would dominate an exhaustive sweep).
#[derive(Default)]
struct Buffers {
    shapes: Vec<(DType, usize)>,
    bufs: Vec<DeviceBuffer>,
}

/// Why a kernel could not be built and loaded.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}")]
    Compile(#[from] tile_driver::DriverError),
    #[error("{0}")]
    Spec(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// How the JIT specialises a run spec's arguments: device buffers are aligned allocations,
/// integers are known by value, floats are not specialised.
pub fn plan_specialization(args: &[PlanArg]) -> Vec<ArgSpec> {
    args.iter()
        .map(|a| match a {
            PlanArg::Buffer { .. } => ArgSpec::of_ptr(0),
            PlanArg::Scalar {
                value: Scalar::I(v), ..
            } => ArgSpec::of_int(*v),
            PlanArg::Scalar { .. } => ArgSpec::default(),
        })
        .collect()
}

/// Lowers `kernel` through the driver's back half (to a cubin when `ptxas` is given and `gpu`
/// runs the target's machine code, else the GPU driver JIT-compiles the PTX) and loads it on
/// `gpu`.
pub fn build(
    gpu: &Gpu,
    kernel: &Kernel,
    opts: &tile_driver::CompileOptions,
    ptxas: Option<&Path>,
) -> Result<(tile_driver::Compiled, tile_runtime::Function), BuildError> {
    // A cubin the GPU cannot run (sm_80 code on an sm_90 GPU) is useless: load the PTX instead,
    // which the driver compiles for the GPU, as the JIT does.
    let cc = gpu.compute_capability()?;
    let ptxas = ptxas.filter(|_| crate::compile::cubin_runs_on(opts.target.sm, cc));
    load(gpu, tile_driver::lower(kernel, opts, ptxas)?)
}

/// Loads what the driver's back half produced: the cubin when there is one, else the PTX.
fn load(
    gpu: &Gpu,
    lowered: tile_driver::Lowered,
) -> Result<(tile_driver::Compiled, tile_runtime::Function), BuildError> {
    let compiled = lowered.compiled;
    let image = match &lowered.cubin {
        Some((b, _)) => Image::Cubin(b),
        None => Image::Ptx(&compiled.ptx),
    };
    let f = gpu.load(image, &compiled.name, compiled.smem_bytes, compiled.split)?;
    Ok((compiled, f))
}

/// Median times already measured, by PTX and grid, with the kernel's registers.
type TimedKernels = std::collections::HashMap<(String, String), (f64, i32)>;

fn time_candidate(
    gpu: &Gpu,
    req: &TuneRequest<'_>,
    kernel: &Kernel,
    cfg: &Config,
    opts: &TuneOptions,
    (buffers, seen): (&mut Buffers, &mut TimedKernels),
    registers: &mut i32,
) -> Result<f64, BuildError> {
    // The arguments, their specialisation and the grid.
    let (plan, grid) = match &req.problem {
        Problem::Case { spec, case } => {
            // The grid is evaluated with the candidate's values (`cdiv(n, BLOCK)`).
            let mut case = (*case).clone();
            case.consts = kernel.consts.clone();
            let p = spec::plan(spec, &case, kernel).map_err(|d| BuildError::Spec(d.message))?;
            let grid = p.grid;
            (Some(p), grid)
        }
        Problem::Launch { grid, .. } => (None, grid(cfg)),
    };
    kernel
        .check_cluster_grid(grid[0])
        .map_err(|m| BuildError::Spec(format!("`{}` {m}", kernel.name)))?;
    let specialization: Vec<ArgSpec> = match (&plan, &req.problem) {
        (Some(p), _) => plan_specialization(&p.args),
        (None, Problem::Launch { args, .. }) => args.iter().map(arg_spec_of).collect(),
        (None, Problem::Case { .. }) => unreachable!("a case always has a plan"),
    };
    let copts = tile_driver::CompileOptions {
        target: opts.target.clone(),
        num_warps: cfg.num_warps,
        num_stages: cfg.num_stages,
        specialization,
        split: cfg.split,
        debug: false,
    };
    let lowered = tile_driver::lower(kernel, &copts, opts.ptxas.as_deref())?;
    let seen_key = (lowered.compiled.ptx.clone(), format!("{grid:?}"));
    if let Some(&(ms, regs)) = seen.get(&seen_key) {
        *registers = regs;
        return Ok(ms);
    }
    let (compiled, f) = load(gpu, lowered)?;
    *registers = f.registers;
    let base: Vec<KernelArg<'_>> = match (&plan, &req.problem) {
        (Some(p), _) => {
            let shapes: Vec<(DType, usize)> = p
                .args
                .iter()
                .filter_map(|a| match a {
                    PlanArg::Buffer { dtype, .. } => Some((*dtype, a.len())),
                    PlanArg::Scalar { .. } => None,
                })
                .collect();
            if shapes != buffers.shapes {
                buffers.bufs.clear();
                for (i, a) in p.args.iter().enumerate() {
                    if let PlanArg::Buffer { dtype, init, .. } = a {
                        buffers.bufs.push(gpu.upload(&tile_lang::spec::fill_bytes(
                            *dtype,
                            init,
                            a.len(),
                            i as u64 + 1,
                        ))?);
                    }
                }
                buffers.shapes = shapes;
            }
            crate::args::plan_args(&p.args, &buffers.bufs)
        }
        (None, Problem::Launch { args, .. }) => args.to_vec(),
        (None, Problem::Case { .. }) => unreachable!("a case always has a plan"),
    };
    // Kernels reading descriptors through the TMA engine take their tensor maps last.
    let maps = launch_maps(gpu, kernel, &compiled, &base)?;
    let mut args = base;
    args.extend(maps.iter().map(KernelArg::TensorMap));
    let t = gpu.time_kernel(
        &f,
        grid,
        compiled.threads_per_block,
        compiled.smem_bytes,
        &args,
        &opts.timing,
    )?;
    seen.insert(seen_key, (t.median(), f.registers));
    Ok(t.median())
}

/// The tensor maps a compiled kernel takes after `args` (encoded for this launch).
pub fn launch_maps(
    gpu: &Gpu,
    kernel: &Kernel,
    compiled: &tile_driver::Compiled,
    args: &[KernelArg<'_>],
) -> Result<Vec<tile_runtime::TensorMap>, RuntimeError> {
    if compiled.tensor_maps.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<_> = kernel.params.iter().map(|p| p.elem).collect();
    crate::tma::encode_for_args(
        gpu,
        &crate::tma::TensorMapCache::default(),
        &compiled.tensor_maps,
        &params,
        args,
    )
}

fn arg_spec_of(a: &KernelArg<'_>) -> ArgSpec {
    match *a {
        KernelArg::Buffer(_) => ArgSpec::of_ptr(0),
        // Integers as the kernel reads them: 32-bit ones are signed `i32`s.
        KernelArg::U32(v) => ArgSpec::of_int(v as i32 as i64),
        KernelArg::U64(v) => ArgSpec::of_int(v as i64),
        KernelArg::U8(v) => ArgSpec::of_int(v as i64),
        KernelArg::U16(v) => ArgSpec::of_int(v as i64),
        KernelArg::F32(_) | KernelArg::F64(_) | KernelArg::TensorMap(_) => ArgSpec::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::TempDir;

    const SRC: &str = include_str!("../../../dsl-examples/vector_add.tile");

    fn pins() -> Pins {
        Pins {
            consts: vec![
                ("T".into(), ConstValue::DType(DType::F16)),
                ("D".into(), ConstValue::Int(64)),
            ],
            num_warps: None,
            num_stages: None,
            split: None,
        }
    }

    fn parts<'a>(p: &'a Pins, bucket: &'a [(String, i64)]) -> TuneKeyParts<'a> {
        TuneKeyParts {
            source: SRC,
            kernel: "vector_add",
            pins: p,
            bucket,
            gpu_name: "NVIDIA H200",
            compute_capability: (9, 0),
            target_sm: "sm_90a",
            compiler_version: "0.1.0+0",
        }
    }

    #[test]
    fn bucket_rounds_up_to_powers_of_two() {
        let s = |v: &[(&str, i64)]| v.iter().map(|(n, v)| (n.to_string(), *v)).collect::<Vec<_>>();
        assert_eq!(
            shape_bucket(&s(&[("n", 1000), ("m", 1024), ("k", 1025), ("one", 1), ("zero", 0)])),
            s(&[("n", 1024), ("m", 1024), ("k", 2048), ("one", 1), ("zero", 1)])
        );
        assert_eq!(shape_bucket(&s(&[("n", 268_435_456)])), s(&[("n", 268_435_456)]));
    }

    #[test]
    fn key_depends_on_every_part_and_nothing_else() {
        let p = pins();
        let b = shape_bucket(&[("n".into(), 100_000)]);
        let base = tune_key(&parts(&p, &b));
        assert_eq!(base, tune_key(&parts(&p, &b)), "stable");
        // Sizes in one bucket share a key.
        let b2 = shape_bucket(&[("n".into(), 131_072)]);
        assert_eq!(base, tune_key(&parts(&p, &b2)));
        // Pin order does not matter.
        let mut rev = p.clone();
        rev.consts.reverse();
        assert_eq!(base, tune_key(&parts(&rev, &b)));

        let other_bucket = shape_bucket(&[("n".into(), 131_073)]);
        let mut warps = p.clone();
        warps.num_warps = Some(4);
        let mut dtype = p.clone();
        dtype.consts[0].1 = ConstValue::DType(DType::F32);
        let mut float = p.clone();
        float.consts[1].1 = ConstValue::Float(64.0);
        let variants = [
            ("bucket", tune_key(&parts(&p, &other_bucket))),
            ("warps pin", tune_key(&parts(&warps, &b))),
            ("dtype pin", tune_key(&parts(&dtype, &b))),
            ("value kind", tune_key(&parts(&float, &b))),
            (
                "source",
                tune_key(&TuneKeyParts {
                    source: "x",
                    ..parts(&p, &b)
                }),
            ),
            (
                "kernel",
                tune_key(&TuneKeyParts {
                    kernel: "other",
                    ..parts(&p, &b)
                }),
            ),
            (
                "gpu",
                tune_key(&TuneKeyParts {
                    gpu_name: "NVIDIA H100",
                    ..parts(&p, &b)
                }),
            ),
            (
                "compute capability",
                tune_key(&TuneKeyParts {
                    compute_capability: (8, 0),
                    ..parts(&p, &b)
                }),
            ),
            (
                "target",
                tune_key(&TuneKeyParts {
                    target_sm: "sm_90",
                    ..parts(&p, &b)
                }),
            ),
            (
                "compiler",
                tune_key(&TuneKeyParts {
                    compiler_version: "0.2.0+0",
                    ..parts(&p, &b)
                }),
            ),
        ];
        for (i, (what, k)) in variants.iter().enumerate() {
            assert_ne!(*k, base, "changing the {what} must change the key");
            for (other, k2) in &variants[i + 1..] {
                assert_ne!(k, k2, "{what} and {other} collide");
            }
        }
    }

    fn entry() -> TuneEntry {
        TuneEntry {
            kernel: "vector_add".into(),
            config: Config {
                consts: vec![
                    ("BLOCK".into(), ConstValue::Int(2048)),
                    ("T".into(), ConstValue::DType(DType::BF16)),
                    ("EPS".into(), ConstValue::Float(1e-5)),
                    ("CAUSAL".into(), ConstValue::Bool(true)),
                ],
                num_warps: 8,
                num_stages: 2,
                split: 1,
            },
            median_ms: 0.123_456_789,
            gpu: "NVIDIA H200 (9.0)".into(),
            bucket: "n=268435456".into(),
        }
    }

    #[test]
    fn cache_round_trips_and_ignores_corruption() {
        let dir = TempDir::new("tune");
        let cache = TuneCache::new(&dir.0);
        let key = TuneKey([3; 32]);
        assert_eq!(cache.load(&key), TuneLookup::Miss);
        let path = cache.store(&key, &entry()).unwrap();
        assert_eq!(path, dir.0.join("tune").join(format!("{}.tune", key.hex())));
        assert_eq!(cache.load(&key), TuneLookup::Hit(entry()));

        let corrupt = |damage: &dyn Fn(String) -> String| {
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, damage(text)).unwrap();
            let found = cache.load(&key);
            // Re-tuning overwrites the entry whole.
            cache.store(&key, &entry()).unwrap();
            assert_eq!(cache.load(&key), TuneLookup::Hit(entry()));
            found
        };
        let is = |l: TuneLookup, why: &str| matches!(&l, TuneLookup::Corrupt(r) if r.contains(why));
        assert!(is(corrupt(&|t| t[..t.len() / 2].to_string()), "checksum"));
        assert!(is(corrupt(&|t| t.replace("num_warps=8", "num_warps=4")), "checksum"));
        assert!(is(corrupt(&|_| String::new()), "no checksum"));
        // Another key's entry renamed into place: its checksum holds, its key does not.
        let other = TuneKey([4; 32]);
        let other_path = cache.store(&other, &entry()).unwrap();
        std::fs::copy(&other_path, &path).unwrap();
        assert!(matches!(cache.load(&key), TuneLookup::Corrupt(r) if r.contains("another key")));
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert_eq!(cache.load(&key), TuneLookup::Corrupt("not UTF-8".into()));
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(dir.0.join("tune"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            names.iter().all(|n| !n.to_string_lossy().contains(".tmp.")),
            "{names:?}"
        );
    }

    #[test]
    fn shortlist_starts_with_the_models_choice() {
        let file = syntax::parse(SRC).unwrap();
        let (specs, _) = spec::parse_specs(&file);
        let case = spec::bench_cases(&specs[0]).unwrap().pop().unwrap();
        let target = tile_driver::target("90a").unwrap();
        let req = TuneRequest {
            source: SRC,
            kernel: "vector_add",
            pins: Pins::default(),
            problem: Problem::Case {
                spec: &specs[0],
                case: &case,
            },
        };
        let (choice, pins) = plan_choice(&req, &target).unwrap();
        // The spec's `consts(BLOCK: 1024)` is not a pin: BLOCK is tuned.
        assert!(pins.consts.iter().all(|(n, _)| n != "BLOCK"), "{pins:?}");
        assert!(choice.tuned.contains(&"BLOCK".to_string()));
        let all = shortlist(&choice, None);
        assert_eq!(all[0], choice.chosen);
        let near = choice.candidates.iter().filter(|c| near_budget(c)).count();
        assert_eq!(
            all.len(),
            choice.candidates.iter().filter(|c| c.feasible()).count() + near
        );
        let times: Vec<f64> = all[1..]
            .iter()
            .map(|&i| choice.candidates[i].estimate.as_ref().unwrap().time_s)
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        // The first two, and any the model ties with the second.
        let two = shortlist(&choice, Some(2));
        assert_eq!(two[..2], all[..2]);
        let t = |i: usize| choice.candidates[i].estimate.as_ref().unwrap().time_s;
        assert!(two[2..].iter().all(|&i| t(i) <= t(all[1]) * (1.0 + TIE)), "{two:?}");
        if let Some(&next) = all.get(two.len()) {
            assert!(t(next) > t(all[1]) * (1.0 + TIE) || !choice.candidates[next].feasible());
        }
        // At least the choice, with the candidates tied with it.
        let one = shortlist(&choice, Some(0));
        assert_eq!(one[0], choice.chosen);
        assert!(one[1..].iter().all(|&i| t(i) <= t(all[0]) * (1.0 + TIE)), "{one:?}");
    }

    /// Candidates the model puts just over the register budget are timed after the feasible
    /// ones (the estimate leans high); those far over it are not.
    #[test]
    fn shortlist_takes_candidates_just_over_the_register_budget_last() {
        let src = "#[warps(4)]\nkernel k<const BLOCK: i32 in [1024, 2048, 4096, 8192, 16384, 32768]>(x: *f32, y: *mut f32) {\n    let o = arange(0, BLOCK);\n    store(y + o, load(x + o) * 2.0);\n}\n";
        let file = syntax::parse(src).unwrap();
        let target = tile_driver::target("90a").unwrap();
        let desc = TargetDesc::for_target(&target).unwrap();
        let choice = config::choose_on(src, &file, "k", &Pins::default(), &desc, config::On::File).unwrap();
        let order = shortlist(&choice, None);
        let feasible = choice.candidates.iter().filter(|c| c.feasible()).count();
        assert!(
            order[..feasible].iter().all(|&i| choice.candidates[i].feasible()),
            "{order:?}"
        );
        for &i in &order[feasible..] {
            assert!(near_budget(&choice.candidates[i]), "{:?}", choice.candidates[i].verdict);
        }
        let far = choice
            .candidates
            .iter()
            .filter(|c| matches!(c.verdict, config::Verdict::Spills { .. }) && !near_budget(c))
            .count();
        assert!(far > 0, "the largest blocks are far over the budget");
        assert_eq!(order.len() + far, choice.candidates.len());
    }

    #[test]
    fn case_pins_keep_fixed_values_and_the_callers() {
        let src = "kernel k<const T: dtype in [f16, f32], const BLOCK: i32 in [64, 128], const D: i32>(x: *T) {}";
        let file = syntax::parse(src).unwrap();
        let case = Case {
            sizes: vec![("n".into(), 10)],
            consts: vec![
                ("T".into(), ConstValue::DType(DType::F32)),
                ("BLOCK".into(), ConstValue::Int(64)),
                ("D".into(), ConstValue::Int(32)),
            ],
        };
        let user = Pins {
            consts: vec![("D".into(), ConstValue::Int(16))],
            ..Pins::default()
        };
        let p = case_pins(&file, "k", &user, &case);
        assert_eq!(
            p.consts,
            vec![
                ("D".into(), ConstValue::Int(16)),
                ("T".into(), ConstValue::DType(DType::F32))
            ]
        );
    }

    #[test]
    fn values_encode_exactly() {
        for v in [
            ConstValue::Int(-3),
            ConstValue::Float(0.1),
            ConstValue::Bool(false),
            ConstValue::DType(DType::F8E4M3),
        ] {
            assert_eq!(decode_value(&encode_value(&v)), Some(v));
        }
        assert_eq!(decode_value("x:1"), None);
    }
}
