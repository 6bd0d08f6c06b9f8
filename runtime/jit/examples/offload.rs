//! Weight offload: layers' weights live in pinned host memory and are streamed to the GPU while
//! the previous layer computes, the way a model larger than the GPU runs.
//!
//! ```text
//! cargo run --release -p tile-jit --example offload
//! ```
//!
//! Eight layers `x <- x @ W_l` (bf16, x of [16384, 4096], each W of [4096, 4096]: 32 MiB). Two
//! device slots hold weights; a copy stream fills slot `l % 2` with `W_l` while the compute
//! stream multiplies by `W_{l-1}` from the other slot. Events order the two streams (a copy
//! waits until the layer that last read its slot is done; a layer waits for its weights) and
//! time both: the timeline, the copy bandwidth achieved and how much of the copying was hidden
//! under compute are printed. The result is compared, bit for bit, with the same layers run one
//! after another with every weight already on the GPU.
//!
//! Without a GPU it says so and exits with status 1.

use std::process::ExitCode;

use tile_jit::half::bf16;
use tile_jit::{Arg, ConstValue, DType, DeviceTensor, Event, Gpu, Jit, JitKernel, JitOptions, PinnedTensor, Source};

const SOURCE: &str = include_str!("../../../dsl-examples/matmul.tile");
const LAYERS: usize = 8;
const M: usize = 16384;
const K: usize = 4096;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn weights(layer: usize) -> Vec<bf16> {
    // Uniform in ±sqrt(3 / K): variance 1/K, so activations keep their scale layer after layer.
    let a = (3.0 / K as f32).sqrt();
    let mut s = 0x2545_f491_4f6c_dd1du64 ^ (layer as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..K * K)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            bf16::from_f32(((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * a)
        })
        .collect()
}

fn matmul_args<'a>(
    x: &'a DeviceTensor<bf16>,
    w: &'a DeviceTensor<bf16>,
    y: &'a mut DeviceTensor<bf16>,
) -> [Arg<'a>; 12] {
    let (m, k) = (M as i32, K as i32);
    [
        Arg::buf(x),
        Arg::buf(w),
        Arg::buf_mut(y),
        Arg::i32(m),
        Arg::i32(k),
        Arg::i32(k),
        Arg::i32(k),
        Arg::i32(1),
        Arg::i32(k),
        Arg::i32(1),
        Arg::i32(k),
        Arg::i32(1),
    ]
}

fn grid(mm: &JitKernel) -> u32 {
    let c = |name: &str| match mm.consts().iter().find(|(n, _)| n == name) {
        Some((_, ConstValue::Int(v))) => *v as usize,
        _ => 128,
    };
    (M.div_ceil(c("BM")) * K.div_ceil(c("BN"))) as u32
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new(0)?;
    let jit = Jit::new(&gpu, Source::Static(SOURCE), JitOptions::default())?;
    let mm = jit.kernel("matmul_tma", &[("T", ConstValue::DType(DType::BF16))])?;
    let grid = grid(&mm);
    let w_bytes = K * K * 2;
    println!(
        "GPU: {}; {LAYERS} layers x <- x @ W (bf16, x [{M}, {K}], W [{K}, {K}] = {} MiB each, in pinned host memory)",
        gpu.name(),
        w_bytes >> 20
    );

    let host_w: Vec<Vec<bf16>> = (0..LAYERS).map(weights).collect();
    let pinned: Vec<PinnedTensor<bf16>> = host_w
        .iter()
        .map(|w| PinnedTensor::from_slice(&gpu, w))
        .collect::<Result<_, _>>()?;
    let x0: Vec<bf16> = (0..M * K)
        .map(|i| bf16::from_f32(((i * 7919 % 1000) as f32 - 500.0) / 300.0))
        .collect();

    // Reference: every weight resident, the layers one after another on the default stream.
    let resident: Vec<DeviceTensor<bf16>> = host_w
        .iter()
        .map(|w| DeviceTensor::upload(&gpu, w))
        .collect::<Result<_, _>>()?;
    let mut acts = [
        DeviceTensor::upload(&gpu, &x0)?,
        DeviceTensor::<bf16>::zeros(&gpu, M * K)?,
    ];
    for (l, w) in resident.iter().enumerate() {
        let [a, b] = &mut acts;
        let (src, dst) = if l % 2 == 0 { (&*a, b) } else { (&*b, a) };
        mm.launch_async(grid, &matmul_args(src, w, dst))?;
    }
    let want = acts[LAYERS % 2].download()?;
    drop(resident);

    // Streamed: two weight slots, a copy stream and a compute stream.
    let (copy, compute) = (gpu.new_stream()?, gpu.new_stream()?);
    let mut slots = [
        DeviceTensor::<bf16>::zeros(&gpu, K * K)?,
        DeviceTensor::<bf16>::zeros(&gpu, K * K)?,
    ];
    let mut acts = [
        DeviceTensor::upload(&gpu, &x0)?,
        DeviceTensor::<bf16>::zeros(&gpu, M * K)?,
    ];
    gpu.synchronize()?;
    let mut runs = Vec::new();
    for _ in 0..3 {
        acts[0].copy_from(&x0)?;
        gpu.synchronize()?;
        let t0 = copy.record()?;
        compute.wait(&t0)?;
        let mut copies: Vec<(Event, Event)> = Vec::new();
        let mut layers: Vec<(Event, Event)> = Vec::new();
        for l in 0..LAYERS {
            let s = l % 2;
            // The slot is free once the layer that read it (l - 2) is done.
            if l >= 2 {
                copy.wait(&layers[l - 2].1)?;
            }
            let c0 = copy.record()?;
            slots[s].copy_from_pinned(&pinned[l], &copy)?;
            copies.push((c0, copy.record()?));
            compute.wait(&copies[l].1)?;
            let k0 = compute.record()?;
            let [a, b] = &mut acts;
            let (src, dst) = if l % 2 == 0 { (&*a, b) } else { (&*b, a) };
            mm.launch_on(&compute, grid, &matmul_args(src, &slots[s], dst))?;
            layers.push((k0, compute.record()?));
        }
        compute.synchronize()?;
        let at = |e: &Event| t0.elapsed_ms(e).map(|v| v as f64);
        let mut c = Vec::new();
        let mut k = Vec::new();
        for l in 0..LAYERS {
            c.push((at(&copies[l].0)?, at(&copies[l].1)?));
            k.push((at(&layers[l].0)?, at(&layers[l].1)?));
        }
        runs.push((c, k));
    }
    let got = acts[LAYERS % 2].download()?;
    if got != want {
        let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        return Err(format!(
            "the streamed layers differ from the resident ones in {bad} of {} elements",
            got.len()
        )
        .into());
    }

    // The last run's timeline (the first ones warm up).
    let (c, k) = runs.last().unwrap();
    println!("\ntimeline of the last of {} runs (ms from the start):", runs.len());
    println!("  layer   copy W_l            compute layer l");
    for l in 0..LAYERS {
        println!(
            "  {l:>5}   {:>7.3} - {:>7.3}   {:>7.3} - {:>7.3}",
            c[l].0, c[l].1, k[l].0, k[l].1
        );
    }
    let copy_ms: f64 = c.iter().map(|(a, b)| b - a).sum();
    let compute_ms: f64 = k.iter().map(|(a, b)| b - a).sum();
    // Copy time that ran while a layer computed.
    let hidden: f64 = c
        .iter()
        .map(|(a, b)| k.iter().map(|(x, y)| (b.min(*y) - a.max(*x)).max(0.0)).sum::<f64>())
        .sum();
    let total = k.last().unwrap().1;
    let gbps = (LAYERS * w_bytes) as f64 / (copy_ms * 1e-3) / 1e9;
    let tflops = 2.0 * (M * K * K * LAYERS) as f64 / (compute_ms * 1e-3) / 1e12;
    println!("\n  copies:  {copy_ms:.3} ms in all, {gbps:.1} GB/s host to device");
    println!("  compute: {compute_ms:.3} ms in all, {tflops:.0} TFLOP/s");
    println!(
        "  overlap: {:.0}% of the copy time ran under compute; end to end {total:.3} ms against {:.3} ms one after the other",
        100.0 * hidden / copy_ms,
        copy_ms + compute_ms
    );
    println!(
        "BENCH offload_copy_gbps={gbps:.2} overlap_pct={:.1} total_ms={total:.3} serial_ms={:.3}",
        100.0 * hidden / copy_ms,
        copy_ms + compute_ms
    );
    println!("the streamed result equals the resident one bit for bit\nOK");
    Ok(())
}
