//! Claims of the docs that a test can check: the crate dependency graph in
//! docs/architecture.md (the ```deps block) is the one the Cargo.toml files declare.

use std::collections::{BTreeMap, BTreeSet};

use tile_tests::root;

const DOC: &str = "docs/architecture.md";

/// The ```deps block: `crate: dep, dep` or `crate: (none)` per line, with its line number.
fn documented() -> BTreeMap<String, (usize, BTreeSet<String>)> {
    let text = std::fs::read_to_string(root().join(DOC)).unwrap();
    let mut lines = text.lines().enumerate();
    lines
        .find(|(_, l)| l.trim() == "```deps")
        .unwrap_or_else(|| panic!("{DOC} has no ```deps block"));
    let mut crates = BTreeMap::new();
    for (i, l) in lines.take_while(|(_, l)| l.trim() != "```") {
        let (name, deps) = l
            .split_once(':')
            .unwrap_or_else(|| panic!("{DOC}:{}: `{l}` is not `crate: dep, dep` or `crate: (none)`", i + 1));
        let deps: BTreeSet<String> = match deps.trim() {
            "(none)" => BTreeSet::new(),
            d => d.split(',').map(|s| s.trim().to_string()).collect(),
        };
        let previous = crates.insert(name.trim().to_string(), (i + 1, deps));
        assert!(previous.is_none(), "{DOC}:{}: `{}` is listed twice", i + 1, name.trim());
    }
    crates
}

/// Every workspace crate and its normal dependencies on other workspace crates, from `cargo
/// metadata`.
fn declared() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = std::process::Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{cargo} metadata`: {e}"));
    assert!(
        out.status.success(),
        "`cargo metadata` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("a `packages` array");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                // `kind` is null for [dependencies], "dev" or "build" otherwise.
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|n| members.contains(n))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

fn line(name: &str, deps: &BTreeSet<String>) -> String {
    if deps.is_empty() {
        format!("{name}: (none)")
    } else {
        format!("{name}: {}", deps.iter().cloned().collect::<Vec<_>>().join(", "))
    }
}

#[test]
fn architecture_lists_the_crate_dependencies() {
    let doc = documented();
    let cargo = declared();
    let mut wrong = Vec::new();
    for (name, deps) in &cargo {
        match doc.get(name) {
            Some((_, listed)) if listed == deps => {}
            Some((n, _)) => wrong.push(format!("{DOC}:{n}: change the line to `{}`", line(name, deps))),
            None => wrong.push(format!(
                "{DOC}: add the line `{}` to the ```deps block",
                line(name, deps)
            )),
        }
    }
    for (name, (n, _)) in &doc {
        if !cargo.contains_key(name) {
            wrong.push(format!(
                "{DOC}:{n}: remove the line of `{name}`: no workspace crate has that name"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the ```deps block of {DOC} disagrees with the Cargo.toml files (normal dependencies on \
         workspace crates; the order within a line does not matter):\n{}",
        wrong.join("\n")
    );
}

/// docs/checking.md's commands that need no GPU (`tilec check`, and `tilec` with `--interpret`)
/// run as written, from the repository root, and succeed.
#[test]
fn the_checking_guide_runs() {
    let text = std::fs::read_to_string(root().join("docs/checking.md")).unwrap();
    let mut in_sh = false;
    let mut ran = 0;
    for line in text.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            l if in_sh && (l.starts_with("tilec check") || (l.starts_with("tilec ") && l.contains("--interpret"))) => {
                // Paths in the repository are relative to its root; tests run elsewhere.
                let args: Vec<String> = l
                    .split_whitespace()
                    .skip(1)
                    .map(|a| match root().join(a) {
                        p if !a.starts_with('-') && p.exists() => p.to_string_lossy().into_owned(),
                        _ => a.to_string(),
                    })
                    .collect();
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let (code, out, err) = tile_tests::tilec(&args);
                assert_eq!(code, 0, "docs/checking.md: `{l}`\n{out}{err}");
                ran += 1;
            }
            _ => {}
        }
    }
    assert!(ran >= 4, "the guide's commands were found ({ran})");
}
