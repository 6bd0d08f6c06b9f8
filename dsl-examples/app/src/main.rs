//! Calls three kernels of dsl-examples through typed launchers, as an application would, and
//! checks each result against the host:
//!
//!     cargo run --release -p tile-app-example
//!
//! `tile_jit::kernels!` reads each `.tile` file when this crate compiles (a mistake in it is a
//! compile error pointing at the `.tile` line) and generates a module: `Kernels::new` makes the
//! file's JIT, `Kernels::KERNEL(consts)` a launcher whose `launch` takes the kernel's arguments
//! typed, in signature order, and computes the grid from the kernel's `#[grid(..)]`.

use std::process::ExitCode;

use tile_jit::half::bf16;
use tile_jit::{DeviceTensor, Gpu, JitOptions};

tile_jit::kernels!(mod vadd = "../vector_add.tile");
tile_jit::kernels!(mod mm = "../matmul.tile");
tile_jit::kernels!(mod norm = "../rmsnorm.tile");

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

/// A deterministic value in [-1, 1) for element `i` of input `salt`.
fn value(i: usize, salt: u64) -> f32 {
    let h = (i as u64 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    ((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

fn run() -> Result<(), Error> {
    let gpu = Gpu::new(0)?;
    println!("GPU: {}", gpu.name());
    let opts = JitOptions::default();

    // vector_add(x: *f32, y: *f32, out: *mut f32, n: i32), #[grid(cdiv(n, BLOCK))].
    let kernels = vadd::Kernels::new(&gpu, opts.clone())?;
    let add = kernels.vector_add(vadd::VectorAddConsts::default())?;
    let n = 1_000_003;
    let (xh, yh): (Vec<f32>, Vec<f32>) = (
        (0..n).map(|i| value(i, 1)).collect(),
        (0..n).map(|i| value(i, 2)).collect(),
    );
    let x = DeviceTensor::upload(&gpu, &xh)?;
    let y = DeviceTensor::upload(&gpu, &yh)?;
    let mut out = DeviceTensor::<f32>::zeros(&gpu, n)?;
    add.launch(&x, &y, &mut out, n as i32)?;
    let got = out.download()?;
    let bad = (0..n).filter(|&i| got[i] != xh[i] + yh[i]).count();
    report("vector_add", &format!("n={n}"), add.kernel(), bad, 0.0)?;

    // matmul<T: dtype>(a: *T, b: *T, c: *mut T, M, N, K, strides..), T = bf16 from the type.
    let kernels = mm::Kernels::new(&gpu, opts.clone())?;
    let matmul = kernels.matmul::<bf16>(mm::MatmulConsts::default())?;
    let (m, nn, k) = (500usize, 384usize, 320usize);
    let ah: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(value(i, 3))).collect();
    let bh: Vec<bf16> = (0..k * nn).map(|i| bf16::from_f32(value(i, 4))).collect();
    let a = DeviceTensor::upload(&gpu, &ah)?;
    let b = DeviceTensor::upload(&gpu, &bh)?;
    let mut c = DeviceTensor::<bf16>::zeros(&gpu, m * nn)?;
    let (mi, ni, ki) = (m as i32, nn as i32, k as i32);
    matmul.launch(&a, &b, &mut c, mi, ni, ki, ki, 1, ni, 1, ni, 1)?;
    let got = c.download()?;
    let mut worst = 0f32;
    for i in 0..m {
        for j in 0..nn {
            let want: f32 = (0..k).map(|p| ah[i * k + p].to_f32() * bh[p * nn + j].to_f32()).sum();
            let err = (got[i * nn + j].to_f32() - want).abs() / want.abs().max(1.0);
            worst = worst.max(err);
        }
    }
    // One bf16 rounding of the result: 2^-8 relative.
    let bad = usize::from(worst > 1.0 / 128.0);
    report("matmul<bf16>", &format!("{m}x{nn}x{k}"), matmul.kernel(), bad, worst)?;

    // rmsnorm<T: dtype>(x: *T, w: *T, y: *mut T, n_rows, n, stride, eps: f32), T = f32.
    let kernels = norm::Kernels::new(&gpu, opts)?;
    let rms = kernels.rmsnorm::<f32>(norm::RmsnormConsts::default())?;
    let (rows, cols) = (1000usize, 2048usize);
    let xh: Vec<f32> = (0..rows * cols).map(|i| value(i, 5)).collect();
    let wh: Vec<f32> = (0..cols).map(|i| 1.0 + value(i, 6) / 4.0).collect();
    let x = DeviceTensor::upload(&gpu, &xh)?;
    let w = DeviceTensor::upload(&gpu, &wh)?;
    let mut yd = DeviceTensor::<f32>::zeros(&gpu, rows * cols)?;
    let eps = 1e-6f32;
    rms.launch(&x, &w, &mut yd, rows as i32, cols as i32, cols as i32, eps)?;
    let got = yd.download()?;
    let mut worst = 0f32;
    for r in 0..rows {
        let row = &xh[r * cols..(r + 1) * cols];
        let ms = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / cols as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for j in 0..cols {
            let want = (row[j] as f64 * inv * wh[j] as f64) as f32;
            worst = worst.max((got[r * cols + j] - want).abs() / want.abs().max(1e-3));
        }
    }
    let bad = usize::from(worst > 1e-5);
    report("rmsnorm<f32>", &format!("{rows}x{cols}"), rms.kernel(), bad, worst)?;

    // A grid that `#[grid(..)]` cannot give is an error pointing at the expression.
    match add.launch(&x, &y, &mut out, -5000) {
        Err(e) => println!("n = -5000 is refused: {}", e.to_string().lines().next().unwrap_or("")),
        Ok(()) => return Err("a negative grid was launched".into()),
    }
    Ok(())
}

/// One line per kernel: its constants as the JIT chose them and the comparison with the host.
fn report(name: &str, size: &str, k: &tile_jit::JitKernel, bad: usize, worst: f32) -> Result<(), Error> {
    let consts: Vec<String> = k.consts().iter().map(|(n, v)| format!("{n}={v}")).collect();
    let status = if bad == 0 { "ok" } else { "FAILED" };
    println!(
        "{status:6} {name:13} {size:12} warps={} stages={} {}  max rel err {worst:.2e}",
        k.num_warps(),
        k.num_stages(),
        consts.join(" ")
    );
    if bad == 0 {
        Ok(())
    } else {
        Err(format!("{name}: {bad} elements differ from the host").into())
    }
}
