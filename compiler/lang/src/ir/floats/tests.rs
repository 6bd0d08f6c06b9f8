//! Every conversion is compared with implementations written apart from this crate: `half`'s
//! f32 → f16/bf16 for the f32 sweep, and `rustc_apfloat` (LLVM's APFloat in Rust) for f64 and
//! integer sources, both rounding modes and the fp8 formats.

use super::*;
use crate::ir::scalar::{Scalar, cast};
use rustc_apfloat::ieee::{BFloat, Double, Float8E4M3FN, Float8E5M2, Half, Single};
use rustc_apfloat::{Float, FloatConvert, Round};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The interpreter's f32 → format conversion, as bits.
fn ours_from_f32(f: FloatFormat, x: f32) -> u64 {
    f.encode(f.round(x as f64, Rounding::NearestEven))
}

/// One f32 pattern against `half`: the same bits, or NaN on both sides.
fn f32_agrees(b: u32) -> [bool; 2] {
    let x = f32::from_bits(b);
    let h = half::f16::from_f32(x);
    let bf = half::bf16::from_f32(x);
    let f16_ok = if x.is_nan() {
        h.is_nan() && F16.decode(ours_from_f32(F16, x)).is_nan()
    } else {
        ours_from_f32(F16, x) == h.to_bits() as u64
    };
    let bf16_ok = if x.is_nan() {
        bf.is_nan() && BF16.decode(ours_from_f32(BF16, x)).is_nan()
    } else {
        ours_from_f32(BF16, x) == bf.to_bits() as u64
    };
    [f16_ok, bf16_ok]
}

/// Checks the f32 patterns `patterns` on all cores; returns (checked, f16 differences, bf16
/// differences) and the first differing pattern of each.
fn sweep(patterns: impl Fn(u64) -> u32 + Sync, count: u64) -> (u64, [u64; 2], [Option<u32>; 2]) {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let patterns = &patterns;
                s.spawn(move || {
                    let mut diffs = [0u64; 2];
                    let mut first = [None; 2];
                    let mut i = t;
                    while i < count {
                        let b = patterns(i);
                        for (k, ok) in f32_agrees(b).into_iter().enumerate() {
                            if !ok {
                                diffs[k] += 1;
                                first[k] = first[k].or(Some(b));
                            }
                        }
                        i += threads;
                    }
                    (diffs, first)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut diffs = [0u64; 2];
    let mut first = [None; 2];
    for (d, f) in results {
        for k in 0..2 {
            diffs[k] += d[k];
            first[k] = first[k].or(f[k]);
        }
    }
    (count, diffs, first)
}

#[test]
fn the_midpoint_reproducer_rounds_up() {
    // 0x3FA68004 lies just above the midpoint between bf16 1.296875 and 1.3046875.
    let x = f32::from_bits(0x3FA6_8004) as f64;
    assert_eq!(BF16.round(x, Rounding::NearestEven), 1.3046875);
    assert_eq!(BF16.round(x, Rounding::TowardZero), 1.296875);
}

/// A deterministic sample of the f32 → f16/bf16 sweep for CI: 4M patterns spread over the whole
/// range, and every pattern whose dropped bits sit at or next to a rounding boundary.
#[test]
fn f32_to_f16_and_bf16_agree_with_half_on_a_sample() {
    let spread = sweep(|i| (i as u32).wrapping_mul(2_654_435_761), 1 << 22);
    assert_eq!(spread.1, [0, 0], "first differences (f16, bf16): {:?}", spread.2);
    // bf16 drops the low 16 bits; f16 drops 13 (more below its normal range).
    let lows16 = [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xffff];
    let bf16_edges = sweep(|i| ((i / 6) as u32) << 16 | lows16[(i % 6) as usize], 6 << 16);
    assert_eq!(
        bf16_edges.1,
        [0, 0],
        "first differences (f16, bf16): {:?}",
        bf16_edges.2
    );
    let lows13 = [0u32, 1, 0xfff, 0x1000, 0x1001, 0x1fff];
    let f16_edges = sweep(|i| ((i / 6) as u32) << 13 | lows13[(i % 6) as usize], 6 << 19);
    assert_eq!(f16_edges.1, [0, 0], "first differences (f16, bf16): {:?}", f16_edges.2);
}

/// All 2^32 f32 patterns; about a minute on two cores. Run by hand:
/// `cargo test --release -p tile-lang f32_sweep -- --ignored --nocapture`.
#[test]
#[ignore = "the full sweep takes about a minute; CI runs the sample above"]
fn f32_sweep_to_f16_and_bf16_agrees_with_half_on_every_pattern() {
    let started = std::time::Instant::now();
    let (n, diffs, first) = sweep(|i| i as u32, 1 << 32);
    println!(
        "f32 sweep: {n} patterns, f16 differences {}, bf16 differences {} ({:.1} s)",
        diffs[0],
        diffs[1],
        started.elapsed().as_secs_f64()
    );
    assert_eq!(diffs, [0, 0], "first differences (f16, bf16): {first:?}");
}

/// The reference conversion of an f64 by APFloat, as the f64 of the result. Formats that
/// saturate take the largest finite value where APFloat overflows.
fn apfloat_round<T: Float>(x: f64, mode: Round, saturate: bool) -> f64
where
    Double: FloatConvert<T>,
    T: FloatConvert<Double>,
{
    let mut loses = false;
    let r: T = Double::from_bits(x.to_bits() as u128).convert_r(mode, &mut loses).value;
    let r = if saturate && !x.is_nan() && (r.is_infinite() || r.is_nan()) {
        let m = T::largest();
        if x < 0.0 { -m } else { m }
    } else {
        r
    };
    let back: Double = r.convert(&mut loses).value;
    f64::from_bits(back.to_bits() as u64)
}

fn apfloat_for(f: FloatFormat, x: f64, mode: Round) -> f64 {
    let sat = f.overflow == Overflow::Saturate;
    match f {
        F32 => apfloat_round::<Single>(x, mode, sat),
        F16 => apfloat_round::<Half>(x, mode, sat),
        BF16 => apfloat_round::<BFloat>(x, mode, sat),
        E4M3 => apfloat_round::<Float8E4M3FN>(x, mode, sat),
        E5M2 => apfloat_round::<Float8E5M2>(x, mode, sat),
        _ => unreachable!(),
    }
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

const FORMATS: [(&str, FloatFormat); 5] = [
    ("f32", F32),
    ("f16", F16),
    ("bf16", BF16),
    ("e4m3", E4M3),
    ("e5m2", E5M2),
];

/// f64 inputs near every value of a format: the value, the midpoints to its neighbours, and
/// one f64 ulp either side of each (only formats of at most 16 bits are enumerated whole).
fn boundary_inputs(f: FloatFormat) -> Vec<f64> {
    let bits = 1 + f.exp_bits + f.man_bits;
    let mut out = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
    ];
    if bits > 16 {
        return out;
    }
    let values: Vec<f64> = (0..1u64 << bits)
        .map(|b| f.decode(b))
        .filter(|v| v.is_finite())
        .collect();
    for w in values.windows(2) {
        let mid = (w[0] + w[1]) / 2.0; // exact: both are narrow values
        for v in [w[0], mid] {
            out.extend([
                v,
                f64::from_bits(v.to_bits() + 1),
                f64::from_bits(v.to_bits().wrapping_sub(1)),
            ]);
        }
    }
    let top = f.max_finite();
    out.extend([top * 1.5, top * 2.0, -top * 1.75]);
    out
}

#[test]
fn f64_to_every_format_agrees_with_apfloat_in_both_rounding_modes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (name, f) in FORMATS {
        let mut inputs = boundary_inputs(f);
        // Random values with exponents around the format's whole range.
        let (lo, hi) = (f.emin() - f.man_bits as i32 - 4, f.bias() + 3);
        for _ in 0..200_000 {
            let e = lo + (rng.next() % (hi - lo + 1) as u64) as i32;
            let m = f64::from_bits(0x3ff0_0000_0000_0000 | (rng.next() >> 12));
            let s = if rng.next() & 1 == 1 { -1.0 } else { 1.0 };
            inputs.push(s * m * 2f64.powi(e));
        }
        for x in inputs {
            for (mode, ours) in [
                (Round::NearestTiesToEven, Rounding::NearestEven),
                (Round::TowardZero, Rounding::TowardZero),
            ] {
                let want = apfloat_for(f, x, mode);
                let got = f.round(x, ours);
                assert!(
                    same(got, want),
                    "{name} {ours:?}: {x:e} ({:#x}) gives {got:e}, APFloat {want:e}",
                    x.to_bits()
                );
                if !got.is_nan() {
                    assert!(
                        same(f.decode(f.encode(got)), got),
                        "{name}: {got:e} does not round-trip its bits"
                    );
                }
            }
        }
    }
}

#[test]
fn integers_of_every_width_round_once_to_every_float() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut values: Vec<i128> = Vec::new();
    for k in 0..64 {
        for d in [-1i128, 0, 1] {
            values.push((1i128 << k) + d);
            values.push(-(1i128 << k) + d);
        }
    }
    values.extend([i64::MIN as i128, i64::MAX as i128, u64::MAX as i128]);
    for _ in 0..100_000 {
        let width = 1 + rng.next() % 64;
        values.push((rng.next() >> (64 - width)) as i128);
        values.push(-((rng.next() >> (64 - width)) as i128));
    }
    for &v in &values {
        let (from, held) = if v > i64::MAX as i128 {
            (DType::U64, v as u64 as i64)
        } else if v < i64::MIN as i128 {
            continue;
        } else {
            (DType::I64, v as i64)
        };
        for (name, to, f) in FORMATS.map(|(n, f)| (n, dtype_of(f), f)) {
            let Scalar::F(got) = cast(from, to, Scalar::I(held), false) else {
                panic!("a float cast gives a float")
            };
            let want = apfloat_from_int(f, v);
            assert!(same(got, want), "{from} {v} → {name}: {got:e}, APFloat {want:e}");
        }
    }
}

fn dtype_of(f: FloatFormat) -> DType {
    match f {
        F32 => DType::F32,
        F16 => DType::F16,
        BF16 => DType::BF16,
        E4M3 => DType::F8E4M3,
        _ => DType::F8E5M2,
    }
}

/// APFloat's conversion of an integer, rounded once, saturating where the format does.
fn apfloat_from_int(f: FloatFormat, v: i128) -> f64 {
    fn go<T: Float + FloatConvert<Double>>(v: i128, saturate: bool) -> f64 {
        let r = T::from_i128_r(v, Round::NearestTiesToEven).value;
        let r = if saturate && (r.is_infinite() || r.is_nan()) {
            if v < 0 { -T::largest() } else { T::largest() }
        } else {
            r
        };
        let mut loses = false;
        let back: Double = r.convert(&mut loses).value;
        f64::from_bits(back.to_bits() as u64)
    }
    let sat = f.overflow == Overflow::Saturate;
    match f {
        F32 => go::<Single>(v, sat),
        F16 => go::<Half>(v, sat),
        BF16 => go::<BFloat>(v, sat),
        E4M3 => go::<Float8E4M3FN>(v, sat),
        _ => go::<Float8E5M2>(v, sat),
    }
}
