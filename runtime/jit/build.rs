//! Gives the JIT's disk cache a fingerprint of the compiler it is built with: the SHA-256 of the
//! sources of every compiler crate (front end, optimizer and model, driver, codegen). The
//! workspace version alone would let a cache serve PTX from an older codegen while the version
//! stays unchanged between releases.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dirs = [
        root.join("compiler/lang/src"),
        root.join("compiler/opt/src"),
        root.join("compiler/codegen/src"),
        root.join("compiler/driver/src"),
    ];
    let mut all = Vec::new();
    for d in &dirs {
        // A directory: cargo reruns this script when anything below it changes.
        println!("cargo:rerun-if-changed={}", d.display());
        files(d, &mut all);
    }
    // Sorted by path relative to the workspace, so the fingerprint does not depend on where the
    // checkout lives or on the order the file system lists entries in.
    let mut rel: Vec<(String, PathBuf)> = all
        .into_iter()
        .map(|p| (p.strip_prefix(&root).unwrap_or(&p).to_string_lossy().into_owned(), p))
        .collect();
    rel.sort();
    let digest = if rel.is_empty() {
        // Built outside the workspace (a packaged crate): the version has to do.
        "packaged".to_string()
    } else {
        let mut h = Sha256::new();
        for (name, path) in &rel {
            let bytes = std::fs::read(path).unwrap_or_default();
            h.update((name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
        h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
    };
    println!("cargo:rustc-env=TILE_COMPILER_DIGEST={digest}");
}
