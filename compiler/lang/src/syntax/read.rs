//! Reading a `.tile` file from disk, bounded: every reader (tilec, the JIT's file sources, the
//! `kernels!` macro) goes through [`read_source`], so `/dev/zero` or a huge file is refused after
//! [`MAX_SOURCE_BYTES`] + 1 bytes and a file that is not UTF-8 is named with the position of its
//! first bad byte.

use std::io::Read as _;
use std::path::Path;

use super::MAX_SOURCE_BYTES;

/// Why a source file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: larger than {MAX_SOURCE_BYTES} bytes, the limit for a .tile file")]
    TooLarge { path: String },
    #[error("{path}:{line}:{col}: not UTF-8 text: byte {byte:#04x} at offset {offset}; .tile files are UTF-8")]
    NotUtf8 {
        path: String,
        line: usize,
        col: usize,
        byte: u8,
        offset: usize,
    },
}

/// The text of the `.tile` file at `path`, read at most [`MAX_SOURCE_BYTES`] + 1 bytes far.
pub fn read_source(path: &Path) -> Result<String, ReadError> {
    let shown = || path.display().to_string();
    let io = |e: std::io::Error| ReadError::Io {
        path: shown(),
        message: e.to_string(),
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_SOURCE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() > MAX_SOURCE_BYTES {
        return Err(ReadError::TooLarge { path: shown() });
    }
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = &bytes[..offset];
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        // Columns count characters; the prefix of the line is valid UTF-8.
        ReadError::NotUtf8 {
            path: shown(),
            line: before.iter().filter(|&&b| b == b'\n').count() + 1,
            col: String::from_utf8_lossy(&before[line_start..]).chars().count() + 1,
            byte: bytes[offset],
            offset,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_binary_files_are_refused() {
        assert!(matches!(
            read_source(Path::new("/dev/zero")),
            Err(ReadError::TooLarge { .. })
        ));
        let dir = std::env::temp_dir().join(format!("tile-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.tile");
        std::fs::write(&f, b"kernel k() {}\n  \xff").unwrap();
        match read_source(&f) {
            Err(ReadError::NotUtf8 {
                line: 2,
                col: 3,
                byte: 0xff,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(matches!(
            read_source(Path::new("/no/such/file.tile")),
            Err(ReadError::Io { .. })
        ));
    }
}
