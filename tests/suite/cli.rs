//! `tilec`'s exit codes and outputs: 0 clean, 1 diagnostics or failed verification, 2 usage.

use tile_tests::{root, tilec};

fn path(p: &str) -> String {
    root().join(p).to_string_lossy().into_owned()
}

#[test]
fn check_exit_codes() {
    let (code, out, _) = tilec(&["check", &path("dsl-examples/vector_add.tile")]);
    assert_eq!(code, 0, "{out}");
    let bad = tile_tests::tile_files("tests/diagnostics")[0]
        .to_string_lossy()
        .into_owned();
    let (code, _, err) = tilec(&["check", &bad]);
    assert_eq!(code, 1);
    assert!(err.contains("error"), "{err}");
    assert_eq!(tilec(&["check"]).0, 2);
    assert_eq!(tilec(&["frobnicate"]).0, 2);
    assert_eq!(tilec(&["check", "/nonexistent.tile"]).0, 2);
    assert_eq!(
        tilec(&["check", "-D", "BLOCK", &path("dsl-examples/vector_add.tile")]).0,
        2
    );
}

#[test]
fn compile_emits_ast_and_ir_and_binds_defines() {
    let (code, out, err) = tilec(&[
        "compile",
        &path("dsl-examples/vector_add.tile"),
        "--emit",
        "ast,ir",
        "-D",
        "BLOCK=512",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("kernel vector_add<const BLOCK: i32 in [256, 512, 1024, 2048]>"),
        "{out}"
    );
    assert!(out.contains("consts(BLOCK = 512)"), "{out}");
    assert!(out.contains("arange<0, 512>"), "{out}");
    let (code, _, err) = tilec(&["compile", &path("dsl-examples/vector_add.tile"), "-D", "NOPE=1"]);
    assert_eq!(code, 1);
    assert!(err.contains("no compile-time parameter `NOPE`"), "{err}");
    let (code, _, err) = tilec(&["compile", &path("dsl-examples/vector_add.tile"), "-D", "BLOCK=100"]);
    assert_eq!(code, 1);
    // A tile that would give each thread thousands of elements is refused before LLVM, which
    // took minutes on it.
    let (code, _, e) = tilec(&[
        "compile",
        &path("dsl-examples/vector_add.tile"),
        "-D",
        "BLOCK=1048576",
        "--emit",
        "ptx",
    ]);
    assert_eq!(code, 1, "{e}");
    assert!(e.contains("the limit is 1024") && e.contains("more warps"), "{e}");
    // Pipeline depths outside #[stages]'s range are usage errors that say the range.
    for bad in ["0", "100"] {
        let (code, _, e) = tilec(&["explain", &path("dsl-examples/vector_add.tile"), "--num-stages", bad]);
        assert_eq!(code, 2, "{e}");
        assert!(e.contains("1..=8"), "{e}");
    }
    assert!(err.contains("not a power of two"), "{err}");
}

#[test]
fn compile_specialises_on_given_integer_arguments() {
    // matmul_tma's descriptors take their innermost strides from arguments: only a launch
    // with stride 1 (what `--arg` says) gets the TMA engine and its tensor maps.
    let base = [
        "compile",
        &path("dsl-examples/matmul.tile"),
        "--kernel",
        "matmul_tma",
        "--sm",
        "90a",
        "--emit",
        "gir",
        "--assume-aligned",
    ];
    let (code, out, err) = tilec(&base);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("tensor map"), "{out}");
    let mut with_args = base.to_vec();
    with_args.extend(["--arg", "stride_ak=1", "--arg", "stride_bn=1"]);
    let (code, out, err) = tilec(&with_args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("TMA ring of full/empty mbarriers") && out.contains("tensor map 1"),
        "{out}"
    );
    for (bad, says) in [
        (
            "stride=1",
            "has no parameter `stride`; its integer parameters are: M, N, K",
        ),
        ("a=1", "`a` is not an integer parameter"),
        ("K=x", "`x` is not an integer"),
        ("K", "expected NAME=VALUE"),
    ] {
        let mut v = base.to_vec();
        v.extend(["--arg", bad]);
        let (code, _, err) = tilec(&v);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn verify_reports_errors_and_needs_a_backend() {
    let (code, out, err) = tilec(&["verify", "--interpret", &path("dsl-examples/vector_add.tile")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("max abs"), "{out}");
    assert!(out.trim_end().ends_with("passed, 0 failed"), "{out}");
    assert_eq!(tilec(&["verify", &path("dsl-examples/vector_add.tile")]).0, 2);
    // A missing file is named before the missing GPU.
    let (code, _, err) = tilec(&["verify", "no-such-file.tile"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read no-such-file.tile"), "{err}");
    // A kernel without a run spec: the ones with one are named, each once.
    let (code, _, err) = tilec(&[
        "run",
        "--interpret",
        &path("tests/gpu/persistent.tile"),
        "--kernel",
        "nope",
    ]);
    assert_eq!(code, 1, "{err}");
    let named = "the file has run specs for: matmul_persistent, matmul_persistent4, attention_persistent";
    assert!(err.trim_end().ends_with(named), "{err}");
}

/// A reference written as another kernel of the file: it passes when it agrees, fails when it
/// does not, and a reference that does not fit the run spec is the case's error, named.
#[test]
fn verify_with_a_reference_kernel_in_the_file() {
    let (code, out, err) = tilec(&["verify", "--interpret", &path("dsl-examples/dequant.tile")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("max rel") && !out.contains("no reference"), "{out}");
    let dir = temp_dir("refkernel");
    let file = dir.join("twice.tile");
    let kernel =
        "kernel k(x: *f32, out: *mut f32) {\n    let o = arange(0, 8);\n    store(out + o, load(x + o) * 2.0);\n}\n";
    let write = |reference: &str, spec_args: &str| {
        std::fs::write(
            &file,
            format!("{kernel}{reference}\nrun k {{ grid(1); args({spec_args}); reference(interpret: r); }}\n"),
        )
        .unwrap();
        tilec(&["verify", "--interpret", file.to_str().unwrap()])
    };
    let args = "x: randn([8]), out: output([8])";
    let ok = "kernel r(x: *f64, out: *mut f64) { let o = arange(0, 8); store(out + o, load(x + o) + load(x + o)); }";
    let (code, out, err) = write(ok, args);
    assert_eq!(code, 0, "{out}{err}");
    let wrong = "kernel r(x: *f64, out: *mut f64) { let o = arange(0, 8); store(out + o, load(x + o) * 3.0); }";
    let (code, out, err) = write(wrong, args);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAILED") && out.contains("mismatch"), "{out}");
    let f32_buffers = "kernel r(x: *f32, out: *mut f32) { let o = arange(0, 8); store(out + o, load(x + o)); }";
    let (code, out, _) = write(f32_buffers, args);
    assert_eq!(code, 1);
    assert!(out.contains("`x` must point to f64"), "{out}");
    let other_names = "kernel r(y: *f64, out: *mut f64) { let o = arange(0, 8); store(out + o, load(y + o)); }";
    let (code, out, _) = write(other_names, args);
    assert_eq!(code, 1);
    assert!(
        out.contains("takes `y`, which the run spec's `args(..)` does not name"),
        "{out}"
    );
    let (code, _, err) = write("", args);
    assert_eq!(code, 1);
    assert!(err.contains("no other kernel named `r` in this file"), "{err}");
    // A built-in name that is a kernel of the file: the error says how to name the kernel.
    std::fs::write(
        &file,
        format!("{kernel}{ok}\nrun k {{ grid(1); args({args}); reference(r); }}\n"),
    )
    .unwrap();
    let (code, _, err) = tilec(&["verify", "--interpret", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("`reference(interpret: r)`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn verify_without_a_reference_runs_on_the_interpreter() {
    let (code, out, err) = tilec(&["verify", "--interpret", &path("tests/gpu/no_reference.tile")]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches("no reference: ran on the interpreter").count(), 2, "{out}");
    assert!(!out.contains("max abs"), "nothing is compared:\n{out}");
    assert!(out.trim_end().ends_with("verify: 2 passed, 0 failed"), "{out}");
    // With nothing to compare, the interpreter's errors still fail the case.
    let dir = temp_dir("noref");
    let file = dir.join("oob.tile");
    std::fs::write(
        &file,
        "kernel k(x: *f32, out: *mut f32) {\n    let o = arange(0, 8);\n    store(out + o, load(x + o));\n}\n\
         run k { grid(1); args(x: randn([5]), out: output([8])); }\n",
    )
    .unwrap();
    let (code, out, err) = tilec(&["verify", "--interpret", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAILED") && out.contains("out-of-bounds load"), "{out}");
    assert!(!out.contains("no reference"), "{out}");
    assert!(out.trim_end().ends_with("verify: 0 passed, 1 failed"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_interpreter_stops_at_its_step_budget_and_says_where() {
    let dir = temp_dir("budget");
    let file = dir.join("spin.tile");
    std::fs::write(
        &file,
        "kernel spin(out: *mut f32, n: i32) {\n    let mut acc = zeros([64], f32);\n    for i in 0..n {\n        acc = acc + 1.0;\n    }\n    store(out + arange(0, 64), acc);\n}\n\
         run spin { sizes(n: [2_000_000_000]); grid(1); args(out: output([64]), n: n); }\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, out, err) = tilec(&["verify", "--interpret", "--max-steps", "100000", f]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("stopped after 100000 element operations, the budget (--max-steps raises it); the loop at 3:5 was in iteration 513 of 2000000000"),
        "{out}"
    );
    let (code, out, err) = tilec(&["run", "--interpret", "--max-steps", "1000", f]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("stopped after 1000 element operations"), "{err}");
    // A loop whose body does nothing spends the budget too.
    std::fs::write(
        &file,
        "kernel spin(out: *mut f32, n: i64) {\n    for i in 0..n {\n    }\n    store(out + arange(0, 64), 1.0);\n}\n\
         run spin { sizes(n: [1_000_000_000_000]); grid(1); args(out: output([64]), n: n); }\n",
    )
    .unwrap();
    let (code, out, err) = tilec(&["verify", "--interpret", "--max-steps", "100000", f]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("the loop at 2:5 was in iteration"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tune_needs_a_gpu() {
    // Like `verify_reports_errors_and_needs_a_backend`: CI has no GPU.
    let (code, _, err) = tilec(&["tune", &path("dsl-examples/vector_add.tile"), "--top-k", "2"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no CUDA driver") && err.contains("`tilec tune` times kernels on a GPU"),
        "{err}"
    );
    // A file with nothing to tune on says so before looking for a GPU.
    let (code, _, err) = tilec(&["tune", &path("dsl-examples/vector_add.tile"), "--kernel", "nope"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no run spec with `bench(..)` sizes for `nope` in ")
            && err.contains("the kernels that have one: vector_add"),
        "{err}"
    );
    // A pin that no bench case has (softmax's cases take T from [f32, bf16]) is refused before
    // the GPU; a pin of a tunable (BLOCK) excludes no case.
    let file = path("dsl-examples/softmax.tile");
    let (code, _, err) = tilec(&["tune", &file, "--kernel", "softmax", "-D", "T=f16"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no bench case of softmax has the pinned values (T=f16)"),
        "{err}"
    );
    let (code, _, err) = tilec(&["tune", &file, "--kernel", "softmax", "-D", "T=bf16", "-D", "BLOCK=4096"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no CUDA driver"), "{err}");
}

#[test]
fn bench_needs_a_gpu_and_something_to_time() {
    // CI has no GPU: the error says what bench needs, not a flag it does not have.
    let (code, _, err) = tilec(&["bench", &path("dsl-examples/vector_add.tile")]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no CUDA driver") && err.contains("`tilec bench` times kernels on a GPU"),
        "{err}"
    );
    // Before looking for a GPU: a file that does not read, a kernel without bench sizes (the
    // ones with them are named), a file without any.
    let (code, _, err) = tilec(&["bench", "no-such-file.tile"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read no-such-file.tile"), "{err}");
    let (code, _, err) = tilec(&["bench", &path("dsl-examples/vector_add.tile"), "--kernel", "nope"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "no run spec with `bench(..)` sizes for `nope` in these files; the kernels that have one: vector_add"
        ),
        "{err}"
    );
    let (code, _, err) = tilec(&["bench", &path("tests/gpu/no_reference.tile")]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("no run spec in these files has `bench(..)` sizes"),
        "{err}"
    );
    // `--rounds` takes 1 to 100.
    let (code, _, err) = tilec(&["bench", &path("dsl-examples/vector_add.tile"), "--rounds", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("invalid value '0' for '--rounds <ROUNDS>': 0 is not in 1..=100"),
        "{err}"
    );
    let dir = temp_dir("bench");
    let bad = dir.join("bad.tile");
    std::fs::write(&bad, "kernel k(out: *mut f32) {\n    store(out, nope);\n}\n").unwrap();
    let (code, _, err) = tilec(&["bench", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("bad.tile: does not check; run `tilec check`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tilec bench --rounds N` reports each case's median round, with every round's median in
/// the order they ran, the cases in the order they first ran.
#[test]
fn bench_rounds_keep_each_case_s_median_round() {
    let timed = |kernel: &str, label: &str, ms: f64| tilec::BenchResult {
        kernel: kernel.into(),
        dtype: "bf16".into(),
        label: label.into(),
        median_ms: ms,
        p10_ms: ms,
        p90_ms: ms,
        runs: 10,
        bytes: 0.0,
        flops: 0.0,
        registers: 0,
        local_bytes: 0,
        config: "warps=8".into(),
        compile_ms: 0.0,
        same_size_copy_gbps: 0.0,
        rounds_ms: Vec::new(),
    };
    let rounds = vec![
        timed("a", "n=1", 7.1),
        timed("b", "n=1", 7.5),
        timed("a", "n=1", 7.6),
        timed("b", "n=1", 7.4),
        timed("a", "n=1", 7.5),
        timed("b", "n=1", 7.7),
    ];
    let m = tilec::median_rounds(rounds);
    let got: Vec<(&str, f64, Vec<f64>)> = m
        .iter()
        .map(|r| (r.kernel.as_str(), r.median_ms, r.rounds_ms.clone()))
        .collect();
    assert_eq!(
        got,
        vec![("a", 7.5, vec![7.1, 7.6, 7.5]), ("b", 7.5, vec![7.5, 7.4, 7.7])]
    );
    // An even count takes the lower middle round.
    let m = tilec::median_rounds(vec![timed("a", "n=1", 2.0), timed("a", "n=1", 1.0)]);
    assert_eq!((m.len(), m[0].median_ms), (1, 1.0));
    // Cases that differ only in their dtype stay apart (neither label nor config names it).
    let f32_case = |ms: f64| tilec::BenchResult {
        dtype: "f32".into(),
        ..timed("a", "n=1", ms)
    };
    let m = tilec::median_rounds(vec![
        f32_case(3.0),
        timed("a", "n=1", 1.0),
        f32_case(3.2),
        timed("a", "n=1", 1.1),
    ]);
    let got: Vec<(&str, Vec<f64>)> = m.iter().map(|r| (r.dtype.as_str(), r.rounds_ms.clone())).collect();
    assert_eq!(got, vec![("f32", vec![3.0, 3.2]), ("bf16", vec![1.0, 1.1])]);
}

/// `tilec bench --json` rewrites its file after every case, so that a call cut short keeps what
/// it timed: `"complete"` is false until the end, and with `--rounds` each case appears once,
/// as the median of the rounds it ran.
#[test]
fn bench_json_is_written_after_every_case() {
    let timed = |label: &str, ms: f64| tilec::BenchResult {
        kernel: "k".into(),
        dtype: "f32".into(),
        label: label.into(),
        median_ms: ms,
        p10_ms: ms,
        p90_ms: ms,
        runs: 10,
        bytes: 1e6,
        flops: 0.0,
        registers: 32,
        local_bytes: 0,
        config: "warps=4".into(),
        compile_ms: 0.0,
        same_size_copy_gbps: 0.0,
        rounds_ms: Vec::new(),
    };
    let dir = temp_dir("bench-json");
    let path = dir.join("bench.json");
    let read = || -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap() };
    let mut rec = tilec::Record::new(Some(&path), 4000.0, "test GPU", tilec::ConfigSource::Spec, 2);
    rec.push(timed("n=1", 2.0)).unwrap();
    let doc = read();
    assert_eq!(
        (doc["complete"].as_bool(), doc["cases"].as_array().unwrap().len()),
        (Some(false), 1)
    );
    rec.push(timed("n=2", 3.0)).unwrap();
    // Round 2 of the first case: still one entry for it.
    rec.push(timed("n=1", 1.0)).unwrap();
    let doc = read();
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[0]["rounds_ms"], serde_json::json!([2.0, 1.0]));
    assert_eq!(doc["gpu"], "test GPU");
    rec.save(true).unwrap();
    assert_eq!(read()["complete"].as_bool(), Some(true));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh, empty folder under the system's temp dir for one test.
fn temp_dir(test: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tile-cli-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn compile_writes_ptx_to_a_file_or_one_per_kernel() {
    let dir = temp_dir("ptx");
    let one = dir.join("vector_add.ptx");
    let (code, out, err) = tilec(&[
        "compile",
        &path("dsl-examples/vector_add.tile"),
        "--emit",
        "ptx",
        "--sm",
        "80",
        "-o",
        one.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "", "with -o the PTX goes to the file only");
    let written = std::fs::read_to_string(&one).unwrap();
    assert!(written.contains(".target sm_80"), "{written}");
    assert!(written.contains(".entry vector_add("), "{written}");
    // Several kernels and `-o FILE`: one module with every entry, which ptxas accepts.
    let module = dir.join("layernorm.ptx");
    let (code, out, err) = tilec(&[
        "compile",
        &path("dsl-examples/layernorm.tile"),
        "-o",
        module.to_str().unwrap(),
    ]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let written = std::fs::read_to_string(&module).unwrap();
    assert_eq!(written.matches(".version").count(), 1, "{written}");
    for k in ["layernorm", "layernorm_chunked"] {
        assert!(written.contains(&format!(".entry {k}(")), "{written}");
    }
    if let Some(ptxas) = crate::ptx::ptxas("compile_writes_ptx_to_a_file_or_one_per_kernel") {
        tile_codegen::ptxas::assemble(&ptxas, &written, "sm_90a").unwrap();
    }
    std::fs::remove_file(&module).unwrap();
    // Several kernels and `-o DIR`: DIR/NAME.ptx each; `--emit ir` alone prints no PTX.
    let (code, out, err) = tilec(&[
        "compile",
        &path("dsl-examples/swiglu.tile"),
        "--emit",
        "ir",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains(".entry"), "{out}");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 3, "{names:?}");
    for name in names.iter().filter(|n| *n != "vector_add.ptx") {
        let kernel = name.trim_end_matches(".ptx");
        let ptx = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(ptx.contains(&format!(".entry {kernel}(")), "{name}:\n{ptx}");
        assert!(ptx.contains(".target sm_90a"), "{name}");
    }
    let (code, _, err) = tilec(&[
        "compile",
        &path("dsl-examples/vector_add.tile"),
        "--emit",
        "ptx",
        "-o",
        dir.join("missing/x.ptx").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot write"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_emits_resources_and_timings() {
    let file = path("dsl-examples/swiglu.tile");
    // Without ptxas only the timings of the stages before it can be checked.
    let ptxas = crate::ptx::ptxas("compile_emits_resources_and_timings");
    let emit = if ptxas.is_some() { "resources" } else { "ptx" };
    let (code, out, err) = tilec(&["compile", &file, "--emit", emit, "--timings"]);
    assert_eq!(code, 0, "{err}");
    let timings: Vec<&str> = err.lines().filter(|l| l.starts_with("timings: ")).collect();
    assert_eq!(timings.len(), 2, "one line per kernel:\n{err}");
    for line in &timings {
        for stage in ["parse ", "check ", "codegen ", "lower ", "LLVM opt ", "LLVM PTX "] {
            let at = line.find(stage).unwrap_or_else(|| panic!("no {stage}in {line}"));
            assert!(
                line[at + stage.len()..]
                    .split(' ')
                    .next()
                    .unwrap()
                    .parse::<f64>()
                    .is_ok(),
                "{line}"
            );
        }
        assert_eq!(line.ends_with("ptxas -"), ptxas.is_none(), "{line}");
    }
    if ptxas.is_some() {
        let reports: Vec<&str> = out.lines().collect();
        assert_eq!(reports.len(), 2, "{out}");
        for r in reports {
            assert!(r.contains("registers "), "{r}");
            assert!(r.contains("spills 0 B stored / 0 B loaded"), "{r}");
            assert!(r.contains("dynamic shared "), "{r}");
            assert!(r.ends_with(" threads"), "{r}");
        }
    }
    // Without --timings, stderr stays empty; with only `--emit ir`, codegen and ptxas show `-`.
    let (code, _, err) = tilec(&["compile", &file, "--emit", "ir"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, _, err) = tilec(&["compile", &file, "--emit", "ir", "--timings"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.lines().all(|l| l.ends_with("codegen -, ptxas -")), "{err}");
    // The LLVM IR the lowering hands LLVM: one module per kernel, before LLVM's optimizer.
    let (code, out, err) = tilec(&["compile", &file, "--emit", "llvm-ir"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.matches("target triple = \"nvptx64-nvidia-cuda\"").count(),
        2,
        "{out}"
    );
    assert!(out.contains("define ") && !out.contains(".entry"), "{out}");
}

#[test]
fn verify_all_finds_the_examples() {
    // The test runs in tests/; `--all` finds dsl-examples/ in its parent.
    let (code, out, err) = tilec(&["verify", "--all", "--interpret"]);
    assert_eq!(code, 0, "{out}{err}");
    for f in tile_tests::tile_files("dsl-examples") {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            out.lines().any(|l| l.ends_with(&format!("dsl-examples/{name}"))),
            "{name} not verified:\n{out}"
        );
    }
    assert!(out.trim_end().ends_with("passed, 0 failed"), "{out}");
    assert!(!out.contains("FAILED"), "{out}");
    assert_eq!(
        tilec(&["verify", "--interpret"]).0,
        2,
        "no files and no --all is a usage error"
    );
}

#[test]
fn input_that_is_not_text_gets_its_position_and_exit_1() {
    let dir = temp_dir("bytes");
    let f = dir.join("k.tile");
    std::fs::write(&f, b"kernel k() {\n  let x = 1; // caf\xc3\xa9 \xff\n}\n").unwrap();
    let (code, _, err) = tilec(&["check", f.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("k.tile:2:22: not UTF-8 text: byte 0xff at offset 35"),
        "{err}"
    );
    // An endless file is refused after the limit, not read to the end.
    let (code, _, err) = tilec(&["check", "/dev/zero"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("/dev/zero: larger than 1048576 bytes"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_reports_a_run_spec_naming_an_unknown_reference() {
    let dir = temp_dir("reference");
    let f = dir.join("k.tile");
    let src = "kernel k(out: *mut f32) {\n    store(out, 1.0);\n}\n\nrun k {\n    sizes(n: [1]);\n    grid(1);\n    args(out: output([1]));\n    reference(no_such_thing);\n}\n";
    std::fs::write(&f, src).unwrap();
    let (code, _, err) = tilec(&["check", f.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no built-in reference named `no_such_thing`"), "{err}");
    assert!(err.contains("k.tile:9:"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn generator_bounds_may_name_sizes_and_must_be_a_range() {
    let dir = temp_dir("generator");
    let f = dir.join("k.tile");
    let src = |bounds: &str| {
        format!(
            "kernel k<const BLOCK: i32 = 64>(x: *i32, out: *mut i32, n: i32) {{\n    let o = arange(0, BLOCK);\n    store(out + o, load(x + o, o < n), o < n);\n}}\n\nrun k {{\n    sizes(n: [10], V: [7]);\n    grid(1);\n    args(x: randint([n], {bounds}), out: output([n]), n: n);\n}}\n"
        )
    };
    std::fs::write(&f, src("0, V")).unwrap();
    let (code, out, err) = tilec(&["verify", "--interpret", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    std::fs::write(&f, src("V, 3")).unwrap();
    let (code, out, _) = tilec(&["verify", "--interpret", f.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("`randint` needs integers lo < hi; got lo = 7, hi = 3"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_path_refuses_a_file_with_two_kernels_of_one_name() {
    let dir = temp_dir("duplicate");
    let f = dir.join("k.tile");
    let src =
        "kernel k(out: *mut f32) {\n    store(out, 1.0);\n}\n\nkernel k(out: *mut f32) {\n    store(out, 2.0);\n}\n";
    std::fs::write(&f, src).unwrap();
    let path = f.to_str().unwrap();
    for args in [
        vec!["check", path],
        vec!["compile", path, "--emit", "ptx"],
        vec!["explain", path],
    ] {
        let (code, _, err) = tilec(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains("`k` is defined twice"), "{args:?}: {err}");
    }
    let jit = tile_jit::jit_ptx(
        tile_jit::Source::Text {
            name: "k.tile".into(),
            text: src.into(),
        },
        "k",
        &[],
        &Default::default(),
        &tile_driver::target("sm_90a").unwrap(),
        &[],
    );
    let e = jit.err().expect("the JIT refuses it too").to_string();
    assert!(e.contains("`k` is defined twice"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `.tools/` planted in the directory a command runs in is never executed: ptxas is found from
/// `TILE_PTXAS`, above the executable, or on `PATH`.
#[test]
fn ptxas_is_not_looked_up_in_the_current_directory() {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().unwrap();
    let Some(tilec_bin) = exe.ancestors().map(|d| d.join("tilec")).find(|p| p.is_file()) else {
        panic!("the tilec binary is not built next to {}", exe.display());
    };
    let dir = temp_dir("planted");
    let bin = dir.join(".tools/nvcc/nvidia/cu13/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let marker = dir.join("ran");
    let fake = bin.join("ptxas");
    std::fs::write(&fake, format!("#!/bin/sh\ntouch {}\nexit 1\n", marker.display())).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(&tilec_bin)
        .args(["compile", &path("dsl-examples/vector_add.tile"), "--emit", "resources"])
        .current_dir(&dir)
        .env_remove("TILE_PTXAS")
        .output()
        .unwrap();
    assert!(
        !marker.exists(),
        "the planted ptxas ran: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Found by fuzzing the interpreter: `output(f(..))` with `f` no generator panicked in run-spec
/// parsing. It is a size like any other call.
#[test]
fn output_of_a_call_that_is_no_generator_is_a_size() {
    let dir = temp_dir("output-call");
    let file = dir.join("k.tile");
    let kernel =
        "kernel k(out: *mut f32, n: i32) {\n    let o = arange(0, 16);\n    store(out + o, o.to(f32), o < n);\n}\n";
    std::fs::write(
        &file,
        format!("{kernel}run k {{ sizes(n: [16]); grid(1); args(out: output(cdiv(n, 1)), n: n); }}\n"),
    )
    .unwrap();
    let (code, out, err) = tilec(&["verify", "--interpret", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    std::fs::write(
        &file,
        format!("{kernel}run k {{ sizes(n: [16]); grid(1); args(out: output(a2ange([16])), n: n); }}\n"),
    )
    .unwrap();
    let (code, out, err) = tilec(&["verify", "--interpret", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("unsupported expression in a run spec"),
        "{out}{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run-spec values a case cannot use: each is an error naming the value and what is valid.
#[test]
fn a_run_spec_value_out_of_range_is_an_error() {
    let cases = [
        // A size that does not fit the parameter it is passed to.
        (
            "sizes(n: [1099511627776]);\n    grid(1);",
            "`n` is i32, which holds -2147483648 to 2147483647; this value is 1099511627776",
        ),
        // A grid extent below 1.
        (
            "sizes(n: [0]);\n    grid(n);",
            "grid extent 0 is not a positive integer (1 to 2147483647)",
        ),
    ];
    let dir = temp_dir("fit");
    let f = dir.join("k.tile");
    for (spec, message) in cases {
        let src = format!(
            "kernel k<const BLOCK: i32 = 64>(out: *mut i32, n: i32) {{\n    let o = arange(0, BLOCK);\n    store(out + o, o, o < n);\n}}\n\nrun k {{\n    {spec}\n    args(out: output([64]), n: n);\n}}\n"
        );
        std::fs::write(&f, src).unwrap();
        let (code, out, _) = tilec(&["verify", "--interpret", f.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains(message), "{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error() {
    use std::os::unix::ffi::OsStrExt;
    let exe = std::env::current_exe().unwrap();
    let tilec_bin = exe.ancestors().map(|d| d.join("tilec")).find(|p| p.is_file()).unwrap();
    let out = std::process::Command::new(tilec_bin)
        .arg("check")
        .arg(std::ffi::OsStr::from_bytes(b"bad\xff.tile"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("argument 2 is not UTF-8 text"));
}

#[test]
fn repeated_diagnostics_are_said_once_and_many_are_capped() {
    let dir = temp_dir("many");
    let f = dir.join("k.tile");
    // An unrolled loop repeats its body's mistake 2^10 times: one diagnostic.
    let mut src = String::from("kernel k(out: *mut f32) {\n    let mut s = 0.0;\n");
    for i in 0..10 {
        src += &format!("#[unroll] for i{i} in 0..2 {{\n");
    }
    src += "s += nope;\n";
    src += &"}\n".repeat(10);
    src += "    store(out, s);\n}\n";
    std::fs::write(&f, &src).unwrap();
    let (code, _, err) = tilec(&["check", f.to_str().unwrap()]);
    assert_eq!((code, err.matches("error:").count()), (1, 1), "{err}");
    // 60 different mistakes: the first 50, and a count of the rest.
    let body: String = (0..60).map(|i| format!("    let a{i} = nope{i};\n")).collect();
    std::fs::write(&f, format!("kernel k(out: *mut f32) {{\n{body}}}\n")).unwrap();
    let (code, _, err) = tilec(&["check", f.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(err.matches("error:").count(), tile_lang::diag::MAX_SHOWN, "{err}");
    assert!(err.contains("note: 10 more diagnostics not shown"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reference_that_does_not_match_its_run_spec_fails_the_case_without_a_crash() {
    let dir = temp_dir("refnames");
    let f = dir.join("k.tile");
    // The `vector_add` reference reads sizes and buffers named `n`, `x`, `y`, `out`.
    let src = "kernel k<const BLOCK: i32 = 64>(a: *f32, b: *f32, c: *mut f32, len: i32) {\n    let o = arange(0, BLOCK);\n    store(c + o, load(a + o, o < len) + load(b + o, o < len), o < len);\n}\n\nrun k {\n    sizes(len: [10]);\n    grid(1);\n    args(a: randn([len]), b: randn([len]), c: output([len]), len: len);\n    reference(vector_add);\n}\n";
    std::fs::write(&f, src).unwrap();
    let (code, out, err) = tilec(&["verify", "--interpret", f.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("the reference does not match this run spec"), "{out}");
    assert!(
        out.contains("it reads the buffer `x`, which the spec does not give (its buffers: `a`, `b`, `c`)"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `values` to `out` as one NumPy array of `shape` (column-major when `fortran`).
fn write_npy<T: npyz::AutoSerialize>(
    out: &mut impl std::io::Write,
    shape: &[u64],
    fortran: bool,
    values: impl IntoIterator<Item = T>,
) {
    use npyz::WriterBuilder;
    let order = if fortran { npyz::Order::Fortran } else { npyz::Order::C };
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .order(order)
        .writer(out)
        .begin_nd()
        .unwrap();
    for v in values {
        w.push(&v).unwrap();
    }
    w.finish().unwrap();
}

/// `tilec run`: inputs from NumPy files (f32 and f64 into an f32 buffer), outputs written as
/// `.npy` and read back; a wrong file is an error that says what would fit.
#[test]
fn run_reads_and_writes_npy_files() {
    let dir = temp_dir("run-npy");
    fn write<T: npyz::AutoSerialize + Clone>(path: &std::path::Path, shape: &[u64], values: &[T]) {
        write_npy(
            &mut std::fs::File::create(path).unwrap(),
            shape,
            false,
            values.iter().cloned(),
        );
    }
    let x: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5).collect();
    let (xp, yp) = (dir.join("x.npy"), dir.join("y.npy"));
    write(&xp, &[1000], &x.iter().map(|v| *v as f32).collect::<Vec<f32>>());
    write(&yp, &[1000], &vec![1.0f64; 1000]);
    let save = dir.join("out");
    let (code, out, err) = tilec(&[
        "run",
        &path("dsl-examples/vector_add.tile"),
        "--interpret",
        "--case",
        "1",
        "--input",
        &format!("x={}", xp.display()),
        "--input",
        &format!("y={}", yp.display()),
        "--save",
        save.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("out: f32 [1000] ->"), "{out}");
    let bytes = std::fs::read(save.join("out.npy")).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(npy.shape(), &[1000]);
    let got: Vec<f32> = npy.into_vec().unwrap();
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g as f64, x[i] + 1.0, "out[{i}]");
    }
    // The wrong number of elements, and floats for an integer buffer.
    let (code, _, err) = tilec(&[
        "run",
        &path("dsl-examples/vector_add.tile"),
        "--interpret",
        "--input",
        &format!("x={}", xp.display()),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("holds 1000 elements; the case's `x` has 1"), "{err}");
    let (code, _, err) = tilec(&[
        "run",
        &path("dsl-examples/histogram.tile"),
        "--interpret",
        "--case",
        "1",
        "--input",
        &format!("x={}", xp.display()),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("which a i32 buffer does not take"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The arrays of an `.npz` as f64, by name.
fn read_npz(path: &std::path::Path) -> std::collections::BTreeMap<String, (Vec<u64>, Vec<f64>)> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let mut out = std::collections::BTreeMap::new();
    for n in names {
        let mut bytes = Vec::new();
        zip.by_name(&n).unwrap().read_to_end(&mut bytes).unwrap();
        let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
        let shape = npy.shape().to_vec();
        let values: Vec<f64> = match npy.dtype() {
            npyz::DType::Plain(t) if t.to_string() == "<f4" => {
                npy.into_vec::<f32>().unwrap().into_iter().map(f64::from).collect()
            }
            npyz::DType::Plain(t) if t.to_string() == "<i4" => {
                npy.into_vec::<i32>().unwrap().into_iter().map(f64::from).collect()
            }
            _ => npy.into_vec::<f64>().unwrap(),
        };
        out.insert(n.trim_end_matches(".npy").to_string(), (shape, values));
    }
    out
}

#[test]
fn run_and_verify_read_and_write_npz_archives() {
    let dir = temp_dir("run-npz");
    // Arrays in one archive, as np.savez writes it.
    let write_npz = |path: &std::path::Path, arrays: &[(&str, f32)]| {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        for (name, v) in arrays {
            zip.start_file(format!("{name}.npy"), zip::write::SimpleFileOptions::default())
                .unwrap();
            write_npy(&mut zip, &[1000], false, (0..1000).map(|i| i as f32 * v));
        }
        zip.finish().unwrap();
    };
    let input = dir.join("in.npz");
    write_npz(&input, &[("x", 0.25), ("y", 2.0)]);
    let output = dir.join("out.npz");
    let args = [
        "run",
        &path("dsl-examples/vector_add.tile"),
        "--interpret",
        "--case",
        "1",
    ];
    let (code, out, err) = tilec(
        &[
            &args[..],
            &["--input", input.to_str().unwrap(), "--save", output.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("(array `out`)"), "{out}");
    let arrays = read_npz(&output);
    let (shape, got) = &arrays["out"];
    assert_eq!(shape, &[1000]);
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, i as f64 * 2.25, "out[{i}]");
    }
    // An array named after no buffer of the kernel.
    let odd = dir.join("odd.npz");
    write_npz(&odd, &[("x", 1.0), ("n", 1.0)]);
    let (code, _, err) = tilec(&[&args[..], &["--input", odd.to_str().unwrap()]].concat());
    assert_eq!(code, 1);
    assert!(
        err.contains("--input n: `vector_add` has no buffer argument `n`; its buffers: x, y, out"),
        "{err}"
    );
    // verify --save: every case's inputs, outputs and expected values.
    let saved = dir.join("cases");
    let (code, out, err) = tilec(&[
        "verify",
        "--interpret",
        "--save",
        saved.to_str().unwrap(),
        &path("dsl-examples/vector_add.tile"),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let case = read_npz(&saved.join("vector_add-case1.npz"));
    assert_eq!(
        case.keys().cloned().collect::<Vec<_>>(),
        ["out", "out.expected", "out.initial", "x", "y"]
    );
    let (x, y, o, e) = (&case["x"].1, &case["y"].1, &case["out"].1, &case["out.expected"].1);
    assert_eq!(x.len(), 1000);
    for i in 0..x.len() {
        assert_eq!(o[i], (x[i] as f32 + y[i] as f32) as f64, "out[{i}]");
        assert_eq!(e[i], x[i] + y[i], "expected[{i}] in f64");
    }
    // An archive verify saved replays its case: a kernel that accumulates into its output
    // (histogram's atomic counts) starts from `OUT.initial`, not from the saved result.
    let hist = path("dsl-examples/histogram.tile");
    let (code, out, err) = tilec(&["verify", "--interpret", "--save", saved.to_str().unwrap(), &hist]);
    assert_eq!(code, 0, "{out}{err}");
    let archive = saved.join("histogram-case1.npz");
    let (code, out, err) = tilec(&[
        "run",
        &hist,
        "--interpret",
        "--case",
        "1",
        "--input",
        archive.to_str().unwrap(),
        "--save",
        output.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (again, before) = (read_npz(&output), read_npz(&archive));
    assert_eq!(
        again["counts"].1, before["counts"].1,
        "the replay counts what verify counted"
    );
    // An archive verify saved feeds `run` as it is (its `.expected` entries are skipped).
    let again = tilec(
        &[
            &args[..],
            &["--input", saved.join("vector_add-case1.npz").to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(again.0, 0, "{}{}", again.1, again.2);
    // A file far larger than the buffer it fills is refused before it is read whole.
    let big = dir.join("big.npy");
    write_npy(
        &mut std::fs::File::create(&big).unwrap(),
        &[100_000],
        false,
        (0..100_000).map(|i| i as f32),
    );
    let (code, _, err) = tilec(&[&args[..], &["--input", &format!("x={}", big.display())]].concat());
    assert_eq!(code, 1);
    assert!(
        err.contains("far more than the 1000 elements of the buffer it fills"),
        "{err}"
    );
    // Column-major arrays are refused rather than read transposed; float16 is read.
    let fortran = dir.join("f.npy");
    write_npy(
        &mut std::fs::File::create(&fortran).unwrap(),
        &[10, 100],
        true,
        (0..1000).map(|i| i as f32),
    );
    let x_from = |p: &std::path::Path| format!("x={}", p.display());
    let (code, _, err) = tilec(&[&args[..], &["--input", &x_from(&fortran)]].concat());
    assert_eq!(code, 1);
    assert!(err.contains("stored in Fortran (column-major) order"), "{err}");
    let half = dir.join("h.npy");
    write_npy(
        &mut std::fs::File::create(&half).unwrap(),
        &[1000],
        false,
        (0..1000).map(|i| half::f16::from_f32(i as f32 * 0.5)),
    );
    let inputs = ["--input", input.to_str().unwrap(), "--input", &x_from(&half)];
    let (code, out, err) = tilec(&[&args[..], &inputs, &["--save", output.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(read_npz(&output)["out"].1[3], 1.5 + 3.0 * 2.0);
    // Where NumPy is installed: an archive np.savez_compressed writes, read back by NumPy.
    let numpy = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .status()
        .is_ok_and(|s| s.success());
    if numpy {
        let script = format!(
            "import numpy as np; np.savez_compressed(r'{0}', x=np.arange(1000, dtype=np.float64) / 3, y=np.ones(1000, np.float32))",
            input.display()
        );
        assert!(
            std::process::Command::new("python3")
                .args(["-c", &script])
                .status()
                .unwrap()
                .success()
        );
        let (code, out, err) = tilec(
            &[
                &args[..],
                &["--input", input.to_str().unwrap(), "--save", output.to_str().unwrap()],
            ]
            .concat(),
        );
        assert_eq!(code, 0, "{out}{err}");
        let check = format!(
            "import numpy as np; o = np.load(r'{0}')['out']; x = (np.arange(1000) / 3).astype(np.float32); \
             assert o.dtype == np.float32 and o.shape == (1000,); assert (o == x + np.float32(1)).all(), o[:4]",
            output.display()
        );
        assert!(
            std::process::Command::new("python3")
                .args(["-c", &check])
                .status()
                .unwrap()
                .success()
        );
        eprintln!("NumPy round trip: ok");
    } else {
        eprintln!("NumPy round trip: skipped (no NumPy)");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
