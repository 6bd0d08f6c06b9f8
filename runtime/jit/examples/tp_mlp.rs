//! A tensor-parallel MLP step across the GPUs of one host: tile kernels for the matmuls and the
//! activation, NCCL's all-reduce between, bf16.
//!
//! ```text
//! cargo run --release -p tile-jit --example tp_mlp [-- GPUS]
//! ```
//!
//! The MLP is Llama's: `Y = (silu(X Wg) * (X Wu)) W2` with D = 4096, F = 14336. Each of the N
//! GPUs holds a column slice of Wg and Wu (`[D, 2F/N]`, gate and up side by side: the layout
//! `swiglu` reads) and the matching row slice of W2 (`[F/N, D]`), so that its partial `Y_r` is
//! summed by an all-reduce. X (4 micro-batches of 2048 tokens) is on every GPU. Three schedules
//! are timed (CUDA events, median of 10 steps):
//!
//! - **serialised**: compute and all-reduce one after another on one stream;
//! - **overlapped**: compute on one stream, each micro-batch's all-reduce on another as soon as
//!   its partial is ready, so the next micro-batch's matmuls run under it;
//! - **overlapped, compute in NCCL's domain**: the same with the compute stream put in the
//!   remote memory-synchronisation domain, where NCCL's kernels run, so that the compute
//!   kernels' fences also wait for NCCL's traffic; the plain overlapped run keeps them apart.
//!
//! The all-reduce alone is timed from 1 MiB to 1 GiB (algorithm and bus bandwidth, as
//! nccl-tests define them). The result on every GPU is checked against the same MLP on GPU 0
//! with the whole weights. `NCCL_MAX_CTAS` (NCCL's own setting) bounds the SMs NCCL takes.
//!
//! With one GPU the all-reduce is NCCL's copy of one rank and nothing overlaps across GPUs: the
//! example still runs every path and checks the result, and says so. Without NCCL or a GPU it
//! says what is missing and exits with status 1.

use std::process::ExitCode;

use tile_jit::collective::{self, Communicator, ReduceOp};
use tile_jit::half::bf16;
use tile_jit::{ConstValue, DeviceTensor, Gpu, JitOptions, MemSyncDomain, Stream};

tile_jit::kernels!(mod mm = "../../dsl-examples/matmul.tile");
tile_jit::kernels!(mod act = "../../dsl-examples/swiglu.tile");

const D: usize = 4096;
const F: usize = 14336;
const TOKENS: usize = 2048;
const MICRO: usize = 4;
const STEPS: usize = 10;

type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Deterministic values uniform in ±`scale`.
fn values(n: usize, seed: u64, scale: f32) -> Vec<bf16> {
    let mut s = 0x2545_f491_4f6c_dd1du64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            bf16::from_f32(((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
        })
        .collect()
}

/// Columns `[c0, c1)` of the gate and of the up projection (`[D, F]` each), side by side per
/// row: the `[D, 2 (c1 - c0)]` operand whose product `swiglu` reads.
fn gate_up(wg: &[bf16], wu: &[bf16], c0: usize, c1: usize) -> Vec<bf16> {
    wg.chunks(F)
        .zip(wu.chunks(F))
        .flat_map(|(g, u)| g[c0..c1].iter().chain(&u[c0..c1]).copied())
        .collect()
}

/// One GPU's share: its kernels, weights, activations and streams.
struct Rank {
    gpu: Gpu,
    matmul: mm::Matmul<bf16>,
    swiglu: act::Swiglu<bf16>,
    /// `[D, 2f]`: this rank's gate columns, then its up columns.
    w1: DeviceTensor<bf16>,
    /// `[f, D]`: this rank's rows of W2.
    w2: DeviceTensor<bf16>,
    x: Vec<DeviceTensor<bf16>>,
    g: DeviceTensor<bf16>,
    h: DeviceTensor<bf16>,
    y: Vec<DeviceTensor<bf16>>,
    compute: Stream,
    comm_stream: Stream,
    /// F / N: this rank's hidden width.
    f: usize,
}

impl Rank {
    /// A rank of hidden width `f` on `gpu`, with its weights `w1` (`[D, 2f]`) and `w2` (`[f, D]`).
    fn new(gpu: &Gpu, x: &[Vec<bf16>], w1: &[bf16], w2: &[bf16], f: usize) -> Result<Rank, Error> {
        let opts = JitOptions::default();
        Ok(Rank {
            matmul: mm::Kernels::new(gpu, opts.clone())?.matmul::<bf16>(mm::MatmulConsts::default())?,
            swiglu: act::Kernels::new(gpu, opts)?.swiglu::<bf16>(act::SwigluConsts::default())?,
            w1: DeviceTensor::upload(gpu, w1)?,
            w2: DeviceTensor::upload(gpu, w2)?,
            x: x.iter()
                .map(|x| DeviceTensor::upload(gpu, x))
                .collect::<Result<_, _>>()?,
            g: DeviceTensor::zeros(gpu, TOKENS * 2 * f)?,
            h: DeviceTensor::zeros(gpu, TOKENS * f)?,
            y: (0..MICRO)
                .map(|_| DeviceTensor::zeros(gpu, TOKENS * D))
                .collect::<Result<_, _>>()?,
            compute: gpu.new_stream()?,
            comm_stream: gpu.new_stream()?,
            gpu: gpu.clone(),
            f,
        })
    }

    /// Every micro-batch through this rank alone: its partial outputs, on the host.
    fn forward_all(&mut self) -> Result<Vec<Vec<bf16>>, Error> {
        let s = self.compute.clone();
        (0..MICRO)
            .map(|m| {
                self.forward(m, &s)?;
                s.synchronize()?;
                Ok(self.y[m].download()?)
            })
            .collect()
    }

    /// Micro-batch `m` through the rank's slice of the MLP, on `stream`: `Y_m = swiglu(X_m W1) W2`.
    fn forward(&mut self, m: usize, stream: &Stream) -> Result<(), Error> {
        let (t, d, f2, f) = (TOKENS as i32, D as i32, 2 * self.f as i32, self.f as i32);
        self.matmul
            .launch_on(stream, &self.x[m], &self.w1, &mut self.g, t, f2, d, d, 1, f2, 1, f2, 1)?;
        let block = match self.swiglu.kernel().consts().iter().find(|(n, _)| n == "BLOCK") {
            Some((_, ConstValue::Int(b))) => *b as u32,
            _ => 1024,
        };
        let grid = (TOKENS as u32, (self.f as u32).div_ceil(block));
        self.swiglu.launch_on(stream, grid, &self.g, &mut self.h, f, f2, f)?;
        self.matmul
            .launch_on(stream, &self.h, &self.w2, &mut self.y[m], t, d, f, f, 1, d, 1, d, 1)?;
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Schedule {
    Serialised,
    Overlapped,
}

/// One MLP step over every micro-batch on every rank; returns the step's time on rank 0 in ms.
fn step(ranks: &mut [Rank], comms: &[Communicator], schedule: Schedule) -> Result<f32, Error> {
    let start = ranks[0].compute.record()?;
    for r in ranks.iter() {
        r.compute.wait(&start)?;
    }
    for m in 0..MICRO {
        let mut ready = Vec::new();
        for r in ranks.iter_mut() {
            let s = r.compute.clone();
            r.forward(m, &s)?;
            ready.push(s.record()?);
        }
        let mut all = Vec::new();
        for (r, e) in ranks.iter_mut().zip(&ready) {
            let s = match schedule {
                Schedule::Serialised => &r.compute,
                Schedule::Overlapped => {
                    r.comm_stream.wait(e)?;
                    &r.comm_stream
                }
            };
            all.push((s, &mut r.y[m]));
        }
        let mut all: Vec<_> = all.into_iter().zip(comms).map(|((s, y), c)| (c, y, s)).collect();
        collective::all_reduce_in_place_all(&mut all, ReduceOp::Sum)?;
    }
    for r in ranks.iter() {
        r.compute.wait_for(&r.comm_stream)?;
    }
    let end = ranks[0].compute.record()?;
    for r in ranks.iter() {
        r.compute.synchronize()?;
    }
    Ok(start.elapsed_ms(&end)?)
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

fn run() -> Result<(), Error> {
    let available = Gpu::count();
    if available == 0 {
        return Err("no CUDA GPU found: this example needs a GPU, its driver and NCCL".into());
    }
    let n: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|_| format!("GPUS must be a number, not `{a}`"))?,
        None => available,
    };
    if n == 0 || n > available {
        return Err(format!("asked for {n} GPU(s); this machine has {available}").into());
    }
    if F % n != 0 {
        return Err(format!("F = {F} does not split over {n} GPUs").into());
    }
    let (major, minor, patch) = collective::nccl_version()?;
    let gpus: Vec<Gpu> = (0..n).map(Gpu::new).collect::<Result<_, _>>()?;
    println!(
        "{} x {}, NCCL {major}.{minor}.{patch}, NCCL_MAX_CTAS={}",
        n,
        gpus[0].name(),
        std::env::var("NCCL_MAX_CTAS").unwrap_or_else(|_| "(NCCL's default)".into())
    );
    if n == 1 {
        println!("one GPU: the all-reduce is NCCL's one-rank copy; nothing crosses GPUs");
    }
    let comms = collective::init_all(&gpus)?;

    // The whole model, on the host: X in ±1, weights with variance 1/fan_in.
    let w_scale = |fan_in: usize| (3.0 / fan_in as f32).sqrt();
    let x_host: Vec<Vec<bf16>> = (0..MICRO).map(|m| values(TOKENS * D, 10 + m as u64, 1.0)).collect();
    let wg = values(D * F, 1, w_scale(D));
    let wu = values(D * F, 2, w_scale(D));
    let w2 = values(F * D, 3, w_scale(F));

    let f = F / n;
    let mut ranks = (0..n)
        .map(|r| {
            let w2r = &w2[r * f * D..(r + 1) * f * D];
            Rank::new(&gpus[r], &x_host, &gate_up(&wg, &wu, r * f, (r + 1) * f), w2r, f)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    for r in &ranks {
        r.gpu.synchronize()?;
    }

    // The reference: the whole MLP on GPU 0, one rank of width F.
    let reference = if n == 1 {
        ranks[0].forward_all()?
    } else {
        Rank::new(&gpus[0], &x_host, &gate_up(&wg, &wu, 0, F), &w2, F)?.forward_all()?
    };

    // Each schedule: 2 warm-up steps, then the median of STEPS, and the result checked.
    let mut rows = Vec::new();
    for (name, schedule, domain) in [
        ("serialised", Schedule::Serialised, MemSyncDomain::Default),
        ("overlapped", Schedule::Overlapped, MemSyncDomain::Default),
        (
            "overlapped, compute in NCCL's domain",
            Schedule::Overlapped,
            MemSyncDomain::Remote,
        ),
    ] {
        for r in &ranks {
            r.compute.set_mem_sync_domain(domain)?;
        }
        for _ in 0..2 {
            step(&mut ranks, &comms, schedule)?;
        }
        let times = (0..STEPS)
            .map(|_| step(&mut ranks, &comms, schedule))
            .collect::<Result<Vec<_>, _>>()?;
        let mut worst = 0f32;
        let peak = reference
            .iter()
            .flatten()
            .map(|v| v.to_f32().abs())
            .fold(0f32, f32::max);
        for r in &ranks {
            for (m, want) in reference.iter().enumerate() {
                let got = r.y[m].download()?;
                for (g, w) in got.iter().zip(want) {
                    worst = worst.max((g.to_f32() - w.to_f32()).abs() / peak);
                }
            }
        }
        if worst > 2e-2 {
            return Err(
                format!("{name}: the result differs from the single-GPU MLP by {worst:.2e} of its peak").into(),
            );
        }
        rows.push((name, median(times), worst));
    }
    for r in &ranks {
        r.compute.set_mem_sync_domain(MemSyncDomain::Default)?;
    }
    let flops = 2.0 * (TOKENS * MICRO) as f64 * (D * 2 * F + F * D) as f64;
    println!("\nMLP step: {MICRO} x {TOKENS} tokens, D {D}, F {F}, bf16, {n} GPU(s)");
    println!(
        "{:<40} {:>9} {:>12} {:>14}",
        "schedule", "ms", "TFLOP/s", "max err/peak"
    );
    for (name, ms, worst) in &rows {
        println!(
            "{name:<40} {ms:>9.3} {:>12.1} {worst:>14.2e}",
            flops / (*ms as f64 * 1e-3) / 1e12
        );
    }

    // The all-reduce alone, 1 MiB to 1 GiB of bf16, in place, on each rank's comm stream.
    if n == 1 {
        println!("\nall-reduce bandwidth: not measured on one GPU (NCCL's one-rank in-place all-reduce moves no data)");
        return Ok(());
    }
    println!("\nall-reduce (bf16, sum, in place)");
    println!("{:>10} {:>10} {:>12} {:>12}", "bytes", "us", "algbw GB/s", "busbw GB/s");
    let mut bytes = 1usize << 20;
    while bytes <= 1 << 30 {
        let len = bytes / 2;
        let mut bufs: Vec<DeviceTensor<bf16>> = gpus
            .iter()
            .map(|g| DeviceTensor::zeros(g, len))
            .collect::<Result<_, _>>()?;
        for g in &gpus {
            g.synchronize()?;
        }
        let mut times = Vec::new();
        for i in 0..(3 + STEPS) {
            let start = ranks[0].comm_stream.record()?;
            let mut all: Vec<_> = comms
                .iter()
                .zip(&mut bufs)
                .zip(&ranks)
                .map(|((c, b), r)| (c, b, &r.comm_stream))
                .collect();
            collective::all_reduce_in_place_all(&mut all, ReduceOp::Sum)?;
            let end = ranks[0].comm_stream.record()?;
            for r in &ranks {
                r.comm_stream.synchronize()?;
            }
            if i >= 3 {
                times.push(start.elapsed_ms(&end)?);
            }
        }
        let s = median(times) as f64 * 1e-3;
        let alg = bytes as f64 / s / 1e9;
        let bus = alg * 2.0 * (n as f64 - 1.0) / n as f64;
        println!("{bytes:>10} {:>10.1} {alg:>12.1} {bus:>12.1}", s * 1e6);
        bytes *= 4;
    }
    Ok(())
}
