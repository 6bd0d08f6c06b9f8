//! The static configuration model (`tile_opt::config`) against what the back end really does:
//!
//! - `model_vs_ptxas`: every candidate of every example kernel is compiled to PTX and assembled
//!   with ptxas (sm_90a); the estimated shared memory must equal the lowering's, no chosen
//!   configuration may spill, and no candidate the model calls feasible may spill. With
//!   `TILE_MODEL_TABLE=1` it prints the error distribution that docs/optimizer.md quotes.
//! - `explain_*`: `tilec explain` output, snapshot-tested (`snapshots/explain/`).
//! - `static_choice_on_stored_sweeps`: the static choice's measured time over the best on every
//!   exhaustive sweep kept in `bench/records/`, a snapshot (a model change shows as a diff).
//!
//! Candidates that differ only in `num_stages` compile to the same code today (the codegen does
//! not pipeline), so each (values, warps) pair is compiled once.

use std::collections::HashMap;
use std::fmt::Write as _;

use tile_codegen::{ArgSpec, CompileOptions};

use tile_lang::ir::ConstValue;
use tile_lang::{check, syntax};
use tile_opt::config::{self, Pins, TargetDesc};
use tile_tests::{rel, root, tile_files, tilec};

use crate::ptx::ptxas;

const SM: &str = "sm_90a";

fn desc() -> TargetDesc {
    TargetDesc::for_target(&tile_codegen::target(SM).unwrap()).unwrap()
}

#[test]
fn model_vs_ptxas() {
    let Some(ptxas) = ptxas("model_vs_ptxas") else {
        return;
    };
    let t = desc();
    let mut problems = Vec::new();
    let mut counts = String::new();
    // (example/kernel, config, estimated regs, ptxas regs, spilled)
    let mut rows: Vec<(String, String, u32, u32, bool, bool)> = Vec::new();
    for p in tile_files("dsl-examples") {
        let file = rel(&p);
        let text = std::fs::read_to_string(&p).unwrap();
        let ast = syntax::parse(&text).unwrap();
        for name in check::kernel_names(&ast) {
            let choice = config::choose(&text, &ast, &name, &Pins::default(), &t)
                .unwrap_or_else(|e| panic!("{file}: kernel `{name}`: {e}"));
            let _ = writeln!(counts, "{file} {name}: {} candidates", choice.candidates.len());
            let mut seen: HashMap<String, (u32, u32, bool)> = HashMap::new();
            for (i, c) in choice.candidates.iter().enumerate() {
                let (Some(k), Some(e)) = (&c.kernel, &c.estimate) else {
                    continue;
                };
                // Candidates the model puts far over the register file (hundreds of elements per
                // thread) take LLVM minutes each and would spill whatever the estimate's error:
                // they are counted, not compiled.
                if e.registers > 4 * 255 {
                    continue;
                }
                let key = format!("{:?} {} {}", c.config.consts, c.config.num_warps, c.config.num_stages);
                let (regs, smem, spilled) = match seen.get(&key) {
                    Some(r) => *r,
                    None => {
                        // As the JIT compiles a launch of the case the model estimated: buffers
                        // aligned, integer arguments known (strides of 1 fold, multiples of 16
                        // vectorise).
                        let specialization = k
                            .params
                            .iter()
                            .map(|p| match e.int_args.get(&p.value) {
                                Some(v) => ArgSpec::of_int(*v),
                                None if p.elem.is_ptr() => ArgSpec::of_ptr(0),
                                None => ArgSpec::default(),
                            })
                            .collect();
                        let opts = CompileOptions {
                            num_warps: c.config.num_warps,
                            num_stages: c.config.num_stages,
                            specialization,
                            ..CompileOptions::new(t.target.clone())
                        };
                        let compiled = match tile_codegen::compile(k, &opts) {
                            Ok(x) => x,
                            // Over the shared-memory limit: the model rejects it too, with the
                            // same figure.
                            Err(err)
                                if e.smem_bytes > t.target.max_smem_per_block
                                    && err.to_string().contains(&format!("needs {} bytes", e.smem_bytes)) =>
                            {
                                continue;
                            }
                            Err(err) => {
                                problems.push(format!("{file} {name} [{}]: codegen: {err}", c.config));
                                continue;
                            }
                        };
                        let r = match tile_codegen::ptxas::assemble(&ptxas, &compiled.ptx, SM) {
                            Ok((_, r)) => r,
                            Err(err) => {
                                problems.push(format!("{file} {name} [{}]: ptxas: {err}", c.config));
                                continue;
                            }
                        };
                        let spilled = r.spill_store_bytes > 0 || r.spill_load_bytes > 0;
                        // With a producer warpgroup ptxas reports the registers at entry (the
                        // split's 168), not what the consumers use after `setmaxnreg`: such
                        // candidates count for spills only (registers 0: left out of the table).
                        let produced = compiled.threads_per_block > c.config.num_warps * 32;
                        // The model counts a cluster kernel's static exchange array too.
                        let smem = compiled.smem_bytes + r.shared_bytes;
                        let v = (if produced { 0 } else { r.registers }, smem, spilled);
                        seen.insert(key, v);
                        v
                    }
                };
                if smem != e.smem_bytes {
                    problems.push(format!(
                        "{file} {name} [{}]: shared memory estimated {} B, the lowering needs {smem} B",
                        c.config, e.smem_bytes
                    ));
                }
                if spilled && c.feasible() {
                    problems.push(format!(
                        "{file} {name} [{}]: the model calls it feasible (~{} registers of {}) but ptxas \
                         spills ({regs} registers){}",
                        c.config,
                        e.registers,
                        e.reg_budget,
                        if i == choice.chosen {
                            " -- and it is the chosen one"
                        } else {
                            ""
                        }
                    ));
                }
                rows.push((
                    format!("{file} {name}"),
                    c.config.to_string(),
                    e.registers,
                    regs,
                    spilled,
                    c.feasible(),
                ));
            }
        }
    }
    if std::env::var("TILE_MODEL_TABLE").is_ok_and(|v| v == "1") {
        println!("{counts}");
        println!("{}", table(&rows));
    }
    assert!(!rows.is_empty());
    assert!(
        problems.is_empty(),
        "{} problem(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

/// The error distribution (estimate - ptxas) of registers per thread, per kernel and overall,
/// over the candidates that did not spill (a spilling one's count is capped by the budget).
fn table(rows: &[(String, String, u32, u32, bool, bool)]) -> String {
    let mut by: Vec<(String, Vec<i64>)> = Vec::new();
    for (k, _, est, act, spilled, _) in rows {
        if *spilled || *act == 0 {
            continue;
        }
        let d = *est as i64 - *act as i64;
        match by.iter_mut().find(|(n, _)| n == k) {
            Some((_, v)) => v.push(d),
            None => by.push((k.clone(), vec![d])),
        }
    }
    let all: Vec<i64> = by.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    by.push(("all".into(), all));
    let mut s = String::from(
        "| kernel | n | min | median | max | mean abs | within ±25% of ptxas |\n|---|---|---|---|---|---|---|\n",
    );
    let ratio_ok: HashMap<&str, (usize, usize)> =
        rows.iter()
            .filter(|r| !r.4 && r.3 > 0)
            .fold(HashMap::new(), |mut m, r| {
                let e = m.entry(r.0.as_str()).or_insert((0, 0));
                e.1 += 1;
                if (r.2 as f64 - r.3 as f64).abs() <= 0.25 * r.3 as f64 {
                    e.0 += 1;
                }
                m
            });
    for (k, mut v) in by {
        v.sort();
        let n = v.len();
        if n == 0 {
            continue;
        }
        let mean_abs = v.iter().map(|d| d.abs() as f64).sum::<f64>() / n as f64;
        let ok = if k == "all" {
            ratio_ok.values().map(|x| x.0).sum::<usize>()
        } else {
            ratio_ok.get(k.as_str()).map_or(0, |x| x.0)
        };
        let _ = writeln!(
            s,
            "| {k} | {n} | {:+} | {:+} | {:+} | {mean_abs:.1} | {ok}/{n} |",
            v[0],
            v[n / 2],
            v[n - 1]
        );
    }
    let spilled = rows.iter().filter(|r| r.4).count();
    let caught = rows.iter().filter(|r| r.4 && !r.5).count();
    let _ = writeln!(
        s,
        "\nptxas spilled on {spilled} candidate(s); the model rejected {caught} of them as spilling."
    );
    let _ = writeln!(
        s,
        "The model rejected {} non-spilling candidate(s) as spilling (pessimism).",
        rows.iter().filter(|r| !r.4 && !r.5).count()
    );
    let _ = writeln!(
        s,
        "{} non-spilling candidate(s) with a producer warpgroup are not in the table (ptxas reports \
         their registers at entry).",
        rows.iter().filter(|r| !r.4 && r.3 == 0).count()
    );
    s
}

fn explain_snapshot(example: &str, extra: &[&str]) {
    let path = root().join("dsl-examples").join(format!("{example}.tile"));
    let mut args = vec!["explain", path.to_str().unwrap()];
    args.extend(extra);
    let (code, out, err) = tilec(&args);
    assert_eq!(code, 0, "{err}");
    insta::with_settings!({snapshot_path => "snapshots/explain", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(example, out);
    });
}

#[test]
fn explain_softmax() {
    explain_snapshot("softmax", &[]);
}

#[test]
fn explain_matmul() {
    // As the JIT plans a launch at 8192³ on aligned, row-major operands.
    explain_snapshot(
        "matmul",
        &[
            "--assume-aligned",
            "--size",
            "M=8192",
            "--size",
            "N=8192",
            "--size",
            "K=8192",
            "--size",
            "stride_ak=1",
            "--size",
            "stride_bn=1",
            "--size",
            "stride_cn=1",
        ],
    );
}

#[test]
fn explain_pins() {
    let path = root().join("dsl-examples/matmul.tile");
    let (code, out, err) = tilec(&[
        "explain",
        path.to_str().unwrap(),
        "-D",
        "BM=64",
        "--num-warps",
        "8",
        "--num-stages",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("chosen: BM=64 "), "{out}");
    assert!(out.contains("warps=8 stages=3"), "{out}");
    assert!(out.contains("candidates: 8 "), "{out}");
}

/// A program's second pass over its own row is a re-read the model weighs by what L2 keeps:
/// layernorm_fixed's two unrolled passes and softmax_chunked's two loops over the same range
/// re-read the row once; the one-pass softmax re-reads nothing; and the more bytes the
/// resident programs move, the smaller the share L2 keeps.
#[test]
fn model_rereads() {
    let t = desc();
    let candidates = |example: &str, kernel: &str| {
        let text = std::fs::read_to_string(root().join("dsl-examples").join(format!("{example}.tile"))).unwrap();
        let ast = syntax::parse(&text).unwrap();
        let c = config::choose(&text, &ast, kernel, &Pins::default(), &t).unwrap();
        c.candidates
            .into_iter()
            .filter(|c| c.estimate.is_some())
            .collect::<Vec<_>>()
    };
    let block = |c: &config::Candidate| {
        c.config
            .consts
            .iter()
            .find_map(|(n, v)| match v {
                ConstValue::Int(b) if n == "BLOCK" => Some(*b as f64),
                _ => None,
            })
            .unwrap()
    };
    // The bench case: 16384 f32 columns a row.
    let ln = candidates("layernorm", "layernorm_fixed");
    let mut traffic = Vec::new();
    for c in &ln {
        let e = c.estimate.as_ref().unwrap();
        assert_eq!(e.work.reread_bytes, 16384.0 * 4.0, "{}", c.config);
        let keeps = e.l2_keeps.unwrap_or_else(|| panic!("{}: no L2 share", c.config));
        assert!(keeps > 0.0 && keeps <= 1.0, "{}: {keeps}", c.config);
        traffic.push((e.blocks_per_sm as f64 * e.work.dram_bytes, keeps, c.config.to_string()));
    }
    traffic.sort_by(|a, b| a.0.total_cmp(&b.0));
    for w in traffic.windows(2) {
        assert!(w[1].1 <= w[0].1, "{} keeps more than {}", w[1].2, w[0].2);
    }
    assert!(traffic.first().unwrap().1 > traffic.last().unwrap().1, "{traffic:?}");
    // 32768 f32 columns: the first chunk and the loop's trips, the last of which (one chunk past
    // the row) is masked off and moves nothing; a thread's piece under 8 bytes is charged extra,
    // as every access of that width.
    for c in candidates("softmax", "softmax_chunked") {
        let e = c.estimate.as_ref().unwrap();
        let narrow = block(&c) * 4.0 / (c.config.num_warps as f64 * 32.0) < 8.0;
        let bytes = 32768.0 * 4.0 * if narrow { config::NARROW_ACCESS_COST } else { 1.0 };
        assert_eq!(e.work.reread_bytes, bytes, "{}", c.config);
    }
    for c in candidates("softmax", "softmax") {
        let e = c.estimate.as_ref().unwrap();
        assert_eq!((e.work.reread_bytes, e.l2_keeps), (0.0, None), "{}", c.config);
    }
}

/// The static choice scored on the stored exhaustive sweeps (`bench/records/*/tune-*.json`,
/// written by `tilec tune --all-candidates --json`): for each swept case, the measured time of
/// the candidate the model chooses today (`tilec explain --case LABEL`, the values every
/// candidate shares pinned) over the sweep's best. The table is a snapshot: a model change that
/// moves any choice shows here as a diff to read, and a worse ratio must be argued for.
/// (`bench/static-vs-sweep.py` prints the same score for any sweep file, older ones included.)
#[test]
fn static_choice_on_stored_sweeps() {
    let mut sweeps: Vec<std::path::PathBuf> = std::fs::read_dir(root().join("bench/records"))
        .unwrap()
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|d| d.is_dir())
        .flat_map(|d| std::fs::read_dir(d).unwrap().filter_map(|f| f.ok().map(|f| f.path())))
        .filter(|f| {
            let name = f.file_name().unwrap().to_string_lossy();
            name.starts_with("tune-") && name.ends_with(".json")
        })
        .collect();
    sweeps.sort();
    assert!(!sweeps.is_empty(), "no stored sweeps under bench/records");
    let files: Vec<_> = tile_files("dsl-examples")
        .into_iter()
        .chain(tile_files("bench/corpus"))
        .collect();
    let mut table = String::new();
    let mut worst = 1.0f64;
    for sweep in &sweeps {
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(sweep).unwrap()).unwrap();
        for case in doc["cases"].as_array().into_iter().flatten() {
            let kernel = case["kernel"].as_str().unwrap();
            let label = case["case"].as_str().unwrap();
            let times: HashMap<&str, f64> = case["candidates"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| Some((c["config"].as_str()?, c["median_ms"].as_f64()?)))
                .collect();
            let best = times.values().copied().fold(f64::INFINITY, f64::min);
            // Values every candidate shares (dtypes, fixed constants) are pinned.
            let mut values: HashMap<&str, Vec<&str>> = HashMap::new();
            for cfg in times.keys() {
                for part in cfg.split_whitespace() {
                    let (n, v) = part.split_once('=').unwrap();
                    let vs = values.entry(n).or_default();
                    if !vs.contains(&v) {
                        vs.push(v);
                    }
                }
            }
            let mut pins: Vec<String> = values
                .iter()
                .filter(|(n, vs)| vs.len() == 1 && !matches!(**n, "warps" | "stages"))
                .map(|(n, vs)| format!("{n}={}", vs[0]))
                .collect();
            pins.sort();
            let file = files
                .iter()
                .find(|f| {
                    std::fs::read_to_string(f).unwrap().lines().any(|l| {
                        l.starts_with(&format!("kernel {kernel}<")) || l.starts_with(&format!("kernel {kernel}("))
                    })
                })
                .unwrap_or_else(|| panic!("{}: no example or corpus file defines `{kernel}`", rel(sweep)));
            let path = file.to_string_lossy().into_owned();
            let mut args = vec!["explain", path.as_str(), "--kernel", kernel, "--case", label];
            for p in &pins {
                args.extend(["-D", p.as_str()]);
            }
            let (code, out, err) = tilec(&args);
            assert_eq!(code, 0, "{}: {kernel} [{label}]: {err}", rel(sweep));
            let chosen = out
                .lines()
                .find_map(|l| l.strip_prefix("chosen: "))
                .unwrap_or_else(|| panic!("no choice in:\n{out}"))
                .trim();
            let ratio = times.get(chosen).map(|t| t / best);
            if let Some(r) = ratio {
                worst = worst.max(r);
            }
            writeln!(
                table,
                "{} {kernel} [{label}]: {chosen} -> {}",
                rel(sweep).trim_start_matches("bench/records/"),
                ratio.map_or("not swept".to_string(), |r| format!("{r:.3} of the best")),
            )
            .unwrap();
        }
    }
    writeln!(table, "worst: {worst:.3}").unwrap();
    insta::with_settings!({snapshot_path => "snapshots/explain", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("static_choice_on_stored_sweeps", table);
    });
}
