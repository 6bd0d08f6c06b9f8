//! The disk cache of compiled kernels.
//!
//! An entry is three files named by the key's hex digest in one directory: `KEY.ptx`,
//! `KEY.cubin` (when ptxas was available) and `KEY.meta`, a few `name=value` lines with the
//! launch facts (kernel name, threads per block, dynamic shared memory) and the length and
//! SHA-256 of each payload. Every file is written to a temporary name in the same directory and
//! renamed into place, the metadata last; a reader trusts a payload only when it matches the
//! metadata, so a torn, truncated or half-replaced entry reads as corrupt and is recompiled —
//! which also makes a cache shared by several processes safe without locks (two writers of
//! one key write the same bytes).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use tile_driver::ArgSpec;
use tile_lang::ir::ConstValue;

/// Bump when the entry layout or the meaning of a key changes, so that old entries are never
/// read: it is part of every key. Also bump it when codegen changes what it emits without a
/// version bump, if stale entries could otherwise be served.
pub const CACHE_FORMAT: u32 = 5;

/// The compiler's version: the workspace's (every crate shares it) and a fingerprint of the
/// front end's and codegen's sources (see `build.rs`), so that a compiler changed without a
/// version bump never reads kernels an older one compiled.
pub const COMPILER_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "+", env!("TILE_COMPILER_DIGEST"));

/// The LLVM that compiles kernels. Hard-coded: the runtime may not link inkwell itself, and
/// tile-codegen does not expose LLVM's version; a test checks it against the workspace's
/// inkwell feature (`llvm22-1-...`), so a move to another LLVM fails until this is updated.
pub const LLVM_VERSION: &str = "22.1";

/// A cache key: the SHA-256 of everything that determines a compiled kernel.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            let _ = write!(s, "{b:02x}");
        }
        s
    }
}

/// Everything a compiled kernel depends on.
#[derive(Clone, Debug)]
pub struct KeyParts<'a> {
    pub source: &'a str,
    pub kernel: &'a str,
    pub bindings: &'a [(String, ConstValue)],
    pub num_warps: u32,
    pub num_stages: u32,
    /// Programs of a cluster sharing the kernel's loop (1: no split).
    pub split: u32,
    pub specialization: &'a [ArgSpec],
    /// `sm_90a`, ...
    pub target_sm: &'a str,
    pub compiler_version: &'a str,
    pub llvm_version: &'a str,
}

/// The key of `parts`: [`specialize`] of [`base_key`], so that a kernel handle hashes the source
/// and the bindings once and each new specialisation only hashes 32 bytes and a few tags.
pub fn cache_key(parts: &KeyParts<'_>) -> CacheKey {
    let digest = source_digest(parts.source);
    specialize(&base_key(&digest, parts), parts.specialization)
}

/// The SHA-256 of a source text (hashed once per source, not per kernel or launch).
pub fn source_digest(source: &str) -> [u8; 32] {
    Sha256::digest(source.as_bytes()).into()
}

fn put_str(h: &mut Sha256, s: &str) {
    // Length-prefixed, so that no two different field sequences hash the same bytes.
    h.update((s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

/// The key of everything but the specialisation (`parts.source` is ignored: `source_digest`
/// stands for it).
pub fn base_key(source_digest: &[u8; 32], parts: &KeyParts<'_>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"tile-kernel");
    h.update(CACHE_FORMAT.to_le_bytes());
    put_str(&mut h, parts.compiler_version);
    put_str(&mut h, parts.llvm_version);
    h.update(source_digest);
    put_str(&mut h, parts.kernel);
    put_str(&mut h, parts.target_sm);
    h.update(parts.num_warps.to_le_bytes());
    h.update(parts.num_stages.to_le_bytes());
    h.update(parts.split.to_le_bytes());
    // Bindings are a set: the order the caller listed them in does not change the kernel.
    let mut bindings: Vec<&(String, ConstValue)> = parts.bindings.iter().collect();
    bindings.sort_by(|a, b| a.0.cmp(&b.0));
    h.update((bindings.len() as u64).to_le_bytes());
    for (name, value) in bindings {
        put_str(&mut h, name);
        match value {
            ConstValue::Int(v) => {
                h.update([0]);
                h.update(v.to_le_bytes());
            }
            ConstValue::Float(v) => {
                h.update([1]);
                h.update(v.to_bits().to_le_bytes());
            }
            ConstValue::Bool(v) => h.update([2, *v as u8]),
            ConstValue::DType(d) => {
                h.update([3]);
                put_str(&mut h, d.name());
            }
        }
    }
    h.finalize().into()
}

/// The full key: the base key and one tag per argument.
pub fn specialize(base: &[u8; 32], specialization: &[ArgSpec]) -> CacheKey {
    let mut h = Sha256::new();
    h.update(base);
    h.update((specialization.len() as u64).to_le_bytes());
    for s in specialization {
        h.update([s.tag() as u8]);
    }
    CacheKey(h.finalize().into())
}

/// `key` of a debug build when `debug` holds (another key: its kernels differ), else `key`.
pub fn debug_key(key: [u8; 32], debug: bool) -> [u8; 32] {
    if !debug {
        return key;
    }
    let mut h = Sha256::new();
    h.update(b"debug");
    h.update(key);
    h.finalize().into()
}

/// The key of an entry whose cubin `ptxas` (of version `version`) assembled: another ptxas gives
/// another key, so a cubin is never served to a process using a different assembler.
pub fn with_ptxas(key: &CacheKey, version: &str) -> CacheKey {
    let mut h = Sha256::new();
    h.update(b"ptxas");
    h.update(key.0);
    put_str(&mut h, version);
    CacheKey(h.finalize().into())
}

/// Where the disk cache lives: `TILE_CACHE_DIR` if set, else `$XDG_CACHE_HOME/tile`, else
/// `$HOME/.cache/tile`; `None` when none of them is set (the disk cache is then off).
pub fn default_cache_dir() -> Option<PathBuf> {
    cache_dir_from(
        std::env::var_os("TILE_CACHE_DIR"),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`default_cache_dir`] from given variable values (pure, for tests). Empty values count as
/// unset, and so does a relative `XDG_CACHE_HOME`, as the XDG specification asks.
pub fn cache_dir_from(tile: Option<OsString>, xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let set = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = set(tile) {
        return Some(d);
    }
    if let Some(d) = set(xdg).filter(|d| d.is_absolute()) {
        return Some(d.join("tile"));
    }
    set(home).map(|h| h.join(".cache").join("tile"))
}

/// A compiled kernel as the cache stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheEntry {
    pub kernel: String,
    pub threads_per_block: u32,
    pub smem_bytes: u32,
    /// Programs launched for each program of the grid along axis 0 (`Compiled::split`).
    pub split: u32,
    /// The specialisation tags, for people reading the cache (`dd-1`).
    pub specialization: String,
    pub target_sm: String,
    pub ptx: String,
    pub cubin: Option<Vec<u8>>,
    /// Tensor maps a launch passes after the kernel's parameters (`tensor_map=` lines).
    pub tensor_maps: Vec<tile_driver::tma::TensorMap>,
}

/// What a lookup found.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    Hit(CacheEntry),
    Miss,
    /// An entry exists but cannot be trusted (the reason says why); recompile and store again.
    Corrupt(String),
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write the kernel cache entry {path}: {source}")]
pub struct CacheWriteError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// A directory of compiled kernels, kept under a size bound: past it, the entries used least
/// recently are removed.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// The default bound of a disk cache: 2 GiB (`TILE_CACHE_MAX_BYTES` sets another).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;

/// The size bound `TILE_CACHE_MAX_BYTES` sets: unset, the default; a byte count (digits, with
/// an optional `K`, `M` or `G` suffix, powers of 1024) otherwise; anything else is an error
/// naming the value (a typo must not silently mean 2 GiB).
pub fn max_bytes_from_env() -> Result<u64, String> {
    match std::env::var("TILE_CACHE_MAX_BYTES") {
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_MAX_BYTES),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!(
            "TILE_CACHE_MAX_BYTES={}: not a byte count (write e.g. 1073741824 or 1G)",
            v.to_string_lossy()
        )),
        Ok(v) => parse_bytes(&v).ok_or_else(|| {
            format!(
                "TILE_CACHE_MAX_BYTES={}: not a byte count (write e.g. 1073741824 or 1G)",
                v.chars().take(64).collect::<String>()
            )
        }),
    }
}

/// `1073741824`, `512M`, `2G` (powers of 1024); `None` for anything else or an overflow.
fn parse_bytes(v: &str) -> Option<u64> {
    let v = v.trim();
    let (digits, scale) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&v[..i], 1 << 20),
        (i, 'g' | 'G') => (&v[..i], 1 << 30),
        _ => (v, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

/// Whether `stem` is a cache key's file stem (64 lowercase hex digits): the only files the
/// cache reads or removes, so that a directory holding other files (a `tilec compile -o DIR/`
/// folder, say) loses none of them.
fn is_key_stem(stem: &str) -> bool {
    stem.len() == 64 && stem.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The most a cache file may hold (metadata: a few hundred bytes; a cubin: megabytes): reads
/// stop there, so a file replaced by a link to `/dev/zero` is corrupt, not a hang.
const MAX_META_BYTES: u64 = 64 << 10;
const MAX_PAYLOAD_BYTES: u64 = 512 << 20;

/// Reads a regular file (links are not followed into devices: the file must be regular), at
/// most `limit` bytes; more is an error.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    f.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

impl DiskCache {
    /// A cache in `dir` with the size bound `TILE_CACHE_MAX_BYTES` sets (the default when it is
    /// unset or not a byte count; `Jit::new` refuses a value that is not one).
    pub fn new(dir: impl Into<PathBuf>) -> DiskCache {
        DiskCache {
            dir: dir.into(),
            max_bytes: max_bytes_from_env().unwrap_or(DEFAULT_MAX_BYTES),
        }
    }

    /// The same cache with another size bound.
    pub fn with_max_bytes(self, max_bytes: u64) -> DiskCache {
        DiskCache { max_bytes, ..self }
    }

    /// Removes the least recently used entries (by their metadata's modification time, which a
    /// hit refreshes) until the entries take at most the size bound; returns how many went.
    /// Metadata first, so that a reader meanwhile sees a miss, never half an entry.
    pub fn evict(&self) -> usize {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        // Entries by key: total bytes and the time their metadata was last touched.
        let mut entries: HashMap<String, (u64, std::time::SystemTime)> = HashMap::new();
        for e in dir.flatten() {
            let (Ok(m), name) = (e.metadata(), e.file_name().to_string_lossy().into_owned()) else {
                continue;
            };
            let Some((stem, ext)) = name.split_once('.') else {
                continue;
            };
            if !m.is_file() || !is_key_stem(stem) || !matches!(ext, "meta" | "ptx" | "cubin") {
                continue;
            }
            let slot = entries.entry(stem.to_string()).or_insert((0, std::time::UNIX_EPOCH));
            slot.0 += m.len();
            if ext == "meta" {
                slot.1 = m.modified().unwrap_or(std::time::UNIX_EPOCH);
            }
        }
        let mut total: u64 = entries.values().map(|e| e.0).sum();
        let mut oldest_first: Vec<(String, (u64, std::time::SystemTime))> = entries.into_iter().collect();
        oldest_first.sort_by_key(|(_, (_, used))| *used);
        let mut removed = 0;
        for (stem, (bytes, _)) in oldest_first {
            if total <= self.max_bytes {
                break;
            }
            // Only entries this cache wrote: their metadata opens with its format line.
            let ours = read_bounded(&self.dir.join(format!("{stem}.meta")), MAX_META_BYTES)
                .is_ok_and(|m| m.starts_with(b"format="));
            if !ours {
                continue;
            }
            for ext in ["meta", "ptx", "cubin"] {
                let _ = std::fs::remove_file(self.dir.join(format!("{stem}.{ext}")));
            }
            total -= bytes;
            removed += 1;
        }
        removed
    }

    /// Removes temporary files that writers left behind when they crashed between writing and
    /// renaming (`.NAME.tmp.PID.N`) and that are older than `age`; returns how many. Files of
    /// writers still at work are younger. A JIT prunes once when it opens the cache.
    pub fn prune_temporaries(&self, age: std::time::Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = std::time::SystemTime::now();
        entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                is_cache_temporary(&name)
            })
            .filter(|e| {
                e.metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| now.duration_since(t).is_ok_and(|d| d > age))
            })
            .filter(|e| std::fs::remove_file(e.path()).is_ok())
            .count()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &CacheKey, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", key.hex()))
    }

    /// Reads the entry of `key`. Never fails: a missing entry is a miss, and anything wrong
    /// with an existing one (unreadable, truncated, altered) is reported as corrupt.
    pub fn load(&self, key: &CacheKey) -> Lookup {
        let meta = match read_bounded(&self.path(key, "meta"), MAX_META_BYTES) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return Lookup::Corrupt(format!("metadata unreadable: {e}")),
        };
        match self.read_entry(key, &meta) {
            Ok(e) => {
                // Used now: the last to be evicted.
                if let Ok(f) = std::fs::File::options().write(true).open(self.path(key, "meta")) {
                    let _ = f.set_modified(std::time::SystemTime::now());
                }
                Lookup::Hit(e)
            }
            Err(why) => Lookup::Corrupt(why),
        }
    }

    fn read_entry(&self, key: &CacheKey, meta: &[u8]) -> Result<CacheEntry, String> {
        let meta = std::str::from_utf8(meta).map_err(|_| "metadata is not UTF-8".to_string())?;
        let (body, sum) = meta
            .trim_end_matches('\n')
            .rsplit_once('\n')
            .and_then(|(body, last)| Some((body, last.strip_prefix("meta_sha256=")?)))
            .ok_or("metadata has no checksum")?;
        if hex(&Sha256::digest(format!("{body}\n").as_bytes())) != sum {
            return Err("metadata does not match its checksum".into());
        }
        let meta = body;
        let field = |name: &str| -> Result<&str, String> {
            meta.lines()
                .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
                .ok_or_else(|| format!("metadata has no `{name}`"))
        };
        let number = |name: &str| -> Result<u64, String> {
            field(name)?
                .parse()
                .map_err(|_| format!("metadata `{name}` is not a number"))
        };
        if number("format")? != CACHE_FORMAT as u64 {
            return Err("metadata of another format".into());
        }
        if field("key")? != key.hex() {
            return Err("metadata belongs to another key".into());
        }
        let payload = |ext: &str| -> Result<Vec<u8>, String> {
            let len = number(&format!("{ext}_len"))?;
            if len > MAX_PAYLOAD_BYTES {
                return Err(format!("{ext} would have {len} bytes, more than a kernel has"));
            }
            let bytes = read_bounded(&self.path(key, ext), len).map_err(|e| format!("{ext} unreadable: {e}"))?;
            if bytes.len() as u64 != len {
                return Err(format!("{ext} has {} bytes; the metadata says otherwise", bytes.len()));
            }
            if hex(&Sha256::digest(&bytes)) != field(&format!("{ext}_sha256"))? {
                return Err(format!("{ext} does not match its checksum"));
            }
            Ok(bytes)
        };
        let ptx = String::from_utf8(payload("ptx")?).map_err(|_| "ptx is not UTF-8".to_string())?;
        let cubin = match field("cubin_len") {
            Ok(_) => Some(payload("cubin")?),
            Err(_) => None,
        };
        Ok(CacheEntry {
            kernel: field("kernel")?.to_string(),
            threads_per_block: u32::try_from(number("threads_per_block")?).map_err(|e| e.to_string())?,
            smem_bytes: u32::try_from(number("smem_bytes")?).map_err(|e| e.to_string())?,
            split: u32::try_from(number("split")?)
                .ok()
                .filter(|s| tile_driver::split::is_valid(*s))
                .ok_or("split is not a split the compiler makes")?,
            specialization: field("specialization")?.to_string(),
            target_sm: field("target")?.to_string(),
            ptx,
            cubin,
            tensor_maps: meta
                .lines()
                .filter_map(|l| l.strip_prefix("tensor_map="))
                .map(|m| m.parse())
                .collect::<Result<_, _>>()?,
        })
    }

    /// Writes the entry of `key`, replacing any entry already there.
    pub fn store(&self, key: &CacheKey, e: &CacheEntry) -> Result<(), CacheWriteError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| CacheWriteError {
            path: self.dir.clone(),
            source,
        })?;
        let mut meta = format!(
            "format={CACHE_FORMAT}\nkey={}\nkernel={}\nthreads_per_block={}\nsmem_bytes={}\nsplit={}\nspecialization={}\ntarget={}\n\
             compiler={COMPILER_VERSION}\nllvm={LLVM_VERSION}\nptx_len={}\nptx_sha256={}\n",
            key.hex(),
            e.kernel,
            e.threads_per_block,
            e.smem_bytes,
            e.split,
            e.specialization,
            e.target_sm,
            e.ptx.len(),
            hex(&Sha256::digest(e.ptx.as_bytes())),
        );
        for m in &e.tensor_maps {
            let _ = writeln!(meta, "tensor_map={m}");
        }
        write_atomic(&self.path(key, "ptx"), e.ptx.as_bytes())?;
        if let Some(c) = &e.cubin {
            let _ = write!(
                meta,
                "cubin_len={}\ncubin_sha256={}\n",
                c.len(),
                hex(&Sha256::digest(c))
            );
            write_atomic(&self.path(key, "cubin"), c)?;
        }
        // The metadata's own checksum, last: a field altered on disk is caught like a payload.
        let _ = writeln!(meta, "meta_sha256={}", hex(&Sha256::digest(meta.as_bytes())));
        // Last: until the metadata is in place, readers see a miss (or the previous entry,
        // whose checksums then decide).
        write_atomic(&self.path(key, "meta"), meta.as_bytes())?;
        self.evict();
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Writes `bytes` to `path` so that readers see the old file or the whole new one: a temporary
/// file in the same directory (a rename is only atomic within one file system), then a rename.
/// No fsync: after a crash an entry may be truncated, and the checksums catch that.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CacheWriteError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let err = |source| CacheWriteError {
        path: path.to_path_buf(),
        source,
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
    // Unique per process and call, so that concurrent writers never share a temporary file.
    let tmp = path.with_file_name(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    // `create_new` refuses a path that exists, a link planted there included: the bytes go to a
    // new file of this process's, and the rename replaces `path` itself (a link at `path` is
    // replaced, never followed).
    let write = || -> std::io::Result<()> {
        use std::io::Write as _;
        let mut f = std::fs::File::options().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        drop(f);
        std::fs::rename(&tmp, path)
    };
    let result = write();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}

/// Whether `name` is a temporary file `write_atomic` made for a cache file (`.KEY.EXT.tmp.PID.N`).
fn is_cache_temporary(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some((file, _)) = rest.split_once(".tmp.") else {
        return false;
    };
    file.split_once('.')
        .is_some_and(|(stem, ext)| is_key_stem(stem) && matches!(ext, "meta" | "ptx" | "cubin" | "tune"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tile_lang::ir::DType;

    /// A fresh directory under the system's temporary directory, removed on drop.
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> TempDir {
            use std::sync::atomic::{AtomicU64, Ordering};
            static N: AtomicU64 = AtomicU64::new(0);
            let d = std::env::temp_dir().join(format!(
                "tile-runtime-test-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            TempDir(d)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const SPEC: [ArgSpec; 2] = [
        ArgSpec {
            equals_one: false,
            divisible_by_16: true,
            divisible_by_8: true,
        },
        ArgSpec {
            equals_one: true,
            divisible_by_16: false,
            divisible_by_8: false,
        },
    ];

    fn with_parts<R>(f: impl FnOnce(&KeyParts<'_>) -> R) -> R {
        let bindings = vec![
            ("BLOCK".to_string(), ConstValue::Int(1024)),
            ("T".to_string(), ConstValue::DType(DType::F32)),
        ];
        f(&KeyParts {
            source: "kernel k() {}",
            kernel: "k",
            bindings: &bindings,
            num_warps: 4,
            num_stages: 1,
            split: 1,
            specialization: &SPEC,
            target_sm: "sm_90a",
            compiler_version: COMPILER_VERSION,
            llvm_version: LLVM_VERSION,
        })
    }

    #[test]
    fn key_is_stable() {
        // The same inputs give the same key in every process and on every machine: pinned
        // here, so that an accidental change of the hashing shows up as a test failure (change
        // CACHE_FORMAT and this value together).
        let k = with_parts(|p| {
            cache_key(&KeyParts {
                compiler_version: "0.1.0",
                llvm_version: "22.1",
                ..p.clone()
            })
        });
        assert_eq!(
            k,
            with_parts(|p| cache_key(&KeyParts {
                compiler_version: "0.1.0",
                llvm_version: "22.1",
                ..p.clone()
            }))
        );
        assert_eq!(k.hex().len(), 64);
        assert_eq!(
            k.hex(),
            PINNED_KEY,
            "the key's hashing changed: bump CACHE_FORMAT and update PINNED_KEY"
        );
    }

    const PINNED_KEY: &str = "20a55ddc7f685f17879f10fb7268e25021d51c34bdf3740e12fbf58385a3f245";

    #[test]
    fn key_changes_with_every_part() {
        let base = with_parts(cache_key);
        let other_bindings = vec![
            ("BLOCK".to_string(), ConstValue::Int(512)),
            ("T".to_string(), ConstValue::DType(DType::F32)),
        ];
        let other_dtype = vec![
            ("BLOCK".to_string(), ConstValue::Int(1024)),
            ("T".to_string(), ConstValue::DType(DType::F16)),
        ];
        let float_not_int = vec![
            ("BLOCK".to_string(), ConstValue::Float(1024.0)),
            ("T".to_string(), ConstValue::DType(DType::F32)),
        ];
        let one_binding = vec![("BLOCK".to_string(), ConstValue::Int(1024))];
        let other_spec = [SPEC[0], ArgSpec::default()];
        let variants: Vec<(&str, CacheKey)> = with_parts(|p| {
            vec![
                (
                    "source",
                    cache_key(&KeyParts {
                        source: "kernel k() { }",
                        ..p.clone()
                    }),
                ),
                (
                    "kernel",
                    cache_key(&KeyParts {
                        kernel: "k2",
                        ..p.clone()
                    }),
                ),
                (
                    "binding value",
                    cache_key(&KeyParts {
                        bindings: &other_bindings,
                        ..p.clone()
                    }),
                ),
                (
                    "binding dtype",
                    cache_key(&KeyParts {
                        bindings: &other_dtype,
                        ..p.clone()
                    }),
                ),
                (
                    "binding kind",
                    cache_key(&KeyParts {
                        bindings: &float_not_int,
                        ..p.clone()
                    }),
                ),
                (
                    "binding count",
                    cache_key(&KeyParts {
                        bindings: &one_binding,
                        ..p.clone()
                    }),
                ),
                (
                    "num_warps",
                    cache_key(&KeyParts {
                        num_warps: 8,
                        ..p.clone()
                    }),
                ),
                (
                    "num_stages",
                    cache_key(&KeyParts {
                        num_stages: 3,
                        ..p.clone()
                    }),
                ),
                (
                    "specialization",
                    cache_key(&KeyParts {
                        specialization: &other_spec,
                        ..p.clone()
                    }),
                ),
                (
                    "specialization length",
                    cache_key(&KeyParts {
                        specialization: &SPEC[..1],
                        ..p.clone()
                    }),
                ),
                (
                    "target",
                    cache_key(&KeyParts {
                        target_sm: "sm_80",
                        ..p.clone()
                    }),
                ),
                (
                    "compiler version",
                    cache_key(&KeyParts {
                        compiler_version: "9.9.9",
                        ..p.clone()
                    }),
                ),
                (
                    "llvm version",
                    cache_key(&KeyParts {
                        llvm_version: "23.1",
                        ..p.clone()
                    }),
                ),
            ]
        });
        for (what, k) in &variants {
            assert_ne!(*k, base, "changing the {what} must change the key");
        }
        for (i, (a, ka)) in variants.iter().enumerate() {
            for (b, kb) in &variants[i + 1..] {
                assert_ne!(ka, kb, "{a} and {b} collide");
            }
        }
    }

    #[test]
    fn key_ignores_binding_order() {
        let reversed = vec![
            ("T".to_string(), ConstValue::DType(DType::F32)),
            ("BLOCK".to_string(), ConstValue::Int(1024)),
        ];
        let a = with_parts(cache_key);
        let b = with_parts(|p| {
            cache_key(&KeyParts {
                bindings: &reversed,
                ..p.clone()
            })
        });
        assert_eq!(a, b);
    }

    #[test]
    fn fields_cannot_run_into_each_other() {
        // Without length prefixes, kernel "ab" + target "c" would hash like "a" + "bc".
        let a = with_parts(|p| {
            cache_key(&KeyParts {
                kernel: "ab",
                target_sm: "c",
                ..p.clone()
            })
        });
        let b = with_parts(|p| {
            cache_key(&KeyParts {
                kernel: "a",
                target_sm: "bc",
                ..p.clone()
            })
        });
        assert_ne!(a, b);
    }

    #[test]
    fn split_key_equals_whole_key() {
        let whole = with_parts(cache_key);
        let split = with_parts(|p| specialize(&base_key(&source_digest(p.source), p), p.specialization));
        assert_eq!(whole, split);
    }

    fn entry(cubin: bool) -> CacheEntry {
        CacheEntry {
            kernel: "vector_add".into(),
            threads_per_block: 128,
            // A split kernel's launches multiply the grid: the entry keeps the factor.
            split: 4,
            smem_bytes: 4096,
            specialization: "ddd-".into(),
            target_sm: "sm_90a".into(),
            ptx: ".version 8.0\n.target sm_90a\n// body\n".into(),
            cubin: cubin.then(|| vec![0x7f, b'E', b'L', b'F', 0, 1, 2, 3]),
            // Entries keep the tensor maps their launches pass (round-tripped by the tests).
            tensor_maps: vec![
                "bf16 base=0 dims=arg4,arg3 strides=arg4 box=64,128 swizzle=128"
                    .parse()
                    .unwrap(),
            ],
        }
    }

    fn key(n: u8) -> CacheKey {
        CacheKey([n; 32])
    }

    #[test]
    fn store_then_load_round_trips() {
        let dir = TempDir::new("roundtrip");
        let cache = DiskCache::new(dir.0.join("nested/cache"));
        assert_eq!(cache.load(&key(1)), Lookup::Miss);
        for (n, cubin) in [(1, true), (2, false)] {
            cache.store(&key(n), &entry(cubin)).unwrap();
            assert_eq!(cache.load(&key(n)), Lookup::Hit(entry(cubin)));
        }
        // Storing again replaces the entry whole.
        let mut changed = entry(false);
        changed.smem_bytes = 0;
        cache.store(&key(1), &changed).unwrap();
        assert_eq!(cache.load(&key(1)), Lookup::Hit(changed));
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(cache.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");
        assert_eq!(names.len(), 5, "{names:?}");
    }

    #[test]
    fn atomic_write_replaces_and_cleans_up() {
        let dir = TempDir::new("atomic");
        let p = dir.0.join("f.ptx");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second, longer").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second, longer");
        assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1);
        // A directory that does not exist: an error, and no temporary file anywhere.
        let e = write_atomic(&dir.0.join("missing/f.ptx"), b"x").unwrap_err();
        assert!(e.to_string().contains("missing/f.ptx"), "{e}");
    }

    fn corrupt_with(tag: &str, damage: impl FnOnce(&DiskCache, &CacheKey)) -> Lookup {
        let dir = TempDir::new(tag);
        let cache = DiskCache::new(&dir.0);
        cache.store(&key(7), &entry(true)).unwrap();
        damage(&cache, &key(7));
        let found = cache.load(&key(7));
        // Recovery: storing again makes the entry whole.
        cache.store(&key(7), &entry(true)).unwrap();
        assert_eq!(cache.load(&key(7)), Lookup::Hit(entry(true)));
        found
    }

    /// Rewrites an entry's metadata with `f`; with `resign`, with a matching checksum again (so
    /// that the checks behind the checksum are reached).
    fn edit_meta(c: &DiskCache, k: &CacheKey, f: impl Fn(&str) -> String, resign: bool) {
        let p = c.path(k, "meta");
        let m = std::fs::read_to_string(&p).unwrap();
        let (body, sum) = m.trim_end().rsplit_once('\n').unwrap();
        let body = f(&format!("{body}\n"));
        let sum = if resign {
            format!("meta_sha256={}", hex(&Sha256::digest(body.as_bytes())))
        } else {
            sum.to_string()
        };
        std::fs::write(&p, format!("{body}{sum}\n")).unwrap();
    }

    fn is_corrupt(l: &Lookup, why: &str) -> bool {
        matches!(l, Lookup::Corrupt(r) if r.contains(why))
    }

    #[test]
    fn corrupt_entries_are_detected() {
        let truncated = corrupt_with("trunc", |c, k| {
            let p = c.path(k, "ptx");
            let t = std::fs::read(&p).unwrap();
            std::fs::write(&p, &t[..t.len() / 2]).unwrap();
        });
        assert!(is_corrupt(&truncated, "ptx has"), "{truncated:?}");

        let flipped = corrupt_with("flip", |c, k| {
            let p = c.path(k, "cubin");
            let mut t = std::fs::read(&p).unwrap();
            t[4] ^= 1;
            std::fs::write(&p, t).unwrap();
        });
        assert!(is_corrupt(&flipped, "cubin does not match"), "{flipped:?}");

        let missing = corrupt_with("missing", |c, k| std::fs::remove_file(c.path(k, "ptx")).unwrap());
        assert!(is_corrupt(&missing, "ptx unreadable"), "{missing:?}");

        let empty_meta = corrupt_with("emptymeta", |c, k| std::fs::write(c.path(k, "meta"), "").unwrap());
        assert!(is_corrupt(&empty_meta, "no checksum"), "{empty_meta:?}");

        // A field altered on disk (a metadata payload, not only the PTX and cubin, is checked).
        let altered = corrupt_with("altered", |c, k| {
            edit_meta(
                c,
                k,
                |m| m.replace("threads_per_block=128", "threads_per_block=256"),
                false,
            )
        });
        assert!(
            is_corrupt(&altered, "metadata does not match its checksum"),
            "{altered:?}"
        );

        let garbage = corrupt_with("garbage", |c, k| {
            std::fs::write(c.path(k, "meta"), [0xff, 0xfe, 0]).unwrap()
        });
        assert!(is_corrupt(&garbage, "not UTF-8"), "{garbage:?}");

        let bad_number = corrupt_with("badnum", |c, k| {
            edit_meta(
                c,
                k,
                |m| m.replace("threads_per_block=128", "threads_per_block=12x"),
                true,
            )
        });
        assert!(is_corrupt(&bad_number, "threads_per_block"), "{bad_number:?}");

        // A split the compiler never makes (re-checksummed, so that only the value is wrong).
        let bad_split = corrupt_with("badsplit", |c, k| {
            edit_meta(c, k, |m| m.replace("split=4", "split=9"), true)
        });
        assert!(is_corrupt(&bad_split, "split is not a split"), "{bad_split:?}");
        // In range but not a power of two: not one either.
        let odd_split = corrupt_with("oddsplit", |c, k| {
            edit_meta(c, k, |m| m.replace("split=4", "split=3"), true)
        });
        assert!(is_corrupt(&odd_split, "split is not a split"), "{odd_split:?}");

        let moved = corrupt_with("moved", |c, k| {
            // Another key's entry renamed into this one's place.
            c.store(&key(8), &entry(false)).unwrap();
            std::fs::rename(c.path(&key(8), "meta"), c.path(k, "meta")).unwrap();
        });
        assert!(is_corrupt(&moved, "another key"), "{moved:?}");

        let old_format = corrupt_with("format", |c, k| {
            edit_meta(c, k, |m| m.replace(&format!("format={CACHE_FORMAT}"), "format=0"), true)
        });
        assert!(is_corrupt(&old_format, "another format"), "{old_format:?}");
    }

    #[test]
    fn past_the_size_bound_the_least_recently_used_entries_go() {
        let dir = TempDir::new("lru");
        let cache = DiskCache::new(&dir.0);
        for k in 0..3 {
            cache.store(&key(k), &entry(true)).unwrap();
        }
        // Entry 0 is the oldest by its store; a hit makes it the most recently used.
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        for (k, age) in [(0u8, 10), (1, 20), (2, 30)] {
            let f = std::fs::File::options()
                .write(true)
                .open(cache.path(&key(k), "meta"))
                .unwrap();
            f.set_modified(past + std::time::Duration::from_secs(age)).unwrap();
        }
        assert!(matches!(cache.load(&key(0)), Lookup::Hit(_)));
        let one: u64 = ["meta", "ptx", "cubin"]
            .iter()
            .map(|e| std::fs::metadata(cache.path(&key(1), e)).unwrap().len())
            .sum();
        // Room for two entries: the least recently used (1) goes.
        let bounded = cache.with_max_bytes(2 * one + one / 2);
        assert_eq!(bounded.evict(), 1);
        assert_eq!(bounded.load(&key(1)), Lookup::Miss);
        assert!(matches!(bounded.load(&key(0)), Lookup::Hit(_)));
        assert!(matches!(bounded.load(&key(2)), Lookup::Hit(_)));
    }

    #[test]
    fn stale_temporaries_are_pruned_and_fresh_ones_kept() {
        let dir = TempDir::new("prune");
        let cache = DiskCache::new(&dir.0);
        cache.store(&key(7), &entry(true)).unwrap();
        let k = key(8).hex();
        let stale = dir.0.join(format!(".{k}.ptx.tmp.1.0"));
        let fresh = dir.0.join(format!(".{k}.ptx.tmp.2.0"));
        // Someone else's old dotfile that merely looks temporary stays.
        let theirs = dir.0.join(".notes.txt.tmp.1.0");
        for (p, text) in [(&stale, "half written"), (&fresh, "being written"), (&theirs, "mine")] {
            std::fs::write(p, text).unwrap();
        }
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        for p in [&stale, &theirs] {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        assert_eq!(cache.prune_temporaries(std::time::Duration::from_secs(3600)), 1);
        assert!(!stale.exists() && fresh.exists() && theirs.exists());
        assert_eq!(cache.load(&key(7)), Lookup::Hit(entry(true)));
    }

    /// Eviction removes only the cache's own entries: a directory that also holds a user's PTX
    /// (a `tilec compile -o DIR/` folder) keeps it, however far over the bound it is.
    #[test]
    fn eviction_leaves_files_it_did_not_write() {
        let dir = TempDir::new("evict-theirs");
        let theirs = ["matmul.ptx", "notes.meta", "x.cubin"].map(|n| dir.0.join(n));
        for p in &theirs {
            std::fs::write(p, vec![b'x'; 4096]).unwrap();
        }
        // A key-shaped file without the cache's metadata is not the cache's either.
        let lookalike = dir.0.join(format!("{}.ptx", key(9).hex()));
        std::fs::write(&lookalike, b"user ptx").unwrap();
        let cache = DiskCache::new(&dir.0).with_max_bytes(1);
        cache.store(&key(1), &entry(false)).unwrap();
        cache.evict();
        assert!(theirs.iter().all(|p| p.exists()) && lookalike.exists());
        assert_eq!(cache.load(&key(1)), Lookup::Miss);
    }

    /// Reads are bounded and never follow a link into a device; writes never follow a link
    /// planted where their temporary file or their destination goes.
    #[test]
    fn links_and_endless_files_are_not_followed() {
        let dir = TempDir::new("links");
        let cache = DiskCache::new(&dir.0);
        let k = key(3);
        cache.store(&k, &entry(false)).unwrap();
        let meta = dir.0.join(format!("{}.meta", k.hex()));
        std::fs::remove_file(&meta).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &meta).unwrap();
        assert!(matches!(cache.load(&k), Lookup::Corrupt(_)));
        // A destination that is a link to a file elsewhere: the link is replaced, its target kept.
        let outside = dir.0.join("outside.txt");
        std::fs::write(&outside, b"keep me").unwrap();
        let dest = dir.0.join("dest.bin");
        std::os::unix::fs::symlink(&outside, &dest).unwrap();
        write_atomic(&dest, b"new").unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep me");
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert!(!std::fs::symlink_metadata(&dest).unwrap().file_type().is_symlink());
    }

    #[test]
    fn cache_bounds_are_byte_counts() {
        assert_eq!(parse_bytes("1073741824"), Some(1 << 30));
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("2g"), Some(2 << 30));
        for bad in [
            "",
            "-1",
            "garbage",
            "1.5G",
            "G",
            "99999999999999999999",
            "18446744073709551615G",
        ] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn another_ptxas_gives_another_key() {
        let k = key(7);
        let (a, b) = (with_ptxas(&k, "Build cuda_13.0"), with_ptxas(&k, "Build cuda_13.1"));
        assert!(a != b && a != k && b != k);
        assert_eq!(a, with_ptxas(&k, "Build cuda_13.0"));
    }

    #[test]
    fn location_precedence() {
        let s = |v: &str| Some(OsString::from(v));
        let p = |v: &str| Some(PathBuf::from(v));
        assert_eq!(cache_dir_from(s("/t"), s("/x"), s("/h")), p("/t"));
        assert_eq!(cache_dir_from(None, s("/x"), s("/h")), p("/x/tile"));
        assert_eq!(cache_dir_from(None, None, s("/h")), p("/h/.cache/tile"));
        assert_eq!(cache_dir_from(None, None, None), None);
        // Empty means unset; a relative XDG_CACHE_HOME is ignored, as the XDG spec says.
        assert_eq!(cache_dir_from(s(""), s(""), s("/h")), p("/h/.cache/tile"));
        assert_eq!(cache_dir_from(None, s("rel/cache"), s("/h")), p("/h/.cache/tile"));
        // TILE_CACHE_DIR is taken as given, relative or not.
        assert_eq!(cache_dir_from(s("rel"), s("/x"), None), p("rel"));
    }
}
