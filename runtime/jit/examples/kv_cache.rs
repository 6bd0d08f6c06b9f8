//! A paged KV cache that grows in place: many sequences append one token per decode step, and
//! an attention kernel reads every token each sequence has cached, through a block table.
//!
//! ```text
//! cargo run --release -p tile-jit --example kv_cache [-- --bench]
//! ```
//!
//! The K and V caches are [`GrowableTensor`]s: a large range of device addresses reserved once,
//! physical memory mapped chunk by chunk as pages are handed out. Growing copies nothing and the
//! base address never changes, so the block table's page ids stay valid and nothing is
//! re-uploaded. Each step runs `paged_append` (the new token's K and V rows into their slot) and
//! `paged_decode` (dsl-examples/paged_attention.tile); every few steps the output is compared with
//! attention computed on the host from a host copy of every token.
//!
//! With `--bench` it also measures what growing costs at 8 GB of cache: mapping one more chunk
//! into the reserved range, against the alternative without virtual memory (allocate a larger
//! buffer, copy 8 GB into it, free the old one).
//!
//! Without a GPU it says so and exits with status 1.

use std::process::ExitCode;
use std::time::Instant;

use tile_jit::{Arg, ConstValue, DType, DeviceTensor, Gpu, GrowableTensor, Jit, JitOptions, Source};

const SOURCE: &str = include_str!("../../../dsl-examples/paged_attention.tile");
const PAGE: usize = 16;
const D: usize = 64;
const HEADS: usize = 8;
const SEQS: usize = 64;
const MAX_PAGES: usize = 64; // up to 1024 tokens per sequence
const STEPS: usize = 300;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A small deterministic generator (xorshift), so that runs are repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// Attention of one query over `keys`/`values` (rows of D) on the host, in f64.
fn attend(q: &[f32], keys: &[Vec<f32>], values: &[Vec<f32>], scale: f32) -> Vec<f32> {
    let scores: Vec<f64> = keys
        .iter()
        .map(|k| k.iter().zip(q).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() * scale as f64)
        .collect();
    let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
    let l: f64 = w.iter().sum();
    (0..D)
        .map(|d| (w.iter().zip(values).map(|(w, v)| w * v[d] as f64).sum::<f64>() / l) as f32)
        .collect()
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new(0)?;
    let jit = Jit::new(&gpu, Source::Static(SOURCE), JitOptions::default())?;
    let consts = [
        ("PAGE", ConstValue::Int(PAGE as i64)),
        ("D", ConstValue::Int(D as i64)),
        ("T", ConstValue::DType(DType::F32)),
    ];
    let append = jit.kernel("paged_append", &consts)?;
    let decode = jit.kernel("paged_decode", &consts)?;
    let page_elems = HEADS * PAGE * D;

    // Room for every page of every sequence (addresses only), 2 MiB chunks mapped on demand.
    let capacity = SEQS * MAX_PAGES * page_elems;
    let mut k_cache = GrowableTensor::<f32>::reserve(&gpu, capacity, 0)?;
    let mut v_cache = GrowableTensor::<f32>::reserve(&gpu, capacity, 0)?;
    let base = (k_cache.device_ptr(), v_cache.device_ptr());
    println!(
        "GPU: {}; {SEQS} sequences x {HEADS} heads, D = {D}, pages of {PAGE} tokens ({} KiB of K per page); {:.1} GiB reserved per cache, chunks of {} MiB",
        gpu.name(),
        page_elems * 4 / 1024,
        (k_cache.capacity() * 4) as f64 / (1u64 << 30) as f64,
        k_cache.chunk_bytes() >> 20
    );

    // Host state: lengths, block table, and every token's K and V for the check.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut lens: Vec<i32> = (0..SEQS).map(|s| 1 + (s * 7 % 40) as i32).collect(); // staggered starts
    let mut table = vec![0i32; SEQS * MAX_PAGES];
    let mut next_page = 0usize;
    let mut host_k: Vec<Vec<Vec<Vec<f32>>>> = vec![vec![Vec::new(); HEADS]; SEQS];
    let mut host_v = host_k.clone();
    let mut d_table = DeviceTensor::<i32>::zeros(&gpu, SEQS * MAX_PAGES)?;
    let mut d_lens = DeviceTensor::<i32>::zeros(&gpu, SEQS)?;
    let mut out = DeviceTensor::<f32>::zeros(&gpu, SEQS * HEADS * D)?;
    let scale = 1.0 / (D as f32).sqrt();
    let (mut grows, mut grow_time) = (0usize, 0f64);
    let mut checked = 0usize;

    // Sequences that start with tokens: write them through the append kernel, one step each.
    let prefill = *lens.iter().max().unwrap() as usize;
    let target: Vec<i32> = lens.clone();
    lens.iter_mut().for_each(|l| *l = 0);
    for step in 0..prefill + STEPS {
        // Every sequence still prefilling, or every one once decoding, gains a token.
        let decoding = step >= prefill;
        for s in 0..SEQS {
            if decoding || lens[s] < target[s] {
                let t = lens[s] as usize;
                if t % PAGE == 0 {
                    table[s * MAX_PAGES + t / PAGE] = next_page as i32;
                    next_page += 1;
                }
                lens[s] += 1;
            }
        }
        // Map memory for the pages handed out (whole chunks, in place).
        if next_page * page_elems > k_cache.len() {
            let t = Instant::now();
            k_cache.grow_to(next_page * page_elems)?;
            v_cache.grow_to(next_page * page_elems)?;
            grow_time += t.elapsed().as_secs_f64();
            grows += 1;
        }
        assert_eq!(
            (k_cache.device_ptr(), v_cache.device_ptr()),
            base,
            "the caches never move"
        );
        d_table.copy_from(&table)?;
        d_lens.copy_from(&lens)?;

        // New tokens (sequences that did not grow rewrite their last token with the same row).
        let (kn, vn) = (rng.vec(SEQS * HEADS * D), rng.vec(SEQS * HEADS * D));
        for s in 0..SEQS {
            for h in 0..HEADS {
                let row = |x: &[f32]| x[(s * HEADS + h) * D..][..D].to_vec();
                let (hk, hv) = (&mut host_k[s][h], &mut host_v[s][h]);
                if hk.len() < lens[s] as usize {
                    hk.push(row(&kn));
                    hv.push(row(&vn));
                } else if let (Some(k), Some(v)) = (hk.last_mut(), hv.last_mut()) {
                    *k = row(&kn);
                    *v = row(&vn);
                }
            }
        }
        let (kn_d, vn_d) = (DeviceTensor::upload(&gpu, &kn)?, DeviceTensor::upload(&gpu, &vn)?);
        let grid = (SEQS as u32, HEADS as u32);
        let (hd, mp) = (Arg::i32(HEADS as i32), Arg::i32(MAX_PAGES as i32));
        append.launch_async(
            grid,
            &[
                Arg::buf(&kn_d),
                Arg::buf(&vn_d),
                Arg::buf_mut(&mut k_cache),
                Arg::buf_mut(&mut v_cache),
                Arg::buf(&d_table),
                Arg::buf(&d_lens),
                hd,
                mp,
            ],
        )?;
        if !decoding {
            continue;
        }
        let q = rng.vec(SEQS * HEADS * D);
        let q_d = DeviceTensor::upload(&gpu, &q)?;
        decode.launch_async(
            grid,
            &[
                Arg::buf(&q_d),
                Arg::buf(&k_cache),
                Arg::buf(&v_cache),
                Arg::buf(&d_table),
                Arg::buf(&d_lens),
                Arg::buf_mut(&mut out),
                hd,
                mp,
                Arg::f32(scale),
            ],
        )?;
        let d = step - prefill;
        if d % 50 == 0 || d == STEPS - 1 {
            let got = out.download()?;
            let mut worst = 0f32;
            for s in 0..SEQS {
                for h in 0..HEADS {
                    let want = attend(&q[(s * HEADS + h) * D..][..D], &host_k[s][h], &host_v[s][h], scale);
                    let g = &got[(s * HEADS + h) * D..][..D];
                    for (a, b) in g.iter().zip(&want) {
                        let err = (a - b).abs() / (1e-3 + b.abs());
                        worst = worst.max(err);
                    }
                }
            }
            if worst > 1e-3 {
                return Err(format!(
                    "decode step {d}: the GPU's attention differs from the host's (worst relative error {worst:.2e})"
                )
                .into());
            }
            checked += 1;
            let tokens: i32 = lens.iter().sum();
            println!(
                "  step {d:>3}: {tokens:>6} tokens cached in {next_page:>4} pages, {:>4} MiB mapped per cache; output matches the host (worst rel. error {worst:.1e})",
                k_cache.mapped_bytes() >> 20
            );
        }
    }
    println!(
        "{STEPS} decode steps, {checked} checked against the host; the caches grew {grows} times ({:.1} µs per grow of both caches), the base addresses never moved",
        grow_time / grows.max(1) as f64 * 1e6
    );

    if std::env::args().any(|a| a == "--bench") {
        bench_growth(&gpu)?;
    }
    println!("OK");
    Ok(())
}

/// Growing by one chunk at 8 GB of cache: map one more chunk, against allocate + copy + free.
fn bench_growth(gpu: &Gpu) -> Result<(), Box<dyn std::error::Error>> {
    const GB8: usize = 8 << 30;
    println!("\ngrowing a cache of 8 GiB by one chunk (median of 10)");
    let mut cache = GrowableTensor::<u8>::reserve(gpu, 4 * GB8, 0)?;
    let chunk = cache.chunk_bytes();
    let t = Instant::now();
    cache.grow_to(GB8)?;
    let first = t.elapsed().as_secs_f64();
    println!(
        "  map 8 GiB in {} chunks of {} MiB: {:.1} ms, {:.1} µs per chunk",
        GB8 / chunk,
        chunk >> 20,
        first * 1e3,
        first / (GB8 / chunk) as f64 * 1e6
    );
    let mut vmm = Vec::new();
    for i in 0..10 {
        let t = Instant::now();
        cache.grow_to(GB8 + (i + 1) * chunk)?;
        vmm.push(t.elapsed().as_secs_f64());
    }
    vmm.sort_by(f64::total_cmp);
    let vmm = vmm[vmm.len() / 2];
    drop(cache);

    // Without virtual memory: a larger buffer, the old contents copied over, the old freed.
    let stream = gpu.stream();
    let mut old = DeviceTensor::<u8>::zeros(gpu, GB8)?;
    let mut copy = Vec::new();
    for _ in 0..5 {
        gpu.synchronize()?;
        let t = Instant::now();
        let mut bigger = DeviceTensor::<u8>::uninit_on(gpu, stream, old.len() + chunk)?;
        bigger.copy_from_device(&old, stream)?;
        old = bigger;
        gpu.synchronize()?;
        copy.push(t.elapsed().as_secs_f64());
    }
    copy.sort_by(f64::total_cmp);
    let copy = copy[copy.len() / 2];
    println!("  one more chunk, mapped in place:     {:>10.1} µs", vmm * 1e6);
    println!("  allocate larger + copy 8 GiB + free: {:>10.1} µs", copy * 1e6);
    println!("  in place is {:.0}x cheaper", copy / vmm);
    println!(
        "BENCH vmm_grow_us={:.2} alloc_copy_us={:.2} ratio={:.1}",
        vmm * 1e6,
        copy * 1e6,
        copy / vmm
    );
    Ok(())
}
