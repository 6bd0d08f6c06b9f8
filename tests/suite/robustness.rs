//! No input makes the front end panic or hang: mutated copies of every example (bytes deleted,
//! duplicated, swapped, replaced by tokens of the language) go through parse, check and run-spec
//! parsing. The fuzz targets in tests/fuzz do the same without end, for the front end, the whole
//! pipeline and the interpreter; their corpora are replayed here.

use std::sync::mpsc;
use std::time::Duration;

use tile_tests::{Rng, tile_files};

const TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    ",",
    ";",
    ":",
    "::",
    ".",
    "..",
    "=",
    "==",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "&&",
    "|",
    "||",
    "!",
    "^",
    "<<",
    ">>",
    "let ",
    "mut ",
    "for ",
    "in ",
    "if ",
    "else ",
    "kernel ",
    "fn ",
    "run ",
    "const ",
    "None",
    "#[unroll]",
    "#[stages(3)]",
    "0",
    "1",
    "-1",
    "1e40",
    "99999999999999999999999",
    "0x",
    "1.5",
    "inf",
    "nan",
    "\"",
    "//",
    "/*",
    "x",
    "BLOCK",
    "f16",
    "bf16",
    "f8e4m3",
    "i64",
    "u8",
    "*mut f32",
    "dot(",
    "load(",
    "store(",
    "arange(0, 4096)",
    "zeros([1024, 1024])",
    "reduce(",
    "scan(",
    "program_id(7)",
    "[:, None]",
    "\u{e9}",
];

fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut b: Vec<u8> = src.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(5) {
            0 if !b.is_empty() => {
                let n = 1 + rng.below(8);
                b.drain(at.min(b.len() - 1)..(at + n).min(b.len()));
            }
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                b.splice(at..at, t.iter().copied());
            }
            2 if b.len() > 2 => {
                let j = rng.below(b.len());
                let i = at.min(b.len() - 1);
                b.swap(i, j);
            }
            3 => {
                let from = rng.below(b.len().max(1));
                let chunk: Vec<u8> = b[from..(from + 1 + rng.below(40)).min(b.len())].to_vec();
                b.splice(at..at, chunk);
            }
            _ => b.truncate(at),
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// Runs the whole front end on `text`; any panic propagates.
fn front_end(text: &str) {
    let c = tilec::check_source(text, &vec![]);
    let _ = tile_lang::diag::render("mutant.tile", text, &c.diags);
}

#[test]
fn mutated_examples_never_panic_or_hang() {
    let sources: Vec<String> = tile_files("dsl-examples")
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut inputs = Vec::new();
    for s in &sources {
        for _ in 0..300 {
            inputs.push(mutate(s, &mut rng));
        }
    }
    // Pathological shapes: deep nesting, long operator chains, huge literals.
    inputs.push(format!(
        "kernel k() {{ let x = {}1{}; }}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    ));
    inputs.push(format!("kernel k() {{ let x = {}1; }}", "-".repeat(100_000)));
    inputs.push(format!("kernel k() {{ let x = 1{}; }}", " + 1".repeat(100_000)));
    inputs.push(format!("kernel k() {{ {} }}", "if true { ".repeat(5000)));
    inputs.push("kernel k() { let x = zeros([1 << 62, 1 << 62]); }".into());
    inputs.push("fn f(x) { f(x) } kernel k() { let y = f(1); }".into());
    inputs.push("kernel k() { #[unroll] for i in 0..1000000000 { } }".into());
    // Unclosed parentheses and nested block values: once exponential in pest's backtracking.
    inputs.push(format!("kernel k() {{ let x = f({} x, m); }}", "(".repeat(120)));
    inputs.push(format!(
        "kernel k() {{ let x = 1{}{}; }}",
        " + if true { 1".repeat(60),
        " }".repeat(60)
    ));
    for (i, input) in inputs.into_iter().enumerate() {
        let (tx, rx) = mpsc::channel();
        let shown: String = input.chars().take(300).collect();
        let worker = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || {
                let r = std::panic::catch_unwind(|| front_end(&input));
                let _ = tx.send(r.is_ok());
            })
            .unwrap();
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(true) => {}
            Ok(false) => panic!("input {i} made the front end panic:\n{shown}"),
            Err(_) => panic!("input {i} did not finish in 20 s:\n{shown}"),
        }
        worker.join().unwrap();
    }
}

/// The fuzzers' corpora of kernels (tests/fuzz/corpus/front_end and whole_pipeline: the examples
/// and what the fuzzers kept) through the whole pipeline, as every command and the JIT run it:
/// parse and file-level checks, the static model's configuration, check, the e-graph rewriter,
/// and codegen to PTX for sm_90a. Errors are expected; a panic or a stage that does not finish
/// is a bug.
#[test]
fn fuzz_corpus_through_the_whole_pipeline() {
    let (mut compiled, mut refused) = (0usize, 0usize);
    for corpus in ["front_end", "whole_pipeline"] {
        let files = corpus_files(corpus);
        assert!(
            files.len() > 100,
            "the {corpus} corpus is in tests/fuzz/corpus/{corpus}"
        );
        for (path, text) in files {
            let (ok, bad) = bounded(&path, move || whole_pipeline(&text));
            compiled += ok;
            refused += bad;
        }
    }
    eprintln!("fuzz corpora: {compiled} kernels to PTX, {refused} refused with an error");
    // The examples are in the corpus: some kernels must get through.
    assert!(compiled > 10, "{compiled} kernels compiled, {refused} refused");
}

/// The interpreter fuzzer's corpus (tests/fuzz/corpus/interpreter) through `tilec verify
/// --interpret`, with the fuzz target's limit on case sizes: a result or a diagnostic for each
/// file, never a panic or a case that does not finish.
#[test]
fn fuzz_corpus_through_the_interpreter() {
    let files = corpus_files("interpreter");
    assert!(
        files.len() > 20,
        "the interpreter corpus is in tests/fuzz/corpus/interpreter"
    );
    let mut ran = 0;
    for (path, text) in files {
        ran += bounded(&path, move || {
            let checked = tilec::check_source(&text, &vec![]);
            let small = checked.diags.is_empty()
                && checked.specs.iter().all(|s| {
                    tile_lang::spec::cases(s).is_ok_and(|cases| {
                        cases.len() <= 16 && cases.iter().all(|c| c.sizes.iter().all(|(_, v)| (0..=64).contains(v)))
                    })
                });
            small && tilec::verify(&text, &fuzz_budget()).is_ok()
        }) as usize;
    }
    eprintln!("interpreter corpus: {ran} files ran their cases");
    assert!(ran > 10);
}

/// The run-spec fuzzer's corpus (tests/fuzz/corpus/run_spec) through what that target runs:
/// specs, cases, each case's sizes, its kernel checked for them, its launch planned, its
/// `#[requires(..)]` evaluated — a result or an error for each file, never a panic or a hang.
#[test]
fn fuzz_corpus_through_run_spec_evaluation() {
    use tile_lang::{check, spec, syntax};
    let files = corpus_files("run_spec");
    assert!(files.len() > 20, "the run_spec corpus is in tests/fuzz/corpus/run_spec");
    let mut planned = 0;
    for (path, text) in files {
        planned += bounded(&path, move || {
            let Ok(ast) = syntax::parse(&text) else { return 0 };
            let mut n = 0;
            for s in spec::parse_specs(&ast).0.iter().take(4) {
                let _ = spec::bench_cases(s);
                let Ok(cases) = spec::cases(s) else { continue };
                for case in cases.iter().take(8) {
                    let sizes = spec::case_sizes(s, case);
                    let Some(def) = check::find_kernel(&ast, &s.kernel) else {
                        continue;
                    };
                    let _ = check::launch::computed_consts(def, &case.consts, &sizes);
                    let Ok(k) = check::check_kernel_at(&text, &ast, &s.kernel, &case.consts, &sizes) else {
                        continue;
                    };
                    n += spec::plan(s, case, &k).is_ok() as usize;
                    let reqs = check::launch::requirements(def);
                    let _ = check::launch::check_requirements(&reqs, &k.consts, &|n| sizes.get(n));
                }
            }
            n
        });
    }
    eprintln!("run_spec corpus: {planned} cases planned");
    assert!(planned > 20);
}

/// The `.npy` fuzzer's corpus (tests/fuzz/corpus/npy) read as every kind of buffer and as an
/// archive: each file read or refused (a header whose shape overflows, Fortran order, a
/// structured dtype), never a panic.
#[test]
fn fuzz_corpus_through_npy_reading() {
    use tile_lang::ir::DType;
    let dir = tile_tests::root().join("tests/fuzz/corpus/npy");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "the npy corpus is in tests/fuzz/corpus/npy");
    let mut read = 0;
    for path in files {
        let p = path.clone();
        read += bounded(&path, move || {
            let bytes = std::fs::read(&p).unwrap();
            let mut n = 0;
            for d in [DType::F32, DType::BF16, DType::I32, DType::U64, DType::Bool, DType::F64] {
                n += tilec::npy::read_array("corpus.npy", &bytes, d).is_ok() as usize;
            }
            if let Ok(mut npz) = tilec::npy::Npz::open(&p) {
                for name in npz.names() {
                    n += npz.read(&name, DType::F32, 1 << 16).is_ok() as usize;
                }
            }
            n
        });
    }
    assert!(read > 5, "{read} reads succeeded");
    // The header of 2^62 + 250 rows of 4 is refused, not wrapped to 1000 elements.
    let bytes = std::fs::read(dir.join("shape_overflow.npy")).unwrap();
    let e = tilec::npy::read_array("x.npy", &bytes, DType::F32).unwrap_err();
    assert!(e.contains("holds more elements than the file"), "{e}");
}

/// The interpreter fuzz target's options: a step budget of 1e7 per run (under a second), so
/// that a loop with a huge bound ends with an error.
fn fuzz_budget() -> tilec::VerifyOptions<'static> {
    tilec::VerifyOptions {
        limits: tile_lang::interp::Limits { max_steps: 10_000_000 },
        ..Default::default()
    }
}

/// The UTF-8 files of a fuzz corpus, by name.
fn corpus_files(corpus: &str) -> Vec<(std::path::PathBuf, String)> {
    let dir = tile_tests::root().join("tests/fuzz/corpus").join(corpus);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| String::from_utf8(std::fs::read(&p).unwrap()).ok().map(|t| (p, t)))
        .collect()
}

/// Runs `f` on a thread with a large stack: its result, or a test failure naming `path` when it
/// panics or takes more than 60 s.
fn bounded<T: Send + 'static>(path: &std::path::Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(r.ok());
        })
        .unwrap();
    let r = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Some(r)) => r,
        Ok(None) => panic!("{} made the pipeline panic", path.display()),
        Err(_) => panic!("{} did not finish in 60 s", path.display()),
    };
    worker.join().unwrap();
    r
}

/// Every kernel of `text` to PTX; returns how many compiled and how many were refused.
fn whole_pipeline(text: &str) -> (usize, usize) {
    use tile_driver::{ConfigSource, OptOptions, Request, Source, Stage};
    let Ok(src) = Source::parse("corpus.tile", text) else {
        return (0, 1);
    };
    let target = tile_driver::target("sm_90a").unwrap();
    let (mut ok, mut bad) = (0, 0);
    for name in src.kernel_names() {
        let req = Request {
            config: ConfigSource::Model(tile_driver::Planned::File),
            rewrite: Some(OptOptions::default()),
            ..Request::new(name, target.clone())
        };
        match tile_driver::compile(&src, &req, Stage::Ptx) {
            Ok(c) => {
                ok += 1;
                // Again as for an aligned launch (TMA, rings, producer warpgroups), as the
                // fuzz target does: an error is fine, a panic is not.
                let aligned = Request {
                    specialization: vec![tile_driver::ArgSpec::of_ptr(0); c.kernel().params.len()],
                    ..req
                };
                let _ = tile_driver::compile(&src, &aligned, Stage::Ptx);
            }
            Err(_) => bad += 1,
        }
    }
    (ok, bad)
}
