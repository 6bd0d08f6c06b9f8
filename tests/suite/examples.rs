//! Every example checks clean, its IR is snapshot-tested and round-trips through the text form,
//! its AST prints back to source that parses to the same print, and its run spec verifies on the
//! interpreter against the plain-Rust reference.

use tile_lang::{check, ir, syntax};
use tile_tests::{rel, tile_files};

fn examples() -> Vec<(String, String)> {
    let files = tile_files("dsl-examples");
    assert!(!files.is_empty(), "no examples found");
    files
        .into_iter()
        .map(|p| (rel(&p), std::fs::read_to_string(&p).unwrap()))
        .collect()
}

#[test]
fn examples_check_clean() {
    for (name, text) in examples() {
        let c = tilec::check_source(&text, &vec![]);
        assert!(
            c.diags.is_empty(),
            "{name}:\n{}",
            tile_lang::diag::render(&name, &text, &c.diags)
        );
        assert!(!c.kernels.is_empty(), "{name}: no kernel");
        assert!(!c.specs.is_empty(), "{name}: no run spec");
    }
}

#[test]
fn example_ir_snapshots_and_round_trip() {
    for (name, text) in examples() {
        let ast = syntax::parse(&text).unwrap();
        let (kernels, diags) = check::check_file(&text, &ast, &vec![]);
        assert!(diags.is_empty(), "{name}");
        let mut all = String::new();
        for k in &kernels {
            let printed = k.to_string();
            let parsed =
                ir::parse_kernel(&printed).unwrap_or_else(|e| panic!("{name}: IR does not parse back: {e}\n{printed}"));
            assert_eq!(&parsed, k, "{name}: IR changed through its text form");
            assert_eq!(parsed.to_string(), printed, "{name}: IR text is not a fixpoint");
            all.push_str(&printed);
        }
        let snap = name
            .trim_start_matches("dsl-examples/")
            .trim_end_matches(".tile")
            .to_string();
        insta::with_settings!({ snapshot_path => "snapshots/ir", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(snap, all);
        });
    }
}

/// The GPU test files' kernels (loop attributes such as `#[warp_specialize]` included) go
/// through the IR's text form unchanged too.
#[test]
fn gpu_test_ir_round_trips() {
    let mut kernels_seen = 0;
    for p in tile_files("tests/gpu") {
        let (name, text) = (rel(&p), std::fs::read_to_string(&p).unwrap());
        let ast = syntax::parse(&text).unwrap();
        let (kernels, diags) = check::check_file(&text, &ast, &vec![]);
        assert!(diags.is_empty(), "{name}");
        for k in &kernels {
            let printed = k.to_string();
            let parsed =
                ir::parse_kernel(&printed).unwrap_or_else(|e| panic!("{name}: IR does not parse back: {e}\n{printed}"));
            assert_eq!(&parsed, k, "{name}: IR changed through its text form");
            kernels_seen += 1;
        }
    }
    assert!(kernels_seen > 20, "{kernels_seen} kernels");
}

#[test]
fn example_ast_prints_back() {
    for (name, text) in examples() {
        let once = syntax::parse(&text).unwrap().to_string();
        let again = syntax::parse(&once)
            .unwrap_or_else(|d| panic!("{name}: printed AST does not parse: {:?}\n{once}", d))
            .to_string();
        assert_eq!(once, again, "{name}: AST print is not a fixpoint");
    }
}

#[test]
fn examples_verify_on_the_interpreter() {
    let mut failures = Vec::new();
    let mut cases = 0;
    for (name, text) in examples() {
        let results = tilec::verify_interpreted(&text)
            .unwrap_or_else(|d| panic!("{name}: {}", tile_lang::diag::render(&name, &text, &d)));
        assert!(!results.is_empty(), "{name}: no cases");
        for r in results {
            cases += 1;
            if !r.passed() {
                failures.push(format!(
                    "{name} {} [{}]: {:?} {:?}",
                    r.kernel, r.case, r.error, r.comparisons
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
