//! ptxas, when present: assembles PTX to a cubin and reports the resources each kernel uses.
//! Found through `TILE_PTXAS`, then `.tools/nvcc/nvidia/cu13/bin/ptxas` above the running
//! executable (where tests/setup.sh installs it from PyPI), then `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What ptxas reports for one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub registers: u32,
    /// Static shared memory (dynamic shared memory is the launch's, not counted here).
    pub shared_bytes: u32,
    pub stack_frame_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// ptxas's "Potential Performance Loss" notes (e.g. wgmma serialised: C7514), its codes
    /// and messages; tile treats any of them as a code-generation bug.
    pub performance_warnings: Vec<String>,
}

impl std::fmt::Display for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "registers {}, shared {} B, stack {} B, spills {} B stored / {} B loaded",
            self.registers, self.shared_bytes, self.stack_frame_bytes, self.spill_store_bytes, self.spill_load_bytes
        )?;
        for w in &self.performance_warnings {
            write!(f, "; ptxas: {w}")?;
        }
        Ok(())
    }
}

/// The ptxas to use, if one is installed: `TILE_PTXAS`, else the project's own installation
/// (`.tools/nvcc/nvidia/cu13/bin/ptxas` in a directory above the running executable — where
/// tests/setup.sh puts it for the binaries built in `target/`), else `PATH`. The current
/// directory is never searched: a `.tools/` planted where a command runs is not executed.
pub fn find() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TILE_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok());
    if let Some(p) = exe
        .iter()
        .flat_map(|e| e.ancestors().skip(1))
        .map(|d| d.join(".tools/nvcc/nvidia/cu13/bin/ptxas"))
        .find(|p| p.is_file())
    {
        return Some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
}

/// Assembles `ptx` for `sm` (e.g. `sm_90a`); returns the cubin and the resource report. Works
/// in a fresh private temporary directory (removed afterwards, also on error), so that no
/// other process can plant or read the files.
pub fn assemble(ptxas: &Path, ptx: &str, sm: &str) -> Result<(Vec<u8>, Resources), String> {
    let dir = tempfile::Builder::new()
        .prefix("tile-ptxas-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let (src, out, log) = (
        dir.path().join("k.ptx"),
        dir.path().join("k.cubin"),
        dir.path().join("ptxas.log"),
    );
    std::fs::write(&src, ptx).map_err(|e| e.to_string())?;
    // ptxas writes its report to a file, not a pipe: nothing blocks while we wait, and a
    // flood of messages costs disk, not memory.
    let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let mut child = Command::new(ptxas)
        .arg(format!("-arch={sm}"))
        .arg("-v")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(log_file)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > PTXAS_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "ptxas did not finish within {} s; the kernel is too large to assemble (fewer unrolled loops or smaller tiles)",
                    PTXAS_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(2)),
            Err(e) => return Err(format!("waiting for ptxas: {e}")),
        }
    };
    let report = read_log(&log);
    if !status.success() {
        return Err(format!("ptxas rejected the PTX:\n{report}"));
    }
    std::fs::read(&out)
        .map(|cubin| (cubin, parse_report(&report)))
        .map_err(|e| e.to_string())
}

/// How long one ptxas run may take: the largest example kernels assemble in under a second.
pub const PTXAS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// What ptxas reports is relayed at most this long (its first bytes, then how many more).
pub const MAX_PTXAS_REPORT: usize = 64 << 10;

/// ptxas's report, cut at [`MAX_PTXAS_REPORT`] bytes (on a line boundary when there is one).
fn read_log(path: &Path) -> String {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let total = std::fs::metadata(path).map_or(0, |m| m.len());
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(MAX_PTXAS_REPORT as u64).read_to_end(&mut bytes);
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if total > bytes.len() as u64 {
        if let Some(i) = text.rfind('\n') {
            text.truncate(i + 1);
        }
        text.push_str(&format!(
            "... ({} more bytes of ptxas output)\n",
            total - text.len() as u64
        ));
    }
    text
}

/// Reads `ptxas -v` output: "Used 24 registers, used 0 barriers, 16 bytes smem" and
/// "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads".
pub fn parse_report(text: &str) -> Resources {
    let mut r = Resources::default();
    let num_before = |line: &str, word: &str| -> Option<u32> {
        let i = line.find(word)?;
        line[..i].split_whitespace().last()?.parse().ok()
    };
    for line in text.lines() {
        if let Some(i) = line.find("Potential Performance Loss") {
            let code = line[..i]
                .trim()
                .trim_start_matches("ptxas info")
                .trim()
                .trim_start_matches(':')
                .trim();
            let msg = line[i..].split(" in the function").next().unwrap_or(&line[i..]);
            r.performance_warnings.push(format!("{code} {msg}").trim().to_string());
            continue;
        }
        if let Some(v) = num_before(line, "registers") {
            r.registers = v;
        }
        if let Some(v) = num_before(line, "bytes smem") {
            r.shared_bytes = v;
        }
        if let Some(v) = num_before(line, "bytes stack frame") {
            r.stack_frame_bytes = v;
        }
        if let Some(v) = num_before(line, "bytes spill stores") {
            r.spill_store_bytes = v;
        }
        if let Some(v) = num_before(line, "bytes spill loads") {
            r.spill_load_bytes = v;
        }
    }
    r
}
