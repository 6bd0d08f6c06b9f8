//! `tilec explain FILE`: the configuration the static model chooses for each kernel, its
//! estimates, the rewrites applied, and every rejected candidate with the reason.

use std::io::Write;
use std::path::Path;

use tile_lang::codespan_reporting::term::termcolor::WriteColor;
use tile_lang::{check, spec};
use tile_opt::config::{self, Candidate, Pins, TargetDesc};

pub(crate) fn cmd_explain(
    file: &Path,
    (launch, case): (&super::LaunchArgs, Option<&str>),
    defines: &[String],
    kernel: Option<&str>,
    sm: &str,
    (num_warps, num_stages): (Option<u32>, Option<u32>),
    out: &mut dyn Write,
    err: &mut dyn WriteColor,
) -> anyhow::Result<i32> {
    let pins = Pins {
        consts: super::parse_defines(defines)?,
        num_warps,
        num_stages,
        split: None,
    };
    let target = tile_driver::target(sm)?;
    let desc = TargetDesc::for_target(&target).ok_or_else(|| {
        anyhow::anyhow!(
            "the cost model has no figures for {}; use --sm 80, 86, 89, 90 or 90a",
            target.sm
        )
    })?;
    let Some(src) = super::parse_or_report(file, err)? else {
        return Ok(1);
    };
    let ast = &src.ast;
    let names = match kernel {
        Some(k) => vec![k.to_string()],
        None => check::kernel_names(ast),
    };
    let mut failed = false;
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let (facts, sizes) = match check::find_kernel(ast, name) {
            Some(def) => launch.facts(def)?,
            None => (Vec::new(), Default::default()),
        };
        // Planned for the bench case asked for (as `tilec tune --case` plans it), else for the
        // sizes given, else for the file's largest bench case; with the facts `tilec compile`
        // would compile with (nothing assumed unless asked).
        let chosen = match case {
            Some(text) => match bench_case(ast, name, &pins, text) {
                Ok((spec, case)) => {
                    let pins = tile_jit::tune::case_pins(ast, name, &pins, &case);
                    config::choose_on(&src.text, ast, name, &pins, &desc, config::On::Case(&spec, &case))
                }
                Err(e) => {
                    writeln!(err, "error: {}: kernel `{name}`: {e}", src.name)?;
                    failed = true;
                    continue;
                }
            },
            None => {
                let l = config::LaunchProblem { sizes, grid: None };
                let on = if l.sizes.is_empty() {
                    config::On::File
                } else {
                    config::On::Launch(&l)
                };
                config::choose_with(&src.text, ast, name, &pins, &desc, on, &facts)
            }
        };
        match chosen {
            Ok(c) => write_choice(out, &c, &desc)?,
            Err(e) => {
                writeln!(err, "error: {}: kernel `{name}`: {e}", src.name)?;
                failed = true;
            }
        }
    }
    Ok(if failed { 1 } else { 0 })
}

/// The first `bench(..)` case of `kernel`'s run specs whose label contains `text` and whose
/// fixed values agree with the pins (as `tilec tune --case` selects it).
fn bench_case(
    ast: &tile_lang::syntax::ast::File,
    kernel: &str,
    pins: &Pins,
    text: &str,
) -> Result<(spec::RunSpec, spec::Case), String> {
    let (specs, _) = spec::parse_specs(ast);
    let mut labels = Vec::new();
    for s in specs.into_iter().filter(|s| s.kernel == kernel && !s.bench.is_empty()) {
        for case in spec::bench_cases(&s).map_err(|d| d.message)? {
            if super::tune::agrees(ast, kernel, pins, &case) && case.label().contains(text) {
                return Ok((s, case));
            }
            labels.push(case.label());
        }
    }
    labels.truncate(20);
    Err(match labels.is_empty() {
        true => "no `bench(..)` case to plan for (`--case` reads the kernel's run specs)".into(),
        false => format!(
            "no bench case's label contains `{text}`; the cases are:\n  {}",
            labels.join("\n  ")
        ),
    })
}

fn micros(s: f64) -> String {
    format!("{:.2} us", s * 1e6)
}

pub(crate) fn write_choice(out: &mut dyn Write, c: &config::Choice, t: &TargetDesc) -> std::io::Result<()> {
    let best = c.best();
    let e = best.estimate.as_ref().expect("the chosen candidate has an estimate");
    writeln!(out, "kernel {} on {}", c.kernel, t.target.sm)?;
    writeln!(out, "problem: {}", c.problem)?;
    // What varies among the candidates: the tuned compile-time values, and warps and stages
    // when they take more than one value.
    let varies = |f: fn(&Candidate) -> u32| {
        let mut v: Vec<u32> = c.candidates.iter().map(f).collect();
        v.sort_unstable();
        v.dedup();
        v.len() > 1
    };
    let mut tuned = c.tuned.clone();
    if varies(|x| x.config.num_warps) {
        tuned.push("warps".into());
    }
    if varies(|x| x.config.num_stages) {
        tuned.push("stages".into());
    }
    writeln!(
        out,
        "tuned: {}",
        if tuned.is_empty() {
            "nothing (every value fixed)".to_string()
        } else {
            tuned.join(", ")
        }
    )?;
    writeln!(out, "chosen: {}", best.config)?;
    writeln!(
        out,
        "  registers ~{} of {} per thread, shared memory {} B, {} threads, {} blocks/SM (occupancy {:.0}%)",
        e.registers,
        e.reg_budget,
        e.smem_bytes,
        e.threads,
        e.blocks_per_sm,
        e.occupancy * 100.0
    )?;
    if best.fallback() {
        writeln!(
            out,
            "  every candidate is estimated over the register budget: this one needs the fewest (the \
             estimate leans high; `tilec tune` times the candidates)"
        )?;
    }
    if e.producer {
        writeln!(
            out,
            "  a producer warpgroup (128 of the threads) issues the pipelined loop's TMA copies{}{}",
            if e.producer_runs_tiles {
                ", running the tile loop around it too (the ring goes on from tile to tile)"
            } else {
                ""
            },
            if e.pingpong {
                "; the consumer warpgroups take turns issuing wgmma (`#[pingpong]`)"
            } else {
                ""
            }
        )?;
    }
    if e.multicast_bytes > 0 {
        writeln!(
            out,
            "  TMA multicast: the {} programs of a cluster load {} B of each {} B stage once for all, each \
             copying 1/{} of it into every program's shared memory",
            e.cluster, e.multicast_bytes, e.tma_stage_bytes, e.cluster
        )?;
    }
    writeln!(
        out,
        "  {} programs, time {} ({}-bound: memory {}, ALU {}{}, shared memory {})",
        e.programs,
        micros(e.time_s),
        e.bound(),
        micros(e.dram_s),
        micros(e.alu_s),
        if e.tensor_s > 0.0 {
            format!(
                " (tensor cores {}, other instructions {})",
                micros(e.tensor_s),
                micros(e.insts_s)
            )
        } else {
            String::new()
        },
        micros(e.smem_s)
    )?;
    if let Some(keeps) = e.l2_keeps {
        writeln!(
            out,
            "  re-reads {:.0} KB a program; L2 keeps {:.0}% of them (up to {} programs resident per SM)",
            e.work.reread_bytes / 1024.0,
            keeps * 100.0,
            e.blocks_per_sm
        )?;
    }
    // Fast paths the chosen plan does not take, and the rule that refused each.
    for r in &e.refusals {
        writeln!(out, "  note: {r}")?;
    }
    match best
        .kernel
        .as_ref()
        .map(|k| tile_opt::egraph::optimize(k, &Default::default()))
    {
        Some(Ok((_, r))) => {
            let rules: Vec<String> = r.applied.iter().map(|(n, c)| format!("{n} x{c}")).collect();
            writeln!(
                out,
                "rewrites (exact rules; applied with `tilec compile --opt`): {} -> {} ops; {}",
                r.ops_before,
                r.ops_after,
                if rules.is_empty() {
                    "no rule fired".to_string()
                } else {
                    rules.join(", ")
                }
            )?;
        }
        Some(Err(e)) => writeln!(out, "rewrites: the optimizer failed: {e}")?,
        None => writeln!(out, "rewrites: no checked kernel")?,
    }
    let feasible = c.candidates.iter().filter(|c| c.feasible() && !c.fallback()).count();
    writeln!(out, "candidates: {} ({} feasible)", c.candidates.len(), feasible)?;
    for cand in &c.candidates {
        writeln!(out, "  {}", row(cand))?;
    }
    Ok(())
}

fn row(c: &Candidate) -> String {
    match &c.estimate {
        Some(e) => format!(
            "{}: regs ~{}, smem {} B, occ {:.0}%, {} -- {}",
            c.config,
            e.registers,
            e.smem_bytes,
            e.occupancy * 100.0,
            micros(e.time_s),
            c.verdict
        ),
        None => format!("{} -- {}", c.config, c.verdict),
    }
}
