//! No input makes the front end panic or hang: mutated copies of every example (bytes deleted,
//! duplicated, swapped, replaced by tokens of the language) go through parse, check and run-spec
//! parsing. The fuzz target in tests/fuzz does the same without end.

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

/// The fuzzer's corpus (tests/fuzz/corpus/front_end: the examples and what the front-end fuzzer
/// kept) through the whole pipeline, as every command and the JIT run it: parse and file-level
/// checks, the static model's configuration, check, the e-graph rewriter, and codegen to PTX for
/// sm_90a. Errors are expected; a panic or a stage that does not finish is a bug.
#[test]
fn fuzz_corpus_through_the_whole_pipeline() {
    let dir = tile_tests::root().join("tests/fuzz/corpus/front_end");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() > 100, "the corpus is in {}", dir.display());
    let (mut compiled, mut refused) = (0usize, 0usize);
    for path in files {
        let Ok(text) = String::from_utf8(std::fs::read(&path).unwrap()) else {
            continue;
        };
        let (tx, rx) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || {
                let r = std::panic::catch_unwind(|| whole_pipeline(&text));
                let _ = tx.send(r.ok());
            })
            .unwrap();
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Some((ok, bad))) => {
                compiled += ok;
                refused += bad;
            }
            Ok(None) => panic!("{} made the pipeline panic", path.display()),
            Err(_) => panic!("{} did not finish in 60 s", path.display()),
        }
        worker.join().unwrap();
    }
    eprintln!("fuzz corpus: {compiled} kernels to PTX, {refused} refused with an error");
    // The examples are in the corpus: some kernels must get through.
    assert!(compiled > 10, "{compiled} kernels compiled, {refused} refused");
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
            config: ConfigSource::Model(None),
            rewrite: Some(OptOptions::default()),
            ..Request::new(name, target.clone())
        };
        match tile_driver::compile(&src, &req, Stage::Ptx) {
            Ok(_) => ok += 1,
            Err(_) => bad += 1,
        }
    }
    (ok, bad)
}
