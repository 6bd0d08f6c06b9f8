//! JIT-compiles `dsl-examples/vector_add.tile`, adds two vectors of 2^24 random f32 on the GPU,
//! checks the sum on the host and prints OK.
//!
//! ```text
//! cargo run --release -p tile-jit --example vector_add
//! ```
//!
//! Without a GPU (or its driver) it says so and exits with status 1; a wrong sum exits with 2.

use std::process::ExitCode;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tile_jit::{Arg, ConstValue, DeviceTensor, Gpu, Jit, JitOptions, Origin, Source};

const N: usize = 1 << 24;
const BLOCK: u32 = 1024;

fn main() -> ExitCode {
    match run() {
        Ok(true) => {
            println!("OK");
            ExitCode::SUCCESS
        }
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether the GPU's sum is right.
fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let gpu = Gpu::new(0)?;
    let jit = Jit::new(
        &gpu,
        Source::Static(include_str!("../../../dsl-examples/vector_add.tile")),
        JitOptions::default(),
    )?;
    println!(
        "GPU: {} (compute capability {:?}); target {}; cubins: {}; disk cache: {}",
        gpu.name(),
        gpu.compute_capability()?,
        jit.target().sm,
        if jit.uses_ptxas() { "yes (ptxas)" } else { "no (PTX)" },
        jit.cache_dir().map_or("off".to_string(), |d| d.display().to_string()),
    );
    let started = Instant::now();
    let add = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(BLOCK as i64))])?;
    let checked = started.elapsed();

    let mut rng = StdRng::seed_from_u64(0x7117e);
    let x: Vec<f32> = (0..N).map(|_| rng.random_range(-1.0..1.0)).collect();
    let y: Vec<f32> = (0..N).map(|_| rng.random_range(-1.0..1.0)).collect();
    let dx = DeviceTensor::upload(&gpu, &x)?;
    let dy = DeviceTensor::upload(&gpu, &y)?;
    // Poisoned, so that an element the kernel fails to write cannot pass as a sum.
    let mut dout = DeviceTensor::upload(&gpu, &vec![f32::NAN; N])?;

    let args = [
        Arg::buf(&dx),
        Arg::buf(&dy),
        Arg::buf_mut(&mut dout),
        Arg::i32(N as i32),
    ];
    // The first launch compiles (or reads the disk cache) and loads; do that explicitly here to
    // time it.
    let started = Instant::now();
    let loaded = add.prepare(&args)?;
    println!(
        "vector_add: checked in {:.1} ms; specialisation {} {} and loaded in {:.1} ms ({}); \
         {} threads per block, {} registers",
        checked.as_secs_f64() * 1e3,
        loaded.specialization(),
        if loaded.origin() == Origin::Compiled {
            "compiled"
        } else {
            "read from the disk cache"
        },
        started.elapsed().as_secs_f64() * 1e3,
        if loaded.from_cubin() { "cubin" } else { "PTX" },
        loaded.threads_per_block(),
        loaded.registers(),
    );
    add.launch((N as u32).div_ceil(BLOCK), &args)?;
    let out = dout.download()?;

    // f32 addition is exactly rounded on both sides: the sums must be bit-for-bit equal.
    let bad: Vec<usize> = (0..N).filter(|&i| out[i] != x[i] + y[i]).collect();
    if let Some(&i) = bad.first() {
        eprintln!(
            "FAILED: {} of {N} elements differ; first at [{i}]: got {}, expected {}",
            bad.len(),
            out[i],
            x[i] + y[i]
        );
        return Ok(false);
    }
    println!("checked {N} sums on the host");
    Ok(true)
}
