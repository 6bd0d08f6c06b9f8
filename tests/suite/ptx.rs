//! Every kernel of every example through the GPU back end, with its default compile-time values
//! and default warps (the kernel's first `#[warps]` candidate, else 4):
//!
//! - it compiles to PTX for every target, deterministically, calling no intrinsic that LLVM did
//!   not know (those print as `.extern .func llvm.*` and fail at load time);
//! - its sm_90a PTX is snapshot-tested (`snapshots/ptx/`);
//! - with ptxas, its PTX assembles for every target, spills nothing and draws no "Potential
//!   Performance Loss" note (wgmma serialised) on sm_90a, and its sm_90a resources are
//!   snapshot-tested (`snapshots/resources/`).
//!
//! ptxas is required: tests/setup.sh installs it. Without it these tests fail, unless
//! `TILE_SKIP_PTXAS=1` is set, when they say that they were skipped.
//!
//! A failure here is usually a codegen bug: each test lists every kernel and target that failed
//! before it stops.

use std::fmt::Write as _;
use std::path::PathBuf;

use tile_codegen::{CompileOptions, Compiled, TARGETS, Target};
use tile_lang::ir::Kernel;
use tile_lang::{check, syntax};
use tile_tests::{rel, tile_files};

/// The target the snapshots and the spill check are for.
const SNAPSHOT_SM: &str = "sm_90a";

struct Example {
    /// The file's stem: `matmul`.
    name: String,
    kernels: Vec<Kernel>,
}

/// Every example with its kernels checked with default compile-time values.
fn examples() -> Vec<Example> {
    let files = tile_files("dsl-examples");
    assert!(!files.is_empty(), "no examples found");
    files
        .iter()
        .map(|p| {
            let file = rel(p);
            let text = std::fs::read_to_string(p).unwrap();
            let ast = syntax::parse(&text)
                .unwrap_or_else(|d| panic!("{file}: {}", tile_lang::diag::render(&file, &text, &d)));
            let kernels: Vec<Kernel> = check::kernel_names(&ast)
                .iter()
                .map(|k| {
                    check::check_kernel(&text, &ast, k, &vec![])
                        .unwrap_or_else(|d| panic!("{file}: {}", tile_lang::diag::render(&file, &text, &d)))
                })
                .collect();
            assert!(!kernels.is_empty(), "{file}: no kernel");
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            Example { name, kernels }
        })
        .collect()
}

fn options(k: &Kernel, target: &Target) -> CompileOptions {
    CompileOptions {
        num_warps: k.warps.first().copied().unwrap_or(4),
        ..CompileOptions::new(target.clone())
    }
}

/// Shared-memory accesses whose constant offset lies past the dynamic shared memory the kernel
/// asks for (every region starts at a constant offset from the window's start, so an offset at
/// or past the size is an access outside it: CUDA_ERROR_ILLEGAL_ADDRESS at best), or past the
/// declared size of a static array (a cluster kernel's exchange array).
fn shared_past_the_end(c: &Compiled) -> Vec<String> {
    let mut out = Vec::new();
    // `.shared .align 8 .b8 cluster_slots[96];`
    let statics: std::collections::HashMap<&str, u64> = c
        .ptx
        .lines()
        .filter_map(|l| {
            let decl = l.trim().strip_prefix(".shared ")?.rsplit(' ').next()?;
            let (name, size) = decl.strip_suffix("];")?.split_once('[')?;
            Some((name, size.parse().ok()?))
        })
        .collect();
    for line in c.ptx.lines() {
        let t = line.trim();
        let Some(op) = t.split_whitespace().next() else {
            continue;
        };
        if !op.contains(".shared") || t.starts_with("//") {
            continue;
        }
        for part in t.split('[').skip(1) {
            let addr = part.split(']').next().unwrap_or("");
            let Some((base, off)) = addr.rsplit_once('+') else {
                continue;
            };
            let Ok(off) = off.trim().parse::<u64>() else {
                continue;
            };
            match statics.get(base.trim()) {
                Some(&size) if off >= size => out.push(format!(
                    "shared access at offset {off}, past the {size} B of `{base}`: `{t}`"
                )),
                Some(_) => {}
                // A register may hold an address inside a static array: bounded by the largest.
                None if off >= (c.smem_bytes as u64).max(statics.values().copied().max().unwrap_or(0)) => {
                    out.push(format!(
                        "shared access at offset {off}, past the {} B the kernel asks for: `{t}`",
                        c.smem_bytes
                    ))
                }
                None => {}
            }
        }
    }
    out.truncate(3);
    out
}

fn snapshot_target() -> Target {
    tile_codegen::target(SNAPSHOT_SM).unwrap()
}

/// The targets `k` can compile for: all of them, except that a kernel running in thread-block
/// clusters needs one that has them (`cluster_kernels_need_clusters` checks the error the others
/// give).
fn targets_for(k: &Kernel) -> impl Iterator<Item = &'static Target> {
    let clustered = k.cluster > 1;
    TARGETS.iter().filter(move |t| t.clusters || !clustered)
}

#[test]
fn cluster_kernels_need_clusters() {
    let mut checked = 0;
    for ex in examples() {
        for k in ex.kernels.iter().filter(|k| k.cluster > 1) {
            for target in TARGETS.iter().filter(|t| !t.clusters) {
                match tile_codegen::compile(k, &options(k, target)) {
                    Err(tile_codegen::CodegenError::NoClusters { size, .. }) if size == k.cluster => checked += 1,
                    other => panic!(
                        "{}: kernel `{}` on {}: expected the no-clusters error, got {other:?}",
                        ex.name, k.name, target.sm
                    ),
                }
            }
        }
    }
    assert!(checked > 0, "no example runs in clusters");
}

/// Compiles or says which example, kernel and target failed and why.
fn compile(ex: &Example, k: &Kernel, target: &Target) -> Result<Compiled, String> {
    tile_codegen::compile(k, &options(k, target))
        .map_err(|e| format!("{}: kernel `{}` on {}: codegen failed: {e}", ex.name, k.name, target.sm))
}

/// Fails with every problem found, one a line.
fn assert_none(what: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{what}: {} problem{} (codegen bugs, not test bugs):\n  {}",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" },
        problems.join("\n  ")
    );
}

/// The ptxas to use; `None` means skip (after saying so). Panics when it is missing and the
/// skip was not asked for.
pub(crate) fn ptxas(test: &str) -> Option<PathBuf> {
    if let Some(p) = tile_codegen::ptxas::find() {
        return Some(p);
    }
    if std::env::var("TILE_SKIP_PTXAS").is_ok_and(|v| v == "1") {
        // Straight to stderr, past the test harness's capture, so that the skip shows.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "{test}: ptxas checks SKIPPED (ptxas not found; TILE_SKIP_PTXAS=1)"
        );
        return None;
    }
    panic!(
        "{test}: ptxas not found; run `bash tests/setup.sh` (installs it into .tools/), or set \
         TILE_PTXAS=/path/to/ptxas, or set TILE_SKIP_PTXAS=1 to skip the ptxas checks"
    );
}

#[test]
fn example_kernels_compile_for_every_target_deterministically() {
    let mut problems = Vec::new();
    let mut compiled = 0;
    for ex in examples() {
        for k in &ex.kernels {
            for target in targets_for(k) {
                let at = format!("{}: kernel `{}` on {}", ex.name, k.name, target.sm);
                let (first, second) = match (compile(&ex, k, target), compile(&ex, k, target)) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => {
                        problems.push(e);
                        continue;
                    }
                };
                compiled += 1;
                let ptx = &first.ptx;
                for l in ptx.lines().filter(|l| l.contains(".extern .func llvm.")) {
                    problems.push(format!("{at}: calls an intrinsic LLVM did not know: `{}`", l.trim()));
                }
                if !ptx.lines().any(|l| l.trim() == format!(".target {}", target.sm)) {
                    problems.push(format!("{at}: no `.target {}` line", target.sm));
                }
                if !ptx.contains(&format!(".entry {}(", k.name)) {
                    problems.push(format!("{at}: no `.entry {}`", k.name));
                }
                if first.ptx != second.ptx {
                    problems.push(format!("{at}: two compiles gave different PTX"));
                }
                if (first.smem_bytes, first.threads_per_block) != (second.smem_bytes, second.threads_per_block) {
                    problems.push(format!("{at}: two compiles gave different launch needs"));
                }
            }
        }
    }
    assert_none("compiling every example kernel for every target", &problems);
    assert!(compiled > 0);
}

#[test]
fn example_ptx_snapshots() {
    let target = snapshot_target();
    let mut problems = Vec::new();
    let mut snaps = Vec::new();
    for ex in examples() {
        let mut all = String::new();
        for k in &ex.kernels {
            match compile(&ex, k, &target) {
                Ok(c) => {
                    let warps = options(k, &target).num_warps;
                    writeln!(all, "// ---- kernel {} ({}, num_warps {warps}) ----", k.name, target.sm).unwrap();
                    all.push_str(&tile_driver::normalise_ptx(&c.ptx));
                }
                Err(e) => problems.push(e),
            }
        }
        snaps.push((ex.name, all));
    }
    assert_none("compiling the example kernels for the PTX snapshots", &problems);
    for (name, all) in snaps {
        insta::with_settings!({ snapshot_path => "snapshots/ptx", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(name, all);
        });
    }
}

#[test]
fn example_kernels_assemble_without_spills() {
    let Some(ptxas) = ptxas("example_kernels_assemble_without_spills") else {
        return;
    };
    let mut problems = Vec::new();
    let mut snaps = Vec::new();
    for ex in examples() {
        let mut report = String::new();
        for k in &ex.kernels {
            for target in targets_for(k) {
                let at = format!("{}: kernel `{}` on {}", ex.name, k.name, target.sm);
                let c = match compile(&ex, k, target) {
                    Ok(c) => c,
                    Err(e) => {
                        problems.push(e);
                        continue;
                    }
                };
                let r = match tile_codegen::ptxas::assemble(&ptxas, &c.ptx, target.sm) {
                    Ok((_, r)) => r,
                    Err(e) => {
                        problems.push(format!("{at}: {e}"));
                        continue;
                    }
                };
                if target.sm != SNAPSHOT_SM {
                    continue;
                }
                if r.spill_store_bytes != 0 || r.spill_load_bytes != 0 {
                    problems.push(format!(
                        "{at}: spills {} B stored / {} B loaded ({r})",
                        r.spill_store_bytes, r.spill_load_bytes
                    ));
                }
                if !r.performance_warnings.is_empty() {
                    problems.push(format!("{at}: {}", r.performance_warnings.join("; ")));
                }
                let warps = options(k, target).num_warps;
                if !report.is_empty() {
                    report.push('\n');
                }
                writeln!(report, "kernel {} ({}, num_warps {warps})", k.name, target.sm).unwrap();
                for (what, v) in [
                    ("registers", r.registers),
                    ("static shared bytes", r.shared_bytes),
                    ("stack frame bytes", r.stack_frame_bytes),
                    ("spill store bytes", r.spill_store_bytes),
                    ("spill load bytes", r.spill_load_bytes),
                    ("dynamic shared bytes", c.smem_bytes),
                    ("threads per block", c.threads_per_block),
                ] {
                    writeln!(report, "  {what:<21} {v}").unwrap();
                }
            }
        }
        snaps.push((ex.name, report));
    }
    assert_none(
        &format!("assembling every example kernel with {}", ptxas.display()),
        &problems,
    );
    for (name, report) in snaps {
        insta::with_settings!({ snapshot_path => "snapshots/resources", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(name, report);
        });
    }
}

#[test]
fn normalised_ptx_keeps_version_and_target() {
    let ptx = "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.0\n.target sm_90a\n.address_size 64\n\n\t// .globl\tk\n";
    assert_eq!(
        tile_driver::normalise_ptx(ptx),
        ".version 8.0\n.target sm_90a\n.address_size 64\n\n\t// .globl\tk\n"
    );
}

/// The e-graph rewriter must not cost a kernel its vector accesses: with the exact rules applied
/// (what `tilec compile --opt` does), every example kernel has at least as many 64- and 128-bit
/// global loads and stores as without, specialised as the JIT would (aligned arguments).
#[test]
fn rewritten_kernels_keep_their_vector_accesses() {
    let target = snapshot_target();
    let vector_accesses = |ptx: &str| {
        ptx.lines()
            .filter(|l| {
                ["ld.global.v2", "ld.global.v4", "st.global.v2", "st.global.v4"]
                    .iter()
                    .any(|p| l.contains(p))
            })
            .count()
    };
    let mut problems = Vec::new();
    for ex in examples() {
        for k in &ex.kernels {
            let opts = CompileOptions {
                specialization: k.params.iter().map(|_| tile_codegen::ArgSpec::of_ptr(0)).collect(),
                ..options(k, &target)
            };
            let (o, _) = tile_opt::egraph::optimize(k, &Default::default())
                .unwrap_or_else(|e| panic!("{}: kernel `{}`: {e}", ex.name, k.name));
            let plain = tile_codegen::compile(k, &opts).map(|c| vector_accesses(&c.ptx));
            let rewritten = tile_codegen::compile(&o, &opts).map(|c| vector_accesses(&c.ptx));
            match (plain, rewritten) {
                (Ok(a), Ok(b)) if b >= a => {}
                (Ok(a), Ok(b)) => problems.push(format!(
                    "{}: kernel `{}`: {a} vector accesses, {b} after the rewriter",
                    ex.name, k.name
                )),
                (_, Err(e)) | (Err(e), _) => problems.push(format!("{}: kernel `{}`: {e}", ex.name, k.name)),
            }
        }
    }
    assert_none("kernels that lost vector accesses to the rewriter", &problems);
}

/// PTX integer ops on 16-bit registers that compute, or compare by order: ptxas emulates them
/// in 32-bit registers and does not always re-extend between them (`neg.s16` then `shr.s16`
/// gave +128 for -128 on an H200), so the lowering computes 8- and 16-bit integers in 32 bits
/// and must never emit these. Moves, conversions, loads, stores, selects, bitwise masks and
/// tests for (in)equality (of bytes just loaded: bool masks) stay allowed.
fn sixteen_bit_arithmetic(ptx: &str) -> Vec<String> {
    const OPS: [&str; 13] = [
        "add", "sub", "mul", "mad", "neg", "abs", "shl", "shr", "div", "rem", "min", "max", "slct",
    ];
    let mut found: Vec<String> = ptx
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| !w.starts_with('@')))
        .filter(|ins| {
            let parts: Vec<&str> = ins.split('.').collect();
            let ordered_setp = parts[0] == "setp" && !matches!(parts.get(1), Some(&"eq" | &"ne"));
            // A widening product of 16-bit operands has a 32-bit result: nothing to wrap.
            let widening = parts[0] == "mul" && parts.get(1) == Some(&"wide");
            (OPS.contains(&parts[0]) || ordered_setp)
                && !widening
                && parts[1..]
                    .iter()
                    .any(|p| matches!(*p, "s16" | "u16" | "b16" | "s8" | "u8" | "b8"))
        })
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn sixteen_bit_arithmetic_is_recognised_in_ptx() {
    let ptx = "\tneg.s16 \t%rs2, %rs1;\n\t@%p1 shr.s16 %rs3, %rs2, 8;\n\tcvt.s32.s16 %r1, %rs3;\n\tsetp.lt.u16 %p2, %rs1, %rs3;\n\tand.b16 %rs4, %rs1, 255;\n\tsetp.ne.b16 %p3, %rs4, 0;\n\tmul.wide.u16 %r2, %rs4, 512;\n\tmul.lo.s16 %rs5, %rs4, 3;\n";
    assert_eq!(
        sixteen_bit_arithmetic(ptx),
        ["mul.lo.s16", "neg.s16", "setp.lt.u16", "shr.s16"]
    );
}

/// Every run-spec case of tests/gpu/ (the GPU-vs-interpreter test files) and every example
/// kernel: its sm_90a PTX assembles, spills nothing, draws no ptxas performance note and
/// computes no 8- or 16-bit integer arithmetic; it also compiles as for aligned arguments, and
/// pipelined by its first `#[stages]` without them, with no performance note either.
#[test]
fn no_kernel_computes_in_16_bit_integer_registers() {
    let ptxas = ptxas("no_kernel_computes_in_16_bit_integer_registers");
    let target = snapshot_target();
    let mut problems = Vec::new();
    let mut compiled = 0;
    for p in tile_files("tests/gpu").iter().chain(&tile_files("dsl-examples")) {
        let file = rel(p);
        let text = std::fs::read_to_string(p).unwrap();
        let c = tilec::check_source(&text, &vec![]);
        assert!(
            c.diags.is_empty(),
            "{file}: {}",
            tile_lang::diag::render(&file, &text, &c.diags)
        );
        let ast = c.ast.unwrap();
        let mut seen = std::collections::HashSet::new();
        for s in &c.specs {
            for case in tile_lang::spec::cases(s).unwrap() {
                let at = format!("{file}: kernel `{}` {:?}", s.kernel, case.consts);
                let k = check::check_kernel(&text, &ast, &s.kernel, &case.consts)
                    .unwrap_or_else(|d| panic!("{at}: {}", tile_lang::diag::render(&file, &text, &d)));
                // Every case within what `tilec verify` prepares (three GPU files outgrew the
                // limit unnoticed until a GPU run).
                let planned = tile_lang::spec::Case {
                    consts: k.consts.clone(),
                    ..case.clone()
                };
                let plan = tile_lang::spec::plan(s, &planned, &k)
                    .unwrap_or_else(|d| panic!("{at}: {}", tile_lang::diag::render(&file, &text, &[d])));
                if let Err(d) = tile_lang::spec::check_case_elements(s, &plan) {
                    problems.push(format!("{at} {:?}: {}", case.sizes, d.message));
                }
                if !seen.insert((s.kernel.clone(), format!("{:?}", case.consts))) {
                    continue;
                }
                // As a launch with aligned buffers and integers divisible by 16 would compile it
                // too, pipelined by its first `#[stages]` value: those facts widen accesses (a
                // masked 2-byte vector of bytes once panicked), copy tiles by TMA and lay out
                // shared memory for the stages (a dot outside a loop whose scratch reused the stage
                // buffers once wrote past the end of shared memory; a wait after a loop reached by
                // zeroed accumulators once made ptxas serialise every wgmma). Checked for codegen
                // errors, shared memory and ptxas's performance warnings; spills and 16-bit
                // arithmetic on the unpipelined compile below (pipelined, tensor_cores' 32x128x32
                // `mm` computes a `shr.u16`: not yet fixed).
                let aligned = CompileOptions {
                    specialization: vec![tile_codegen::ArgSpec::of_ptr(0); k.params.len()],
                    num_stages: k.stages.first().copied().unwrap_or(1),
                    ..options(&k, &target)
                };
                match tile_codegen::compile(&k, &aligned) {
                    Ok(c) => {
                        problems.extend(
                            shared_past_the_end(&c)
                                .into_iter()
                                .map(|e| format!("{at} (aligned): {e}")),
                        );
                        // ptxas must not serialise the pipelined wgmma of such a launch.
                        if let Some(ptxas) = &ptxas
                            && let Ok((_, r)) = tile_codegen::ptxas::assemble(ptxas, &c.ptx, target.sm)
                            && !r.performance_warnings.is_empty()
                        {
                            problems.push(format!("{at} (aligned): {}", r.performance_warnings.join("; ")));
                        }
                    }
                    Err(e) => problems.push(format!("{at}: codegen with aligned arguments failed: {e}")),
                }
                // Pipelined without those facts (a TMA ring's cp.async fallback): ptxas must not
                // serialise its wgmma either (attention_rotated's did, C7513, until a pending
                // wgmma reading P from registers was waited for before P's next value).
                let fallback = CompileOptions {
                    num_stages: k.stages.first().copied().unwrap_or(1),
                    ..options(&k, &target)
                };
                if fallback.num_stages > 1
                    && let Some(ptxas) = &ptxas
                {
                    match tile_codegen::compile(&k, &fallback) {
                        Ok(c) => {
                            if let Ok((_, r)) = tile_codegen::ptxas::assemble(ptxas, &c.ptx, target.sm)
                                && !r.performance_warnings.is_empty()
                            {
                                problems.push(format!("{at} (pipelined): {}", r.performance_warnings.join("; ")));
                            }
                        }
                        Err(e) => problems.push(format!("{at}: pipelined codegen failed: {e}")),
                    }
                }
                let c = match tile_codegen::compile(&k, &options(&k, &target)) {
                    Ok(c) => c,
                    Err(e) => {
                        problems.push(format!("{at}: codegen failed: {e}"));
                        continue;
                    }
                };
                compiled += 1;
                problems.extend(shared_past_the_end(&c).into_iter().map(|e| format!("{at}: {e}")));
                let bad = sixteen_bit_arithmetic(&c.ptx);
                if !bad.is_empty() {
                    problems.push(format!("{at}: 16-bit integer arithmetic: {}", bad.join(", ")));
                }
                if let Some(ptxas) = &ptxas {
                    match tile_codegen::ptxas::assemble(ptxas, &c.ptx, target.sm) {
                        Ok((_, r)) if r.spill_store_bytes + r.spill_load_bytes != 0 => {
                            problems.push(format!("{at}: spills ({r})"))
                        }
                        Ok((_, r)) if !r.performance_warnings.is_empty() => {
                            problems.push(format!("{at}: {}", r.performance_warnings.join("; ")))
                        }
                        Ok(_) => {}
                        Err(e) => problems.push(format!("{at}: {e}")),
                    }
                }
            }
        }
    }
    assert!(compiled > 20, "only {compiled} kernels compiled");
    assert_none(
        "PTX of every case (16-bit integer arithmetic, spills, ptxas warnings, shared memory past the end)",
        &problems,
    );
}

/// The JIT and `tilec compile` go through one pipeline with one default configuration (the
/// static model's choice): for every example kernel, with nothing bound, they produce the same
/// PTX.
#[test]
fn jit_and_tilec_compile_produce_identical_ptx() {
    let target = snapshot_target();
    let mut compared = 0;
    let mut problems = Vec::new();
    for p in tile_files("dsl-examples") {
        let file = rel(&p);
        let text = std::fs::read_to_string(&p).unwrap();
        let src = tile_driver::Source::parse(&file, &text).unwrap();
        for kernel in src.kernel_names() {
            let path = p.to_string_lossy();
            let (code, tilec_ptx, err) =
                tile_tests::tilec(&["compile", &path, "--kernel", &kernel, "--emit", "ptx", "--sm", "90a"]);
            if code != 0 {
                problems.push(format!("{file}: `{kernel}`: tilec compile failed: {err}"));
                continue;
            }
            let source = tile_jit::Source::Text {
                name: file.clone(),
                text: text.clone(),
            };
            match tile_jit::jit_ptx(source, &kernel, &[], &Default::default(), &target, &[]) {
                Ok(jit) if jit == tilec_ptx => compared += 1,
                Ok(_) => problems.push(format!(
                    "{file}: `{kernel}`: the JIT's PTX differs from tilec compile's"
                )),
                Err(e) => problems.push(format!("{file}: `{kernel}`: the JIT failed: {e}")),
            }
        }
    }
    assert_none("JIT vs tilec compile", &problems);
    assert!(compared >= 10, "only {compared} kernels compared");
}

/// Every built-in is called in some file whose kernels the PTX tests
/// compile and ptxas assembles (dsl-examples/, tests/gpu/): none reaches users untried.
#[test]
fn every_builtin_is_compiled_and_assembled_somewhere() {
    let mut text = String::new();
    for p in tile_files("dsl-examples").iter().chain(&tile_files("tests/gpu")) {
        let src = std::fs::read_to_string(p).unwrap();
        // Calls in comments do not count.
        text.extend(src.lines().map(|l| format!("{}\n", l.split("//").next().unwrap_or(""))));
    }
    let called = |name: &str| {
        text.match_indices(&format!("{name}(")).any(|(i, _)| {
            let before = text[..i].chars().next_back();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    };
    let missing: Vec<&str> = check::builtin_names().filter(|n| !called(n)).collect();
    assert!(
        missing.is_empty(),
        "built-ins no GPU-compiled file calls: {missing:?} (add them to tests/gpu/builtins.tile)"
    );
}

/// ptxas's "Potential Performance Loss" notes (here: wgmma serialised) are kept, with their code
/// and without the function name, so that the checks above can reject them.
#[test]
fn ptxas_report_keeps_performance_notes() {
    let text = "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function 'matmul'\n\
                ptxas info    : Used 174 registers, used 1 barriers\n\
                    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
    let r = tile_codegen::ptxas::parse_report(text);
    assert_eq!(r.registers, 174);
    assert_eq!(r.performance_warnings.len(), 1);
    assert!(r.performance_warnings[0].starts_with("(C7514) Potential Performance Loss: wgmma.mma_async"));
    assert!(!r.performance_warnings[0].contains("matmul"));
    assert!(r.to_string().ends_with("pipeline stage"), "{r}");
}

/// The snapshot helper as a user's own test would call it (docs/language.md 13.2 shows this code):
/// the JIT's choices for a kernel and its bindings, specialised as a launch with aligned
/// buffers and a length divisible by 16, the ptxas report and the PTX, recorded with insta.
#[test]
fn user_ptx_snapshot_helper() {
    if ptxas("user_ptx_snapshot_helper").is_none() {
        return;
    }
    use tile_jit::{ArgSpec, ConstValue, SnapshotOptions, Source, jit_snapshot};
    let source = Source::Static(include_str!("../../dsl-examples/vector_add.tile"));
    let opts = SnapshotOptions {
        specialization: vec![
            ArgSpec::of_ptr(0),
            ArgSpec::of_ptr(0),
            ArgSpec::of_ptr(0),
            ArgSpec::of_int(1 << 20),
        ],
        ..SnapshotOptions::new(tile_jit::target("sm_90a").unwrap())
    };
    let text = jit_snapshot(source, "vector_add", &[("BLOCK", ConstValue::Int(1024))], &opts).unwrap();
    insta::with_settings!({ snapshot_path => "snapshots/user", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!("vector_add", text);
    });
    // Without ptxas's report, and a bad binding named as such.
    let no_report = SnapshotOptions {
        resources: false,
        ..opts.clone()
    };
    let snap = |block: i64| {
        jit_snapshot(
            source_again(),
            "vector_add",
            &[("BLOCK", ConstValue::Int(block))],
            &no_report,
        )
    };
    let text = snap(1024).unwrap();
    assert!(!text.contains("ptxas:") && text.contains("---- ptx ----"), "{text}");
    let err = snap(100).unwrap_err();
    assert!(err.to_string().contains("BLOCK"), "{err}");
}

fn source_again() -> tile_jit::Source {
    tile_jit::Source::Static(include_str!("../../dsl-examples/vector_add.tile"))
}
