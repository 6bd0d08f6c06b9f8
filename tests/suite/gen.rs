//! The random kernel generator (`tests/gen.rs`): every generated file is accepted by the checker
//! and runs on the interpreter without an error, together they cover what the generator
//! promises, and the e-graph rewriter changes none of their results by a bit. `write_generated_kernels` writes them out for a GPU host, where
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

/// Kernels run through the rewriter on every run.
const REWRITTEN: u64 = 300;

/// Differential testing of the e-graph rewriter: every generated kernel, rewritten with the exact
/// rules, leaves on the interpreter the same bits in every buffer as the original (a NaN agrees
/// with any NaN: the rules may reorder the operands an op takes its NaN payload from).
#[test]
fn rewritten_generated_kernels_compute_the_same_bits() {
    let mut failures = Vec::new();
    let mut changed = 0;
    for seed in 0..REWRITTEN {
        let text = random_kernel_file(seed);
        match same_bits_when_rewritten(&text) {
            Ok(c) => changed += c as u64,
            Err(e) => failures.push(format!("seed {seed}: {e}\n{text}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {REWRITTEN} generated kernels compute other bits once rewritten; the first:\n{}",
        failures.len(),
        failures[0]
    );
    // The comparison means something only if the rewriter changes kernels.
    assert!(
        changed > REWRITTEN / 2,
        "the rewriter changed only {changed} of {REWRITTEN} kernels"
    );
}

/// Whether the rewriter changed the kernel (in any case), or where the bits differ.
fn same_bits_when_rewritten(text: &str) -> Result<bool, String> {
    use tile_lang::{interp, spec};
    let c = tilec::check_source(text, &vec![]);
    let render = |d: &[tile_lang::diag::Diagnostic]| tile_lang::diag::render("gen.tile", text, d);
    if !c.diags.is_empty() {
        return Err(render(&c.diags));
    }
    let src = tile_driver::Source::parse("gen.tile", text).map_err(|e| format!("{e:?}"))?;
    let mut changed = false;
    for s in &c.specs {
        for (i, case) in spec::cases(s).map_err(|d| render(&[d]))?.iter().enumerate() {
            let run = |rewrite: Option<tile_opt::egraph::OptOptions>| -> Result<(String, Vec<interp::Buffer>), String> {
                let req = tile_driver::Request {
                    pins: tile_driver::Pins {
                        consts: case.consts.clone(),
                        ..Default::default()
                    },
                    rewrite,
                    ..tile_driver::Request::new(&s.kernel, tile_driver::target("sm_90a").unwrap())
                };
                let compiled =
                    tile_driver::compile(&src, &req, tile_driver::Stage::Rewrite).map_err(|e| src.render(&e))?;
                let k = compiled.kernel();
                let mut p = spec::prepare(s, case, k, i as u64 + 1).map_err(|d| render(&[d]))?;
                interp::run(k, p.grid, &p.args, &mut p.buffers).map_err(|e| format!("interpreter: {e}"))?;
                Ok((k.to_string(), p.buffers))
            };
            let ((before, plain), (after, rewritten)) = (run(None)?, run(Some(Default::default()))?);
            changed |= before != after;
            for (a, b) in plain.iter().zip(&rewritten) {
                let differs = a
                    .data
                    .iter()
                    .zip(&b.data)
                    .position(|(x, y)| x != y && !(x.as_f64(a.dtype).is_nan() && y.as_f64(b.dtype).is_nan()));
                if let Some(at) = differs {
                    return Err(format!(
                        "case [{}]: buffer `{}` element {at}: {:?} originally, {:?} rewritten",
                        case.label(),
                        a.name,
                        a.data[at],
                        b.data[at]
                    ));
                }
            }
        }
    }
    Ok(changed)
}

/// Kernels compiled through the back half of the pipeline on every run.
const LOWERED: u64 = 100;

/// The back half of the pipeline on generated kernels: the static model's configuration, the
/// rewriter, codegen to PTX for sm_80 and sm_90a, and ptxas: no panic, no error, for each run-spec
/// case's values.
#[test]
fn generated_kernels_compile_and_assemble_for_every_target() {
    let ptxas = crate::ptx::ptxas("generated_kernels_compile_and_assemble_for_every_target");
    let mut failures = Vec::new();
    let mut assembled = 0;
    for seed in 0..LOWERED {
        let text = random_kernel_file(seed);
        let c = tilec::check_source(&text, &vec![]);
        let src = tile_driver::Source::parse("gen.tile", text.clone()).expect("generated kernels parse");
        for s in &c.specs {
            for case in tile_lang::spec::cases(s).unwrap() {
                for (sm, rewrite) in [("sm_80", None), ("sm_90a", Some(Default::default()))] {
                    let req = tile_driver::Request {
                        pins: tile_driver::Pins {
                            consts: case.consts.clone(),
                            ..Default::default()
                        },
                        config: tile_driver::ConfigSource::Model(tile_driver::Planned::Case(s.clone(), case.clone())),
                        rewrite,
                        ptxas: ptxas.clone(),
                        ..tile_driver::Request::new(&s.kernel, tile_driver::target(sm).unwrap())
                    };
                    let at = format!("seed {seed} [{}] {sm}", case.label());
                    let r = std::panic::catch_unwind(|| tile_driver::compile(&src, &req, tile_driver::Stage::Cubin));
                    match r {
                        Ok(Ok(comp)) => assembled += comp.lowered.is_some_and(|l| l.cubin.is_some()) as usize,
                        Ok(Err(e)) => failures.push(format!("{at}: {}", src.render(&e))),
                        Err(_) => failures.push(format!("{at}: panicked\n{text}")),
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} generated kernel compilations failed; the first:\n{}",
        failures.len(),
        failures[0]
    );
    if ptxas.is_some() {
        assert!(assembled > 0);
    }
}
