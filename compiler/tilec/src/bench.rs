//! `tilec bench`: times each run spec's `bench(..)` cases on the GPU with CUDA events (warm-up,
//! then many runs, the L2 flushed before each), and reports time, achieved bandwidth or
//! throughput, and the share of the copy bandwidth measured in the same run. `--json` writes
//! the results in the format `bench/report.py` joins with the Triton and PyTorch peers.

use std::io::Write;
use std::path::PathBuf;

use tile_lang::check;
use tile_lang::interp::Scalar;
use tile_lang::ir::{ConstValue, Elem, Kernel};
use tile_lang::spec::{self, Init, PlanArg};
use tile_runtime::{Gpu, Image, TimingOptions};

use crate::{GpuBackend, check_source, read};

/// One timed case, as written to JSON.
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

pub struct BenchOptions {
    pub json: Option<PathBuf>,
    pub timing: TimingOptions,
}

pub fn run(files: &[PathBuf], g: &GpuBackend, opts: &BenchOptions, out: &mut dyn Write) -> anyhow::Result<i32> {
    let copy_gbps = g.gpu.copy_bandwidth(1 << 30, 20)?;
    writeln!(out, "device-to-device copy: {copy_gbps:.0} GB/s (1 GiB, read + write)")?;
    writeln!(
        out,
        "{:<12} {:<6} {:<36} {:>10} {:>10} {:>9} {:>7} {:>5}",
        "kernel", "dtype", "case", "median ms", "GB/s", "TFLOP/s", "% copy", "regs"
    )?;
    let mut results = Vec::new();
    let mut failures = 0;
    for f in files {
        let src = read(f)?;
        let c = check_source(&src.text, &vec![]);
        let Some(ast) = c.ast.filter(|_| c.diags.is_empty()) else {
            writeln!(out, "{}: does not check; run `tilec check`", src.name)?;
            failures += 1;
            continue;
        };
        for s in &c.specs {
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
                let kernel = match check::check_kernel(&src.text, &ast, &s.kernel, &case.consts) {
                    Ok(k) => k,
                    Err(d) => {
                        writeln!(out, "{} [{}]: {}", s.kernel, case.label(), d[0].message)?;
                        failures += 1;
                        continue;
                    }
                };
                match bench_case(g, s, case, &kernel, i as u64, opts) {
                    Ok(mut r) => {
                        r.label = label(case, &tunable);
                        writeln!(
                            out,
                            "{:<12} {:<6} {:<36} {:>10.4} {:>10.0} {:>9.2} {:>6.1}% {:>5}",
                            r.kernel,
                            r.dtype,
                            r.label,
                            r.median_ms,
                            r.gbps(),
                            r.tflops(),
                            100.0 * r.gbps() / copy_gbps,
                            r.registers
                        )?;
                        results.push(r);
                    }
                    Err(e) => {
                        writeln!(out, "{} [{}]: {e}", s.kernel, case.label())?;
                        failures += 1;
                    }
                }
            }
        }
    }
    if let Some(path) = &opts.json {
        std::fs::write(path, json(&results, copy_gbps, &g.gpu))?;
        writeln!(out, "wrote {}", path.display())?;
    }
    writeln!(out, "bench: {} cases timed, {failures} failed", results.len())?;
    Ok(if failures > 0 { 1 } else { 0 })
}

fn bench_case(
    g: &GpuBackend,
    s: &spec::RunSpec,
    case: &spec::Case,
    kernel: &Kernel,
    seed: u64,
    opts: &BenchOptions,
) -> anyhow::Result<BenchResult> {
    let plan = spec::plan(s, case, kernel).map_err(|d| anyhow::anyhow!("{}", d.message))?;
    // Specialise as the JIT does: device buffers are aligned, integers by value.
    let specialization = plan
        .args
        .iter()
        .map(|a| match a {
            PlanArg::Buffer { .. } => tile_codegen::ArgSpec::of_ptr(0),
            PlanArg::Scalar {
                value: Scalar::I(v), ..
            } => tile_codegen::ArgSpec::of_int(*v),
            PlanArg::Scalar { .. } => tile_codegen::ArgSpec::default(),
        })
        .collect();
    let copts = tile_codegen::CompileOptions {
        target: g.target.clone(),
        num_warps: kernel.warps.first().copied().unwrap_or(4),
        specialization,
    };
    let compiled = tile_codegen::compile(kernel, &copts)?;
    let cubin = match &g.ptxas {
        Some(p) => Some(
            tile_codegen::ptxas::assemble(p, &compiled.ptx, g.target.sm)
                .map_err(|e| anyhow::anyhow!(e))?
                .0,
        ),
        None => None,
    };
    let image = match &cubin {
        Some(b) => Image::Cubin(b),
        None => Image::Ptx(&compiled.ptx),
    };
    let f = g.gpu.load(image, &compiled.name, compiled.smem_bytes)?;
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
    let args = tile_runtime::plan_args(&plan.args, &bufs);
    let t = g.gpu.time_kernel(
        &f,
        plan.grid,
        compiled.threads_per_block,
        compiled.smem_bytes,
        &args,
        &opts.timing,
    )?;
    let flops = match &s.flops {
        Some(e) => spec::eval_in_case(e, case, kernel)
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
    Ok(BenchResult {
        kernel: kernel.name.clone(),
        dtype,
        label: String::new(),
        median_ms: t.median(),
        p10_ms: t.quantile(0.1),
        p90_ms: t.quantile(0.9),
        runs: t.ms.len(),
        bytes,
        flops,
        registers: f.registers,
    })
}

fn json_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The results in `bench/README.md`'s format (written by hand: a handful of flat records).
fn json(results: &[BenchResult], copy_gbps: f64, gpu: &Gpu) -> String {
    let cases: Vec<String> = results
        .iter()
        .map(|r| {
            format!(
                "{{\"kernel\": {}, \"dtype\": {}, \"label\": {}, \"median_ms\": {}, \"p10_ms\": {}, \"p90_ms\": {}, \"runs\": {}, \"bytes\": {}, \"flops\": {}, \"gbps\": {}, \"tflops\": {}, \"registers\": {}}}",
                json_str(&r.kernel),
                json_str(&r.dtype),
                json_str(&r.label),
                r.median_ms,
                r.p10_ms,
                r.p90_ms,
                r.runs,
                r.bytes,
                r.flops,
                r.gbps(),
                r.tflops(),
                r.registers
            )
        })
        .collect();
    format!(
        "{{\"gpu\": {}, \"ceilings\": {{\"copy_gbps\": {copy_gbps}}}, \"cases\": [\n  {}\n]}}\n",
        json_str(&gpu.name()),
        cases.join(",\n  ")
    )
}
