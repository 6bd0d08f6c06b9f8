//! The random kernel generator (`tests/gen.rs`): every generated file is accepted by the checker
//! and runs on the interpreter without an error, and together they cover what the generator
//! promises. `write_generated_kernels` writes them out for a GPU host, where
//! `tilec verify DIR/*.tile` compares the GPU with the interpreter.

use tile_tests::random_kernel_file;

/// Kernels checked on every run (about 2 s in release mode).
const CHECKED: u64 = 300;

#[test]
fn generated_kernels_check_and_run_on_the_interpreter() {
    let files: Vec<String> = (0..CHECKED).map(random_kernel_file).collect();
    let failures: Vec<String> = files
        .iter()
        .enumerate()
        .filter_map(|(seed, text)| {
            check_and_interpret(text)
                .err()
                .map(|e| format!("seed {seed}: {e}\n{text}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {CHECKED} generated kernels failed; the first:\n{}",
        failures.len(),
        failures[0]
    );
    assert_covers(&files);
}

/// The file's diagnostics, or the first case that failed on the interpreter.
fn check_and_interpret(text: &str) -> Result<(), String> {
    let checked = tilec::check_source(text, &vec![]);
    if !checked.diags.is_empty() {
        return Err(tile_lang::diag::render("gen.tile", text, &checked.diags));
    }
    let results = tilec::verify_interpreted(text).map_err(|d| tile_lang::diag::render("gen.tile", text, &d))?;
    if results.is_empty() {
        return Err("no cases".into());
    }
    match results.iter().find(|r| !r.passed()) {
        Some(r) => Err(format!(
            "case [{}]: {}",
            r.case,
            r.error.as_deref().unwrap_or("a comparison failed")
        )),
        None => Ok(()),
    }
}

/// Every feature the generator promises appears in some file.
fn assert_covers(files: &[String]) {
    let features = [
        "*i8",
        "*i16",
        "*i32",
        "*i64",
        "*u8",
        "*u16",
        "*u32",
        "*f16",
        "*bf16",
        "*f32",
        "*bool",
        "out_i: *mut",
        ".to(bool)",
        "rounding: \"rtz\"",
        " + ",
        " - ",
        " * ",
        " / ",
        " % ",
        " & ",
        " | ",
        " ^ ",
        " << ",
        " >> ",
        "(-",
        "(!",
        " < ",
        " == ",
        "exp(",
        "exp2(",
        "log(",
        "log2(",
        "rsqrt(",
        "sqrt(abs(",
        "abs(",
        "floor(",
        "ceil(",
        "maximum(",
        "minimum(",
        "where(",
        "fma(",
        "sum(",
        "max(",
        "min(",
        "xor_sum(",
        "cumsum(",
        "cumprod(",
        "reverse: true",
        "keep_dims: true",
        "[:, None]",
        "[None, :]",
        "program_id(1)",
        "for k in 0..reps",
        "#[unroll]",
        "step_by(BLOCK)",
        "carry",
        "other: ",
        "consts(BLOCK",
        "tolerance(rtol: 0, atol: 0)",
        "tolerance(rtol: 1e-3, atol: 1e-3)",
    ];
    let missing: Vec<&str> = features
        .iter()
        .copied()
        .filter(|f| !files.iter().any(|t| t.contains(f)))
        .collect();
    assert!(missing.is_empty(), "no generated kernel has {missing:?}");
    let largest = files.iter().map(|t| kernel_statements(t)).max().unwrap();
    assert!(largest <= 30, "a generated kernel has {largest} statements");
}

/// Statements in the kernel (not the run spec): lines ending in `;`, and `for` loops.
fn kernel_statements(file: &str) -> usize {
    let kernel = &file[..file.find("\nrun ").unwrap_or(file.len())];
    kernel
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with(';') || l.starts_with("for "))
        .count()
}

#[test]
fn generation_is_deterministic() {
    assert_eq!(random_kernel_file(7), random_kernel_file(7));
    assert_ne!(random_kernel_file(7), random_kernel_file(8));
}

/// Writes `TILE_GEN_COUNT` (default 1000) generated files as `TILE_GEN_DIR/gen_00000.tile`, ..
/// for `tilec verify DIR/*.tile` on a GPU host (docs/architecture.md, "tests/").
#[test]
#[ignore = "writes files: set TILE_GEN_DIR (and TILE_GEN_COUNT) and pass --ignored"]
fn write_generated_kernels() {
    let dir = std::env::var("TILE_GEN_DIR").expect("set TILE_GEN_DIR to the folder to write the kernels into");
    let count: u64 = std::env::var("TILE_GEN_COUNT").map_or(1000, |c| {
        c.parse()
            .unwrap_or_else(|_| panic!("TILE_GEN_COUNT={c} is not a count"))
    });
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    for seed in 0..count {
        let path = dir.join(format!("gen_{seed:05}.tile"));
        std::fs::write(&path, random_kernel_file(seed))
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
    println!("wrote {count} kernels to {}", dir.display());
}
