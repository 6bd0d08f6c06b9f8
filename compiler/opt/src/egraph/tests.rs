//! Every rule, evaluated both ways on random inputs with the interpreter: a small kernel
//! whose body is the rule's left side runs unoptimized and optimized with only that rule, and
//! the outputs must agree bit for bit (NaNs agree with NaNs), or within the documented bound
//! for fast-math rules. The test also checks that the rule fired.

use std::collections::HashMap;

use tile_lang::interp::{self, Arg, Buffer};
use tile_lang::ir::{DType, Elem, Kernel, parse_kernel};
use tile_lang::ir::{Scalar, scalar};

use super::{OptOptions, optimize};

const N: usize = 64;

/// The kernel text for `body` (names instead of numbers; `$T` the input dtype, `$R` the
/// output's): inputs `%x` and `%y` are loaded, `%r` is stored.
fn kernel(t: &str, r: &str, body: &str) -> Kernel {
    let src = format!(
        "kernel @t(out %out: *mut {r}, a %pa: *{t}, b %pb: *{t}) {{
  %i = arange<0, {N}> : i32[{N}]
  %ba = broadcast %pa : (*{t})[{N}]
  %qa = ptr_add %ba, %i : (*{t})[{N}]
  %x = load %qa : {t}[{N}]
  %bb = broadcast %pb : (*{t})[{N}]
  %qb = ptr_add %bb, %i : (*{t})[{N}]
  %y = load %qb : {t}[{N}]
{}
  %bo = broadcast %out : (*mut {r})[{N}]
  %qo = ptr_add %bo, %i : (*mut {r})[{N}]
  store %qo, %r
}}
",
        body.replace("$T", t).replace("$R", r).replace("$N", &N.to_string())
    );
    // Names to dense numbers in order of appearance.
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut out = String::new();
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            let mut name = String::new();
            while let Some(&n) = chars.peek() {
                if n.is_ascii_alphanumeric() || n == '_' {
                    name.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
            let k = names.len();
            out.push_str(&names.entry(name).or_insert(k).to_string());
        }
    }
    parse_kernel(&out).unwrap_or_else(|e| panic!("{e:?}\n{out}"))
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn normal(&mut self) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let w = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (-2.0 * (u.max(1e-300)).ln()).sqrt() * (2.0 * std::f64::consts::PI * w).cos()
    }
}

/// Random elements of `d` with the special values mixed in.
fn random(d: DType, rng: &mut Rng, finite: bool) -> Vec<Scalar> {
    (0..N)
        .map(|i| {
            let s = if d.is_bool() {
                Scalar::B(rng.next() & 1 == 1)
            } else if d.is_float() {
                let special = [0.0, -0.0, 1.0, -1.0, 0.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
                let x = if i < special.len() && !finite {
                    special[i]
                } else {
                    rng.normal() * [1.0, 1e3, 1e-3, 30.0][(rng.next() % 4) as usize]
                };
                Scalar::F(x)
            } else {
                let special = [0i64, 1, -1, i64::MAX, i64::MIN, 127, 128, 255, 256, -128, 65535];
                let x = if i < special.len() {
                    special[i]
                } else {
                    rng.next() as i64 >> (rng.next() % 63)
                };
                Scalar::I(x)
            };
            scalar::cast(
                if d.is_float() { DType::F64 } else { DType::I64 }.max(d.min(DType::I64)),
                d,
                s,
                false,
            )
        })
        .map(|s| match (d, s) {
            (d, Scalar::I(x)) if d.is_int() => Scalar::I(scalar::wrap(d, x)),
            (d, Scalar::F(x)) if d.is_float() => Scalar::F(scalar::round_float(d, x)),
            (_, s) => s,
        })
        .collect()
}

fn run(k: &Kernel, inputs: &[Buffer]) -> Vec<Scalar> {
    let mut bufs = inputs.to_vec();
    let args: Vec<Arg> = (0..k.params.len()).map(Arg::Buffer).collect();
    interp::run(k, [1, 1, 1], &args, &mut bufs).expect("the kernel runs");
    bufs[0].data.clone()
}

fn pointee(k: &Kernel, i: usize) -> DType {
    match k.params[i].elem {
        Elem::Ptr { pointee, .. } => pointee,
        Elem::Scalar(d) => d,
    }
}

/// Checks `rule` on `body` for each `(input, output)` dtype pair; returns the largest
/// relative error seen (0 for exact rules, which must agree bit for bit).
fn check(rule: &str, body: &str, types: &[(&str, &str)], fast_math: bool) -> f64 {
    let mut worst: f64 = 0.0;
    for (t, r) in types {
        let before = worst;
        worst = 0.0;
        let k = kernel(t, r, body);
        let opts = OptOptions {
            fast_math,
            only_rules: Some(vec![rule.to_string()]),
            ..OptOptions::default()
        };
        let (o, report) = optimize(&k, &opts).unwrap_or_else(|e| panic!("{rule} on {t}: {e}"));
        assert!(
            report.applied.get(rule).is_some_and(|n| *n > 0),
            "{rule} did not fire on {t}:\n{k}"
        );
        let rd = pointee(&k, 0);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ t.len() as u64);
        for _ in 0..20 {
            let bufs: Vec<Buffer> = (0..3)
                .map(|i| {
                    let d = pointee(&k, i);
                    let data = if i == 0 {
                        vec![Scalar::I(0); N]
                            .iter()
                            .map(|_| tile_lang::spec::poison(d))
                            .collect()
                    } else {
                        random(d, &mut rng, fast_math)
                    };
                    Buffer::new(format!("p{i}"), d, data)
                })
                .collect();
            let (want, got) = (run(&k, &bufs), run(&o, &bufs));
            for (e, (w, g)) in want.iter().zip(&got).enumerate() {
                let (wb, gb) = (scalar::to_bits(rd, *w), scalar::to_bits(rd, *g));
                let both_nan = matches!((w, g), (Scalar::F(a), Scalar::F(b)) if a.is_nan() && b.is_nan());
                if wb == gb || both_nan {
                    continue;
                }
                let (Scalar::F(a), Scalar::F(b)) = (w, g) else {
                    panic!("{rule} on {t}: element {e}: {w:?} became {g:?}\n{k}\n{o}");
                };
                assert!(
                    fast_math,
                    "{rule} on {t}: element {e}: {a:e} became {b:e} (inputs {:?}, {:?})\n{o}",
                    bufs[1].data[e], bufs[2].data[e]
                );
                worst = worst.max((a - b).abs() / a.abs().max(f64::MIN_POSITIVE));
            }
        }
        if fast_math {
            eprintln!("{rule} on {t}: max relative error {worst:.2e}");
        }
        worst = worst.max(before);
    }
    worst
}

const FLOATS: &[(&str, &str)] = &[("f32", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("f64", "f64")];
const INTS: &[(&str, &str)] = &[
    ("i32", "i32"),
    ("u32", "u32"),
    ("i8", "i8"),
    ("u16", "u16"),
    ("i64", "i64"),
];
const NUMS: &[(&str, &str)] = &[
    ("f32", "f32"),
    ("bf16", "bf16"),
    ("i32", "i32"),
    ("u8", "u8"),
    ("i64", "i64"),
];

/// `%r = OP %x, const<C>` on tiles.
fn with_const(op: &str, c: &str) -> String {
    format!("  %c = const<{c}> : $T\n  %cb = broadcast %c : $T[$N]\n  %r = {op} %x, %cb : $T[$N]")
}

#[test]
fn algebra() {
    let bin = |op: &str| format!("  %r = {op} %x, %y : $T[$N]");
    for (rule, op) in [
        ("add-comm", "add"),
        ("mul-comm", "mul"),
        ("max-comm", "max"),
        ("min-comm", "min"),
    ] {
        check(rule, &bin(op), NUMS, false);
    }
    check("add-zero", &with_const("add", "-0.0"), FLOATS, false);
    check("add-zero", &with_const("add", "0"), INTS, false);
    check("sub-zero", &with_const("sub", "0.0"), FLOATS, false);
    check("sub-zero", &with_const("sub", "0"), INTS, false);
    check("mul-one", &with_const("mul", "1"), NUMS, false);
    check("div-one", &with_const("div", "1"), NUMS, false);
    check("mul-zero-int", &with_const("mul", "0"), INTS, false);
    check(
        "mul-minus-one",
        &with_const("mul", "-1"),
        &[("f32", "f32"), ("bf16", "bf16"), ("i32", "i32"), ("i8", "i8")],
        false,
    );
    check("neg-neg", "  %n = neg %x : $T[$N]\n  %r = neg %n : $T[$N]", NUMS, false);
    check(
        "sub-neg",
        "  %n = neg %y : $T[$N]\n  %r = sub %x, %n : $T[$N]",
        NUMS,
        false,
    );
    check(
        "add-neg",
        "  %n = neg %y : $T[$N]\n  %r = add %x, %n : $T[$N]",
        NUMS,
        false,
    );
    check("sub-self-int", "  %r = sub %x, %x : $T[$N]", INTS, false);
    check("xor-self-int", "  %r = xor %x, %x : $T[$N]", INTS, false);
    check("max-self", "  %r = max %x, %x : $T[$N]", NUMS, false);
    check("min-self", "  %r = min %x, %x : $T[$N]", NUMS, false);
    check(
        "and-self",
        "  %r = and %x, %x : $T[$N]",
        &[("i32", "i32"), ("bool", "bool")],
        false,
    );
    check(
        "or-self",
        "  %r = or %x, %x : $T[$N]",
        &[("u8", "u8"), ("bool", "bool")],
        false,
    );
}

#[test]
fn strength() {
    check("mul-pow2-shl", &with_const("mul", "8"), INTS, false);
    check(
        "udiv-pow2-shr",
        &with_const("div", "16"),
        &[("u32", "u32"), ("u8", "u8"), ("u64", "u64")],
        false,
    );
    check(
        "urem-pow2-and",
        &with_const("rem", "4"),
        &[("u32", "u32"), ("u16", "u16"), ("u64", "u64")],
        false,
    );
}

#[test]
fn division() {
    check("fdiv-pow2-mul", &with_const("div", "4.0"), FLOATS, false);
    check("fdiv-pow2-mul", &with_const("div", "-0.125"), FLOATS, false);
    let e = check("fdiv-const-mul", &with_const("div", "3.0"), FLOATS, true);
    eprintln!("fdiv-const-mul: max relative error {e:e}");
    assert!(e <= 2e-2, "{e}");
    let body = "  %s = reduce<sum, 0> %y : $T\n  %sb = broadcast %s : $T[$N]\n  %r = div %x, %sb : $T[$N]";
    let e = check("fdiv-broadcast-recip", body, FLOATS, true);
    eprintln!("fdiv-broadcast-recip: max relative error {e:e}");
    assert!(e <= 2e-2, "{e}");
}

#[test]
fn exp_log() {
    let e = check("exp-to-exp2", "  %r = exp %x : $T[$N]", FLOATS, true);
    eprintln!("exp-to-exp2: max relative error {e:e}");
    let l = check("log-to-log2", "  %r = log %x : $T[$N]", FLOATS, true);
    eprintln!("log-to-log2: max relative error {l:e}");
    let f = check(
        "fma-contract",
        "  %m = mul %x, %y : $T[$N]\n  %r = add %m, %x : $T[$N]",
        FLOATS,
        true,
    );
    eprintln!("fma-contract: max relative error {f:e}");
}

#[test]
fn casts() {
    let chain = |mid: &str| format!("  %m = cast<rne> %x : {mid}[$N]\n  %r = cast<rne> %m : $R[$N]");
    check(
        "cast-round-trip",
        &chain("f32"),
        &[("f16", "f16"), ("bf16", "bf16"), ("i16", "i16"), ("u8", "u8")],
        false,
    );
    check(
        "cast-round-trip",
        &chain("i64"),
        &[("i32", "i32"), ("u32", "u32"), ("bool", "bool")],
        false,
    );
    check(
        "cast-chain",
        &chain("f32"),
        &[
            ("f16", "f64"),
            ("bf16", "f16"),
            ("i8", "f16"),
            ("f16", "i32"),
            ("i16", "i32"),
        ],
        false,
    );
    check(
        "cast-chain",
        &chain("i64"),
        &[("i8", "u8"), ("u16", "i8"), ("i32", "f32")],
        false,
    );
}

#[test]
fn casts_refuse_saturating_chains() {
    // i32 → f64 → i8 saturates where i32 → i8 wraps: the chain must stay.
    let body = "  %m = cast<rne> %x : f64[$N]\n  %r = cast<rne> %m : i8[$N]";
    let k = kernel("i32", "i8", body);
    let opts = OptOptions {
        only_rules: Some(vec!["cast-chain".into()]),
        ..OptOptions::default()
    };
    let (_, report) = optimize(&k, &opts).unwrap();
    assert!(!report.applied.contains_key("cast-chain"));
}

#[test]
fn masks() {
    let cmp = |c: &str| format!("  %c = {c} %x, %y : bool[$N]\n  %n = not %c : bool[$N]\n  %r = cast<rne> %n : $R[$N]");
    for (rule, c) in [
        ("not-lt-int", "lt"),
        ("not-le-int", "le"),
        ("not-gt-int", "gt"),
        ("not-ge-int", "ge"),
    ] {
        check(rule, &cmp(c), &[("i32", "i32"), ("u8", "i32"), ("i64", "i32")], false);
    }
    for (rule, c) in [("not-eq", "eq"), ("not-ne", "ne")] {
        check(rule, &cmp(c), &[("f32", "i32"), ("i32", "i32"), ("bf16", "i32")], false);
    }
    check(
        "select-same",
        "  %c = lt %x, %y : bool[$N]\n  %r = select %c, %x, %x : $T[$N]",
        NUMS,
        false,
    );
    let sel = "  %c = lt %x, %y : bool[$N]\n  %n = not %c : bool[$N]\n  %r = select %n, %x, %y : $T[$N]";
    check("select-not", sel, NUMS, false);
    let k = |v: &str| {
        format!("  %t = const<{v}> : bool\n  %tb = broadcast %t : bool[$N]\n  %r = select %tb, %x, %y : $T[$N]")
    };
    check("select-true", &k("true"), NUMS, false);
    check("select-false", &k("false"), NUMS, false);
    check(
        "not-not",
        "  %n = not %x : $T[$N]\n  %r = not %n : $T[$N]",
        &[("bool", "bool"), ("i32", "i32"), ("u8", "u8")],
        false,
    );
    let b = |op: &str, v: &str| {
        format!("  %t = const<{v}> : bool\n  %tb = broadcast %t : bool[$N]\n  %r = {op} %x, %tb : bool[$N]")
    };
    check("and-true", &b("and", "true"), &[("bool", "bool")], false);
    check("and-false", &b("and", "false"), &[("bool", "bool")], false);
    check("or-false", &b("or", "false"), &[("bool", "bool")], false);
    check("or-true", &b("or", "true"), &[("bool", "bool")], false);
    check(
        "and-comm",
        "  %r = and %x, %y : $T[$N]",
        &[("bool", "bool"), ("i32", "i32")],
        false,
    );
    check(
        "or-comm",
        "  %r = or %x, %y : $T[$N]",
        &[("bool", "bool"), ("u16", "u16")],
        false,
    );
}

#[test]
fn broadcast() {
    let two = |op: &str| {
        format!(
            "  %s = reduce<max, 0> %x : $T\n  %u = reduce<min, 0> %y : $T\n  %sb = broadcast %s : $T[$N]\n  %ub = broadcast %u : $T[$N]\n  %r = {op} %sb, %ub : $T[$N]"
        )
    };
    for op in ["add", "sub", "mul", "max", "min"] {
        check(&format!("hoist-{op}"), &two(op), NUMS, false);
    }
    check("hoist-div", &two("div"), FLOATS, false);
    let one =
        |op: &str| format!("  %s = reduce<max, 0> %x : $T\n  %sb = broadcast %s : $T[$N]\n  %r = {op} %sb : $T[$N]");
    for op in ["neg", "exp", "sqrt", "rsqrt"] {
        check(&format!("hoist-{op}"), &one(op), FLOATS, false);
    }
    let bb = "  %s = reduce<max, 0> %x : $T\n  %e = broadcast %s : $T[1]\n  %r = broadcast %e : $T[$N]";
    check("broadcast-broadcast", bb, NUMS, false);
}

#[test]
fn reductions() {
    // Reductions to a scalar, broadcast back so the kernel stores a tile.
    let red = |op: &str, x: &str| format!("{x}  %s = reduce<{op}, 0> %v : $T\n  %r = broadcast %s : $T[$N]");
    let splat = "  %e = reduce<max, 0> %y : $T\n  %v = broadcast %e : $T[$N]\n";
    check("max-of-splat", &red("max", splat), NUMS, false);
    check("min-of-splat", &red("min", splat), NUMS, false);
    check(
        "sum-of-splat-int",
        &red("sum", splat),
        &[("i32", "i32"), ("u32", "u32"), ("i64", "i64")],
        false,
    );
    let times = "  %e = reduce<max, 0> %y : $T\n  %b = broadcast %e : $T[$N]\n  %v = mul %x, %b : $T[$N]\n";
    check(
        "sum-mul-splat-int",
        &red("sum", times),
        &[("i32", "i32"), ("i64", "i64")],
        false,
    );
    let neg = "  %v = neg %x : $T[$N]\n";
    check(
        "sum-neg-int",
        &red("sum", neg),
        &[("i32", "i32"), ("i64", "i64")],
        false,
    );
    let e = check(
        "sum-mul-splat",
        &red("sum", times),
        &[("f32", "f32"), ("f64", "f64")],
        true,
    );
    eprintln!("sum-mul-splat: max relative error {e:e}");
    let over = "  %e = reduce<max, 0> %y : $T\n  %b = broadcast %e : $T[$N]\n  %v = div %x, %b : $T[$N]\n";
    let d = check(
        "sum-div-splat",
        &red("sum", over),
        &[("f32", "f32"), ("f64", "f64")],
        true,
    );
    eprintln!("sum-div-splat: max relative error {d:e}");
}

/// A kernel with a masked tail (`%m`: the first 40 of 64 lanes), for the load/store fusions.
fn masked(load: &str, store_value: &str) -> Kernel {
    let src = format!(
        "kernel @t(out %0: *mut f32, a %1: *f32, b %2: *f32) {{
  %3 = arange<0, {N}> : i32[{N}]
  %4 = const<40> : i32
  %5 = broadcast %4 : i32[{N}]
  %6 = lt %3, %5 : bool[{N}]
  %7 = broadcast %1 : (*f32)[{N}]
  %8 = ptr_add %7, %3 : (*f32)[{N}]
  %9 = const<-7.5> : f32
  %10 = broadcast %9 : f32[{N}]
  %12 = broadcast %2 : (*f32)[{N}]
  %13 = ptr_add %12, %3 : (*f32)[{N}]
  %14 = load %13 : f32[{N}]
{load}
  %15 = select %6, %11, %14 : f32[{N}]
  %16 = broadcast %0 : (*mut f32)[{N}]
  %17 = ptr_add %16, %3 : (*mut f32)[{N}]
  store<mask> %17, {store_value}, %6
}}
"
    );
    parse_kernel(&src).unwrap_or_else(|e| panic!("{e:?}\n{src}"))
}

/// Runs `k` before and after `rule` alone on random inputs; the whole output buffer (the
/// masked-off lanes keep their poison) must agree bit for bit.
fn check_fusion(rule: &str, k: &Kernel) {
    let opts = OptOptions {
        only_rules: Some(vec![rule.to_string()]),
        ..OptOptions::default()
    };
    let (o, report) = optimize(k, &opts).unwrap_or_else(|e| panic!("{rule}: {e}"));
    assert_eq!(report.applied.get(rule), Some(&1), "{rule} did not fire:\n{k}\n{o}");
    let mut rng = Rng(42);
    for _ in 0..10 {
        let bufs = vec![
            Buffer::new(
                "out",
                DType::F32,
                (0..N).map(|_| tile_lang::spec::poison(DType::F32)).collect(),
            ),
            Buffer::new("a", DType::F32, random(DType::F32, &mut rng, false)),
            Buffer::new("b", DType::F32, random(DType::F32, &mut rng, false)),
        ];
        let (want, got) = (run(k, &bufs), run(&o, &bufs));
        for (e, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(
                scalar::to_bits(DType::F32, *w),
                scalar::to_bits(DType::F32, *g),
                "{rule}: element {e}\n{o}"
            );
        }
    }
}

#[test]
fn load_store_fusion() {
    // The select's other side is another load; the store is masked by the same `%6`.
    check_fusion(
        "store-select-mask",
        &masked("  %11 = load<mask> %8, %6 : f32[64]", "%15"),
    );
    // The masked load's result is read only by the select: its `other` becomes the select's.
    let k = masked("  %11 = load<mask, other> %8, %6, %10 : f32[64]", "%15");
    check_fusion("load-select-other", &k);
    // A load whose result has another reader is left alone.
    let k2 = masked("  %11 = load<mask> %8, %6 : f32[64]", "%11");
    let opts = OptOptions {
        only_rules: Some(vec!["load-select-other".into()]),
        ..OptOptions::default()
    };
    // (here the select is dead, so extraction drops it before fusion: nothing to fuse)
    let (_, report) = optimize(&k2, &opts).unwrap();
    assert!(report.applied.get("load-select-other").is_none());
}
