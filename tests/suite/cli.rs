//! `tilec`'s exit codes and outputs: 0 clean, 1 diagnostics or failed verification, 2 usage.

use tile_lang::codespan_reporting::term::termcolor::NoColor;
use tile_tests::root;

fn tilec(args: &[&str]) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = NoColor::new(Vec::new());
    let mut argv = vec!["tilec".to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let code = tilec::run(&argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err.into_inner()).unwrap(),
    )
}

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
    assert!(err.contains("not a power of two"), "{err}");
}

#[test]
fn verify_reports_errors_and_needs_a_backend() {
    let (code, out, err) = tilec(&["verify", "--interpret", &path("dsl-examples/vector_add.tile")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("max abs"), "{out}");
    assert!(out.trim_end().ends_with("passed, 0 failed"), "{out}");
    assert_eq!(tilec(&["verify", &path("dsl-examples/vector_add.tile")]).0, 2);
}
