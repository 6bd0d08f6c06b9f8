//! Host time per kernel launch through the JIT, against the raw driver launch of the same
//! function, plus what the first launch of a kernel costs: a cold compile stage by stage, a
//! fresh process with a warm disk cache, and a warm handle.
//!
//! ```text
//! cargo run --release -p tile-jit --example launch_overhead
//! ```
//!
//! The kernel is `vector_add` on one element with one program, so the GPU has almost nothing to
//! do and the host's enqueue time dominates. Each path enqueues 10,000 launches after a warm-up
//! without waiting in between; the time from the first to the last enqueue, divided by the
//! count, is the host time per launch; the time including the final synchronisation is shown
//! too. When the host enqueues faster than the GPU drains the queue, the queue fills and the
//! enqueue time rises to the GPU's rate (then both columns agree for every path), so the same
//! launches are also timed in bursts of 100 with an untimed synchronisation between bursts: the
//! host's own cost per launch.
//!
//! With `--json PATH` it also writes the headline figures (`jit_us`, `raw_us`: host time per
//! launch in bursts; `cold_ms`, `disk_ms`: the JIT's cold compile and disk-cache hit) for
//! `bench/report.py --launch PATH`.
//!
//! Without a GPU (or its driver) it says so and exits with status 1.

use std::ffi::c_void;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tile_jit::{Arg, ConstValue, DeviceTensor, Gpu, Image, Jit, JitOptions, KernelArg, Origin, Source};

const SOURCE: &str = include_str!("../../../dsl-examples/vector_add.tile");
const BLOCK: i64 = 256;
const LAUNCHES: usize = 10_000;
const WARMUP: usize = 1_000;
const ROUNDS: usize = 9;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A cache directory of our own, so that "cold" is cold; removed at the end.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ms(d: Duration) -> String {
    format!("{:9.3} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:9.2} µs", d.as_secs_f64() * 1e6)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Waits for every stream of the context (the paths below use three kinds of stream).
fn sync_all() -> Result<(), Box<dyn std::error::Error>> {
    Ok(cudarc::driver::result::ctx::synchronize()?)
}

/// Per-launch host times of one path (medians over ROUNDS rounds).
struct Timing {
    /// LAUNCHES back to back: first to last enqueue.
    enqueue: Duration,
    /// The same, up to the end of the final synchronisation.
    total: Duration,
    /// LAUNCHES in bursts of BURST with a synchronisation between bursts (not timed), so that
    /// the launch queue never fills: the host's own cost.
    burst: Duration,
}

/// Launches per burst: well below the depth of the driver's launch queue.
const BURST: usize = 100;

/// One way of launching the kernel.
type Path<'a> = Box<dyn FnMut() -> Result<(), Box<dyn std::error::Error>> + 'a>;

/// Runs each path WARMUP times, then measures them (see [`Timing`]) in ROUNDS rounds, each round
/// timing every path in turn.
fn measure(mut paths: Vec<Path<'_>>) -> Result<Vec<Timing>, Box<dyn std::error::Error>> {
    for launch in paths.iter_mut() {
        for _ in 0..WARMUP {
            launch()?;
        }
    }
    sync_all()?;
    let mut samples = vec![(Vec::new(), Vec::new(), Vec::new()); paths.len()];
    for _ in 0..ROUNDS {
        for (launch, (enqueue, total, burst)) in paths.iter_mut().zip(samples.iter_mut()) {
            let t0 = Instant::now();
            for _ in 0..LAUNCHES {
                launch()?;
            }
            let t1 = Instant::now();
            sync_all()?;
            let t2 = Instant::now();
            enqueue.push((t1 - t0) / LAUNCHES as u32);
            total.push((t2 - t0) / LAUNCHES as u32);

            let mut busy = Duration::ZERO;
            for _ in 0..LAUNCHES / BURST {
                let t0 = Instant::now();
                for _ in 0..BURST {
                    launch()?;
                }
                busy += t0.elapsed();
                sync_all()?;
            }
            burst.push(busy / (LAUNCHES / BURST * BURST) as u32);
        }
    }
    Ok(samples
        .into_iter()
        .map(|(enqueue, total, burst)| Timing {
            enqueue: median(enqueue),
            total: median(total),
            burst: median(burst),
        })
        .collect())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new(0)?;
    let cache = TempDir(std::env::temp_dir().join(format!("tile-launch-overhead-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&cache.0);
    let opts = JitOptions {
        cache_dir: Some(cache.0.clone()),
        ..JitOptions::default()
    };
    let bindings = [("BLOCK", ConstValue::Int(BLOCK))];
    let probe = Jit::new(&gpu, Source::Static(SOURCE), opts.clone())?;
    let target = probe.target().clone();
    // Only when the JIT would use ptxas itself: its cubins must run on this GPU.
    let ptxas = opts.ptxas.clone().filter(|_| probe.uses_ptxas());
    println!(
        "GPU: {} (compute capability {:?}); target {}; ptxas: {}",
        gpu.name(),
        gpu.compute_capability()?,
        target.sm,
        if probe.uses_ptxas() {
            "yes"
        } else {
            "no (PTX is loaded)"
        }
    );
    drop(probe);

    let x = DeviceTensor::upload(&gpu, &[1.0f32])?;
    let y = DeviceTensor::upload(&gpu, &[2.0f32])?;
    let mut out = DeviceTensor::<f32>::zeros(&gpu, 1)?;

    // 1. A cold compile, stage by stage, outside the JIT (the first includes LLVM's start-up).
    println!("\ncold compile of vector_add (BLOCK = {BLOCK}), stage by stage");
    // The driver's pipeline, as `tilec compile` and the JIT run it; each stage timed.
    let src = tile_driver::Source::parse("vector_add.tile", SOURCE).map_err(|_| "vector_add.tile does not parse")?;
    let req = tile_driver::Request {
        pins: tile_driver::Pins {
            consts: bindings.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            ..Default::default()
        },
        ptxas: ptxas.clone(),
        ..tile_driver::Request::new("vector_add", target.clone())
    };
    let c = tile_driver::compile(&src, &req, tile_driver::Stage::Cubin)?;
    let lowered = c.lowered.ok_or("the driver stopped before PTX")?;
    let t_check = src.parse_time + c.timings.config.unwrap_or_default() + c.timings.check.unwrap_or_default();
    println!("  source → IR (parse, check)        {}", ms(t_check));
    println!("  IR → PTX (LLVM, O3)               {}", ms(lowered.codegen_time));
    if let Some(t) = lowered.ptxas_time {
        println!("  PTX → cubin (ptxas)               {}", ms(t));
    }
    let (compiled, cubin) = (lowered.compiled, lowered.cubin.map(|(c, _)| c));
    let t = Instant::now();
    let f_ptx = gpu.load(
        Image::Ptx(&compiled.ptx),
        &compiled.name,
        compiled.smem_bytes,
        compiled.split,
    )?;
    println!("  PTX → loaded function (driver)    {}", ms(t.elapsed()));
    if let Some(c) = &cubin {
        let t = Instant::now();
        gpu.load(Image::Cubin(c), &compiled.name, compiled.smem_bytes, compiled.split)?;
        println!("  cubin → loaded function (driver)  {}", ms(t.elapsed()));
    }

    // 2. The JIT's first use: cold (empty disk cache), then a fresh JIT on the warm disk cache,
    // then the same handle again.
    println!("\nJIT, from `kernel(..)` to a loaded function");
    let cold = Jit::new(&gpu, Source::Static(SOURCE), opts.clone())?;
    let t = Instant::now();
    let k = cold.kernel("vector_add", &bindings)?;
    let l = k.prepare(&[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(1)])?;
    let t_cold = t.elapsed();
    assert_eq!(l.origin(), Origin::Compiled);
    println!("  cold (empty disk cache)           {}", ms(t_cold));

    let warm = Jit::new(&gpu, Source::Static(SOURCE), opts.clone())?;
    let t = Instant::now();
    let k = warm.kernel("vector_add", &bindings)?;
    let l = k.prepare(&[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(1)])?;
    let t_disk = t.elapsed();
    if l.origin() != Origin::DiskCache {
        return Err(format!(
            "the fresh JIT did not hit the disk cache ({:?}); stats {:?}",
            l.origin(),
            warm.stats()
        )
        .into());
    }
    println!(
        "  disk cache hit (fresh Jit)        {}   ({})",
        ms(t_disk),
        if l.from_cubin() { "cubin" } else { "PTX" }
    );
    let t = Instant::now();
    let l = k.prepare(&[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(1)])?;
    println!("  in memory (same handle)           {}", us(t.elapsed()));

    // 3. Launch overhead on the same CUfunction: the JIT handle against the raw driver call, on
    // the default stream and on a non-blocking stream; for reference, cudarc's launch builder on
    // the untyped API (another load) and the per-thread default stream. The paths take turns
    // round by round, so that drifts of the machine (clocks, other processes) hit them alike.
    println!(
        "\nhost time per launch: {LAUNCHES} launches of vector_add (n = 1, 1 program of {} threads), median of {ROUNDS} interleaved rounds",
        l.threads_per_block()
    );
    let grid = 1u32;
    let func = l.cu_function();
    let (threads, smem) = (l.threads_per_block(), l.smem_bytes());
    let own = gpu.new_stream()?;
    let addrs = [x.device_ptr(), y.device_ptr(), out.device_ptr()];
    let raw_on = |stream: cudarc::driver::sys::CUstream| {
        let mut values: [u64; 4] = [addrs[0], addrs[1], addrs[2], 1];
        move || -> Result<(), Box<dyn std::error::Error>> {
            let mut params: [*mut c_void; 4] = [
                (&mut values[0] as *mut u64).cast(),
                (&mut values[1] as *mut u64).cast(),
                (&mut values[2] as *mut u64).cast(),
                (&mut values[3] as *mut u64).cast(),
            ];
            // SAFETY: four parameters as the kernel declares them (three device addresses of
            // live tensors, then an i32 in the low bytes of its slot); the context is current
            // on this thread, which created it.
            unsafe {
                cudarc::driver::result::launch_kernel(func, (grid, 1, 1), (threads, 1, 1), smem, stream, &mut params)
            }?;
            Ok(())
        }
    };
    let bx = gpu.upload(&1.0f32.to_le_bytes())?;
    let by = gpu.upload(&2.0f32.to_le_bytes())?;
    let bout = gpu.upload(&0.0f32.to_le_bytes())?;
    let mut o_own = DeviceTensor::<f32>::zeros(&gpu, 1)?;
    gpu.synchronize()?;
    let paths: Vec<(&str, Path)> = vec![
        (
            "JitKernel::launch_async (default stream)",
            Box::new(|| {
                k.launch_async(grid, &[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(1)])?;
                Ok(())
            }),
        ),
        ("raw cuLaunchKernel, default stream", Box::new(raw_on(gpu.cu_stream()))),
        (
            "JitKernel::launch_on (non-blocking stream)",
            Box::new(|| {
                k.launch_on(
                    &own,
                    grid,
                    &[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut o_own), Arg::i32(1)],
                )?;
                Ok(())
            }),
        ),
        ("raw cuLaunchKernel, the same stream", Box::new(raw_on(own.cu_stream()))),
        (
            "Gpu::launch_async (cudarc launch builder)",
            Box::new(|| {
                let args = [
                    KernelArg::Buffer(&bx),
                    KernelArg::Buffer(&by),
                    KernelArg::Buffer(&bout),
                    KernelArg::U32(1),
                ];
                gpu.launch_async(
                    &f_ptx,
                    [grid, 1, 1],
                    compiled.threads_per_block,
                    compiled.smem_bytes,
                    &args,
                )?;
                Ok(())
            }),
        ),
        (
            "raw, per-thread default stream",
            Box::new(raw_on(0x2 as cudarc::driver::sys::CUstream)),
        ),
    ];
    let names: Vec<&str> = paths.iter().map(|(n, _)| *n).collect();
    let t = measure(paths.into_iter().map(|(_, p)| p).collect())?;
    println!(
        "  {:<44} {:>12} {:>18} {:>22}",
        "path",
        "enqueue",
        "incl. final sync",
        format!("in bursts of {BURST}")
    );
    for (name, t) in names.iter().zip(&t) {
        println!("  {name:<44} {} {:>18} {:>22}", us(t.enqueue), us(t.total), us(t.burst));
    }
    let (jit, raw, jit_own, raw_own, builder) = (&t[0], &t[1], &t[2], &t[3], &t[4]);
    let over = |a: &Timing, b: &Timing| {
        (
            (a.enqueue.as_secs_f64() - b.enqueue.as_secs_f64()) * 1e6,
            (a.burst.as_secs_f64() - b.burst.as_secs_f64()) * 1e6,
        )
    };
    let (d_enq, d_burst) = over(jit, raw);
    let (o_enq, o_burst) = over(jit_own, raw_own);
    println!("  JIT over raw: {d_enq:+.2} µs per launch back to back, {d_burst:+.2} µs in bursts (default stream)");
    println!(
        "                {o_enq:+.2} µs per launch back to back, {o_burst:+.2} µs in bursts (non-blocking stream)"
    );
    // Back to back, the enqueue time is the host's cost only while the queue has room; if the
    // GPU drains it slower than the host fills it, the bursts (queue never full) tell the truth.
    if jit.burst.as_secs_f64() < 0.8 * jit.enqueue.as_secs_f64() {
        println!("  (back to back, the launch queue filled: the bursts column is the host's own cost)");
    }

    // Where the JIT's own time goes, without the driver: the argument check alone, and the
    // check plus the specialisation lookup (what `prepare` does), per call.
    let mut o2 = DeviceTensor::<f32>::zeros(&gpu, 1)?;
    let args = [Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut o2), Arg::i32(1)];
    let per_call = |f: &dyn Fn()| {
        let t = Instant::now();
        for _ in 0..LAUNCHES * 10 {
            f();
        }
        t.elapsed().as_secs_f64() * 1e9 / (LAUNCHES * 10) as f64
    };
    let t_check = per_call(&|| {
        let _ = std::hint::black_box(k.check(std::hint::black_box(&args)));
    });
    let t_prepare = per_call(&|| {
        let _ = std::hint::black_box(k.prepare(std::hint::black_box(&args)));
    });
    println!(
        "  of the JIT's cost, without the driver: argument check {t_check:.0} ns, check + specialisation lookup {t_prepare:.0} ns"
    );

    if let Some(i) = std::env::args().position(|a| a == "--json") {
        let path = std::env::args().nth(i + 1).ok_or("--json needs a path")?;
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let json = serde_json::json!({
            "kernel": "vector_add",
            "jit_us": us(jit.burst),
            "raw_us": us(raw.burst),
            "builder_us": us(builder.burst),
            "cold_ms": t_cold.as_secs_f64() * 1e3,
            "disk_ms": t_disk.as_secs_f64() * 1e3,
        });
        std::fs::write(&path, json.to_string() + "\n")?;
        println!("wrote {path}");
    }

    if out.download()? != [3.0] {
        return Err("vector_add computed a wrong sum".into());
    }
    println!("\nOK");
    Ok(())
}
