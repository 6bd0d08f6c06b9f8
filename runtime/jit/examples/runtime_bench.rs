//! What the runtime's systems cost on this GPU, each against the plain alternative in the same
//! run: CUDA Graph replay against launches one by one, pool allocation against
//! `cuMemAlloc`/`cuMemFree`, and host-to-device copies from pinned against pageable memory.
//!
//! ```text
//! cargo run --release -p tile-jit --example runtime_bench [-- --json PATH]
//! ```
//!
//! - Graphs: 100 launches of `vector_add` (65,536 elements each, a few µs of GPU work) captured
//!   once. Host time of one replay, per kernel, against one `launch_on` per kernel; GPU time per
//!   kernel (events around the replay) against the same 100 kernels launched one by one. For the
//!   GPU times, a long kernel runs first, so that the 100 launches are all queued before the
//!   first runs: the GPU then runs them back to back, whatever the host's speed.
//! - Pool: a 1 MiB temporary allocated and freed in stream order, against `cuMemAlloc` plus
//!   `cuMemFree` (host time, median of 1,000).
//! - Pinned: 256 MiB host to device, from pinned and from pageable memory (GPU time from events,
//!   median of 10; GB/s).
//!
//! Without a GPU it says so and exits with status 1.

use std::process::ExitCode;
use std::time::Instant;

use tile_jit::{Arg, ConstValue, DeviceTensor, Gpu, GraphCapture, Jit, JitOptions, PinnedTensor, Source};

const VECTOR_ADD: &str = include_str!("../../../dsl-examples/vector_add.tile");
const NODES: usize = 100;
const SMALL: usize = 65_536;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn small<'a>(x: &'a DeviceTensor<f32>, y: &'a DeviceTensor<f32>, out: &'a mut DeviceTensor<f32>) -> [Arg<'a>; 4] {
    [Arg::buf(x), Arg::buf(y), Arg::buf_mut(out), Arg::i32(SMALL as i32)]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new(0)?;
    println!("GPU: {}", gpu.name());
    let jit = Jit::new(&gpu, Source::Static(VECTOR_ADD), JitOptions::default())?;
    let add = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(1024))])?;
    let stream = gpu.new_stream()?;

    // --- Graphs -------------------------------------------------------------------------------
    let x = DeviceTensor::upload(&gpu, &vec![1.0f32; SMALL])?;
    let y = DeviceTensor::upload(&gpu, &vec![2.0f32; SMALL])?;
    let mut out = DeviceTensor::<f32>::zeros(&gpu, SMALL)?;
    let big_n = 1usize << 28;
    let bx = DeviceTensor::<f32>::zeros(&gpu, big_n)?;
    let mut bout = DeviceTensor::<f32>::zeros(&gpu, big_n)?;
    gpu.synchronize()?;
    let grid = (SMALL as u32).div_ceil(1024);
    // Compile before capturing.
    add.prepare(&small(&x, &y, &mut out))?;
    let mut cap = GraphCapture::begin(&stream)?;
    for _ in 0..NODES {
        cap.launch(&add, grid, &small(&x, &y, &mut out))?;
    }
    let graph = cap.finish()?;
    graph.upload(&stream)?;
    graph.launch(&stream)?;
    stream.synchronize()?;
    if out.download()? != vec![3.0f32; SMALL] {
        return Err("the replayed graph computed a wrong sum".into());
    }

    // Host time: one replay against NODES launches (synchronising between rounds, untimed).
    let (mut replay, mut one_by_one) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        let t = Instant::now();
        graph.launch(&stream)?;
        replay.push(t.elapsed().as_secs_f64());
        stream.synchronize()?;
        let t = Instant::now();
        for _ in 0..NODES {
            add.launch_on(&stream, grid, &small(&x, &y, &mut out))?;
        }
        one_by_one.push(t.elapsed().as_secs_f64());
        stream.synchronize()?;
    }
    let (replay, one_by_one) = (median(replay), median(one_by_one));

    // GPU time per kernel, both queued behind a long kernel.
    let long = |out: &mut DeviceTensor<f32>| {
        add.launch_on(
            &stream,
            (big_n as u32).div_ceil(1024),
            &[Arg::buf(&bx), Arg::buf(&bx), Arg::buf_mut(out), Arg::i32(big_n as i32)],
        )
    };
    let (mut g_gpu, mut l_gpu) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        long(&mut bout)?;
        let s = stream.record()?;
        graph.launch(&stream)?;
        let e = stream.record()?;
        g_gpu.push(s.elapsed_ms(&e)? as f64 / NODES as f64);
        long(&mut bout)?;
        let s = stream.record()?;
        for _ in 0..NODES {
            add.launch_on(&stream, grid, &small(&x, &y, &mut out))?;
        }
        let e = stream.record()?;
        l_gpu.push(s.elapsed_ms(&e)? as f64 / NODES as f64);
    }
    let (g_gpu, l_gpu) = (median(g_gpu), median(l_gpu));
    println!("\nCUDA Graph of {NODES} vector_add launches ({SMALL} elements each)");
    println!(
        "  host per kernel:  replay {:>7.3} µs   one launch each {:>7.3} µs   ({:.1}x less)",
        replay / NODES as f64 * 1e6,
        one_by_one / NODES as f64 * 1e6,
        one_by_one / replay
    );
    println!(
        "  GPU per kernel:   replay {:>7.3} µs   back to back    {:>7.3} µs   (replay/back-to-back {:.3})",
        g_gpu * 1e3,
        l_gpu * 1e3,
        g_gpu / l_gpu
    );
    drop((bx, bout));

    // --- Pool ---------------------------------------------------------------------------------
    const MB: usize = 1 << 20;
    let (mut pool, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        let t = Instant::now();
        let tmp = DeviceTensor::<u8>::uninit_on(&gpu, &stream, MB)?;
        drop(tmp);
        pool.push(t.elapsed().as_secs_f64());
    }
    stream.synchronize()?;
    for _ in 0..1000 {
        let t = Instant::now();
        // SAFETY: a plain allocation freed right away; nothing uses it.
        unsafe {
            let p = cudarc::driver::result::malloc_sync(MB)?;
            cudarc::driver::result::free_sync(p)?;
        }
        plain.push(t.elapsed().as_secs_f64());
    }
    let (pool, plain) = (median(pool), median(plain));
    println!("\n1 MiB temporary, allocate + free (host, median of 1000)");
    println!(
        "  stream-ordered pool {:>7.2} µs   cuMemAlloc + cuMemFree {:>7.2} µs   ({:.0}x less)",
        pool * 1e6,
        plain * 1e6,
        plain / pool
    );

    // --- Pinned copies ------------------------------------------------------------------------
    const COPY: usize = 256 << 20;
    let pinned = PinnedTensor::<u8>::zeros(&gpu, COPY)?;
    let pageable = vec![0u8; COPY];
    let mut dst = DeviceTensor::<u8>::zeros(&gpu, COPY)?;
    gpu.synchronize()?;
    let (mut pin, mut page) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let s = stream.record()?;
        dst.copy_from_pinned(&pinned, &stream)?;
        let e = stream.record()?;
        pin.push(s.elapsed_ms(&e)? as f64 * 1e-3);
        gpu.synchronize_all()?;
        let t = Instant::now();
        dst.copy_from(&pageable)?;
        gpu.synchronize_all()?;
        page.push(t.elapsed().as_secs_f64());
    }
    let (pin, page) = (COPY as f64 / median(pin) / 1e9, COPY as f64 / median(page) / 1e9);
    println!("\n256 MiB host to device (median of 10)");
    println!("  pinned {pin:>6.1} GB/s   pageable {page:>6.1} GB/s");

    println!(
        "BENCH graph_host_us_per_kernel={:.3} launch_host_us_per_kernel={:.3} graph_gpu_us_per_kernel={:.3} launch_gpu_us_per_kernel={:.3} pool_us={:.3} cumemalloc_us={:.3} pinned_gbps={pin:.2} pageable_gbps={page:.2}",
        replay / NODES as f64 * 1e6,
        one_by_one / NODES as f64 * 1e6,
        g_gpu * 1e3,
        l_gpu * 1e3,
        pool * 1e6,
        plain * 1e6
    );
    if let Some(i) = std::env::args().position(|a| a == "--json") {
        let path = std::env::args().nth(i + 1).ok_or("--json needs a path")?;
        let json = serde_json::json!({
            "graph_host_us_per_kernel": replay / NODES as f64 * 1e6,
            "launch_host_us_per_kernel": one_by_one / NODES as f64 * 1e6,
            "graph_gpu_us_per_kernel": g_gpu * 1e3,
            "launch_gpu_us_per_kernel": l_gpu * 1e3,
            "pool_alloc_free_us": pool * 1e6,
            "cumemalloc_free_us": plain * 1e6,
            "pinned_h2d_gbps": pin,
            "pageable_h2d_gbps": page,
        });
        std::fs::write(&path, json.to_string() + "\n")?;
    }
    println!("OK");
    Ok(())
}
