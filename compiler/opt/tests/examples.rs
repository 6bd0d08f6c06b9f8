//! Every `dsl-examples/*.tile` kernel, on every case of its run specs: the optimized IR
//! verifies, and the interpreter gives bit-identical outputs before and after (all default
//! rules are exact). Prints the optimizer's time per kernel.

use std::path::Path;
use std::time::Duration;

use tile_lang::interp;
use tile_lang::ir::scalar;
use tile_lang::{check, spec, syntax};
use tile_opt::egraph::{OptOptions, optimize};

#[test]
fn examples_agree_after_optimization() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dsl-examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tile"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let opts = OptOptions::default();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let ast = syntax::parse(&text).unwrap();
        let (specs, diags) = spec::parse_specs(&ast);
        assert!(diags.is_empty(), "{}: {diags:?}", path.display());
        for s in &specs {
            let mut slowest = Duration::ZERO;
            let Ok(cases) = spec::cases(s) else {
                eprintln!("{}: spec has no cases, skipped", s.kernel);
                continue;
            };
            for (ci, case) in cases.iter().enumerate() {
                let k = check::check_kernel(&text, &ast, &s.kernel, &case.consts).unwrap();
                let (o, report) = optimize(&k, &opts).unwrap_or_else(|e| panic!("{}: {e}\n{k}", s.kernel));
                slowest = slowest.max(report.time);
                if ci == 0 {
                    eprintln!(
                        "{}: {:?}, ops {} -> {}, max nodes {}, applied {:?}, stops {:?}",
                        s.kernel,
                        report.time,
                        report.ops_before,
                        report.ops_after,
                        report.max_nodes,
                        report.applied,
                        report.stop_reasons
                    );
                }
                // A case the spec itself cannot prepare is the spec's problem (tilec verify reports it).
                let Ok(p) = spec::prepare(s, case, &k, 7 + ci as u64) else {
                    eprintln!("{} case {}: spec cannot be prepared, skipped", s.kernel, case.label());
                    continue;
                };
                let (mut a, mut b) = (p.buffers.clone(), p.buffers.clone());
                interp::run(&k, p.grid, &p.args, &mut a).unwrap();
                interp::run(&o, p.grid, &p.args, &mut b).unwrap_or_else(|e| panic!("{}: {e}\n{o}", s.kernel));
                for (name, i) in &p.outputs {
                    let d = a[*i].dtype;
                    for (e, (x, y)) in a[*i].data.iter().zip(&b[*i].data).enumerate() {
                        let nan = |v: &tile_lang::ir::Scalar| matches!(v, tile_lang::ir::Scalar::F(f) if f.is_nan());
                        assert!(
                            scalar::to_bits(d, *x) == scalar::to_bits(d, *y) || (nan(x) && nan(y)),
                            "{} case {}: `{name}`[{e}]: {x:?} became {y:?}",
                            s.kernel,
                            case.label()
                        );
                    }
                }
            }
            eprintln!("{}: slowest optimization {slowest:?}", s.kernel);
        }
    }
}
