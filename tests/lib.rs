//! Shared helpers for the test suite: where the data-driven inputs live, and the generator of
//! random kernels for differential testing.

use std::path::{Path, PathBuf};

// `gen` is a reserved keyword in Rust 2024, hence the raw identifier (the file is gen.rs).
pub mod r#gen;

pub use r#gen::random_kernel_file;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// The `.tile` files in a folder of the workspace, sorted.
pub fn tile_files(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("cannot read {dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tile"))
        .collect();
    v.sort();
    v
}

/// A path relative to the workspace root, with forward slashes (stable in snapshots).
pub fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).to_string_lossy().replace('\\', "/")
}

/// A small deterministic generator (xorshift) for mutation tests and generated kernels.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Runs `tilec` in memory with `args` (program name left out): exit code, stdout, stderr.
pub fn tilec(args: &[&str]) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = tile_lang::codespan_reporting::term::termcolor::NoColor::new(Vec::new());
    let mut argv = vec!["tilec".to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let code = tilec::run(&argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err.into_inner()).unwrap(),
    )
}
