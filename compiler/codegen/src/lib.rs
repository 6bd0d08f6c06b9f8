//! Tile IR to PTX through LLVM's NVPTX back end. The only crate that uses inkwell.
//!
//! ```text
//! let compiled = tile_codegen::compile(&kernel, &CompileOptions::new(target("sm_90a")?))?;
//! compiled.ptx            // PTX text for the driver or ptxas
//! ```
//!
//! The lowering obeys `tile_gir::assign::GpuPlan`: each tile is in the blocked layout (see
//! `layout.rs`) unless the plan gives it another (a tensor-core accumulator, a reduced or
//! recomputed one); `dot`s with a `MmaPlan` run on `mma.sync` with `ldmatrix` or, on sm_90a, on
//! `wgmma.mma_async` through shared-memory descriptors; loops feeding them are pipelined with
//! `cp.async`, or for tensor-descriptor loads on sm_90a with the TMA engine on mbarriers
//! (`tile_gir::tma`), and operands in the wrong layout are converted. Elementwise ops stay in
//! registers, axis reductions run in their operand's layout (shuffles, and shared memory only
//! between warps); other data movement (tile broadcasts of loaded values, scans, transposes)
//! goes through shared memory.

mod axis;
mod lower;
pub mod ptxas;

// Targets, layouts and the resource estimate are GPU-free data the optimizer reads too.
use tile_gir::layout;
pub use tile_gir::{ArgSpec, TARGETS, Target, UnknownTarget, estimate, target};

use inkwell::OptimizationLevel;
use inkwell::context::Context;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target as LlvmTarget, TargetTriple};
use tile_lang::ir::{Kernel, Loc};

/// How to compile: the target, the launch shape of a block, and what the caller promises about
/// the arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct CompileOptions {
    pub target: Target,
    /// Warps per block (a power of two, 1 to 32).
    pub num_warps: u32,
    /// Software-pipelining depth of the kernel's loops, 1 to 8 (1: none): loops feeding
    /// tensor-core dots copy their operands `num_stages - 1` iterations ahead (a loop's own
    /// `#[stages(..)]` wins).
    pub num_stages: u32,
    /// One entry per kernel parameter (or empty: nothing is assumed).
    pub specialization: Vec<ArgSpec>,
    /// Programs of a thread-block cluster that share the kernel's loop (`tile_gir::split`; 1:
    /// no split). The launch runs that many times as many programs along grid axis 0.
    pub split: u32,
    /// A debug build: every mbarrier wait gives up after [`DEBUG_WAIT_TIMEOUT_NS`] and traps
    /// with a message naming the kernel, block, thread, loop, stage and phase it waited for.
    pub debug: bool,
}

/// How long a debug build's mbarrier wait spins before it reports and traps: far beyond any
/// copy's latency, also under compute-sanitizer.
pub const DEBUG_WAIT_TIMEOUT_NS: u64 = 10_000_000_000;

impl CompileOptions {
    pub fn new(target: Target) -> CompileOptions {
        CompileOptions {
            target,
            num_warps: 4,
            num_stages: 1,
            specialization: Vec::new(),
            split: 1,
            debug: false,
        }
    }
}

/// A compiled kernel: its PTX and what a launch needs to know.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub name: String,
    pub ptx: String,
    pub threads_per_block: u32,
    /// Dynamic shared memory each block needs, in bytes.
    pub smem_bytes: u32,
    /// Tensor maps the launch passes after the kernel's own parameters, in this order (each a
    /// 128-byte `CUtensorMap` encoded on the host from the arguments).
    pub tensor_maps: Vec<tile_gir::tma::TensorMap>,
    /// Programs the GPU runs for each program of a launch's grid along axis 0 (the grid's first
    /// extent is multiplied by it): more than 1 where the kernel's loop is split over a
    /// thread-block cluster (`tile_gir::split`).
    pub split: u32,
    /// Where the time went: the lowering, LLVM's IR optimizer and its PTX emission.
    pub times: CodegenTimes,
}

/// The wall time of each step of [`compile_stage`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CodegenTimes {
    /// The plan lowered to an LLVM module (and the module verified).
    pub lower: std::time::Duration,
    /// LLVM's `default<O3>` pipeline.
    pub optimize: std::time::Duration,
    /// LLVM's NVPTX back end: the optimized module to PTX text.
    pub emit: std::time::Duration,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodegenError {
    #[error(transparent)]
    UnknownTarget(#[from] UnknownTarget),
    #[error("num_warps must be a power of two from 1 to {max}; got {got}")]
    BadWarps { got: u32, max: u32 },
    #[error(
        "num_stages must be from 1 to {} (1: no pipelining); got {got}",
        tile_lang::ir::MAX_STAGES
    )]
    BadStages { got: u32 },
    #[error(
        "a tile of {shape} puts {per_thread} elements in each of {threads} threads{at}; the limit is {MAX_ELEMS_PER_THREAD}: use more warps (up to 32) or smaller tiles"
    )]
    TileTooLarge {
        shape: String,
        per_thread: usize,
        threads: u32,
        at: String,
    },
    #[error("{what} is not supported by the GPU back end yet (`{op}`{at})")]
    Unsupported { what: String, op: String, at: String },
    #[error("`#[cluster({size})]`: {target} has no thread-block clusters; compile for sm_90 or newer (`--sm 90a`)")]
    NoClusters { size: u32, target: String },
    #[error("the kernel needs {need} bytes of shared memory; {target} allows {limit}")]
    SharedMemory { need: u32, limit: u32, target: String },
    #[error("LLVM: {0}")]
    Llvm(String),
}

impl CodegenError {
    pub(crate) fn unsupported(what: impl Into<String>, op: &str, loc: Loc) -> CodegenError {
        let at = if loc == Loc::default() {
            String::new()
        } else {
            format!(" at {}:{}", loc.line, loc.col)
        };
        CodegenError::Unsupported {
            what: what.into(),
            op: op.to_string(),
            at,
        }
    }
}

/// The most elements of one tile a thread may hold. Beyond it the lowering's code (and LLVM's
/// time and memory) grows without bound — `BLOCK = 2^20` on 4 warps took minutes — and ptxas
/// would spill long before.
pub const MAX_ELEMS_PER_THREAD: usize = 1024;

/// Compiles a kernel to PTX (its GPU stage made here; [`compile_stage`] takes one made before).
pub fn compile(kernel: &Kernel, opts: &CompileOptions) -> Result<Compiled, CodegenError> {
    let stage = tile_gir::GpuStage::new(
        kernel,
        opts.num_warps,
        opts.num_stages,
        opts.split,
        &opts.target,
        &opts.specialization,
    );
    compile_stage(&stage, opts)
}

/// Compiles the kernel of a GPU stage made for `opts` (its warps, stages, target and facts) to
/// PTX, lowering by the stage's plan.
pub fn compile_stage(stage: &tile_gir::GpuStage, opts: &CompileOptions) -> Result<Compiled, CodegenError> {
    let started = std::time::Instant::now();
    let ctx = Context::create();
    let built = build_module(&ctx, stage, opts)?;
    let lower = started.elapsed();
    let started = std::time::Instant::now();
    built
        .module
        .run_passes("default<O3>", &built.machine, PassBuilderOptions::create())
        .map_err(|e| CodegenError::Llvm(e.to_string()))?;
    let optimize = started.elapsed();
    let started = std::time::Instant::now();
    let buf = built
        .machine
        .write_to_memory_buffer(&built.module, FileType::Assembly)
        .map_err(|e| CodegenError::Llvm(e.to_string()))?;
    let ptx = String::from_utf8_lossy(buf.as_slice()).into_owned();
    Ok(Compiled {
        name: stage.kernel().name.clone(),
        ptx,
        threads_per_block: built.block_threads,
        smem_bytes: built.smem_bytes,
        tensor_maps: stage.prepared.maps.clone(),
        split: stage.split,
        times: CodegenTimes {
            lower,
            optimize,
            emit: started.elapsed(),
        },
    })
}

/// The LLVM IR the lowering hands LLVM for `stage` (before LLVM's optimizer): what
/// `tilec compile --emit llvm-ir` prints. Lowers again; [`compile_stage`] keeps no text.
pub fn llvm_ir(stage: &tile_gir::GpuStage, opts: &CompileOptions) -> Result<String, CodegenError> {
    let ctx = Context::create();
    let built = build_module(&ctx, stage, opts)?;
    Ok(built.module.print_to_string().to_string())
}

/// A verified LLVM module of one kernel, with the target machine it is compiled for and what
/// a launch needs.
struct Built<'ctx> {
    module: inkwell::module::Module<'ctx>,
    machine: inkwell::targets::TargetMachine,
    smem_bytes: u32,
    block_threads: u32,
}

fn build_module<'ctx>(
    ctx: &'ctx Context,
    stage: &tile_gir::GpuStage,
    opts: &CompileOptions,
) -> Result<Built<'ctx>, CodegenError> {
    let max_warps = opts.target.max_threads_per_block / opts.target.warp_size;
    if !opts.num_warps.is_power_of_two() || opts.num_warps > max_warps {
        return Err(CodegenError::BadWarps {
            got: opts.num_warps,
            max: max_warps,
        });
    }
    if !(1..=tile_lang::ir::MAX_STAGES).contains(&opts.num_stages) {
        return Err(CodegenError::BadStages { got: opts.num_stages });
    }
    // The facts compiled with: none for parameters kept out of specialisation (the stage was
    // planned with the same).
    let specialization = ArgSpec::for_kernel(stage.kernel(), &opts.specialization);
    let kernel = stage.kernel();
    LlvmTarget::initialize_nvptx(&InitializationConfig::default());
    let module = ctx.create_module(&kernel.name);
    let triple = TargetTriple::create("nvptx64-nvidia-cuda");
    module.set_triple(&triple);
    let threads = opts.num_warps * opts.target.warp_size;
    let (smem_bytes, block_threads) = lower::lower(
        ctx,
        &module,
        kernel,
        threads,
        &opts.target,
        &specialization,
        stage,
        opts.debug,
    )?;
    // The dynamic window and a cluster kernel's static exchange array share the limit.
    let need = smem_bytes
        + tile_gir::cluster::ClusterSlots::of(kernel).map_or(0, |c| c.bytes())
        + tile_gir::split::slot_bytes(kernel);
    if need > opts.target.max_smem_per_block {
        return Err(CodegenError::SharedMemory {
            need,
            limit: opts.target.max_smem_per_block,
            target: opts.target.sm.into(),
        });
    }
    module
        .verify()
        .map_err(|e| CodegenError::Llvm(format!("invalid module: {e}")))?;
    let llvm_target = LlvmTarget::from_triple(&triple).map_err(|e| CodegenError::Llvm(e.to_string()))?;
    let machine = llvm_target
        .create_target_machine(
            &triple,
            opts.target.sm,
            opts.target.ptx_feature,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| CodegenError::Llvm(format!("no target machine for {}", opts.target.sm)))?;
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    Ok(Built {
        module,
        machine,
        smem_bytes,
        block_threads,
    })
}
