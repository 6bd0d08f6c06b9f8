//! The JIT and the runtime on a real GPU. Ignored by default (CI has no GPU); run on the GPU
//! host with `cargo test --release -p tile-jit -- --ignored`, or the built test binary with
//! `--ignored`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tile_jit::half::{bf16, f16};
use tile_jit::{
    Arg, ArgError, CompileEvent, CompileHook, ConstValue, DeviceTensor, Gpu, GraphCapture, Image, Jit, JitError,
    JitOptions, KernelArg, NodeId, Origin, Source,
};

tile_jit::kernels!(mod vadd = "../../dsl-examples/vector_add.tile");

const VECTOR_ADD: &str = include_str!("../../../dsl-examples/vector_add.tile");

const MIXED: &str = include_str!("kernels/mixed.tile");

const DESCRIPTORS: &str = include_str!("../../../tests/gpu/descriptors.tile");

fn gpu() -> Gpu {
    Gpu::new(0).expect("this test needs a CUDA GPU")
}

/// A fresh cache directory per test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("tile-runtime-gpu-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn opts(cache: &TempDir) -> JitOptions {
    JitOptions {
        cache_dir: Some(cache.0.clone()),
        ..JitOptions::default()
    }
}

/// `vector_add` at BLOCK = 1024 on `g`, compiled into a fresh cache named `tag` (returned, so that
/// it lives as long as the test).
fn vector_add_1024(g: &Gpu, tag: &str) -> (TempDir, tile_jit::JitKernel) {
    let cache = TempDir::new(tag);
    let jit = Jit::new(g, Source::Static(VECTOR_ADD), opts(&cache)).unwrap();
    let add = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(1024))]).unwrap();
    (cache, add)
}

fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..n).map(|i| (i % 1000) as f32 * 0.25 - 7.0).collect();
    let y = (0..n).map(|i| (i % 17) as f32 * -1.5 + 0.125).collect();
    (x, y)
}

fn run_vector_add(jit: &Jit, n: usize, block: i64) -> Vec<f32> {
    let gpu = jit.gpu();
    let k = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(block))]).unwrap();
    let (xh, yh) = inputs(n);
    let x = DeviceTensor::upload(gpu, &xh).unwrap();
    let y = DeviceTensor::upload(gpu, &yh).unwrap();
    let mut out = DeviceTensor::upload(gpu, &vec![f32::NAN; n]).unwrap();
    k.launch(
        (n as u32).div_ceil(block as u32),
        &[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(n as i32)],
    )
    .unwrap();
    out.download().unwrap()
}

fn assert_sum(n: usize, got: &[f32]) {
    let (x, y) = inputs(n);
    for i in 0..n {
        assert_eq!(got[i], x[i] + y[i], "element {i} of {n}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn vector_add_matches_the_host() {
    let cache = TempDir::new("add");
    let jit = Jit::new(&gpu(), Source::Static(VECTOR_ADD), opts(&cache)).unwrap();
    for (n, block) in [(1, 256), (1000, 512), (98_765, 1024), (1 << 20, 2048)] {
        assert_sum(n, &run_vector_add(&jit, n, block));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_fresh_jit_reads_the_disk_cache() {
    let cache = TempDir::new("disk");
    let g = gpu();
    let first = Jit::new(&g, Source::Static(VECTOR_ADD), opts(&cache)).unwrap();
    assert_sum(5000, &run_vector_add(&first, 5000, 1024));
    assert_eq!((first.stats().compiled, first.stats().disk_hits), (1, 0));

    let second = Jit::new(&g, Source::Static(VECTOR_ADD), opts(&cache)).unwrap();
    assert_sum(5000, &run_vector_add(&second, 5000, 1024));
    assert_eq!((second.stats().compiled, second.stats().disk_hits), (0, 1));

    // Corrupt every PTX and cubin: the next JIT notices, recompiles and still gets it right.
    for e in std::fs::read_dir(&cache.0).unwrap() {
        let p = e.unwrap().path();
        if matches!(p.extension().and_then(|x| x.to_str()), Some("ptx" | "cubin")) {
            std::fs::write(&p, b"garbage").unwrap();
        }
    }
    let third = Jit::new(&g, Source::Static(VECTOR_ADD), opts(&cache)).unwrap();
    assert_sum(5000, &run_vector_add(&third, 5000, 1024));
    let s = third.stats();
    assert_eq!((s.compiled, s.disk_hits, s.disk_corrupt), (1, 0, 1));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn each_specialisation_is_its_own_variant() {
    let cache = TempDir::new("spec");
    let g = gpu();
    let jit = Jit::new(&g, Source::Static(VECTOR_ADD), opts(&cache)).unwrap();
    let k = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(256))]).unwrap();
    let x = DeviceTensor::upload(&g, &[1.0f32; 32]).unwrap();
    let y = DeviceTensor::upload(&g, &[2.0f32; 32]).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&g, 32).unwrap();
    let tags: Vec<String> = [1, 7, 32]
        .into_iter()
        .map(|n| {
            let args = [Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(n)];
            let l = k.prepare(&args).unwrap();
            // Each launch runs the plan made for its size (a tiny one may take fewer warps).
            let warps = k.plan_for(&args).unwrap().num_warps;
            assert_eq!((l.threads_per_block(), l.smem_bytes()), (warps * 32, 0));
            assert_eq!(l.origin(), Origin::Compiled);
            k.launch(1, &args).unwrap();
            l.specialization().to_string()
        })
        .collect();
    assert_eq!(tags, ["ddd1", "ddd-", "dddd"]);
    // 7 is no multiple of 8; 8 is, not of 16.
    let args = [Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(8)];
    assert_eq!(k.prepare(&args).unwrap().specialization(), "ddde");
    assert_eq!(jit.stats().compiled, 4);
    assert_eq!(out.download().unwrap(), vec![3.0f32; 32]);
    // The same kernel asked for again shares the loaded variants.
    let again = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(256))]).unwrap();
    let args = [Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(7)];
    again.launch(1, &args).unwrap();
    assert_eq!(jit.stats().compiled, 4);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_arguments_never_reach_the_gpu() {
    let g = gpu();
    let jit = Jit::new(
        &g,
        Source::Static(VECTOR_ADD),
        JitOptions {
            cache_dir: None,
            ..JitOptions::default()
        },
    )
    .unwrap();
    let k = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(256))]).unwrap();
    let x = DeviceTensor::upload(&g, &[1.0f32; 4]).unwrap();
    let h = DeviceTensor::upload(&g, &[f16::ONE; 4]).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&g, 4).unwrap();
    let err = |r: Result<(), JitError>| match r {
        Err(JitError::Arg(e)) => e,
        other => panic!("expected an argument error, got {other:?}"),
    };
    assert!(matches!(
        err(k.launch(1, &[Arg::buf(&x), Arg::buf(&x), Arg::buf(&out), Arg::i32(4)])),
        ArgError::ReadOnly { index: 2, .. }
    ));
    assert!(matches!(
        err(k.launch(1, &[Arg::buf(&x), Arg::buf(&h), Arg::buf_mut(&mut out), Arg::i32(4)])),
        ArgError::BufferDType { index: 1, .. }
    ));
    assert!(matches!(
        err(k.launch(1, &[Arg::f32(1.0), Arg::buf(&x), Arg::buf_mut(&mut out), Arg::i32(4)])),
        ArgError::ExpectedBuffer { index: 0, .. }
    ));
    assert!(matches!(
        err(k.launch(1, &[Arg::buf(&x), Arg::buf(&x), Arg::buf_mut(&mut out)])),
        ArgError::Count { .. }
    ));
    // Nothing was compiled for any of them.
    assert_eq!(jit.stats().compiled, 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mixed_dtypes() {
    let g = gpu();
    let cache = TempDir::new("mixed");
    let jit = Jit::new(
        &g,
        Source::Text {
            name: "mixed.tile".into(),
            text: MIXED.into(),
        },
        opts(&cache),
    )
    .unwrap();
    let k = jit.kernel("mixed", &[]).unwrap();
    let n = 1000;
    let xh: Vec<f16> = (0..n).map(|i| f16::from_f32(i as f32 * 0.5)).collect();
    let yh: Vec<bf16> = (0..n).map(|i| bf16::from_f32(-(i as f32))).collect();
    let x = DeviceTensor::upload(&g, &xh).unwrap();
    let y = DeviceTensor::upload(&g, &yh).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    k.launch(
        (n as u32).div_ceil(256),
        &[
            Arg::buf(&x),
            Arg::buf(&y),
            Arg::buf_mut(&mut out),
            Arg::f32(2.0),
            Arg::i64(3),
            Arg::i32(n as i32),
        ],
    )
    .unwrap();
    let got = out.download().unwrap();
    for i in 0..n {
        let want = xh[i].to_f32() * 2.0 + yh[i].to_f32() + 3.0;
        assert_eq!(got[i], want, "element {i}");
    }
}

/// fp8 buffers and scalars from the host: products of two e4m3 values are exact in f32, and
/// the e5m2 store must round as `float8`'s saturating conversion does.
const FP8_IO: &str = "kernel fp8_io(x: *f8e4m3, y: *mut f8e5m2, out: *mut f32, s: f8e4m3, n: i32) {
    let offs = program_id(0) * 256 + arange(0, 256);
    let m = offs < n;
    let v = load(x + offs, m).to(f32) * s.to(f32);
    store(out + offs, v, m);
    store(y + offs, v.to(f8e5m2), m);
}";

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_tensors_and_scalars() {
    use tile_jit::float8::{F8E4M3, F8E5M2};
    let g = gpu();
    let cache = TempDir::new("fp8");
    let source = Source::Text {
        name: "fp8_io.tile".into(),
        text: FP8_IO.into(),
    };
    let jit = Jit::new(&g, source, opts(&cache)).unwrap();
    let k = jit.kernel("fp8_io", &[]).unwrap();
    let n = 1000;
    let xh: Vec<F8E4M3> = (0..n).map(|i| F8E4M3::from_f32(i as f32 * 0.37 - 150.0)).collect();
    let x = DeviceTensor::upload(&g, &xh).unwrap();
    let mut y = DeviceTensor::<F8E5M2>::zeros(&g, n).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    let s = F8E4M3::from_f32(1.5);
    let args = [
        Arg::buf(&x),
        Arg::buf_mut(&mut y),
        Arg::buf_mut(&mut out),
        Arg::f8e4m3(s),
        Arg::i32(n as i32),
    ];
    k.launch((n as u32).div_ceil(256), &args).unwrap();
    let (got, got8) = (out.download().unwrap(), y.download().unwrap());
    for i in 0..n {
        let want = xh[i].to_f32() * s.to_f32();
        assert_eq!(got[i], want, "element {i}");
        let want8 = F8E5M2::from_f32(want);
        assert_eq!(
            F8E5M2::to_bits(&got8[i]),
            F8E5M2::to_bits(&want8),
            "element {i}: {want}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn async_launches_run_in_order() {
    let g = gpu();
    let jit = Jit::new(&g, Source::Static(VECTOR_ADD), JitOptions::default()).unwrap();
    let k = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(1024))]).unwrap();
    let n = 10_000;
    let one = DeviceTensor::upload(&g, &vec![1.0f32; n]).unwrap();
    let mut acc = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    let grid = (n as u32).div_ceil(1024);
    for _ in 0..100 {
        // acc = acc + 1, a hundred times, without waiting in between; each old `acc` is dropped
        // while the kernel that reads it may still be queued (the stream frees it after).
        let mut tmp = DeviceTensor::<f32>::zeros(&g, n).unwrap();
        k.launch_async(
            grid,
            &[
                Arg::buf(&acc),
                Arg::buf(&one),
                Arg::buf_mut(&mut tmp),
                Arg::i32(n as i32),
            ],
        )
        .unwrap();
        acc = tmp;
    }
    assert_eq!(acc.download().unwrap(), vec![100.0f32; n]);
    // A grid with no programs launches nothing (and is not an error).
    k.launch(
        0,
        &[Arg::buf(&one), Arg::buf(&one), Arg::buf_mut(&mut acc), Arg::i32(0)],
    )
    .unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tensors_round_trip_every_host_type() {
    let g = gpu();
    fn rt<T: tile_jit::Element + PartialEq + std::fmt::Debug>(g: &Gpu, v: &[T]) {
        let t = DeviceTensor::upload(g, v).unwrap();
        assert_eq!((t.len(), t.dtype()), (v.len(), T::DTYPE));
        assert_eq!(t.download().unwrap(), v);
        assert_eq!(t.device_ptr() % 256, 0, "driver allocations are 256-byte aligned");
    }
    rt(&g, &[1.5f32, -2.0]);
    rt(&g, &[1.5f64, -2.0]);
    rt(&g, &[i32::MIN, 7]);
    rt(&g, &[i64::MIN, 7]);
    rt(&g, &[u32::MAX, 7]);
    rt(&g, &[u8::MAX, 7]);
    rt(&g, &[i8::MIN, 7]);
    rt(&g, &[u16::MAX, 7]);
    rt(&g, &[f16::MAX, f16::MIN_POSITIVE]);
    rt(&g, &[bf16::MAX, bf16::NEG_ONE]);
    rt::<f32>(&g, &[]);
    let mut z = DeviceTensor::<u16>::zeros(&g, 3).unwrap();
    assert_eq!(z.download().unwrap(), [0, 0, 0]);
    z.copy_from(&[1, 2, 3]).unwrap();
    assert_eq!(z.download().unwrap(), [1, 2, 3]);
    assert!(z.copy_from(&[1]).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_untyped_gpu_api_still_works() {
    // What `tilec verify` does: compile by hand, load, launch with untyped arguments.
    let g = gpu();
    let src = tile_driver::Source::parse("vector_add.tile", VECTOR_ADD).unwrap();
    let cc = g.compute_capability().unwrap();
    let target = tile_driver::target(if cc == (9, 0) { "sm_90a" } else { "sm_80" }).unwrap();
    let mut req = tile_driver::Request::new("vector_add", target);
    req.pins.consts = vec![("BLOCK".to_string(), ConstValue::Int(256))];
    let c = tile_driver::compile(&src, &req, tile_driver::Stage::Ptx)
        .unwrap()
        .lowered
        .unwrap()
        .compiled;
    let f = g.load(Image::Ptx(&c.ptx), &c.name, c.smem_bytes, c.split).unwrap();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let x = g.upload(&bytes(&[1.0, 2.0, 3.0])).unwrap();
    let out = g.upload(&bytes(&[0.0; 3])).unwrap();
    let args = [
        KernelArg::Buffer(&x),
        KernelArg::Buffer(&x),
        KernelArg::Buffer(&out),
        KernelArg::U32(3),
    ];
    g.launch(&f, [1, 1, 1], c.threads_per_block, c.smem_bytes, &args)
        .unwrap();
    assert_eq!(g.download(&out).unwrap(), bytes(&[2.0, 4.0, 6.0]));
    g.launch_async(&f, [1, 1, 1], c.threads_per_block, c.smem_bytes, &args)
        .unwrap();
    g.synchronize().unwrap();
}

/// C = A @ B on the host for small integers (exact in f32).
fn host_matmul(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tensor_maps_through_the_jit() {
    let cache = TempDir::new("tma");
    let g = gpu();
    let run = |jit: &Jit, m: usize, n: usize, k: usize, seed: usize| -> (Vec<f32>, Vec<f32>, usize, u32) {
        let kern = jit
            .kernel(
                "mm_desc",
                &[
                    ("BM", ConstValue::Int(128)),
                    ("BN", ConstValue::Int(128)),
                    ("BK", ConstValue::Int(64)),
                ],
            )
            .unwrap();
        let ah: Vec<f32> = (0..m * k).map(|i| ((i * 7 + seed) % 9) as f32 - 4.0).collect();
        let bh: Vec<f32> = (0..k * n).map(|i| ((i * 5 + seed) % 9) as f32 - 4.0).collect();
        let a = DeviceTensor::upload(&g, &ah.iter().map(|x| bf16::from_f32(*x)).collect::<Vec<_>>()).unwrap();
        let b = DeviceTensor::upload(&g, &bh.iter().map(|x| bf16::from_f32(*x)).collect::<Vec<_>>()).unwrap();
        let mut c = DeviceTensor::upload(&g, &vec![f32::NAN; m * n]).unwrap();
        let args = [
            Arg::buf(&a),
            Arg::buf(&b),
            Arg::buf_mut(&mut c),
            Arg::i32(m as i32),
            Arg::i32(n as i32),
            Arg::i32(k as i32),
        ];
        let loaded = kern.prepare(&args).unwrap();
        let (maps, split) = (loaded.tensor_maps(), loaded.split());
        let grid = (m.div_ceil(128) * n.div_ceil(128)) as u32;
        kern.launch(grid, &args).unwrap();
        // Again with the same tensors: the maps are found, not encoded again.
        kern.launch(grid, &args).unwrap();
        (c.download().unwrap(), host_matmul(&ah, &bh, m, n, k), maps, split)
    };
    let jit = Jit::new(&g, Source::Static(DESCRIPTORS), opts(&cache)).unwrap();
    let mut splits = Vec::new();
    // Aligned rows: both operands through the TMA engine; ragged M and a K that ends in a partial
    // block exercise the zero fill.
    // K = 0: empty A and B (C = 0), their maps read a zeroed box.
    for (m, n, k, seed) in [
        (200, 256, 192, 1),
        (128, 384, 64, 2),
        (77, 128, 320, 3),
        (64, 128, 0, 6),
    ] {
        let (got, want, maps, split) = run(&jit, m, n, k, seed);
        splits.push(split);
        // A and B through the TMA engine, and C's store too where the plan for this launch
        // leaves room for its staging buffer.
        assert!(
            maps >= 2,
            "{m}x{n}x{k}: both loaded descriptors should be copied by TMA ({maps} maps)"
        );
        assert_eq!(got, want, "{m}x{n}x{k} (split {split})");
    }
    // The handle plans for the run spec's largest case (12 programs), where the model splits the
    // loop over clusters of 2: the JIT's launches run twice the grid (a launch of the grid
    // given left half the tiles unwritten).
    assert!(splits.iter().any(|s| *s > 1), "no split plan was launched: {splits:?}");
    // Rows that are not 16-byte aligned: the same kernel through pointers.
    let (got, want, maps, _) = run(&jit, 100, 97, 150, 4);
    assert_eq!(maps, 0);
    assert_eq!(got, want);
    // A fresh JIT reads the specialisation, tensor maps included, from the disk cache.
    let maps_before = run(&jit, 200, 256, 192, 5).2;
    let again = Jit::new(&g, Source::Static(DESCRIPTORS), opts(&cache)).unwrap();
    let (got, want, maps, _) = run(&again, 200, 256, 192, 5);
    assert_eq!((maps, again.stats().compiled), (maps_before, 0));
    assert_eq!(got, want);
}

// --- Runtime systems: streams, graphs, pools, growable buffers, pinned memory -----------------

fn add_args<'a>(
    x: &'a DeviceTensor<f32>,
    y: &'a DeviceTensor<f32>,
    out: &'a mut DeviceTensor<f32>,
    n: usize,
) -> [Arg<'a>; 4] {
    [Arg::buf(x), Arg::buf(y), Arg::buf_mut(out), Arg::i32(n as i32)]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn graphs_replay_and_update_checked_arguments() {
    let g = gpu();
    let cache = TempDir::new("graph");
    let jit = Jit::new(&g, Source::Static(VECTOR_ADD), opts(&cache)).unwrap();
    let add = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(256))]).unwrap();
    let n = 10_000;
    let x = DeviceTensor::upload(&g, &vec![1.0f32; n]).unwrap();
    let y = DeviceTensor::upload(&g, &vec![2.0f32; n]).unwrap();
    let z = DeviceTensor::upload(&g, &vec![10.0f32; n]).unwrap();
    let mut a = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    let mut b = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    let grid = (n as u32).div_ceil(256);
    // The default stream cannot be captured: a clear error.
    let e = GraphCapture::begin(g.stream()).err().unwrap().to_string();
    assert!(e.contains("default stream"), "{e}");

    let s = g.new_stream().unwrap();
    g.synchronize().unwrap();
    let mut cap = GraphCapture::begin(&s).unwrap();
    let first = cap.launch(&add, grid, &add_args(&x, &y, &mut a, n)).unwrap();
    let second = cap.launch(&add, grid, &add_args(&x, &x, &mut b, n)).unwrap();
    // Allocating on the capturing stream is refused, the capture goes on.
    let e = DeviceTensor::<f32>::zeros_on(&g, &s, 4).unwrap_err().to_string();
    assert!(e.contains("allocate the buffers the graph uses before"), "{e}");
    let mut graph = cap.finish().unwrap();
    assert_eq!((graph.len(), first, second), (2, NodeId(0), NodeId(1)));
    // Nothing ran at capture.
    assert_eq!(a.download().unwrap(), vec![0.0; n]);
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(a.download().unwrap(), vec![3.0; n]);
    assert_eq!(b.download().unwrap(), vec![2.0; n]);

    // Point node 1 at other inputs and only half the grid.
    graph.update(second, grid / 2, &add_args(&z, &y, &mut b, n)).unwrap();
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    let got = b.download().unwrap();
    let half = (grid / 2 * 256) as usize;
    assert!(got[..half].iter().all(|v| *v == 12.0) && got[half..].iter().all(|v| *v == 2.0));

    // A bad update names the kernel and the parameter, and changes nothing.
    let bad = [Arg::buf(&z), Arg::buf(&y), Arg::buf(&b), Arg::i32(n as i32)];
    let e = graph.update(second, grid, &bad).unwrap_err().to_string();
    assert!(e.contains("vector_add") && e.contains("`out: *mut f32`"), "{e}");
    let e = graph
        .update(NodeId(7), grid, &add_args(&z, &y, &mut b, n))
        .unwrap_err()
        .to_string();
    assert!(e.contains("node 7") && e.contains("2 nodes"), "{e}");
    // The graph keeps its tensors alive: dropping them before a replay is fine.
    drop((x, z));
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(a.download().unwrap(), vec![3.0; n]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn typed_launchers_capture_and_update_graphs_and_compiles_are_reported() {
    let g = gpu();
    let cache = TempDir::new("typed-graph");
    let events: Arc<Mutex<Vec<CompileEvent>>> = Arc::default();
    let seen = events.clone();
    let o = JitOptions {
        on_compile: Some(CompileHook::new(move |e| seen.lock().unwrap().push(e.clone()))),
        ..opts(&cache)
    };
    let kernels = vadd::Kernels::new(&g, o).unwrap();
    let add = kernels.vector_add(vadd::VectorAddConsts { BLOCK: Some(256) }).unwrap();
    let n = 10_000;
    let x = DeviceTensor::upload(&g, &vec![1.0f32; n]).unwrap();
    let y = DeviceTensor::upload(&g, &vec![2.0f32; n]).unwrap();
    let z = DeviceTensor::upload(&g, &vec![10.0f32; n]).unwrap();
    let mut a = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    let mut b = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    let s = g.new_stream().unwrap();
    g.synchronize().unwrap();
    let mut cap = GraphCapture::begin(&s).unwrap();
    // Typed and checked like a launch; the grid follows `#[grid(cdiv(n, BLOCK))]`.
    let first = add.capture(&mut cap, &x, &y, &mut a, n as i32).unwrap();
    let second = add.capture(&mut cap, &x, &x, &mut b, n as i32).unwrap();
    let mut graph = cap.finish().unwrap();
    assert_eq!((graph.len(), first, second), (2, NodeId(0), NodeId(1)));
    {
        // Both nodes share one specialisation: compiled once, at the first capture.
        let ev = events.lock().unwrap();
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!((ev[0].kernel.as_str(), ev[0].origin), ("vector_add", Origin::Compiled));
        assert!(
            ev[0].consts.contains(&("BLOCK".to_string(), ConstValue::Int(256))),
            "{:?}",
            ev[0]
        );
        assert!(
            ev[0].to_string().contains("compiled `vector_add` [BLOCK=256"),
            "{}",
            ev[0]
        );
    }
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(a.download().unwrap(), vec![3.0; n]);
    assert_eq!(b.download().unwrap(), vec![2.0; n]);

    // A typed update: other inputs and 5,000 elements (a grid of 20 programs, and a length
    // that is not a multiple of 16: another specialisation, compiled now and reported).
    let m = 5_000;
    add.update_node(&mut graph, second, &z, &y, &mut b, m as i32).unwrap();
    assert_eq!(events.lock().unwrap().len(), 2);
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    let got = b.download().unwrap();
    assert!(got[..m].iter().all(|v| *v == 12.0) && got[m..].iter().all(|v| *v == 2.0));
    // Replays compile nothing.
    for _ in 0..10 {
        graph.launch(&s).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(events.lock().unwrap().len(), 2);

    // A launcher of another JIT is refused, and so is a node that does not exist.
    let other = vadd::Kernels::new(&g, opts(&cache)).unwrap();
    let add2 = other.vector_add(vadd::VectorAddConsts::default()).unwrap();
    let e = add2
        .update_node(&mut graph, first, &z, &y, &mut a, n as i32)
        .unwrap_err()
        .to_string();
    assert!(e.contains("node 0") && e.contains("another JIT"), "{e}");
    let e = add
        .update_node(&mut graph, NodeId(5), &z, &y, &mut a, n as i32)
        .unwrap_err()
        .to_string();
    assert!(e.contains("node 5") && e.contains("2 nodes"), "{e}");
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(a.download().unwrap(), vec![3.0; n]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_parameter_kept_out_of_specialisation_never_compiles_again() {
    const SRC: &str = "#[grid(rows)]\n#[no_specialize(n)]\n\
        kernel scale<const BLOCK: i32 = 1024>(x: *f32, out: *mut f32, rows: i32, n: i32) {\n\
        let cols = arange(0, BLOCK);\n\
        let offs = program_id(0) * n + cols;\n\
        store(out + offs, load(x + offs, cols < n) * 2.0, cols < n);\n}\n";
    let g = gpu();
    let cache = TempDir::new("no-specialize");
    let jit = Jit::new(&g, Source::Static(SRC), opts(&cache)).unwrap();
    let k = jit.kernel("scale", &[]).unwrap();
    let rows = 3;
    for n in [1usize, 16, 1000, 1023, 1024, 17] {
        let xh: Vec<f32> = (0..rows * n).map(|i| i as f32 - 5.0).collect();
        let x = DeviceTensor::upload(&g, &xh).unwrap();
        let mut out = DeviceTensor::<f32>::zeros(&g, rows * n).unwrap();
        k.launch_planned(&[
            Arg::buf(&x),
            Arg::buf_mut(&mut out),
            Arg::i32(rows as i32),
            Arg::i32(n as i32),
        ])
        .unwrap();
        let want: Vec<f32> = xh.iter().map(|v| v * 2.0).collect();
        assert_eq!(out.download().unwrap(), want, "n = {n}");
    }
    // n = 1, 16 and 1000 would each be their own specialisation without the attribute.
    assert_eq!(jit.stats().compiled, 1, "{:?}", jit.stats());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_prepared_range_compiles_nothing_while_the_decode_loop_runs() {
    // A kernel planned per launch bucket (`#[grid]`) and specialised on `n`: n = 1..=100 needs
    // the buckets 1, 2, 4, .., 128 crossed with n's facts (equal to 1, a multiple of 16 or 8,
    // neither).
    const SRC: &str = "#[grid(cdiv(n, BLOCK))]\n\
        kernel scale<const BLOCK: i32 in [64, 128, 256]>(x: *f32, out: *mut f32, n: i32) {\n\
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n\
        store(out + offs, load(x + offs, offs < n) * 2.0, offs < n);\n}\n";
    let g = gpu();
    let cache = TempDir::new("prepare-range");
    let jit = Jit::new(&g, Source::Static(SRC), opts(&cache)).unwrap();
    let k = jit.kernel("scale", &[]).unwrap();
    let xh: Vec<f32> = (0..100).map(|i| i as f32 - 7.0).collect();
    let x = DeviceTensor::upload(&g, &xh).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&g, 100).unwrap();
    let variants = k
        .prepare_range(&[Arg::buf(&x), Arg::buf_mut(&mut out), Arg::i32(1)], "n", 1..=100)
        .unwrap();
    let compiled = jit.stats().compiled;
    assert!(
        variants > 1 && compiled as usize >= variants,
        "{variants} variants, {:?}",
        jit.stats()
    );
    for n in 1..=100usize {
        k.launch_planned(&[Arg::buf(&x), Arg::buf_mut(&mut out), Arg::i32(n as i32)])
            .unwrap();
        let got = out.download().unwrap();
        assert_eq!(
            &got[..n],
            &xh[..n].iter().map(|v| v * 2.0).collect::<Vec<_>>()[..],
            "n = {n}"
        );
    }
    assert_eq!(jit.stats().compiled, compiled, "a launch compiled after the warm-up");
    // Mistakes name themselves.
    let args = [Arg::buf(&x), Arg::buf_mut(&mut out), Arg::i32(1)];
    let e = k.prepare_range(&args, "m", 1..=2).unwrap_err().to_string();
    assert!(e.contains("no integer parameter `m`") && e.contains("n"), "{e}");
    let e = k.prepare_range(&args, "n", 0..=(1 << 40)).unwrap_err().to_string();
    assert!(e.contains("at most 1048576"), "{e}");
    let e = k
        .prepare_range(&args, "n", (1 << 31)..=(1 << 31) + 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`n: i32` holds"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nothing_leaks_when_errors_happen_midway() {
    let g = gpu();
    let cache = TempDir::new("leaks");
    let jit = Jit::new(&g, Source::Static(VECTOR_ADD), opts(&cache)).unwrap();
    let add = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(256))]).unwrap();
    g.synchronize().unwrap();
    let before = g.live_allocations();
    {
        let s = g.new_stream().unwrap();
        let x = DeviceTensor::upload(&g, &[1.0f32; 300]).unwrap();
        let mut out = DeviceTensor::<f32>::zeros(&g, 300).unwrap();
        g.synchronize().unwrap();
        let mut cap = GraphCapture::begin(&s).unwrap();
        cap.launch(&add, 2, &add_args(&x, &x, &mut out, 300)).unwrap();
        // A mistake midway: the capture is dropped without finishing.
        let wrong = [Arg::buf(&x), Arg::buf(&x), Arg::buf_mut(&mut out), Arg::f32(1.0)];
        assert!(cap.launch(&add, 2, &wrong).is_err());
        drop(cap);
        // The stream is usable again.
        add.launch_on(&s, 2, &add_args(&x, &x, &mut out, 300)).unwrap();
        assert_eq!(out.download().unwrap(), vec![2.0; 300]);
        // Out of memory names the size asked for and what is free.
        let e = DeviceTensor::<u8>::zeros(&g, 1 << 50).unwrap_err().to_string();
        assert!(
            e.contains("out of GPU memory") && e.contains("1125899906842624 bytes") && e.contains("free"),
            "{e}"
        );
        let e = g.pinned(1 << 50).unwrap_err().to_string();
        assert!(e.contains("1125899906842624"), "{e}");
        // A growable buffer asked to grow past its reservation.
        let mut kv = tile_jit::GrowableTensor::<f32>::reserve(&g, 1 << 20, 0).unwrap();
        kv.grow_to(1000).unwrap();
        let e = kv.grow_to(1 << 21).unwrap_err().to_string();
        assert!(e.contains("reserved"), "{e}");
        assert_eq!(kv.len(), 1000);
        assert!(g.live_allocations() > before);
    }
    g.synchronize_all().unwrap();
    assert_eq!(g.live_allocations(), before, "every allocation is freed");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_buffer_used_on_another_stream_is_freed_after_that_work() {
    // A long kernel on stream `s` reads `x`; `x` is dropped at once and its memory handed out
    // again on the default stream and overwritten. The free waits for `s`, so the kernel still
    // reads its own data.
    let g = gpu();
    let (_cache, add) = vector_add_1024(&g, "streams");
    let n = 1 << 26;
    let s = g.new_stream().unwrap();
    let y = DeviceTensor::upload(&g, &vec![2.0f32; n]).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    for _ in 0..3 {
        let x = DeviceTensor::upload(&g, &vec![1.0f32; n]).unwrap();
        g.synchronize().unwrap();
        add.launch_on(&s, (n as u32).div_ceil(1024), &add_args(&x, &y, &mut out, n))
            .unwrap();
        drop(x);
        let mut other = DeviceTensor::<f32>::zeros(&g, n).unwrap();
        other.copy_from(&vec![7.0f32; n]).unwrap();
        // `out` was written on `s`: the download waits for it.
        let got = out.download().unwrap();
        assert!(
            got.iter().all(|v| *v == 3.0),
            "a kernel saw its input freed and overwritten"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn work_on_another_stream_waits_for_the_buffers_last_uses() {
    // Stream `up` is kept busy, then uploads new contents into `x`; a kernel reading `x` is
    // enqueued at once on stream `s`, and its result copied back on `up`, with no synchronise
    // and no event by hand: each buffer makes the next stream wait for its last uses.
    let g = gpu();
    let (_cache, add) = vector_add_1024(&g, "ordering");
    let n = 1 << 24;
    let grid = (n as u32).div_ceil(1024);
    let (up, s) = (g.new_stream().unwrap(), g.new_stream().unwrap());
    let y = DeviceTensor::upload(&g, &vec![2.0f32; n]).unwrap();
    let mut busy = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    let fives = tile_jit::PinnedTensor::from_slice(&g, &vec![5.0f32; n]).unwrap();
    let mut back = tile_jit::PinnedTensor::<f32>::zeros(&g, n).unwrap();
    for round in 0..3 {
        let mut x = DeviceTensor::upload(&g, &vec![1.0f32; n]).unwrap();
        let mut out = DeviceTensor::<f32>::zeros(&g, n).unwrap();
        g.synchronize().unwrap();
        for _ in 0..40 {
            add.launch_on(&up, grid, &add_args(&y, &y, &mut busy, n)).unwrap();
        }
        x.copy_from_pinned(&fives, &up).unwrap();
        add.launch_on(&s, grid, &add_args(&x, &y, &mut out, n)).unwrap();
        out.copy_to_pinned(&mut back, &up).unwrap();
        let got = back.as_slice().unwrap();
        let wrong = got.iter().filter(|v| **v != 7.0).count();
        assert_eq!(
            wrong, 0,
            "round {round}: {wrong} of {n} elements read `x` before its upload"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_copies_overlap_on_their_own_streams() {
    let g = gpu();
    let n = 1 << 22;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let src = tile_jit::PinnedTensor::from_slice(&g, &host).unwrap();
    let mut back = tile_jit::PinnedTensor::<f32>::zeros(&g, n).unwrap();
    let (up, down) = (g.new_stream().unwrap(), g.new_stream().unwrap());
    let mut d = DeviceTensor::<f32>::zeros(&g, n).unwrap();
    g.synchronize().unwrap();
    d.copy_from_pinned(&src, &up).unwrap();
    let done = up.record().unwrap();
    down.wait(&done).unwrap();
    d.copy_to_pinned(&mut back, &down).unwrap();
    // The host view waits for the copy in flight.
    assert_eq!(back.as_slice().unwrap(), &host[..]);
    let short = tile_jit::PinnedTensor::<f32>::zeros(&g, 3).unwrap();
    let e = d.copy_from_pinned(&short, &up).unwrap_err().to_string();
    assert!(e.contains("lengths must match"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn growable_buffers_grow_in_place_keeping_their_contents() {
    let g = gpu();
    let (_cache, add) = vector_add_1024(&g, "vmm");
    let before = g.live_allocations();
    let mut buf = tile_jit::GrowableTensor::<f32>::reserve(&g, 1 << 28, 0).unwrap();
    let base = buf.device_ptr();
    let chunk = buf.chunk_bytes() / 4;
    buf.grow_to(chunk + 10).unwrap();
    assert_eq!((buf.len(), buf.mapped_bytes()), (chunk + 10, 2 * chunk * 4));
    let ones: Vec<f32> = (0..chunk + 10).map(|i| i as f32).collect();
    buf.write_at(0, &ones).unwrap();
    buf.grow_to(5 * chunk).unwrap();
    assert_eq!(buf.device_ptr(), base);
    assert_eq!(&buf.download().unwrap()[..chunk + 10], &ones[..]);
    assert!(buf.write_at(5 * chunk - 1, &[1.0, 2.0]).is_err());
    drop(buf);
    assert_eq!(g.live_allocations(), before);

    // Stress: 10,000 grows and shrinks, a kernel writing the whole buffer after each grow (run
    // it under compute-sanitizer memcheck: no access may land outside the mapped chunks).
    let y = DeviceTensor::upload(&g, &vec![1.0f32; 16 * chunk]).unwrap();
    let mut kv = tile_jit::GrowableTensor::<f32>::reserve(&g, 16 * chunk, 0).unwrap();
    let mut rng = 12345u64;
    let cycles: usize = std::env::var("TILE_VMM_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    for i in 0..cycles {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let len = 1 + (rng % (16 * chunk as u64)) as usize;
        kv.grow_to(len).unwrap();
        let n = kv.len();
        let grid = (n as u32).div_ceil(1024);
        let args = [Arg::buf(&y), Arg::buf(&y), Arg::buf_mut(&mut kv), Arg::i32(n as i32)];
        add.launch(grid, &args).unwrap();
        if i % 1000 == 0 {
            assert!(kv.download().unwrap().iter().all(|v| *v == 2.0));
        }
        kv.shrink_to((rng >> 32) as usize % (n + 1)).unwrap();
        assert!(kv.mapped_bytes() >= kv.len() * 4 && kv.mapped_bytes() <= kv.len() * 4 + kv.chunk_bytes());
    }
    drop(kv);
    g.synchronize_all().unwrap();
    assert_eq!(g.live_allocations(), before + 1, "only `y` is left");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tensors_past_two_to_the_31_elements() {
    // 2^31 + 4099 one-byte elements per tensor (2 GiB each): the last programs address bytes past
    // 2^31, which i32 offsets would wrap. Checked against the host, every element.
    let g = gpu();
    let cache = TempDir::new("wide");
    let jit = Jit::new(
        &g,
        Source::Static(include_str!("kernels/wide_offsets.tile")),
        opts(&cache),
    )
    .unwrap();
    let k = jit.kernel("add_wide", &[]).unwrap();
    let n = (1usize << 31) + 4099;
    let xh: Vec<i8> = (0..n).map(|i| (i % 251) as u8 as i8).collect();
    let yh: Vec<i8> = (0..n).map(|i| (i % 13) as i8 - 6).collect();
    let x = DeviceTensor::upload(&g, &xh).unwrap();
    let y = DeviceTensor::upload(&g, &yh).unwrap();
    let mut out = DeviceTensor::<i8>::zeros(&g, n).unwrap();
    let block = match k.consts().iter().find(|(name, _)| name == "BLOCK") {
        Some((_, ConstValue::Int(b))) => *b as usize,
        other => panic!("BLOCK: {other:?}"),
    };
    let grid = n.div_ceil(block) as u32;
    k.launch(
        grid,
        &[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i64(n as i64)],
    )
    .unwrap();
    let got = out.download().unwrap();
    let bad = (0..n).filter(|&i| got[i] != xh[i].wrapping_add(yh[i])).count();
    assert_eq!(bad, 0, "{bad} of {n} elements differ from the host");
    assert_eq!(got[n - 1], xh[n - 1].wrapping_add(yh[n - 1]));
    // The kernel with i32 offsets is refused these tensors, naming the first one and the add.
    let narrow = jit.kernel("add_narrow", &[]).unwrap();
    let e = narrow
        .launch(
            grid,
            &[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(i32::MAX)],
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("argument 1 `x: *i8` has 2147487747 elements, but the kernel computes its offsets into `x` in i32"),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn collectives_and_sync_domains_on_one_gpu() {
    use tile_jit::collective::{self, ReduceOp};
    use tile_jit::{MemSyncDomain, RuntimeError};
    let g = gpu();
    // Memory synchronisation domains: a stream of one's own takes one; the default stream does not.
    let s = g.new_stream().unwrap();
    if g.compute_capability().unwrap().0 >= 9 {
        s.set_mem_sync_domain(MemSyncDomain::Remote).unwrap();
        s.set_mem_sync_domain(MemSyncDomain::Default).unwrap();
        s.set_mem_sync_domain_map(2, 3).unwrap();
        s.set_mem_sync_domain_map(0, 1).unwrap();
        let e = g
            .stream()
            .set_mem_sync_domain(MemSyncDomain::Remote)
            .unwrap_err()
            .to_string();
        assert!(e.contains("new_stream"), "{e}");
    }
    let (major, minor, patch) = match collective::nccl_version() {
        Ok(v) => v,
        Err(RuntimeError::NoNccl) => panic!("NCCL is needed here: {}", RuntimeError::NoNccl),
        Err(e) => panic!("{e}"),
    };
    eprintln!("NCCL {major}.{minor}.{patch}");
    let comms = collective::init_all(std::slice::from_ref(&g)).unwrap();
    let c = &comms[0];
    assert_eq!((c.rank(), c.size()), (0, 1));
    // One rank: every collective gives back its input, through NCCL's kernels on `s`.
    let host: Vec<f32> = (0..100_003).map(|i| i as f32 * 0.5).collect();
    let x = DeviceTensor::upload(&g, &host).unwrap();
    let mut y = DeviceTensor::<f32>::zeros(&g, host.len()).unwrap();
    collective::group(|| collective::all_reduce(c, &x, &mut y, ReduceOp::Sum, &s)).unwrap();
    let mut z = DeviceTensor::<f32>::zeros(&g, host.len()).unwrap();
    collective::all_gather(c, &y, &mut z, &s).unwrap();
    let mut w = DeviceTensor::<f32>::zeros(&g, host.len()).unwrap();
    collective::reduce_scatter(c, &z, &mut w, ReduceOp::Max, &s).unwrap();
    let mut b = DeviceTensor::upload(&g, &host.iter().map(|v| bf16::from_f32(*v)).collect::<Vec<_>>()).unwrap();
    collective::all_reduce_in_place(c, &mut b, ReduceOp::Avg, &s).unwrap();
    collective::all_reduce_in_place_all(&mut [(c, &mut b, &s)], ReduceOp::Max).unwrap();
    s.synchronize().unwrap();
    assert_eq!(w.download().unwrap(), host);
    assert_eq!(b.download().unwrap()[1000].to_f32(), 500.0);
    // Lengths that do not fit the collective are errors.
    let mut short = DeviceTensor::<f32>::zeros(&g, 10).unwrap();
    let e = collective::all_reduce(c, &x, &mut short, ReduceOp::Sum, &s)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the receive tensor has 10 elements; it must have 100003"),
        "{e}"
    );
}

/// A debug build's bounded wait, on a kernel made to hang: matmul_tma's TMA ring (8 warps, 4
/// stages, a producer warpgroup) built with `debug`, its PTX patched so that every stage's full
/// barrier expects 16 bytes more than its copies bring — the first wait never completes. The
/// launch must end in an error after the 10 s bound (not hang), printing what it waited for.
/// The faulting launch runs in a child process (this test binary, `debug_build_child`): a trap
/// leaves the CUDA context unusable for the rest of the process.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_debug_build_traps_instead_of_hanging() {
    let exe = std::env::current_exe().unwrap();
    let started = std::time::Instant::now();
    // The child's output goes to a file: through a pipe nobody reads until it exits, the
    // kernel's messages (one per warp) could fill the pipe and block the child.
    let dir = TempDir::new("debug-child");
    let log = dir.0.join("child.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut child = std::process::Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "debug_build_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("TILE_TEST_DEBUG_CHILD", "1")
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    // A hang would be the bug under test: give up after two minutes.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let elapsed = started.elapsed();
    assert!(status.is_some(), "the debug build hung for {elapsed:?}:\n{text}");
    assert!(text.contains("the launch failed:"), "the launch did not fail:\n{text}");
    assert!(
        text.contains("tile debug: kernel `matmul_tma`") && text.contains("to be filled"),
        "no message naming the wait:\n{text}"
    );
    assert!(elapsed.as_secs_f64() >= 9.0, "trapped after only {elapsed:?}:\n{text}");
}

/// The faulting launch of [`a_debug_build_traps_instead_of_hanging`] (only in its child).
#[test]
#[ignore = "needs a CUDA GPU; run by a_debug_build_traps_instead_of_hanging"]
fn debug_build_child() {
    if std::env::var("TILE_TEST_DEBUG_CHILD").is_err() {
        return;
    }
    let gpu = gpu();
    let target = tile_jit::target("sm_90a").unwrap();
    let src = tile_driver::Source::parse("matmul.tile", include_str!("../../../dsl-examples/matmul.tile")).unwrap();
    let consts = [("BM", 128), ("BN", 256), ("BK", 64)]
        .map(|(n, v)| (n.to_string(), ConstValue::Int(v)))
        .to_vec();
    let req = tile_driver::Request {
        pins: tile_driver::Pins {
            consts,
            num_warps: Some(8),
            num_stages: Some(4),
            split: None,
        },
        ..tile_driver::Request::new("matmul_tma", target.clone())
    };
    let c = tile_driver::compile(&src, &req, tile_driver::Stage::Ir).unwrap();
    let (m, n, k) = (256u32, 256u32, 256u32);
    let ints = [m, n, k, k, 1, n, 1, n, 1];
    let mut spec = vec![tile_jit::ArgSpec::of_ptr(0); 3];
    spec.extend(ints.map(|v| tile_jit::ArgSpec::of_int(v as i64)));
    let opts = tile_driver::CompileOptions {
        target,
        num_warps: 8,
        num_stages: 4,
        specialization: spec,
        split: 1,
        debug: true,
    };
    let mut compiled = tile_driver::lower(c.kernel(), &opts, None).unwrap().compiled;
    assert!(compiled.ptx.contains("vprintf"), "not a debug build");
    // Each `mbarrier.arrive.expect_tx ..., %rN;` takes its byte count from `mov.b32 %rN, BYTES;`.
    let mut patched = 0;
    let lines: Vec<String> = compiled.ptx.lines().map(str::to_string).collect();
    let mut out = lines.clone();
    for l in &lines {
        let t = l.trim();
        if !t.starts_with("mbarrier.arrive.expect_tx") {
            continue;
        }
        let reg = t.trim_end_matches(';').rsplit(", ").next().unwrap().to_string();
        for o in out.iter_mut() {
            let prefix = format!("mov.b32 \t{reg}, ");
            if let Some(bytes) = o.trim().strip_prefix(&prefix) {
                let bytes: u32 = bytes.trim_end_matches(';').parse().unwrap();
                *o = format!("\tmov.b32 \t{reg}, {};", bytes + 16);
                patched += 1;
            }
        }
    }
    assert!(patched > 0, "no expect_tx byte count found to patch");
    compiled.ptx = out.join("\n");
    let f = gpu
        .load(
            Image::Ptx(&compiled.ptx),
            &compiled.name,
            compiled.smem_bytes,
            compiled.split,
        )
        .unwrap();
    let a = gpu.zeros((m * k * 2) as usize).unwrap();
    let b = gpu.zeros((k * n * 2) as usize).unwrap();
    let cbuf = gpu.zeros((m * n * 2) as usize).unwrap();
    let mut args = vec![KernelArg::Buffer(&a), KernelArg::Buffer(&b), KernelArg::Buffer(&cbuf)];
    args.extend(ints.map(KernelArg::U32));
    let maps = tile_jit::tune::launch_maps(&gpu, c.kernel(), &compiled, &args).unwrap();
    args.extend(maps.iter().map(KernelArg::TensorMap));
    let grid = [(m / 128) * (n / 256), 1, 1];
    match gpu.launch(&f, grid, compiled.threads_per_block, compiled.smem_bytes, &args) {
        Ok(()) => println!("the launch completed"),
        Err(e) => println!("the launch failed: {e}"),
    }
}

const ROW_SCALE: &str = "#[grid(n_rows)]
#[requires(n_cols <= BLOCK, \"a row must fit in one block\")]
kernel row_scale<const BLOCK: i32 = next_pow2(n_cols)>(x: *f32, out: *mut f32, n_rows: i32, n_cols: i32) {
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let row = program_id(0) * n_cols;
    let v = load(x + row + cols, mask, other: 0.0);
    store(out + row + cols, v * 2.0, mask);
}
";

/// A kernel with `#[grid(..)]` runs the plan made for each launch's sizes: a computed block
/// follows the row, the results are right at every size, a grid sized from the handle's
/// constants still runs (the handle's plan), and a launch its `#[requires(..)]` refuses is an
/// error naming the clause before anything runs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn launches_are_planned_for_their_sizes() {
    let gpu = gpu();
    let cache = TempDir::new("planned");
    let jit = Jit::new(
        &gpu,
        Source::Text {
            name: "row_scale.tile".into(),
            text: ROW_SCALE.into(),
        },
        opts(&cache),
    )
    .unwrap();
    let k = jit.kernel("row_scale", &[]).unwrap();
    let block = |p: &tile_jit::LaunchPlan| p.consts.iter().find(|(n, _)| n == "BLOCK").map(|(_, v)| *v);
    for (rows, cols) in [(3usize, 100usize), (64, 1000), (7, 20000), (2, 1)] {
        let xh: Vec<f32> = (0..rows * cols).map(|i| (i % 97) as f32 - 40.0).collect();
        let x = DeviceTensor::upload(&gpu, &xh).unwrap();
        let mut out = DeviceTensor::upload(&gpu, &vec![f32::NAN; rows * cols]).unwrap();
        let args = [
            Arg::buf(&x),
            Arg::buf_mut(&mut out),
            Arg::i32(rows as i32),
            Arg::i32(cols as i32),
        ];
        let plan = k.plan_for(&args).unwrap();
        assert_eq!(
            block(&plan),
            Some(ConstValue::Int(cols.next_power_of_two() as i64)),
            "{rows}x{cols}"
        );
        k.launch_planned(&args).unwrap();
        let got = out.download().unwrap();
        assert!(got.iter().zip(&xh).all(|(g, x)| *g == 2.0 * x), "{rows}x{cols}");
    }
    // A grid of the caller's: the handle's own plan, its block computed for this launch.
    let (rows, cols) = (5usize, 300usize);
    let xh: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let x = DeviceTensor::upload(&gpu, &xh).unwrap();
    let mut out = DeviceTensor::upload(&gpu, &vec![f32::NAN; rows * cols]).unwrap();
    {
        let args = [
            Arg::buf(&x),
            Arg::buf_mut(&mut out),
            Arg::i32(rows as i32),
            Arg::i32(cols as i32),
        ];
        k.launch(rows as u32, &args).unwrap();
    }
    assert!(out.download().unwrap().iter().zip(&xh).all(|(g, x)| *g == 2.0 * x));
    // The handle's plan pinned small: the clause refuses a row longer than the block.
    let pinned = jit.kernel("row_scale", &[("BLOCK", ConstValue::Int(128))]).unwrap();
    let args = [
        Arg::buf(&x),
        Arg::buf_mut(&mut out),
        Arg::i32(rows as i32),
        Arg::i32(cols as i32),
    ];
    match pinned.launch(rows as u32, &args) {
        Err(JitError::Requires { rendered, .. }) => {
            assert!(rendered.contains("n_cols = 300, BLOCK = 128"), "{rendered}");
            assert!(rendered.contains("a row must fit in one block"), "{rendered}");
        }
        other => panic!("expected a refused launch, got {other:?}"),
    }
}

/// A debug build checks `assert` on the GPU: a NaN in the input makes the launch fail after
/// printing the kernel, the assertion's line and message, the program and the element (in a
/// child process: a trap leaves the CUDA context unusable). The release build of the same
/// kernel leaves the assertion out and runs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_failed_assert_traps_in_a_debug_build() {
    let exe = std::env::current_exe().unwrap();
    let dir = TempDir::new("assert-child");
    let log = dir.0.join("child.log");
    let file = std::fs::File::create(&log).unwrap();
    let status = std::process::Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "assert_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("TILE_TEST_ASSERT_CHILD", "1")
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success() || text.contains("the launch failed"), "{text}");
    assert!(text.contains("the release build ran"), "{text}");
    assert!(
        text.contains("the launch failed"),
        "the debug build did not trap:\n{text}"
    );
    assert!(
        text.contains("tile assert: kernel `scale` at 5:5: x holds NaN (program (2, 0, 0)")
            && text.contains("element [1]"),
        "no message naming the assertion, program and element:\n{text}"
    );
}

/// The launches of [`a_failed_assert_traps_in_a_debug_build`] (only in its child).
#[test]
#[ignore = "needs a CUDA GPU; run by a_failed_assert_traps_in_a_debug_build"]
fn assert_child() {
    if std::env::var("TILE_TEST_ASSERT_CHILD").is_err() {
        return;
    }
    const SCALE: &str = "#[grid(cdiv(n, BLOCK))]
kernel scale<const BLOCK: i32 = 256>(x: *f32, out: *mut f32, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let v = load(x + offs, offs < n, other: 0.0);
    assert(v == v, \"x holds NaN\");
    store(out + offs, v * 2.0, offs < n);
}
";
    let gpu = gpu();
    let n = 1000usize;
    let mut xh = vec![1.0f32; n];
    xh[2 * 256 + 1] = f32::NAN;
    let x = DeviceTensor::upload(&gpu, &xh).unwrap();
    let mut out = DeviceTensor::<f32>::zeros(&gpu, n).unwrap();
    let source = || Source::Text {
        name: "scale.tile".into(),
        text: SCALE.into(),
    };
    let release = Jit::new(&gpu, source(), JitOptions::default()).unwrap();
    let k = release.kernel("scale", &[]).unwrap();
    k.launch_planned(&[Arg::buf(&x), Arg::buf_mut(&mut out), Arg::i32(n as i32)])
        .unwrap();
    println!("the release build ran");
    let debug = Jit::new(&gpu, source(), JitOptions::default()).unwrap();
    let k = debug
        .kernel_with(
            "scale",
            &[],
            &tile_jit::KernelOptions {
                debug: true,
                ..Default::default()
            },
        )
        .unwrap();
    match k.launch_planned(&[Arg::buf(&x), Arg::buf_mut(&mut out), Arg::i32(n as i32)]) {
        Ok(()) => println!("the launch completed"),
        Err(e) => println!("the launch failed: {e}"),
    }
}
