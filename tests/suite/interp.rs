//! The interpreter's semantics on small kernels: each case is a source, a grid, arguments, and
//! the expected result (buffer contents or the error's text).

use tile_lang::interp::{self, Arg, Buffer};
use tile_lang::ir::DType;
use tile_lang::ir::{Scalar, floats, scalar};
use tile_lang::{check, syntax};

/// Checks `src`, runs its only kernel on `grid` with `args`, returns the buffers or the error.
fn run(src: &str, grid: [u32; 3], args: &[Arg], mut buffers: Vec<Buffer>) -> Result<Vec<Buffer>, String> {
    let ast = syntax::parse(src).map_err(|d| format!("{d:?}"))?;
    let name = check::kernel_names(&ast)[0].clone();
    let k = check::check_kernel(src, &ast, &name, &vec![]).map_err(|d| tile_lang::diag::render("t.tile", src, &d))?;
    interp::run(&k, grid, args, &mut buffers).map_err(|e| e.to_string())?;
    Ok(buffers)
}

fn f32s(name: &str, v: &[f64]) -> Buffer {
    Buffer::from_f64(name, DType::F32, v)
}

#[test]
fn unmasked_out_of_bounds_load_names_op_program_and_index() {
    let src = "kernel k(x: *f32, out: *mut f32) {\n    let o = program_id(0) * 4 + arange(0, 4);\n    store(out + o, load(x + o));\n}\n";
    let e = run(
        src,
        [2, 1, 1],
        &[Arg::Buffer(0), Arg::Buffer(1)],
        vec![f32s("x", &[1.0; 6]), f32s("out", &[0.0; 8])],
    )
    .unwrap_err();
    assert!(e.contains("out-of-bounds load"), "{e}");
    assert!(e.contains("index 6 of `x`"), "{e}");
    assert!(e.contains("which has 6 elements"), "{e}");
    assert!(e.contains("element [2]"), "{e}");
    assert!(e.contains("program [1, 0, 0]"), "{e}");
    assert!(e.contains("at 3:20"), "{e}");
}

#[test]
fn masked_lanes_take_other_and_never_touch_memory() {
    let src = "kernel k(x: *f32, out: *mut f32, n: i32) {\n    let o = arange(0, 8);\n    store(out + o, load(x + o, o < n, other: -1.5));\n}\n";
    let b = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Scalar(Scalar::I(3))],
        vec![f32s("x", &[1.0, 2.0, 3.0]), f32s("out", &[0.0; 8])],
    )
    .unwrap();
    assert_eq!(b[1].to_f64(), vec![1.0, 2.0, 3.0, -1.5, -1.5, -1.5, -1.5, -1.5]);
}

#[test]
fn integer_division_by_zero_is_an_error() {
    let src = "kernel k(out: *mut i32, d: i32) {\n    store(out, 7 / d);\n}\n";
    let e = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0), Arg::Scalar(Scalar::I(0))],
        vec![Buffer::from_f64("out", DType::I32, &[0.0])],
    )
    .unwrap_err();
    assert!(e.contains("integer division by zero"), "{e}");
}

#[test]
fn i32_arithmetic_wraps() {
    let src = "kernel k(out: *mut i32, a: i32) {\n    store(out, a * 2);\n}\n";
    let b = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0), Arg::Scalar(Scalar::I(i32::MAX as i64))],
        vec![Buffer::from_f64("out", DType::I32, &[0.0])],
    )
    .unwrap();
    assert_eq!(b[0].to_f64(), vec![-2.0]);
}

#[test]
fn wrong_hints_are_caught() {
    let src = "kernel k(out: *mut i32) {\n    let o = multiple_of(arange(0, 4) * 3, 2);\n    store(out + arange(0, 4), o);\n}\n";
    let e = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0)],
        vec![Buffer::from_f64("out", DType::I32, &[0.0; 4])],
    )
    .unwrap_err();
    assert!(e.contains("the hint is wrong"), "{e}");
}

#[test]
fn f16_and_bf16_round_to_nearest_even_after_each_op() {
    // 1 + 2^-11 is a tie in f16 (10-bit mantissa): it rounds to even, 1.0.
    let src = "kernel k(x: *f16, out: *mut f16) {\n    store(out, load(x) + load(x + 1));\n}\n";
    let b = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0), Arg::Buffer(1)],
        vec![
            Buffer::from_f64("x", DType::F16, &[1.0, 2f64.powi(-11)]),
            Buffer::from_f64("out", DType::F16, &[0.0]),
        ],
    )
    .unwrap();
    assert_eq!(b[1].to_f64(), vec![1.0]);
    assert_eq!(scalar::round_float(DType::BF16, 1.0 + 2f64.powi(-8)), 1.0);
    assert_eq!(
        scalar::round_float(DType::BF16, 1.0 + 3.0 * 2f64.powi(-8)),
        1.0 + 2f64.powi(-6)
    );
}

#[test]
fn fp8_rounds_and_saturates() {
    assert_eq!(scalar::round_float(DType::F8E4M3, 1000.0), 448.0);
    assert_eq!(scalar::round_float(DType::F8E4M3, -1000.0), -448.0);
    assert_eq!(scalar::round_float(DType::F8E5M2, 1e6), 57344.0);
    assert_eq!(scalar::round_float(DType::F8E4M3, 1.0625), 1.0); // tie between 1 and 1.125: even
    assert_eq!(scalar::round_float(DType::F8E4M3, 1.1875), 1.25); // tie between 1.125 and 1.25: even
    assert_eq!(scalar::round_float(DType::F8E4M3, 2f64.powi(-9)), 2f64.powi(-9)); // smallest subnormal
    for b in 0..=255u8 {
        for f in [floats::E4M3, floats::E5M2] {
            let v = f.decode(b as u64);
            if v.is_finite() {
                assert_eq!(f.decode(f.encode(v)), v, "byte {b:#x}");
            }
        }
    }
}

#[test]
fn float_to_int_truncates_and_saturates() {
    let c = |x: f64, d| scalar::cast(DType::F32, d, Scalar::F(x), false);
    assert_eq!(c(-2.7, DType::I32), Scalar::I(-2));
    assert_eq!(c(1e20, DType::I32), Scalar::I(i32::MAX as i64));
    assert_eq!(c(-5.0, DType::U8), Scalar::I(0));
    assert_eq!(c(f64::NAN, DType::I64), Scalar::I(0));
}

#[test]
fn dot_accumulates_in_the_accumulator_dtype() {
    let src = "kernel k(a: *bf16, b: *bf16, out: *mut f32) {\n    let r = arange(0, 2);\n    let pa = a + r[:, None] * 2 + r[None, :];\n    let pb = b + r[:, None] * 2 + r[None, :];\n    let c = dot(load(pa), load(pb));\n    store(out + r[:, None] * 2 + r[None, :], c);\n}\n";
    let a = Buffer::from_f64("a", DType::BF16, &[1.0, 2.0, 3.0, 4.0]);
    let bb = Buffer::from_f64("b", DType::BF16, &[5.0, 6.0, 7.0, 8.0]);
    let b = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
        vec![a, bb, f32s("out", &[0.0; 4])],
    )
    .unwrap();
    assert_eq!(b[2].to_f64(), vec![19.0, 22.0, 43.0, 50.0]);
}

#[test]
fn loops_carry_values_and_ifs_merge_them() {
    let src = "kernel k(out: *mut i32, n: i32) {\n    let mut s = 0;\n    let mut odd = 0;\n    for i in 0..n {\n        s += i;\n        if i % 2 == 1 { odd += 1; }\n    }\n    store(out, s);\n    store(out + 1, odd);\n}\n";
    let b = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0), Arg::Scalar(Scalar::I(10))],
        vec![Buffer::from_f64("out", DType::I32, &[0.0; 2])],
    )
    .unwrap();
    assert_eq!(b[0].to_f64(), vec![45.0, 5.0]);
}

#[test]
fn argmax_takes_the_first_maximum_and_generic_reduce_runs_its_helper() {
    let src = "fn mul(a, b) { a * b }\nkernel k(x: *f32, out: *mut i32, p: *mut f32) {\n    let v = load(x + arange(0, 8));\n    store(out, argmax(v, axis: 0));\n    store(p, reduce(v, axis: 0, combine: mul));\n}\n";
    let x = f32s("x", &[1.0, 3.0, 2.0, 3.0, 1.0, 1.0, 1.0, 0.5]);
    let b = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
        vec![x, Buffer::from_f64("out", DType::I32, &[0.0]), f32s("p", &[0.0])],
    )
    .unwrap();
    assert_eq!(b[1].to_f64(), vec![1.0]);
    assert_eq!(b[2].to_f64(), vec![9.0]);
}

#[test]
fn atomics_return_old_values_and_apply_every_lane() {
    let src = "kernel k(c: *mut i32, old: *mut i32) {\n    let o = arange(0, 4);\n    store(old + o, atomic_add(c + o * 0, 1));\n}\n";
    let b = run(
        src,
        [3, 1, 1],
        &[Arg::Buffer(0), Arg::Buffer(1)],
        vec![
            Buffer::from_f64("c", DType::I32, &[0.0]),
            Buffer::from_f64("old", DType::I32, &[0.0; 4]),
        ],
    )
    .unwrap();
    assert_eq!(b[0].to_f64(), vec![12.0]);
    assert_eq!(b[1].to_f64(), vec![8.0, 9.0, 10.0, 11.0]);
}

#[test]
fn conversions_round_once_near_a_midpoint() {
    // f32 0x3FA68004 lies just above the midpoint between bf16 1.296875 and 1.3046875: nearest
    // is 1.3046875 (the GPU's cvt.rn.bf16.f32 gives it too); toward zero, 1.296875.
    let src = "kernel k(out: *mut f32) {\n    let o = arange(0, 2);\n    let a = full([2], 1.3007817268371582);\n    store(out + o, where(o == 0, a.to(bf16).to(f32), a.to(bf16, rounding: \"rtz\").to(f32)));\n}\n";
    let b = run(src, [1, 1, 1], &[Arg::Buffer(0)], vec![f32s("out", &[0.0; 2])]).unwrap();
    assert_eq!(b[0].to_f64(), vec![1.3046875, 1.296875]);
    // i64 2^60 + 2^36 + 1 is just above a midpoint of f32; through f64 it would land on the
    // midpoint and round to even (down).
    let src = "kernel k(out: *mut f32, v: i64) {\n    store(out, v.to(f32));\n}\n";
    let v = (1i64 << 60) + (1 << 36) + 1;
    let b = run(
        src,
        [1, 1, 1],
        &[Arg::Buffer(0), Arg::Scalar(Scalar::I(v))],
        vec![f32s("out", &[0.0])],
    )
    .unwrap();
    assert_eq!(b[0].to_f64(), vec![v as f32 as f64]);
    assert_ne!(b[0].to_f64(), vec![(v as f64) as f32 as f64]);
}

/// Philox4x32-10, written independently of the compiler's expansion: the test's reference.
fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(0x9E37_79B9);
            k[1] = k[1].wrapping_add(0xBB67_AE85);
        }
        let p0 = 0xD251_1F53u64 * c[0] as u64;
        let p1 = 0xCD9E_8D57u64 * c[2] as u64;
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// The reference against the known-answer vectors of Random123 (kat_vectors, philox4x32 10).
#[test]
fn philox_reference_matches_the_known_answers() {
    assert_eq!(
        philox4x32_10([0; 4], [0; 2]),
        [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
    );
    assert_eq!(
        philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
        [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
    );
    assert_eq!(
        philox4x32_10(
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0]
        ),
        [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
    );
}

/// `randint(seed, offset, word)` is word `word` of Philox4x32-10 with key = the seed's two halves
/// and counter = (the offset's two halves, 0, 0); `rand` is its top 24 bits times 2^-24.
#[test]
fn randint_and_rand_are_philox() {
    let src = "kernel k(ints: *mut u32, floats: *mut f32, seed: i64, base: i64) {\n    let o = arange(0, 64);\n    let offs = base + o.to(i64);\n    store(ints + o, randint(seed, offs));\n    store(ints + 64 + o, randint(seed, offs, 1));\n    store(ints + 128 + o, randint(seed, offs, 2));\n    store(ints + 192 + o, randint(seed, offs, 3));\n    store(floats + o, rand(seed, offs));\n}\n";
    for (seed, base) in [
        (0i64, 0i64),
        (42, 1000),
        (-1, (1i64 << 32) - 5),
        (0x1234_5678_9abc_def0, 7),
    ] {
        let b = run(
            src,
            [1, 1, 1],
            &[
                Arg::Buffer(0),
                Arg::Buffer(1),
                Arg::Scalar(Scalar::I(seed)),
                Arg::Scalar(Scalar::I(base)),
            ],
            vec![
                Buffer::from_f64("ints", DType::U32, &[0.0; 256]),
                f32s("floats", &[0.0; 64]),
            ],
        )
        .unwrap();
        let (ints, floats) = (b[0].to_f64(), b[1].to_f64());
        let key = [seed as u64 as u32, (seed as u64 >> 32) as u32];
        for i in 0..64 {
            let off = (base + i as i64) as u64;
            let want = philox4x32_10([off as u32, (off >> 32) as u32, 0, 0], key);
            for w in 0..4 {
                assert_eq!(ints[64 * w + i], want[w] as f64, "seed {seed} offset {off} word {w}");
            }
            let u = (want[0] >> 8) as f64 / (1u64 << 24) as f64;
            assert_eq!(floats[i], u, "rand: seed {seed} offset {off}");
            assert!((0.0..1.0).contains(&floats[i]));
        }
    }
}
