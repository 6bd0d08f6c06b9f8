//! File tests for the middle of the pipeline: `tests/filetests/<stage>/*.tile`, each a kernel
//! with the `tilec` command lines to run on it and their expected output, in the one file.
//!
//! A file starts with a header comment (what it pins and why), then one or more run lines,
//! anywhere above the expected block:
//!
//! ```text
//! // run: compile --emit ir -D BLOCK=256
//! // run: compile --emit ptx --sm 90a -D BLOCK=256 | grep ld.global,st.global,bar.sync
//! ```
//!
//! A run line is a `tilec` command line split at whitespace (no quoting); the harness inserts
//! the file's path after its first word, so `compile --emit ir` runs `tilec compile FILE --emit
//! ir` and `check` runs `tilec check FILE`, in memory (`tile_tests::tilec`).
//!
//! An optional `| grep A,B,C` suffix keeps only the stdout lines containing any of the
//! comma-separated words (comment lines left out) and counts them: each kept line is reduced to
//! its instruction — the mnemonic, `@p ` before it when predicated (`@!p ` when negated), and
//! for `wgmma.wait_group` / `cp.async.wait_group` the count of groups left in flight — or,
//! for a directive (a line starting with `.`), the whole line without its `;`; the output is one
//! `N × INSTRUCTION` line per distinct instruction, sorted by instruction. That pins codegen
//! decisions (vector widths, barrier counts) without pinning register numbers.
//!
//! The expected output is the comment block after the marker line `// ---- expected ----` at
//! the end of the file, each line prefixed with `// ` (an empty line is `//`). For each run:
//! its stdout; then, when stderr is not empty, a line `stderr:` and stderr; then `exit: N` when
//! the exit code is not 0. With several run lines, each run's output starts with a line `run:
//! ARGS`. Normalised before comparison: the file's path is its file name; the PTX header
//! comment (the `//` lines before `.version`) is dropped; durations (`1.23ms`) in stderr read
//! `<time>`; trailing spaces and trailing empty lines go. The IR's source locations (`@12:5`)
//! are kept, so adding lines above the kernel changes them: rewrite the block (below).
//!
//! To add a test: write the header, run line(s) and kernel, run
//! `TILE_UPDATE_FILETESTS=1 cargo test --release -p tile-tests --test suite filetests`, which
//! writes (or rewrites) every expected block instead of failing, read the result, and commit
//! it. `TILE_FILETESTS=codegen/` runs only the files whose path (under tests/filetests/)
//! contains that text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tile_tests::{rel, root, tilec};

const MARKER: &str = "// ---- expected ----";
const UPDATE_VAR: &str = "TILE_UPDATE_FILETESTS";
const FILTER_VAR: &str = "TILE_FILETESTS";

/// One `// run:` line.
struct RunLine {
    /// As written after `run:` (the section header when a file has several).
    text: String,
    /// `tilec` arguments, the file's path not yet inserted.
    args: Vec<String>,
    /// The words of a `| grep A,B,C` suffix.
    grep: Option<Vec<String>>,
}

fn parse_run_line(text: &str) -> Result<RunLine, String> {
    let (cmd, grep) = match text.split_once('|') {
        Some((cmd, filter)) => {
            let words = filter
                .trim()
                .strip_prefix("grep ")
                .ok_or_else(|| format!("`{text}`: the only filter is `| grep A,B,C`"))?;
            let words: Vec<String> = words.split(',').map(|w| w.trim().to_string()).collect();
            if words.iter().any(|w| w.is_empty() || w.contains(' ')) {
                return Err(format!(
                    "`{text}`: grep takes comma-separated words, e.g. `| grep ld.global,bar.sync`"
                ));
            }
            (cmd, Some(words))
        }
        None => (text, None),
    };
    let args: Vec<String> = cmd.split_whitespace().map(str::to_string).collect();
    if args.is_empty() {
        return Err(format!(
            "`{text}`: an empty run line (e.g. `// run: compile --emit ir`)"
        ));
    }
    Ok(RunLine {
        text: text.trim().to_string(),
        args,
        grep,
    })
}

/// A file split at the marker: the source above it, and the expected block (if any).
struct FileTest {
    head: String,
    expected: Option<String>,
    runs: Vec<RunLine>,
}

fn parse_file(text: &str) -> Result<FileTest, String> {
    let (head, expected) = match text.find(&format!("\n{MARKER}\n")) {
        Some(i) => {
            let block = &text[i + MARKER.len() + 2..];
            let lines: Result<Vec<&str>, String> = block
                .trim_end()
                .lines()
                .map(|l| {
                    l.strip_prefix("// ")
                        .or_else(|| (l == "//").then_some(""))
                        .ok_or_else(|| format!("a line of the expected block does not start with `// `: `{l}`"))
                })
                .collect();
            (&text[..i], Some(normalise_text(&lines?.join("\n"))))
        }
        None if text.contains(MARKER) => {
            return Err(format!("`{MARKER}` must be a whole line after the kernel"));
        }
        None => (text, None),
    };
    let runs = head
        .lines()
        .filter_map(|l| l.trim().strip_prefix("// run:"))
        .map(parse_run_line)
        .collect::<Result<Vec<_>, _>>()?;
    if runs.is_empty() {
        return Err("no `// run: ...` line".to_string());
    }
    Ok(FileTest {
        head: head.trim_end().to_string(),
        expected,
        runs,
    })
}

/// Trailing spaces on every line and trailing empty lines removed.
fn normalise_text(s: &str) -> String {
    let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
    lines.join("\n").trim_end_matches('\n').to_string()
}

/// The `//` lines of a PTX module's header (LLVM's banner) dropped: every run of comment lines
/// directly before a `.version` line.
fn strip_ptx_header(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let mut keep = vec![true; lines.len()];
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with(".version") {
            let mut j = i;
            while j > 0 && (lines[j - 1].starts_with("//") || lines[j - 1].trim().is_empty()) {
                j -= 1;
                keep[j] = false;
            }
        }
    }
    lines
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(l, _)| *l)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Durations as `Duration`'s `Debug` prints them (`1.23ms`, `456µs`) become `<time>`.
fn scrub_durations(s: &str) -> String {
    const UNITS: [&str; 5] = ["ns", "µs", "us", "ms", "s"];
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        let starts_word = out.chars().last().is_none_or(|p| !p.is_alphanumeric() && p != '.');
        if c.is_ascii_digit() && starts_word {
            let n = rest
                .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
                .unwrap_or(rest.len());
            let after = &rest[n..];
            if let Some(u) = UNITS
                .iter()
                .find(|u| after.starts_with(**u) && !after[u.len()..].starts_with(|ch: char| ch.is_alphanumeric()))
            {
                out.push_str("<time>");
                rest = &after[u.len()..];
                continue;
            }
            out.push_str(&rest[..n]);
            rest = after;
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A PTX line reduced to what a `| grep` count pins (see the module docs).
fn instruction(line: &str) -> String {
    let l = line.trim().trim_end_matches(';').trim_end();
    if l.starts_with('.') {
        return l.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    let mut words = l.split_whitespace();
    let first = words.next().unwrap_or("");
    match first.strip_prefix('@') {
        Some(p) => {
            let neg = if p.starts_with('!') { "!" } else { "" };
            format!("@{neg}p {}", words.next().unwrap_or(""))
        }
        // How many groups a wait leaves in flight is what a pipeline is about: kept.
        None if first.ends_with("wait_group.sync.aligned") || first == "cp.async.wait_group" => {
            format!("{first} {}", words.next().unwrap_or(""))
        }
        None => first.to_string(),
    }
}

/// The lines holding any of `words` (comments left out), counted per instruction.
fn grep_count(out: &str, words: &[String]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for l in out.lines() {
        let t = l.trim();
        if !t.starts_with("//") && words.iter().any(|w| t.contains(w.as_str())) {
            *counts.entry(instruction(t)).or_default() += 1;
        }
    }
    counts
        .iter()
        .map(|(i, n)| format!("{n} × {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs one run line on `path`; its normalised output.
fn run(path: &Path, r: &RunLine) -> String {
    let full = path.to_string_lossy().into_owned();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut argv: Vec<&str> = vec![&r.args[0], &full];
    argv.extend(r.args[1..].iter().map(String::as_str));
    let (code, out, err) = tilec(&argv);
    let out = strip_ptx_header(&out.replace(&full, &name));
    let out = match &r.grep {
        Some(words) => grep_count(&out, words),
        None => out,
    };
    let err = scrub_durations(&err.replace(&full, &name));
    let mut s = normalise_text(&out);
    if !err.trim().is_empty() {
        s.push_str("\nstderr:\n");
        s.push_str(&normalise_text(&err));
    }
    if code != 0 {
        s.push_str(&format!("\nexit: {code}"));
    }
    normalise_text(s.trim_start_matches('\n'))
}

/// Every run of a file, in the expected block's format.
fn actual(path: &Path, t: &FileTest) -> String {
    let several = t.runs.len() > 1;
    let sections: Vec<String> = t
        .runs
        .iter()
        .map(|r| {
            let out = run(path, r);
            match (several, out.is_empty()) {
                (true, true) => format!("run: {}", r.text),
                (true, false) => format!("run: {}\n{out}", r.text),
                (false, _) => out,
            }
        })
        .collect();
    normalise_text(&sections.join("\n\n"))
}

/// The file with `expected` as its expected block.
fn with_expected(head: &str, expected: &str) -> String {
    let block: Vec<String> = expected
        .lines()
        .map(|l| {
            if l.is_empty() {
                "//".to_string()
            } else {
                format!("// {l}")
            }
        })
        .collect();
    match block.is_empty() {
        true => format!("{head}\n\n{MARKER}\n"),
        false => format!("{head}\n\n{MARKER}\n{}\n", block.join("\n")),
    }
}

fn files(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, found);
        } else if p.extension().is_some_and(|x| x == "tile") {
            found.push(p);
        }
    }
}

fn diff(expected: &str, actual: &str) -> String {
    similar::TextDiff::from_lines(&format!("{expected}\n"), &format!("{actual}\n"))
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string()
}

#[test]
fn filetests() {
    let dir = root().join("tests/filetests");
    let mut all = Vec::new();
    files(&dir, &mut all);
    assert!(!all.is_empty(), "no .tile files under {}", dir.display());
    let filter = std::env::var(FILTER_VAR).unwrap_or_default();
    let update = std::env::var(UPDATE_VAR).is_ok_and(|v| !v.is_empty() && v != "0");
    let mut failed = Vec::new();
    let mut ran = 0;
    for path in all {
        let name = rel(&path);
        let under = path.strip_prefix(&dir).unwrap().to_string_lossy().replace('\\', "/");
        if !under.contains(&filter) {
            continue;
        }
        ran += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let t = match parse_file(&text) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{name}: {e}");
                failed.push(name);
                continue;
            }
        };
        let got = actual(&path, &t);
        if t.expected.as_deref() == Some(got.as_str()) {
            continue;
        }
        if update {
            std::fs::write(&path, with_expected(&t.head, &got)).unwrap();
            eprintln!("{name}: expected block written");
            continue;
        }
        match &t.expected {
            Some(e) => eprintln!("{name}: the output differs from the expected block\n{}", diff(e, &got)),
            None => eprintln!("{name}: no `{MARKER}` block; the output is\n{got}"),
        }
        failed.push(name);
    }
    assert!(ran > 0, "{FILTER_VAR}={filter:?} matches no file test");
    assert!(
        failed.is_empty(),
        "{} file test(s) failed (diffs above): {}\n\
         If the new output is right, rewrite the expected blocks with \
         {UPDATE_VAR}=1 cargo test --release -p tile-tests --test suite filetests, \
         and read the rewritten blocks before committing them.",
        failed.len(),
        failed.join(", ")
    );
}

/// The harness's own pieces, on small inputs.
#[test]
fn filetest_harness_pieces() {
    assert_eq!(
        instruction("\t@%p1 ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];"),
        "@p ld.global.v4.b32"
    );
    assert_eq!(instruction("@!%p2 bra $L__BB0_2;"), "@!p bra");
    assert_eq!(instruction("\tbar.sync \t0;"), "bar.sync");
    assert_eq!(
        instruction(".extern .shared .align 16 .b8 global_smem[];"),
        ".extern .shared .align 16 .b8 global_smem[]"
    );
    let ptx = "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.0\n\tbar.sync 0;\n\t// bar.sync in a comment\n\tbar.sync 0;\n\tst.shared.b32 [%r1], %r2;\n";
    assert_eq!(
        grep_count(&strip_ptx_header(ptx), &["bar.sync".into(), "shared".into()]),
        "2 × bar.sync\n1 × st.shared.b32"
    );
    assert_eq!(strip_ptx_header(ptx).lines().next(), Some(".version 8.0"));
    assert_eq!(
        scrub_durations("k: optimized in 1.23ms: 4 -> 3 ops; 12µs, 3s, f32, 2.5 us, 16x"),
        "k: optimized in <time>: 4 -> 3 ops; <time>, <time>, f32, 2.5 us, 16x"
    );
    let r = parse_run_line(" compile --emit ptx | grep ld.global, bar.sync").unwrap();
    assert_eq!(r.args, ["compile", "--emit", "ptx"]);
    assert_eq!(r.grep.unwrap(), ["ld.global", "bar.sync"]);
    assert!(parse_run_line("compile | sort").is_err());
    let t = parse_file(&with_expected("// run: check\nkernel k() {}", "a\n\nb")).unwrap();
    assert_eq!(t.expected.as_deref(), Some("a\n\nb"));
    assert_eq!(t.head, "// run: check\nkernel k() {}");
}
