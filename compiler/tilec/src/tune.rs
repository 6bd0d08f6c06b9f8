//! `tilec tune FILE`: for each run spec with `bench(..)` sizes, tunes its kernel on the largest
//! bench case (every case with `--all-cases`; each of its constant sets, e.g. one per dtype)
//! with `tile_jit::tune`: the
//! model's choice and its time, each timed candidate, the winner (cached on disk). With
//! `--all-candidates` every feasible (or near-budget) candidate is timed (the exhaustive sweep docs/optimizer.md
//! compares the static choice with) and a summary line per case is printed.

use std::io::Write;
use std::path::PathBuf;

use tile_jit::tune::{self, Problem, TuneOptions, TuneRequest, Tuned};
use tile_jit::{Gpu, TimingOptions};
use tile_lang::codespan_reporting::term::termcolor::WriteColor;
use tile_lang::{diag, spec, syntax};
use tile_opt::config::Pins;

#[derive(clap::Args, Debug)]
pub(crate) struct TuneArgs {
    file: PathBuf,
    /// Only this kernel's run specs (default: every run spec with `bench(..)` sizes).
    #[arg(long)]
    kernel: Option<String>,
    /// Pin a compile-time parameter (repeatable): -D BLOCK=1024, -D T=bf16.
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    defines: Vec<String>,
    /// Time the model's N best candidates (and those it estimates within 1% of the N-th: it cannot tell them apart).
    #[arg(long, default_value_t = 4)]
    top_k: usize,
    /// Time every feasible candidate, and those just over the register budget (an exhaustive sweep; ignores a cached winner).
    #[arg(long)]
    all_candidates: bool,
    /// Time again even when a winner is cached.
    #[arg(long)]
    retune: bool,
    /// Timed runs per candidate (after warm-up).
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Write the results as JSON here (again after each case; `"complete": false` until the end).
    #[arg(long)]
    json: Option<PathBuf>,
    /// GPU target: 80, 86, 89, 90 or 90a (sm_90: the H200 measured; the others from published figures).
    #[arg(long, default_value = "90a")]
    sm: String,
    /// Tune every `bench(..)` case, not only the largest: each launch bucket gets its own winner
    /// (with `--all-candidates`: the static choice against the sweep's best at every shape).
    #[arg(long)]
    all_cases: bool,
    /// Tune the `bench(..)` cases whose label (as `tilec bench` prints it, e.g. `M=1 K=4096 N=4096`)
    /// contains this text, instead of the largest.
    #[arg(long, value_name = "TEXT", conflicts_with = "all_cases")]
    case: Option<String>,
}

pub(crate) fn cmd_tune(a: &TuneArgs, out: &mut dyn Write, err: &mut dyn WriteColor) -> anyhow::Result<i32> {
    let pins = Pins {
        consts: super::parse_defines(&a.defines)?,
        num_warps: None,
        num_stages: None,
        split: None,
    };
    let target = tile_driver::target(&a.sm)?;
    let src = super::read(&a.file)?;
    let ast = match syntax::parse(&src.text) {
        Ok(x) => x,
        Err(d) => {
            diag::emit(err, &src.name, &src.text, &d);
            return Ok(1);
        }
    };
    let (specs, d) = spec::parse_specs(&ast);
    if !d.is_empty() {
        diag::emit(err, &src.name, &src.text, &d);
        return Ok(1);
    }
    let mut benched: Vec<String> = Vec::new();
    for s in specs.iter().filter(|s| !s.bench.is_empty()) {
        if !benched.contains(&s.kernel) {
            benched.push(s.kernel.clone());
        }
    }
    let specs: Vec<_> = specs
        .into_iter()
        .filter(|s| !s.bench.is_empty() && a.kernel.as_ref().is_none_or(|k| &s.kernel == k))
        .collect();
    if specs.is_empty() {
        let asked: Vec<String> = a.kernel.iter().cloned().collect();
        writeln!(
            err,
            "error: {}",
            crate::bench::nothing_to_time(&asked, &benched, &src.name)
        )?;
        return Ok(1);
    }
    // Each spec's cases to tune: its largest bench size (by product), every constant set at that
    // size. A `-D` pin of a constant the case fixes (`T: [f32, bf16]`) keeps only the cases with
    // the pinned value (the others would time the pinned kernel again under their own labels).
    let mut chosen = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for s in &specs {
        let cases = spec::bench_cases(s).map_err(|d| anyhow::anyhow!("{}", d.message))?;
        let cases: Vec<_> = cases
            .into_iter()
            .filter(|c| agrees(&ast, &s.kernel, &pins, c))
            .collect();
        labels.extend(cases.iter().map(|c| format!("{} [{}]", s.kernel, c.label())));
        let size = |c: &spec::Case| c.sizes.iter().map(|(_, v)| (*v).max(1) as f64).product::<f64>();
        let max = cases.iter().map(size).fold(0.0, f64::max);
        let cases: Vec<_> = cases
            .into_iter()
            .filter(|c| match &a.case {
                Some(text) => c.label().contains(text.as_str()),
                None => a.all_cases || size(c) == max,
            })
            .collect();
        if !cases.is_empty() {
            chosen.push((s, cases));
        }
    }
    if chosen.is_empty()
        && let Some(text) = &a.case
    {
        labels.truncate(20);
        writeln!(
            err,
            "error: no bench case's label contains `{text}`; the cases are:\n  {}",
            labels.join("\n  ")
        )?;
        return Ok(1);
    }
    if chosen.is_empty() {
        writeln!(
            err,
            "error: no bench case of {} has the pinned values ({}); pin a value the run specs' `consts(..)` list, or leave it unpinned",
            specs.iter().map(|s| s.kernel.as_str()).collect::<Vec<_>>().join(", "),
            a.defines.join(", ")
        )?;
        return Ok(1);
    }
    let gpu = Gpu::new(0).map_err(|e| anyhow::anyhow!("{e}; `tilec tune` times kernels on a GPU"))?;
    let cc = gpu.compute_capability()?;
    writeln!(
        out,
        "GPU: {} (compute capability {cc:?}), target {}",
        gpu.name(),
        target.sm
    )?;
    let opts = TuneOptions {
        top_k: if a.all_candidates { None } else { Some(a.top_k) },
        timing: TimingOptions {
            runs: a.runs,
            ..Default::default()
        },
        read_cache: !a.all_candidates && !a.retune,
        ..TuneOptions::new(target)
    };
    let mut records = Vec::new();
    let mut failures = 0;
    // Written after every case (a call cut short keeps what it tuned) and at the end.
    let save = |records: &[serde_json::Value], complete: bool| -> anyhow::Result<()> {
        if let Some(path) = &a.json {
            let doc = serde_json::json!({
                "gpu": gpu.name(),
                "compute_capability": format!("{}.{}", cc.0, cc.1),
                "target": opts.target.sm,
                "complete": complete,
                "cases": records,
            });
            std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
        }
        Ok(())
    };
    for (s, cases) in &chosen {
        for case in cases {
            let req = TuneRequest {
                source: &src.text,
                kernel: &s.kernel,
                pins: pins.clone(),
                problem: Problem::Case { spec: s, case },
            };
            writeln!(out)?;
            writeln!(out, "{} [{}]", s.kernel, case.label())?;
            match tune::tune(&gpu, &req, &opts) {
                Ok(t) => {
                    report(out, &t, a.all_candidates)?;
                    records.push(json_record(&s.kernel, case, &t));
                    save(&records, false)?;
                }
                Err(e) => {
                    writeln!(out, "  error: {e}")?;
                    failures += 1;
                }
            }
        }
    }
    save(&records, true)?;
    if let Some(path) = &a.json {
        writeln!(out, "wrote {}", path.display())?;
    }
    writeln!(out, "tune: {} cases tuned, {failures} failed", records.len())?;
    Ok(if failures > 0 { 1 } else { 0 })
}

fn report(out: &mut dyn Write, t: &Tuned, summary: bool) -> std::io::Result<()> {
    writeln!(out, "  model's choice: {}", t.choice.best().config)?;
    if let Some(n) = &t.cache_note {
        writeln!(out, "  note: {n}")?;
    }
    if t.from_cache {
        writeln!(
            out,
            "  winner (cached, not re-timed; --retune times again): {} {:.4} ms",
            t.winner, t.winner_ms
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "  {:>4}  {:<40} {:>10} {:>10} {:>5}",
        "rank", "candidate", "model us", "median ms", "regs"
    )?;
    for (rank, c) in t.timed.iter().enumerate() {
        let mark = if c.candidate == t.choice.chosen { "*" } else { " " };
        let time = match &c.median_ms {
            Ok(ms) => format!("{ms:>10.4}"),
            Err(e) => format!("failed: {e}"),
        };
        writeln!(
            out,
            "  {:>3}{mark}  {:<40} {:>10.2} {time} {:>5}",
            rank + 1,
            c.config.to_string(),
            c.estimate_s * 1e6,
            c.registers
        )?;
    }
    let ratio = t.static_ms().map(|s| s / t.winner_ms);
    write!(out, "  winner: {} {:.4} ms", t.winner, t.winner_ms)?;
    match ratio {
        Some(r) => writeln!(out, " (the model's choice takes x{r:.3} of it)")?,
        None => writeln!(out, " (the model's choice failed)")?,
    }
    if let Some(p) = &t.cache_path {
        writeln!(out, "  cached: {}", p.display())?;
    }
    if summary {
        let (s, r) = match (t.static_ms(), ratio) {
            (Some(s), Some(r)) => (format!("{s:.4}"), format!("{r:.3}")),
            _ => ("failed".into(), "-".into()),
        };
        let best_rank = t.timed.iter().position(|c| c.config == t.winner).map_or(0, |i| i + 1);
        writeln!(
            out,
            "  summary: static {s} ms, best {:.4} ms, ratio {r}, best = {} (model rank {best_rank} of {})",
            t.winner_ms,
            t.winner,
            t.timed.len()
        )?;
    }
    Ok(())
}

/// One case as JSON.
fn json_record(kernel: &str, case: &spec::Case, t: &Tuned) -> serde_json::Value {
    let cands: Vec<serde_json::Value> = t
        .timed
        .iter()
        .map(|c| {
            serde_json::json!({
                "config": c.config.to_string(),
                "model_us": c.estimate_s * 1e6,
                "median_ms": c.median_ms.as_ref().ok(),
                "error": c.median_ms.as_ref().err(),
                "registers": c.registers,
                "static": c.candidate == t.choice.chosen,
            })
        })
        .collect();
    serde_json::json!({
        "kernel": kernel,
        "case": case.label(),
        "static": t.choice.best().config.to_string(),
        "static_ms": t.static_ms(),
        "best": t.winner.to_string(),
        "best_ms": t.winner_ms,
        "ratio": t.static_ms().map(|s| s / t.winner_ms),
        "from_cache": t.from_cache,
        "key": t.key.hex(),
        "candidates": cands,
    })
}

/// Whether every constant that `case` fixes for tuning (dtypes and values that are not
/// candidates: `tune::case_pins`) has the pinned value where `pins` names it.
pub(crate) fn agrees(file: &tile_lang::syntax::ast::File, kernel: &str, pins: &Pins, case: &spec::Case) -> bool {
    let fixed = tune::case_pins(file, kernel, &Pins::default(), case);
    pins.consts
        .iter()
        .all(|(name, v)| fixed.consts.iter().all(|(n, cv)| n != name || cv == v))
}
