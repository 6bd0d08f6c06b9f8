//! Every program under tests/diagnostics/ is invalid: `tilec check` must reject it with
//! diagnostics that point into the file. The rendered text is snapshot-tested.

use tile_lang::diag;
use tile_tests::{rel, tile_files};

#[test]
fn invalid_programs_give_located_diagnostics() {
    let files = tile_files("tests/diagnostics");
    assert!(
        files.len() >= 40,
        "expected at least 40 invalid programs, found {}",
        files.len()
    );
    for path in files {
        let name = rel(&path);
        let text = std::fs::read_to_string(&path).unwrap();
        let checked = tilec::check_source(&text, &vec![]);
        assert!(!checked.diags.is_empty(), "{name}: expected diagnostics, got none");
        let rendered = diag::render(&name, &text, &checked.diags);
        for d in &checked.diags {
            let (line, col) = d.line_col(&text);
            assert!(
                rendered.contains(&format!("{name}:{line}:{col}")),
                "{name}: rendering lacks {line}:{col}:\n{rendered}"
            );
        }
        let snap = path.file_stem().unwrap().to_string_lossy().to_string();
        insta::with_settings!({ snapshot_path => "snapshots/diagnostics", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(snap, rendered);
        });
    }
}
