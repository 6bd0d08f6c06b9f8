//! The JIT that Rust programs use to run `.tile` kernels, typed device tensors and the
//! autotuner. It compiles through the one pipeline (`tile-driver`) and runs on the GPU runtime
//! (`tile-runtime`, the only crate that uses cudarc; the CUDA driver is loaded at run time, so
//! everything builds and its non-GPU paths run on machines without CUDA, where [`Gpu::new`]
//! returns [`RuntimeError::NoDriver`] instead of panicking).
//!
//! # The JIT
//!
//! ```no_run
//! use tile_jit::{Arg, ConstValue, DeviceTensor, Gpu, Jit, JitOptions, Source};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let gpu = Gpu::new(0)?;
//!     // The source is compiled into the program; `Source::File(path)` reads one at run time.
//!     let jit = Jit::new(
//!         &gpu,
//!         Source::Static(include_str!("../../../dsl-examples/vector_add.tile")),
//!         JitOptions::default(),
//!     )?;
//!     // A handle per kernel and binding of its compile-time parameters: checked now (its
//!     // diagnostics are the error), compiled on first launch. Keep it: launches through it
//!     // only look up a few write-once slots.
//!     const BLOCK: u32 = 1024;
//!     let add = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(BLOCK as i64))])?;
//!
//!     let n = 1_000_000;
//!     let x = DeviceTensor::upload(&gpu, &vec![1.0f32; n])?;
//!     let y = DeviceTensor::upload(&gpu, &vec![2.0f32; n])?;
//!     let mut out = DeviceTensor::<f32>::zeros(&gpu, n)?;
//!     // `vector_add(x: *f32, y: *f32, out: *mut f32, n: i32)`: arguments are checked against
//!     // the signature (count, dtypes, `*mut` needs `buf_mut`) before anything reaches the GPU.
//!     add.launch(
//!         (n as u32).div_ceil(BLOCK),
//!         &[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(n as i32)],
//!     )?;
//!     assert!(out.download()?.iter().all(|&v| v == 3.0));
//!
//!     // A mistake is a typed error naming the parameter, not a crash on the GPU:
//!     let err = add.launch(1, &[Arg::buf(&x), Arg::buf(&y), Arg::buf(&out), Arg::i32(1)]);
//!     println!("{}", err.unwrap_err()); // ... `out: *mut f32` is written by the kernel; ...
//!     Ok(())
//! }
//! ```
//!
//! What a launch does:
//!
//! 1. [`check_args`]: the arguments against the kernel's parameters, a pure function.
//! 2. Specialisation, as Triton does: each integer argument equal to 1 or divisible by 16, and
//!    each buffer aligned to 16 bytes, is a fact codegen may use ([`tile_driver::ArgSpec`]);
//!    the facts of a launch select one compiled variant of the kernel.
//! 3. The variant, from the first cache that has it: the handle's own slots (packed tags, no
//!    hashing), the [`Jit`]'s map (shared by handles), the disk cache (across processes; see
//!    [`cache`]), or a fresh compile (source → PTX → cubin when ptxas is found).
//! 4. The launch: the caller's grid, the compiled block size and dynamic shared memory.
//!    [`JitKernel::launch`] waits for the kernel; [`JitKernel::launch_async`] does not.
//!
//! The disk cache lives in `TILE_CACHE_DIR`, else `$XDG_CACHE_HOME/tile`, else
//! `$HOME/.cache/tile` ([`JitOptions::cache_dir`] overrides it; `None` turns it off).
//!
//! # Streams, graphs and memory
//!
//! [`JitKernel::launch_on`] launches on any [`Stream`] (`gpu.new_stream()`); [`Event`]s order and
//! time work between streams. [`GraphCapture`] records launches into a CUDA Graph that
//! [`JitGraph::launch`] replays with one driver call, and whose nodes [`JitGraph::update`] points
//! at new arguments (checked like a launch). [`DeviceTensor`]s come from the device's
//! stream-ordered memory pool and are freed after the work on every stream that used them;
//! [`GrowableTensor`] grows in place on virtual memory; [`PinnedTensor`] is page-locked host
//! memory for asynchronous copies. `docs/runtime.md` has the measurements and
//! `examples/kv_cache.rs`, `examples/offload.rs` show them at work.
//!
//! # Below the JIT
//!
//! [`Gpu`] loads PTX or cubins ([`Gpu::load`]) and launches them with untyped [`KernelArg`]s
//! ([`Gpu::launch`], [`Gpu::launch_async`]): what `tilec verify` uses.

mod args;
pub mod cache;
pub mod collective;
mod compile;
pub mod graph;
mod jit;
mod tensor;
pub mod tma;
pub mod tune;

pub use args::{
    Arg, ArgError, MAX_PARAMS, ParamSig, arg_spec, check_args, plan_args, scalar_arg, signature, spec_tags,
};
pub use compile::{JitError, Origin, SnapshotOptions, Source, jit_ptx, jit_snapshot};
pub use graph::{GraphCapture, JitGraph, NodeId};
pub use jit::{
    CompileEvent, CompileHook, Grid, Jit, JitKernel, JitOptions, JitStats, KernelOptions, LaunchPlan, LoadedKernel,
    MAX_PREPARED_VALUES,
};
pub use tensor::{DeviceMemory, DeviceTensor, Element, GrowableTensor, PinnedTensor};
pub use tile_runtime::{
    DeviceBuffer, Event, Function, Gpu, Image, KernelArg, MemSyncDomain, Memory, RuntimeError, Stream, TensorMap,
    TimingOptions, Timings, split_grid,
};

/// Re-exported so that callers name compile-time values, dtypes and half floats with the same
/// versions the JIT uses.
pub use float8;
pub use half;
pub use tile_driver::{ArgSpec, Target, target};
pub use tile_lang::ir::{ConstValue, DType, Elem};
/// Typed launchers for a `.tile` file's kernels, generated at build time: see [`tile_macros`]
/// and docs/language.md §13.3.
pub use tile_macros::kernels;

#[cfg(test)]
mod tests {
    #[test]
    fn llvm_version_matches_the_workspace_inkwell_feature() {
        // `cache::LLVM_VERSION` is hard-coded (see there); the workspace picks LLVM through
        // inkwell's `llvmMAJOR-MINOR` feature. Keep the two in step.
        let manifest = include_str!("../../../Cargo.toml");
        let feature = format!("\"llvm{}", crate::cache::LLVM_VERSION.replace('.', "-"));
        let inkwell = manifest
            .lines()
            .find(|l| l.trim_start().starts_with("inkwell"))
            .expect("the workspace declares inkwell");
        assert!(
            inkwell.contains(&feature),
            "cache::LLVM_VERSION is {} but the workspace's inkwell line is `{inkwell}`",
            crate::cache::LLVM_VERSION
        );
    }

    #[test]
    fn compiler_version_fingerprints_the_compiler_sources() {
        let v = crate::cache::COMPILER_VERSION;
        let digest = v
            .strip_prefix(concat!(env!("CARGO_PKG_VERSION"), "+"))
            .unwrap_or_else(|| panic!("{v}"));
        // Built in the workspace: 8 bytes of the SHA-256 of compiler/{lang,codegen}/src.
        assert_eq!(digest.len(), 16, "{v}");
        assert!(digest.bytes().all(|b| b.is_ascii_hexdigit()), "{v}");
    }

    #[test]
    fn handles_and_tensors_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<super::Gpu>();
        send_sync::<super::Jit>();
        send_sync::<super::JitKernel>();
        send_sync::<super::LoadedKernel>();
        send_sync::<super::DeviceTensor<f32>>();
        send_sync::<super::PinnedTensor<f32>>();
        send_sync::<super::GrowableTensor<f32>>();
        send_sync::<super::JitGraph>();
        send_sync::<super::Stream>();
        send_sync::<super::JitError>();
    }

    #[test]
    fn grids_from_tuples() {
        use super::Grid;
        assert_eq!(Grid::from(5), Grid([5, 1, 1]));
        assert_eq!(Grid::from((5, 6)), Grid([5, 6, 1]));
        assert_eq!(Grid::from((5, 6, 7)), Grid([5, 6, 7]));
        assert_eq!(Grid::from([5, 6, 7]), Grid([5, 6, 7]));
    }

    #[test]
    fn no_gpu_is_an_error_not_a_panic() {
        // On machines with a driver this opens GPU 0 (or fails with a driver error); either way
        // it returns rather than panicking.
        match super::Gpu::new(0) {
            Ok(_) | Err(super::RuntimeError::NoDriver) | Err(super::RuntimeError::Driver(_)) => {}
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}
