//! `tilec bench`: times each run spec's `bench(..)` cases on the GPU with CUDA events (warm-up,
//! then many runs, the L2 flushed before each), and reports time, achieved bandwidth or
//! throughput, and the share of the copy bandwidth measured in the same run. Each case runs in
//! the configuration `--config` names: the autotuner's winner (default; the model's top
//! candidates timed on this case, winners cached on disk), the static model's choice, or the
//! run spec's own values. `--json` writes the results in the format `bench/report.py` joins
//! with the Triton and PyTorch peers, again after every case, so that a call cut short keeps
//! what it timed (`"complete": false` until the last case).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tile_jit::TimingOptions;
use tile_jit::tune::{self, Problem, TuneOptions, TuneRequest};
use tile_lang::check;
use tile_lang::ir::{ConstValue, Elem, Kernel};
use tile_lang::spec::{self, Init, PlanArg};
use tile_opt::config::{Config, Pins};

use crate::{GpuBackend, check_source, read};

/// The results so far, and where `--json` writes them after each one.
pub struct Record<'a> {
    results: Vec<BenchResult>,
    path: Option<&'a Path>,
    copy_gbps: f64,
    gpu: String,
    config: ConfigSource,
    rounds: usize,
}

impl<'a> Record<'a> {
    /// An empty record of a call on `gpu` that passes `rounds` times over its cases.
    pub fn new(path: Option<&'a Path>, copy_gbps: f64, gpu: &str, config: ConfigSource, rounds: usize) -> Self {
        Record {
            results: Vec::new(),
            path,
            copy_gbps,
            gpu: gpu.to_string(),
            config,
            rounds,
        }
    }

    pub fn push(&mut self, r: BenchResult) -> anyhow::Result<()> {
        self.results.push(r);
        self.save(false)
    }

    /// The results, one per case: with `--rounds`, the median of the rounds it has run.
    pub fn cases(&self) -> Vec<BenchResult> {
        match self.rounds {
            0 | 1 => self.results.clone(),
            _ => median_rounds(self.results.clone()),
        }
    }

    /// Writes the JSON file.
    pub fn save(&self, complete: bool) -> anyhow::Result<()> {
        if let Some(path) = self.path {
            std::fs::write(
                path,
                json(&self.cases(), self.copy_gbps, &self.gpu, self.config, complete)?,
            )?;
        }
        Ok(())
    }
}

/// One timed case, as written to JSON.
#[derive(Clone, Debug)]
pub struct BenchResult {
    pub kernel: String,
    pub dtype: String,
    pub label: String,
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
    pub runs: usize,
    pub bytes: f64,
    pub flops: f64,
    pub registers: i32,
    /// Local memory a thread (ptxas's spills and stack), as the driver reports the loaded
    /// function: 0 where every value stays in registers.
    pub local_bytes: i32,
    /// The configuration timed (`BLOCK=1024 warps=4 stages=1`).
    pub config: String,
    /// Source → loaded function for this configuration: check, LLVM, ptxas, driver load.
    pub compile_ms: f64,
    /// The rate of a device copy moving the same bytes, timed the same way (GB/s).
    pub same_size_copy_gbps: f64,
    /// With `--rounds`: the case's median in each round, in round order (this result is the
    /// median round's).
    pub rounds_ms: Vec<f64>,
}

impl BenchResult {
    fn gbps(&self) -> f64 {
        self.bytes / (self.median_ms * 1e-3) / 1e9
    }
    fn tflops(&self) -> f64 {
        self.flops / (self.median_ms * 1e-3) / 1e12
    }
}

/// `rows=4096 cols=1024`, then the case's compile-time values that are neither dtypes nor the
/// kernel's tunable parameters (`D=64 CAUSAL=false`): what the peers' labels name.
fn label(case: &spec::Case, tunable: &[String]) -> String {
    let mut parts: Vec<String> = case.sizes.iter().map(|(n, v)| format!("{n}={v}")).collect();
    for (n, v) in &case.consts {
        if !matches!(v, ConstValue::DType(_)) && !tunable.contains(n) {
            parts.push(format!("{n}={v}"));
        }
    }
    parts.join(" ")
}

/// Where a case's configuration (tunable values, warps, stages) comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigSource {
    /// The autotuner's winner among the static model's top candidates, timed on the case
    /// itself (a cached winner is reused).
    Tuned,
    /// The static model's choice (`tilec explain`), nothing timed to choose it.
    Model,
    /// The run spec's values, else each tunable parameter's first candidate and the first warps.
    Spec,
}

pub struct BenchOptions {
    pub json: Option<PathBuf>,
    pub timing: TimingOptions,
    pub config: ConfigSource,
    /// Candidates the tuner times per case.
    pub top_k: usize,
    /// Run the e-graph rewriter on the configured kernel before timing it (`--opt`).
    pub rewrite: Option<tile_opt::egraph::OptOptions>,
    /// Only these kernels' run specs (empty: every run spec with `bench(..)` sizes).
    pub kernels: Vec<String>,
    /// Times through the whole list of cases (`--rounds`): each case is timed once per round,
    /// the cases alternating, so that a GPU whose speed drifts during the call (clocks, heat)
    /// weighs on every case alike; the report is each case's median round.
    pub rounds: usize,
    /// A pinned split (`--split`), for every kernel whose loop allows one.
    pub split: Option<u32>,
}

impl BenchOptions {
    fn wants(&self, s: &spec::RunSpec) -> bool {
        !s.bench.is_empty() && (self.kernels.is_empty() || self.kernels.contains(&s.kernel))
    }
}

/// Why there is nothing to time (or tune) in `place`: no run spec of the kernels `asked` for
/// (all when empty) has `bench(..)` sizes; `benched` are the kernels that have some.
pub fn nothing_to_time(asked: &[String], benched: &[String], place: &str) -> String {
    if benched.is_empty() || asked.is_empty() {
        return format!("no run spec in {place} has `bench(..)` sizes");
    }
    let asked: Vec<String> = asked.iter().map(|k| format!("`{k}`")).collect();
    format!(
        "no run spec with `bench(..)` sizes for {} in {place}; the kernels that have one: {}",
        asked.join(", "),
        benched.join(", ")
    )
}

/// Before looking for a GPU: every file reads and checks, and some run spec has `bench(..)`
/// sizes for the kernels asked for. `Ok(false)` after saying on `err` what is missing (which
/// kernels of the files have bench sizes).
pub fn preflight(files: &[PathBuf], opts: &BenchOptions, err: &mut dyn Write) -> anyhow::Result<bool> {
    let mut benched: Vec<String> = Vec::new();
    let mut any = false;
    for f in files {
        let src = read(f)?;
        let c = check_source(&src.text, &vec![]);
        if c.ast.is_none() || !c.diags.is_empty() {
            writeln!(err, "error: {}: does not check; run `tilec check`", src.name)?;
            return Ok(false);
        }
        for s in &c.specs {
            if !s.bench.is_empty() && !benched.contains(&s.kernel) {
                benched.push(s.kernel.clone());
            }
            any |= opts.wants(s);
        }
    }
    if !any && !files.is_empty() {
        writeln!(
            err,
            "error: {}",
            nothing_to_time(&opts.kernels, &benched, "these files")
        )?;
    }
    Ok(any || files.is_empty())
}

pub fn run(files: &[PathBuf], g: &GpuBackend, opts: &BenchOptions, out: &mut dyn Write) -> anyhow::Result<i32> {
    let copy_gbps = g.gpu.copy_bandwidth(1 << 30, 20)?;
    writeln!(
        out,
        "device-to-device copy: {copy_gbps:.0} GB/s (1 GiB, read + write); `% copy` compares each case with a copy of its own bytes"
    )?;
    writeln!(
        out,
        "{:<12} {:<6} {:<36} {:>10} {:>10} {:>9} {:>7} {:>5} {:>10}  config ({:?})",
        "kernel", "dtype", "case", "median ms", "GB/s", "TFLOP/s", "% copy", "regs", "compile ms", opts.config
    )?;
    let mut rec = Record::new(opts.json.as_deref(), copy_gbps, &g.gpu.name(), opts.config, opts.rounds);
    if opts.rounds > 1 {
        writeln!(out, "round 1 of {}", opts.rounds)?;
    }
    // With `--rounds`, the first round keeps every case it prepared (compiled, loaded, its
    // buffers on the GPU) and the later rounds only time them again.
    let mut kept = (opts.rounds > 1).then(Vec::new);
    let mut failures = bench_files(files, g, opts, copy_gbps, &mut kept, &mut rec, out)?;
    for round in 2..=opts.rounds {
        writeln!(out, "round {round} of {}", opts.rounds)?;
        for p in kept.iter().flatten() {
            match time_case(g, p, opts) {
                Ok(r) => {
                    print_result(&r, copy_gbps, out)?;
                    rec.push(r)?;
                }
                Err(e) => {
                    let t = &p.template;
                    writeln!(out, "{} [{}]: {e}", t.kernel, t.label)?;
                    failures += 1;
                }
            }
        }
    }
    rec.save(true)?;
    let results = rec.cases();
    if opts.rounds > 1 {
        writeln!(out, "median round of {} (each round's median ms):", opts.rounds)?;
        for r in &results {
            let each: Vec<String> = r.rounds_ms.iter().map(|m| format!("{m:.4}")).collect();
            writeln!(
                out,
                "{:<12} {:<6} {:<36} {:>10.4}  ({})",
                r.kernel,
                r.dtype,
                r.label,
                r.median_ms,
                each.join(", ")
            )?;
        }
    }
    if let Some(path) = &opts.json {
        writeln!(out, "wrote {}", path.display())?;
    }
    let rounds = if opts.rounds > 1 {
        format!(" ({} rounds each)", opts.rounds)
    } else {
        String::new()
    };
    writeln!(out, "bench: {} cases timed{rounds}, {failures} failed", results.len())?;
    Ok(if failures > 0 { 1 } else { 0 })
}

/// One pass over the bench cases of `files`: each result goes to `rec` as it is printed, and
/// each prepared case to `kept` when there is one (`--rounds`); otherwise a case's buffers are
/// freed before the next is prepared. Returns the cases that failed.
fn bench_files(
    files: &[PathBuf],
    g: &GpuBackend,
    opts: &BenchOptions,
    copy_gbps: f64,
    kept: &mut Option<Vec<Prepared>>,
    rec: &mut Record<'_>,
    out: &mut dyn Write,
) -> anyhow::Result<usize> {
    let mut failures = 0;
    for f in files {
        let src = read(f)?;
        let c = check_source(&src.text, &vec![]);
        let Some(ast) = c.ast.filter(|_| c.diags.is_empty()) else {
            writeln!(out, "{}: does not check; run `tilec check`", src.name)?;
            failures += 1;
            continue;
        };
        for s in c.specs.iter().filter(|s| opts.wants(s)) {
            let tunable: Vec<String> = check::find_kernel(&ast, &s.kernel)
                .map(|k| {
                    k.consts
                        .iter()
                        .filter(|c| matches!(c.value, tile_lang::syntax::ast::ConstValueSpec::Choices(_)))
                        .map(|c| c.name.name.clone())
                        .collect()
                })
                .unwrap_or_default();
            for (i, case) in spec::bench_cases(s)
                .map_err(|d| anyhow::anyhow!("{}", d.message))?
                .iter()
                .enumerate()
            {
                let started = Instant::now();
                let config = match configure(g, (&src.text, &ast), s, case, opts) {
                    Ok(c) => c,
                    Err(e) => {
                        writeln!(out, "{} [{}]: no configuration: {e}", s.kernel, case.label())?;
                        failures += 1;
                        continue;
                    }
                };
                let tuning_s = started.elapsed().as_secs_f64();
                let kernel = match check::check_kernel_at(
                    &src.text,
                    &ast,
                    &s.kernel,
                    &config.consts,
                    &spec::case_sizes(s, case),
                ) {
                    Ok(k) => k,
                    Err(d) => {
                        writeln!(out, "{} [{}]: {}", s.kernel, case.label(), d[0].message)?;
                        failures += 1;
                        continue;
                    }
                };
                let sizes = spec::case_sizes(s, case);
                if let Some(def) = check::find_kernel(&ast, &s.kernel)
                    && let Err(d) =
                        check::launch::check_requirements(&check::launch::requirements(def), &kernel.consts, &|n| {
                            sizes.get(n)
                        })
                {
                    writeln!(
                        out,
                        "{} [{}]: {}",
                        s.kernel,
                        case.label(),
                        tile_lang::diag::render(&src.name, &src.text, &[d]).trim_end()
                    )?;
                    failures += 1;
                    continue;
                }
                let kernel = match &opts.rewrite {
                    Some(o) => tile_opt::egraph::optimize(&kernel, o)?.0,
                    None => kernel,
                };
                if tuning_s > 1.0 {
                    writeln!(
                        out,
                        "  ({} [{}]: configuration tuned in {tuning_s:.1} s)",
                        s.kernel,
                        case.label()
                    )?;
                }
                let timed = prepare_case(g, s, case, &kernel, &config, i as u64, opts).and_then(|mut p| {
                    p.template.label = label(case, &tunable);
                    Ok((time_case(g, &p, opts)?, p))
                });
                match timed {
                    Ok((r, p)) => {
                        print_result(&r, copy_gbps, out)?;
                        rec.push(r)?;
                        if let Some(kept) = kept {
                            kept.push(p);
                        }
                    }
                    Err(e) => {
                        writeln!(out, "{} [{}]: {e}", s.kernel, case.label())?;
                        failures += 1;
                    }
                }
            }
        }
    }
    Ok(failures)
}

/// The configuration `opts.config` asks for: the case's values for everything the tuner does not
/// choose (dtypes, sizes-derived values), the tuned ones from the tuner, the model or the spec.
fn configure(
    g: &GpuBackend,
    (source, ast): (&str, &tile_lang::syntax::ast::File),
    s: &spec::RunSpec,
    case: &spec::Case,
    opts: &BenchOptions,
) -> anyhow::Result<Config> {
    let req = TuneRequest {
        source,
        kernel: &s.kernel,
        pins: Pins {
            split: opts.split,
            ..Pins::default()
        },
        problem: Problem::Case { spec: s, case },
    };
    match opts.config {
        ConfigSource::Tuned => {
            let topts = TuneOptions {
                top_k: Some(opts.top_k),
                ptxas: g.ptxas.clone(),
                timing: TimingOptions {
                    runs: opts.timing.runs.min(20),
                    ..opts.timing.clone()
                },
                ..TuneOptions::new(g.target.clone())
            };
            Ok(tune::tune(&g.gpu, &req, &topts)?.winner)
        }
        ConfigSource::Model => Ok(tune::plan_choice(&req, &g.target)?.0.best().config.clone()),
        ConfigSource::Spec => {
            let k = check::check_kernel_at(source, ast, &s.kernel, &case.consts, &spec::case_sizes(s, case))
                .map_err(|d| anyhow::anyhow!("{}", d[0].message))?;
            Ok(Config {
                consts: k.consts.clone(),
                num_warps: tile_driver::default_warps(&k),
                num_stages: tile_driver::default_stages(&k),
                split: opts.split.unwrap_or(1),
            })
        }
    }
}

/// A case ready to time: compiled and loaded, its buffers filled on the GPU, its tensor maps
/// encoded, and the result without its timings (`template`).
struct Prepared {
    f: tile_jit::Function,
    grid: [u32; 3],
    threads: u32,
    smem_bytes: u32,
    plan_args: Vec<PlanArg>,
    bufs: Vec<tile_jit::DeviceBuffer>,
    maps: Vec<tile_jit::TensorMap>,
    template: BenchResult,
}

fn prepare_case(
    g: &GpuBackend,
    s: &spec::RunSpec,
    case: &spec::Case,
    kernel: &Kernel,
    config: &Config,
    seed: u64,
    opts: &BenchOptions,
) -> anyhow::Result<Prepared> {
    let started = Instant::now();
    // The grid is evaluated with the configuration's values (`cdiv(n, BLOCK)`).
    let mut case = case.clone();
    case.consts = kernel.consts.clone();
    let plan = spec::plan(s, &case, kernel).map_err(|d| anyhow::anyhow!("{}", d.message))?;
    let copts = tile_driver::CompileOptions {
        target: g.target.clone(),
        num_warps: config.num_warps,
        num_stages: config.num_stages,
        specialization: tune::plan_specialization(&plan.args),
        split: config.split,
        debug: false,
    };
    let (compiled, f) = tune::build(&g.gpu, kernel, &copts, g.ptxas.as_deref())?;
    let compile_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut bytes = 0.0;
    let mut bufs = Vec::new();
    for (i, a) in plan.args.iter().enumerate() {
        if let PlanArg::Buffer {
            dtype, init, output, ..
        } = a
        {
            let n = a.len();
            bufs.push(
                g.gpu
                    .upload(&spec::fill_bytes(*dtype, init, n, seed * 1000 + i as u64 + 1))?,
            );
            // Inputs are read once and outputs written once; an output with contents is also read.
            let reads = if *output && *init == Init::Poison { 0.0 } else { 1.0 };
            let writes = if *output { 1.0 } else { 0.0 };
            bytes += (reads + writes) * (n * dtype.bytes()) as f64;
        }
    }
    let maps = tune::launch_maps(&g.gpu, kernel, &compiled, &tile_jit::plan_args(&plan.args, &bufs))?;
    let same_size_copy_gbps = if bytes > 0.0 {
        g.gpu.copy_bandwidth_like(bytes as usize, &opts.timing)?
    } else {
        0.0
    };
    let flops = match &s.flops {
        Some(e) => spec::eval_in_case(e, &case, kernel)
            .map_err(|d| anyhow::anyhow!("{}", d.message))?
            .as_f64(),
        None => 0.0,
    };
    let dtype = case
        .consts
        .iter()
        .find_map(|(_, v)| if let ConstValue::DType(d) = v { Some(*d) } else { None })
        .or_else(|| {
            kernel.params.iter().find_map(|p| {
                if let Elem::Ptr { pointee, .. } = p.elem {
                    Some(pointee)
                } else {
                    None
                }
            })
        })
        .map_or("-".to_string(), |d| d.to_string());
    Ok(Prepared {
        grid: plan.grid,
        threads: compiled.threads_per_block,
        smem_bytes: compiled.smem_bytes,
        plan_args: plan.args,
        bufs,
        maps,
        template: BenchResult {
            kernel: kernel.name.clone(),
            dtype,
            label: String::new(),
            median_ms: 0.0,
            p10_ms: 0.0,
            p90_ms: 0.0,
            runs: 0,
            bytes,
            flops,
            registers: f.registers,
            local_bytes: f.local_bytes,
            config: format!("{}", ConfigLabel(config)),
            compile_ms,
            same_size_copy_gbps,
            rounds_ms: Vec::new(),
        },
        f,
    })
}

/// Times a prepared case once (`opts.timing`'s warm-up and runs).
fn time_case(g: &GpuBackend, p: &Prepared, opts: &BenchOptions) -> anyhow::Result<BenchResult> {
    let mut args = tile_jit::plan_args(&p.plan_args, &p.bufs);
    args.extend(p.maps.iter().map(tile_jit::KernelArg::TensorMap));
    let t = g
        .gpu
        .time_kernel(&p.f, p.grid, p.threads, p.smem_bytes, &args, &opts.timing)?;
    Ok(BenchResult {
        median_ms: t.median(),
        p10_ms: t.quantile(0.1),
        p90_ms: t.quantile(0.9),
        runs: t.ms.len(),
        ..p.template.clone()
    })
}

/// One line of the table: the case, its time and rates, `% copy` against the same bytes.
fn print_result(r: &BenchResult, copy_gbps: f64, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<12} {:<6} {:<36} {:>10.4} {:>10.0} {:>9.2} {:>6.1}% {:>5} {:>10.1}  {}",
        r.kernel,
        r.dtype,
        r.label,
        r.median_ms,
        r.gbps(),
        r.tflops(),
        100.0 * r.gbps()
            / if r.same_size_copy_gbps > 0.0 {
                r.same_size_copy_gbps
            } else {
                copy_gbps
            },
        r.registers,
        r.compile_ms,
        r.config
    )?;
    if r.local_bytes > 0 {
        writeln!(
            out,
            "  ({} B of local memory a thread: ptxas spilled registers or kept a stack)",
            r.local_bytes
        )?;
    }
    Ok(())
}

/// One result per case out of several rounds' (`--rounds`): the round with the median time,
/// with every round's median listed, in the order the cases first ran. A case is its kernel,
/// dtype, label and configuration (neither the label nor the configuration names the dtypes).
pub fn median_rounds(results: Vec<BenchResult>) -> Vec<BenchResult> {
    let mut cases: Vec<Vec<BenchResult>> = Vec::new();
    for r in results {
        match cases.iter_mut().find(|c| {
            c[0].kernel == r.kernel && c[0].dtype == r.dtype && c[0].label == r.label && c[0].config == r.config
        }) {
            Some(c) => c.push(r),
            None => cases.push(vec![r]),
        }
    }
    cases
        .into_iter()
        .map(|mut c| {
            let rounds_ms: Vec<f64> = c.iter().map(|r| r.median_ms).collect();
            c.sort_by(|a, b| a.median_ms.total_cmp(&b.median_ms));
            let mut mid = c.swap_remove((c.len() - 1) / 2);
            mid.rounds_ms = rounds_ms;
            mid
        })
        .collect()
}

/// A configuration without the values every case of the spec fixes anyway (dtypes): the
/// tuned values, warps and stages.
struct ConfigLabel<'a>(&'a Config);

impl std::fmt::Display for ConfigLabel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, v) in &self.0.consts {
            if !matches!(v, ConstValue::DType(_)) {
                write!(f, "{n}={v} ")?;
            }
        }
        write!(f, "warps={} stages={}", self.0.num_warps, self.0.num_stages)
    }
}

/// The results in `bench/README.md`'s format; `complete` is false while cases remain.
fn json(
    results: &[BenchResult],
    copy_gbps: f64,
    gpu: &str,
    config: ConfigSource,
    complete: bool,
) -> anyhow::Result<String> {
    let cases: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "kernel": r.kernel,
                "dtype": r.dtype,
                "label": r.label,
                "median_ms": r.median_ms,
                "p10_ms": r.p10_ms,
                "p90_ms": r.p90_ms,
                "runs": r.runs,
                "bytes": r.bytes,
                "flops": r.flops,
                "gbps": r.gbps(),
                "tflops": r.tflops(),
                "registers": r.registers,
                "local_bytes": r.local_bytes,
                "config": r.config,
                "compile_ms": r.compile_ms,
                "same_size_copy_gbps": r.same_size_copy_gbps,
                "rounds_ms": r.rounds_ms,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "gpu": gpu,
        "config_source": format!("{config:?}").to_lowercase(),
        "ceilings": { "copy_gbps": copy_gbps },
        "complete": complete,
        "cases": cases,
    });
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}
