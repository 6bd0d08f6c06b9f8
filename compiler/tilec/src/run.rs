//! `tilec run`: one case of a kernel's run spec on the GPU (or the interpreter), with any buffer
//! argument taken from a NumPy `.npy` file instead of its generator, and every output written
//! to `DIR/NAME.npy` — so that results can be checked with NumPy or PyTorch.

use std::io::Write;
use std::path::{Path, PathBuf};

use tile_lang::interp::{self, Arg, Buffer};
use tile_lang::ir::{DType, Scalar, scalar};
use tile_lang::spec::{self, RefArg};

use crate::{GpuBackend, case_kernel, check_source, run_on_gpu, seed};

/// What `tilec run` runs and where its outputs go.
pub struct RunOptions {
    pub kernel: Option<String>,
    /// The case of the run spec, as `tilec verify` lists them (0-based).
    pub case: usize,
    /// `(buffer name, .npy file)`.
    pub inputs: Vec<(String, PathBuf)>,
    pub save: Option<PathBuf>,
    /// The interpreter's budget, with `--interpret`.
    pub limits: interp::Limits,
}

/// Runs the case; returns the outputs' names, dtypes, shapes and values.
pub fn run_file(
    text: &str,
    opts: &RunOptions,
    gpu: Option<&GpuBackend>,
) -> Result<Vec<(String, DType, Vec<usize>, Vec<Scalar>)>, String> {
    let c = check_source(text, &vec![]);
    if !c.diags.is_empty() {
        return Err(tile_lang::diag::render("run", text, &c.diags));
    }
    let ast = c.ast.expect("no diagnostics means the file parsed");
    let kernels: Vec<&str> = c.specs.iter().map(|s| s.kernel.as_str()).collect();
    let s = match &opts.kernel {
        Some(k) => c.specs.iter().find(|s| s.kernel == *k).ok_or_else(|| {
            format!(
                "no `run` spec for kernel `{k}`; the file has run specs for: {}",
                kernels.join(", ")
            )
        })?,
        None => c.specs.first().ok_or("the file has no `run` spec")?,
    };
    let cases = spec::cases(s).map_err(|d| tile_lang::diag::render("run", text, &[d]))?;
    let case = cases.get(opts.case).ok_or_else(|| {
        format!(
            "kernel `{}`'s run spec has {} case(s) (0 to {}); --case {} does not exist",
            s.kernel,
            cases.len(),
            cases.len().saturating_sub(1),
            opts.case
        )
    })?;
    let src = tile_driver::Source {
        name: "run".into(),
        text: text.into(),
        ast,
        parse_time: Default::default(),
    };
    let compiled = case_kernel(&src, s, case, gpu, None)?;
    let kernel = compiled.kernel();
    let mut p = spec::prepare(s, case, kernel, seed(&s.kernel, opts.case))
        .map_err(|d| tile_lang::diag::render("run", text, &[d]))?;
    for (name, path) in &opts.inputs {
        let idx = kernel
            .params
            .iter()
            .zip(&p.args)
            .find_map(|(param, a)| match a {
                Arg::Buffer(i) if param.name == *name => Some(*i),
                _ => None,
            })
            .ok_or_else(|| {
                let buffers: Vec<&str> = kernel
                    .params
                    .iter()
                    .filter(|p| p.elem.is_ptr())
                    .map(|p| p.name.as_str())
                    .collect();
                format!(
                    "--input {name}: `{}` has no buffer argument `{name}`; its buffers: {}",
                    s.kernel,
                    buffers.join(", ")
                )
            })?;
        let b = &mut p.buffers[idx];
        let values = read_npy(path, b.dtype)?;
        if values.len() != b.data.len() {
            let shape = match p.reference_input.args.get(name) {
                Some(RefArg::Buffer { shape, .. }) => format!("{shape:?}"),
                _ => String::new(),
            };
            return Err(format!(
                "--input {name}: {} holds {} elements; the case's `{name}` has {} {shape}",
                path.display(),
                values.len(),
                b.data.len()
            ));
        }
        b.data = values;
    }
    let buffers: Vec<Buffer> = match gpu {
        Some(g) => {
            let initial = p.buffers.clone();
            run_on_gpu(g, kernel, &compiled.config, &p, initial)?
        }
        None => {
            interp::run_limited(kernel, p.grid, &p.args, &mut p.buffers, &opts.limits)
                .map_err(|e| format!("interpreter: {e}"))?;
            p.buffers.clone()
        }
    };
    let mut out = Vec::new();
    for (name, idx) in &p.outputs {
        let shape = match p.reference_input.args.get(name) {
            Some(RefArg::Buffer { shape, .. }) => shape.clone(),
            _ => vec![buffers[*idx].data.len()],
        };
        let b = &buffers[*idx];
        if let Some(dir) = &opts.save {
            write_npy(&dir.join(format!("{name}.npy")), b.dtype, &shape, &b.data)?;
        }
        out.push((name.clone(), b.dtype, shape, b.data.clone()));
    }
    Ok(out)
}

/// A `.npy` file's values as `dtype` elements: the file's own dtype when it is that one, else
/// integers into integer buffers and floats into float buffers, each converted once (nearest
/// even for floats; integers must fit).
fn read_npy(path: &Path, dtype: DType) -> Result<Vec<Scalar>, String> {
    let what = |e: std::io::Error| format!("{}: {e}", path.display());
    let bytes = std::fs::read(path).map_err(what)?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(what)?;
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(format!(
            "{}: a structured array; tile reads plain numbers",
            path.display()
        ));
    };
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
                    Err(format!("{}: {x} does not fit in {dtype}", path.display()))
                } else {
                    Ok(Scalar::I(x))
                }
            })
            .collect()
    };
    use npyz::TypeChar::{Bool, Float, Int, Uint};
    let int = |d: DType| d.is_int() && !d.is_bool();
    match (kind, size, dtype) {
        (Float, 4, d) if d.is_float() => Ok(floats(widened::<f32, f64>(npy).map_err(what)?)),
        (Float, 8, d) if d.is_float() => Ok(floats(widened::<f64, f64>(npy).map_err(what)?)),
        (Int, 1, d) if int(d) => ints(widened::<i8, i64>(npy).map_err(what)?),
        (Int, 2, d) if int(d) => ints(widened::<i16, i64>(npy).map_err(what)?),
        (Int, 4, d) if int(d) => ints(widened::<i32, i64>(npy).map_err(what)?),
        (Int, 8, d) if int(d) => ints(widened::<i64, i64>(npy).map_err(what)?),
        (Uint, 1, d) if int(d) => ints(widened::<u8, i64>(npy).map_err(what)?),
        (Uint, 2, d) if int(d) => ints(widened::<u16, i64>(npy).map_err(what)?),
        (Uint, 4, d) if int(d) => ints(widened::<u32, i64>(npy).map_err(what)?),
        (Bool, 1, DType::Bool) => Ok(npy
            .into_vec::<bool>()
            .map_err(what)?
            .into_iter()
            .map(|b| Scalar::I(b as i64))
            .collect()),
        _ => Err(format!(
            "{}: holds {ts}, which a {dtype} buffer does not take (floats go to float buffers, integers to integer buffers, bools to bool)",
            path.display()
        )),
    }
}

/// The elements of a `.npy` of `T`s, each widened losslessly to `U`.
fn widened<T: npyz::Deserialize, U: From<T>>(npy: npyz::NpyFile<&[u8]>) -> std::io::Result<Vec<U>> {
    Ok(npy.into_vec::<T>()?.into_iter().map(U::from).collect())
}

/// Writes `data` (elements of `dtype`) as a C-order `.npy` of `shape`. f16 and bf16 go out as
/// f32 (exact: every value of either is an f32 value), since NumPy has no bf16.
fn write_npy(path: &Path, dtype: DType, shape: &[usize], data: &[Scalar]) -> Result<(), String> {
    use npyz::WriterBuilder;
    let what = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(what)?;
    let mut file = std::io::BufWriter::new(file);
    let shape: Vec<u64> = shape.iter().map(|d| *d as u64).collect();
    macro_rules! write_as {
        ($t:ty, $conv:expr) => {{
            let mut w = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&shape)
                .writer(&mut file)
                .begin_nd()
                .map_err(what)?;
            for v in data {
                let x: $t = $conv(*v);
                w.push(&x).map_err(what)?;
            }
            w.finish().map_err(what)?;
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
    file.flush().map_err(|e| format!("{}: {e}", path.display()))
}
