//! `tilec run`: one case of a kernel's run spec on the GPU (or the interpreter), with any buffer
//! argument taken from a NumPy `.npy` or `.npz` file instead of its generator, and every output
//! written to `DIR/NAME.npy` or one `.npz` — so that results can be checked with NumPy or
//! PyTorch.

use std::path::PathBuf;

use tile_lang::interp::{self, Arg, Buffer};
use tile_lang::ir::{DType, Scalar};
use tile_lang::spec::{self, RefArg};

use crate::npy::{self, Array};
use crate::{GpuBackend, case_kernel, check_source, run_on_gpu, seed};

/// Where buffer arguments come from instead of their generators.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// Buffer `name` from a `.npy` file.
    Npy { name: String, path: PathBuf },
    /// Every array of a `.npz` archive, each into the buffer of its name.
    Npz(PathBuf),
}

/// What `tilec run` runs and where its outputs go.
pub struct RunOptions {
    pub kernel: Option<String>,
    /// The case of the run spec, as `tilec verify` lists them (0-based).
    pub case: usize,
    pub inputs: Vec<Input>,
    /// A directory for one `NAME.npy` per output, or a `.npz` file for all of them.
    pub save: Option<PathBuf>,
    /// The interpreter's budget, with `--interpret`.
    pub limits: interp::Limits,
}

/// Runs the case; returns the outputs' names, dtypes, shapes and values.
pub fn run_file(
    name: &str,
    text: &str,
    opts: &RunOptions,
    gpu: Option<&GpuBackend>,
) -> Result<Vec<(String, DType, Vec<usize>, Vec<Scalar>)>, String> {
    let c = check_source(text, &vec![]);
    if !c.diags.is_empty() {
        return Err(tile_lang::diag::render(name, text, &c.diags));
    }
    let ast = c.ast.expect("no diagnostics means the file parsed");
    let mut kernels: Vec<&str> = Vec::new();
    for s in &c.specs {
        if !kernels.contains(&s.kernel.as_str()) {
            kernels.push(s.kernel.as_str());
        }
    }
    let kernel_name = match &opts.kernel {
        Some(k) if kernels.contains(&k.as_str()) => k.as_str(),
        Some(k) => {
            return Err(format!(
                "no `run` spec for kernel `{k}`; the file has run specs for: {}",
                kernels.join(", ")
            ));
        }
        None => kernels.first().ok_or("the file has no `run` spec")?,
    };
    // The kernel's cases across all its run specs, numbered as `tilec verify` prints them (and
    // `verify --save` names its files); each keeps its index within its spec for its seed.
    let mut all = Vec::new();
    for s in c.specs.iter().filter(|s| s.kernel == kernel_name) {
        let cases = spec::cases(s).map_err(|d| tile_lang::diag::render(name, text, &[d]))?;
        all.extend(cases.into_iter().enumerate().map(|(i, case)| (s, i, case)));
    }
    let total = all.len();
    let (s, index, case) = all.into_iter().nth(opts.case).ok_or_else(|| {
        format!(
            "kernel `{kernel_name}`'s run specs have {total} case(s) (0 to {}); --case {} does not exist",
            total.saturating_sub(1),
            opts.case
        )
    })?;
    let case = &case;
    let src = tile_driver::Source {
        name: name.into(),
        text: text.into(),
        ast,
        parse_time: Default::default(),
    };
    let compiled = case_kernel(
        &src,
        s,
        case,
        &crate::VerifyOptions {
            gpu,
            ..Default::default()
        },
    )?;
    let kernel = compiled.kernel();
    let mut p = spec::prepare(s, case, kernel, seed(&s.kernel, index))
        .map_err(|d| tile_lang::diag::render(name, text, &[d]))?;
    spec::check_launch_requirements(&src.ast, kernel, &p.args)
        .map_err(|d| tile_lang::diag::render(name, text, &[d]))?;
    // Each input as (buffer name, where it comes from).
    enum From {
        Npy(PathBuf),
        /// Entry `.1` of `archives[.0]`.
        Npz(usize, String),
    }
    let mut archives = Vec::new();
    let mut given = Vec::new();
    for input in &opts.inputs {
        match input {
            Input::Npy { name, path } => given.push((name.clone(), From::Npy(path.clone()))),
            Input::Npz(path) => {
                let archive = npy::Npz::open(path)?;
                // What `verify --save` writes beside an output: `OUT.initial` (its contents before
                // the kernel, loaded instead of `OUT`, the result), `OUT.interpreter` and
                // `OUT.expected` (results, skipped): an archive verify saved replays its case.
                let names = archive.names();
                for n in names.iter().filter(|n| !n.contains('.')) {
                    let initial = format!("{n}.initial");
                    let entry = if names.contains(&initial) { initial } else { n.clone() };
                    given.push((n.clone(), From::Npz(archives.len(), entry)));
                }
                archives.push((path, archive));
            }
        }
    }
    for (name, from) in given {
        let idx = kernel
            .params
            .iter()
            .zip(&p.args)
            .find_map(|(param, a)| match a {
                Arg::Buffer(i) if param.name == name => Some(*i),
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
        let (path, values) = match from {
            From::Npy(path) => (path.display().to_string(), npy::read_npy(&path, b.dtype, b.data.len())?),
            From::Npz(i, entry) => {
                let (path, archive) = &mut archives[i];
                (
                    format!("{} (array `{entry}`)", path.display()),
                    archive.read(&entry, b.dtype, b.data.len())?,
                )
            }
        };
        if values.len() != b.data.len() {
            let shape = match p.reference_input.args.get(&name) {
                Some(RefArg::Buffer { shape, .. }) => format!("{shape:?}"),
                _ => String::new(),
            };
            return Err(format!(
                "--input {name}: {path} holds {} elements; the case's `{name}` has {} {shape}",
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
        out.push((name.clone(), b.dtype, shape, b.data.clone()));
    }
    match &opts.save {
        Some(path) if is_npz(path) => {
            let arrays: Vec<Array> = out
                .iter()
                .map(|(name, dtype, shape, data)| Array {
                    name,
                    dtype: *dtype,
                    shape,
                    data,
                })
                .collect();
            npy::write_npz(path, &arrays)?;
        }
        Some(dir) => {
            for (name, dtype, shape, data) in &out {
                let a = Array {
                    name,
                    dtype: *dtype,
                    shape,
                    data,
                };
                npy::write_npy(&dir.join(format!("{name}.npy")), &a)?;
            }
        }
        None => {}
    }
    Ok(out)
}

/// Whether `--save PATH` names one `.npz` archive rather than a directory.
pub fn is_npz(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npz"))
}
