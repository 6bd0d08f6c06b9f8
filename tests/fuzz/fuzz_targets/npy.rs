//! Any bytes as a NumPy `.npy` file into buffers of every kind, and as an `.npz` archive: the
//! header's shape and dtype checked against the data, reads bounded by the buffer they fill.
//! Nothing may panic, wrap or allocate past the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tile_lang::ir::DType;

const DTYPES: [DType; 8] = [
    DType::F32,
    DType::BF16,
    DType::F16,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::U64,
    DType::Bool,
];

fuzz_target!(|data: &[u8]| {
    for d in DTYPES {
        let _ = tilec::npy::read_array("fuzz.npy", data, d);
    }
    // The same bytes as an archive, through a file as `tilec run` opens one.
    let path = std::env::temp_dir().join(format!("tile-fuzz-{}.npz", std::process::id()));
    if std::fs::write(&path, data).is_ok()
        && let Ok(mut npz) = tilec::npy::Npz::open(&path)
    {
        for name in npz.names().into_iter().take(4) {
            for d in DTYPES {
                let _ = npz.read(&name, d, 1 << 16);
            }
        }
    }
    let _ = std::fs::remove_file(&path);
});
