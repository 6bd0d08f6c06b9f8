//! NumPy files for `tilec run` and `tilec verify --save`: `.npy` (one array) and `.npz` (a zip
//! of `.npy` files, as `np.savez` and `np.savez_compressed` write them). The array format is the
//! npyz crate's; the archive is the zip crate's.

use std::io::{Read, Write};
use std::path::Path;

use tile_lang::ir::{DType, Scalar, scalar};

/// One array to write: its name (the `.npz` entry), dtype, shape and elements.
pub struct Array<'a> {
    pub name: &'a str,
    pub dtype: DType,
    pub shape: &'a [usize],
    pub data: &'a [Scalar],
}

/// The most bytes an array of `len` elements may take in a file: 8 per element (the widest
/// dtype read) and room for the header. Reading stops there, so a file or a compressed archive
/// entry far larger than the buffer it fills is refused without being read into memory.
fn byte_limit(len: usize) -> u64 {
    (len as u64).saturating_mul(8).saturating_add(1 << 16)
}

/// Reads at most [`byte_limit`]`(len)` bytes of `r`, or says that `what` is too large.
fn read_bounded(what: &str, r: impl Read, len: usize) -> Result<Vec<u8>, String> {
    let limit = byte_limit(len);
    let mut bytes = Vec::new();
    r.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{what}: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{what}: more than {limit} bytes, far more than the {len} elements of the buffer it fills"
        ));
    }
    Ok(bytes)
}

/// The values of the `.npy` file at `path`, as `dtype` elements ([`read_array`]), for a buffer
/// of `len` elements.
pub fn read_npy(path: &Path, dtype: DType, len: usize) -> Result<Vec<Scalar>, String> {
    let what = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| format!("{what}: {e}"))?;
    let bytes = read_bounded(&what, file, len)?;
    read_array(&what, &bytes[..], dtype)
}

/// The names of the arrays in the `.npz` at `path`, and a reader of each by name.
pub struct Npz {
    path: String,
    zip: zip::ZipArchive<std::io::BufReader<std::fs::File>>,
}

impl Npz {
    pub fn open(path: &Path) -> Result<Npz, String> {
        let what = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let file = std::fs::File::open(path).map_err(|e| what(&e))?;
        let zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| what(&e))?;
        Ok(Npz {
            path: path.display().to_string(),
            zip,
        })
    }

    /// The arrays' names (`x` for an entry `x.npy`), in the archive's order.
    pub fn names(&self) -> Vec<String> {
        self.zip
            .file_names()
            .filter_map(|f| f.strip_suffix(".npy"))
            .map(str::to_string)
            .collect()
    }

    /// Array `name` as `dtype` elements ([`read_array`]), for a buffer of `len` elements.
    pub fn read(&mut self, name: &str, dtype: DType, len: usize) -> Result<Vec<Scalar>, String> {
        let what = format!("{} (array `{name}`)", self.path);
        let entry = self
            .zip
            .by_name(&format!("{name}.npy"))
            .map_err(|e| format!("{what}: {e}"))?;
        // Entries may be compressed (np.savez_compressed): read one whole, bounded, then parse it.
        let bytes = read_bounded(&what, entry, len)?;
        read_array(&what, &bytes[..], dtype)
    }
}

/// Writes `array` as the `.npy` file `path`.
pub fn write_npy(path: &Path, array: &Array) -> Result<(), String> {
    let what = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut bytes = Vec::new();
    write_array(&mut bytes, array).map_err(what)?;
    tile_jit::cache::write_atomic(path, &bytes).map_err(|e| e.to_string())
}

/// Writes `arrays` as the `.npz` archive `path` (entries stored uncompressed, as `np.savez`
/// does).
pub fn write_npz(path: &Path, arrays: &[Array]) -> Result<(), String> {
    let what = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(arrays.iter().any(|a| a.data.len() * 8 >= u32::MAX as usize));
    for a in arrays {
        zip.start_file(format!("{}.npy", a.name), options)
            .map_err(|e| what(&e))?;
        write_array(&mut zip, a).map_err(|e| what(&e))?;
    }
    // Written whole through a new file renamed into place: a link planted at `path` (a shared
    // /tmp) is replaced, never followed.
    let bytes = zip.finish().map_err(|e| what(&e))?.into_inner();
    tile_jit::cache::write_atomic(path, &bytes).map_err(|e| e.to_string())
}

/// An `.npy` array's values as `dtype` elements: the file's own dtype when it is that one, else
/// integers into integer buffers and floats into float buffers, each converted once (nearest
/// even for floats; integers must fit). `what` names the array in errors.
pub fn read_array(what: &str, bytes: &[u8], dtype: DType) -> Result<Vec<Scalar>, String> {
    let err = |e: std::io::Error| format!("{what}: {e}");
    // A structured dtype (`[('a', '<f4')]`) is refused before the header is parsed: nested
    // brackets make the parser's time grow without bound (266 bytes of `[[[..` took minutes).
    if header_text(bytes).is_some_and(|h| h.contains(&b'[')) {
        return Err(format!("{what}: a structured array; tile reads plain numbers"));
    }
    let npy = npyz::NpyFile::new(bytes).map_err(err)?;
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(format!("{what}: a structured array; tile reads plain numbers"));
    };
    if npy.order() == npyz::Order::Fortran {
        return Err(format!(
            "{what}: stored in Fortran (column-major) order; save `np.ascontiguousarray(a)` so the elements are in row-major order"
        ));
    }
    // The header's shape, multiplied without wrapping: (2^62 + 250, 4) is not 1000 elements.
    let elements = npy
        .shape()
        .iter()
        .try_fold(1u64, |n, d| n.checked_mul(*d))
        .filter(|n| *n <= (bytes.len() as u64))
        .ok_or_else(|| {
            format!(
                "{what}: the header's shape {:?} holds more elements than the file's {} bytes",
                npy.shape(),
                bytes.len()
            )
        })?;
    if elements != npy.len() {
        return Err(format!(
            "{what}: the header's shape {:?} does not match its data",
            npy.shape()
        ));
    }
    let (kind, size) = (ts.type_char(), ts.size_field());
    let floats = |v: Vec<f64>| -> Vec<Scalar> {
        v.into_iter()
            .map(|x| scalar::cast(DType::F64, dtype, Scalar::F(x), false))
            .collect()
    };
    let ints = |v: Vec<i64>| -> Result<Vec<Scalar>, String> {
        let (lo, hi) = scalar::int_range(dtype);
        v.into_iter()
            .map(|x| {
                if (x as i128) < lo || (x as i128) > hi {
                    Err(format!("{what}: {x} does not fit in {dtype}"))
                } else {
                    Ok(Scalar::I(x))
                }
            })
            .collect()
    };
    use npyz::TypeChar::{Bool, Float, Int, Uint};
    let int = |d: DType| d.is_int() && !d.is_bool();
    match (kind, size, dtype) {
        (Float, 2, d) if d.is_float() => Ok(floats(widened::<half::f16, f64>(npy).map_err(err)?)),
        (Float, 4, d) if d.is_float() => Ok(floats(widened::<f32, f64>(npy).map_err(err)?)),
        (Float, 8, d) if d.is_float() => Ok(floats(widened::<f64, f64>(npy).map_err(err)?)),
        (Int, 1, d) if int(d) => ints(widened::<i8, i64>(npy).map_err(err)?),
        (Int, 2, d) if int(d) => ints(widened::<i16, i64>(npy).map_err(err)?),
        (Int, 4, d) if int(d) => ints(widened::<i32, i64>(npy).map_err(err)?),
        (Int, 8, d) if int(d) => ints(widened::<i64, i64>(npy).map_err(err)?),
        (Uint, 1, d) if int(d) => ints(widened::<u8, i64>(npy).map_err(err)?),
        (Uint, 2, d) if int(d) => ints(widened::<u16, i64>(npy).map_err(err)?),
        (Uint, 4, d) if int(d) => ints(widened::<u32, i64>(npy).map_err(err)?),
        // u64 holds values past i64: a u64 buffer keeps the bits, any other must fit.
        (Uint, 8, DType::U64) => Ok(npy
            .into_vec::<u64>()
            .map_err(err)?
            .into_iter()
            .map(|v| Scalar::I(v as i64))
            .collect()),
        (Uint, 8, d) if int(d) => {
            let v = npy.into_vec::<u64>().map_err(err)?;
            match v.iter().find(|x| **x > i64::MAX as u64) {
                Some(x) => Err(format!("{what}: {x} does not fit in {dtype}")),
                None => ints(v.into_iter().map(|x| x as i64).collect()),
            }
        }
        (Bool, 1, DType::Bool) => Ok(npy
            .into_vec::<bool>()
            .map_err(err)?
            .into_iter()
            .map(|b| Scalar::I(b as i64))
            .collect()),
        _ => Err(format!(
            "{what}: holds {ts}, which a {dtype} buffer does not take (floats go to float buffers, integers to integer buffers, bools to bool)"
        )),
    }
}

/// The header dictionary of an `.npy` file (after the magic, the version and the length), when
/// the bytes hold one.
fn header_text(bytes: &[u8]) -> Option<&[u8]> {
    let rest = bytes.strip_prefix(b"\x93NUMPY")?;
    let (&major, rest) = rest.split_first()?;
    let (_, rest) = rest.split_first()?;
    let (len, rest) = match major {
        1 => (
            u16::from_le_bytes(rest.get(..2)?.try_into().ok()?) as usize,
            rest.get(2..)?,
        ),
        _ => (
            u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize,
            rest.get(4..)?,
        ),
    };
    rest.get(..len.min(rest.len()))
}

/// The elements of an `.npy` of `T`s, each widened losslessly to `U`.
fn widened<T: npyz::Deserialize, U: From<T>>(npy: npyz::NpyFile<&[u8]>) -> std::io::Result<Vec<U>> {
    Ok(npy.into_vec::<T>()?.into_iter().map(U::from).collect())
}

/// Writes `a` as a C-order `.npy` array into `w`. f16 and bf16 go out as f32 (exact: every value
/// of either is an f32 value), since NumPy has no bf16.
fn write_array<W: Write>(w: &mut W, a: &Array) -> std::io::Result<()> {
    use npyz::WriterBuilder;
    let shape: Vec<u64> = a.shape.iter().map(|d| *d as u64).collect();
    let dtype = a.dtype;
    macro_rules! write_as {
        ($t:ty, $conv:expr) => {{
            let mut out = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&shape)
                .writer(&mut *w)
                .begin_nd()?;
            for v in a.data {
                let x: $t = $conv(*v);
                out.push(&x)?;
            }
            out.finish()?;
        }};
    }
    let f = |v: Scalar| v.as_f64(dtype);
    let i = |v: Scalar| match v {
        Scalar::I(x) => x,
        other => other.as_f64(dtype) as i64,
    };
    match dtype {
        DType::F64 => write_as!(f64, f),
        d if d.is_float() => write_as!(f32, |v| f(v) as f32),
        DType::Bool => write_as!(bool, |v| i(v) != 0),
        DType::I8 => write_as!(i8, |v| i(v) as i8),
        DType::I16 => write_as!(i16, |v| i(v) as i16),
        DType::I32 => write_as!(i32, |v| i(v) as i32),
        DType::I64 => write_as!(i64, i),
        DType::U8 => write_as!(u8, |v| i(v) as u8),
        DType::U16 => write_as!(u16, |v| i(v) as u16),
        DType::U32 => write_as!(u32, |v| i(v) as u32),
        _ => write_as!(u64, |v| i(v) as u64),
    }
    Ok(())
}
