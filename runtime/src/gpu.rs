//! The GPU: its context, its default stream, its memory pool, modules loaded from PTX or cubin,
//! and launches. Everything that touches the driver goes through this crate.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute_enum as Attr;
use cudarc::driver::{CudaContext, CudaFunction, LaunchConfig, PushKernelArg};

use crate::memory::{Counter, DeviceBuffer};
use crate::stream::Stream;

/// The driver's handle of a loaded kernel.
pub type CuFunction = cudarc::driver::sys::CUfunction;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("no CUDA driver found (libcuda could not be loaded); a GPU and its driver are needed to run kernels")]
    NoDriver,
    #[error("CUDA: {0}")]
    Driver(String),
    #[error("kernel `{name}` needs {need} bytes of shared memory; this GPU allows {limit}")]
    SharedMemory { name: String, need: u32, limit: u32 },
    #[error("tensor map: {0}")]
    TensorMap(String),
    #[error("cannot copy {got} elements into a device tensor of {expected}; the lengths must match")]
    Length { expected: usize, got: usize },
    #[error("out of GPU memory: a {what} of {requested} bytes ({}) does not fit; {free} bytes ({}) of {total} ({}) are free", mib(*.requested), mib(*.free), mib(*.total))]
    OutOfMemory {
        what: &'static str,
        requested: usize,
        free: usize,
        total: usize,
    },
    #[error(
        "a growable buffer cannot grow to {want} bytes: it reserved {reserved}; reserve more addresses up front (they cost no memory)"
    )]
    Reservation { want: usize, reserved: usize },
    #[error("a chunk of {chunk} bytes is not a multiple of this GPU's allocation granularity of {granularity} bytes")]
    Chunk { chunk: usize, granularity: usize },
    #[error("graph capture: {0}")]
    Capture(String),
    #[error(
        "NCCL could not be loaded (cudarc looks for libnccl.so and libnccl.so.<CUDA major>); install it, or link the libnccl.so.2 that PyTorch's nvidia-nccl wheel ships as libnccl.so in a directory on LD_LIBRARY_PATH"
    )]
    NoNccl,
    #[error("NCCL: {0}")]
    Nccl(String),
    #[error("{0}")]
    Unsupported(String),
    #[error(
        "kernel `{name}` runs {split} programs for each program of its grid along axis 0 (its loop is split over a cluster); a grid of {x} along axis 0 would launch more than 2^31 - 1"
    )]
    SplitGrid { name: String, split: u32, x: u32 },
}

/// The grid the GPU runs for a launch of `grid` of a kernel split over clusters of `split`
/// programs: its first extent times the split, or `None` past 2^31 - 1 programs (the driver's
/// limit). The interpreter runs a split kernel on the same grid (`tilec verify --interpret`).
pub fn split_grid(grid: [u32; 3], split: u32) -> Option<[u32; 3]> {
    let x = grid[0].checked_mul(split).filter(|x| *x <= i32::MAX as u32)?;
    Some([x, grid[1], grid[2]])
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// A cudarc driver result as this crate's error.
pub fn driver_result<T>(r: Result<T, cudarc::driver::DriverError>) -> Result<T, RuntimeError> {
    r.map_err(|e| RuntimeError::Driver(e.to_string()))
}

pub(crate) use driver_result as drv;

/// What every clone of a [`Gpu`] shares.
pub(crate) struct Shared {
    /// The device's default memory pool, behind every [`DeviceBuffer`].
    pub(crate) pool: cudarc::driver::sys::CUmemoryPool,
    /// Live allocations made through this runtime (see [`Gpu::live_allocations`]).
    pub(crate) allocations: Arc<Counter>,
    /// Whether buffers order their uses across streams ([`Gpu::set_stream_ordering`]).
    pub(crate) ordering: Arc<std::sync::atomic::AtomicBool>,
}

// SAFETY: the pool handle is a driver object usable from any thread.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// A GPU: its context, a default stream, and its memory pool. Cloning is cheap and shares all
/// three. Work goes to the default stream unless a [`Stream`] is given.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Stream,
    pub(crate) shared: Arc<Shared>,
}

impl Gpu {
    /// The default stream: the context's legacy stream, which waits for (and is waited for by)
    /// blocking streams. Capture graphs on a stream of their own ([`Gpu::new_stream`]).
    pub fn stream(&self) -> &Stream {
        &self.stream
    }
}

thread_local! {
    /// The context this runtime last made current on this thread, so that launches skip asking
    /// the driver (a launch that fails because other code changed it binds and retries).
    static BOUND: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Machine code or PTX for the driver to load.
pub enum Image<'a> {
    Ptx(&'a str),
    Cubin(&'a [u8]),
}

/// A kernel loaded on the GPU, with what the driver reports about it.
pub struct Function {
    func: CudaFunction,
    pub name: String,
    pub registers: i32,
    pub local_bytes: i32,
    pub static_shared_bytes: i32,
    /// Programs launched for each program of the grid along axis 0: more than 1 where the
    /// compiler split the kernel's loop over a thread-block cluster (`Compiled::split`). The
    /// launches below multiply the grid's first extent by it.
    pub split: u32,
}

impl Function {
    /// The grid the GPU runs for a launch on `grid`: its first extent times [`Function::split`].
    pub fn launched_grid(&self, grid: [u32; 3]) -> Result<[u32; 3], RuntimeError> {
        match split_grid(grid, self.split) {
            Some(g) => Ok(g),
            None => Err(RuntimeError::SplitGrid {
                name: self.name.clone(),
                split: self.split,
                x: grid[0],
            }),
        }
    }

    /// The driver's handle, for code that launches through the driver API itself (benchmarks,
    /// interop). It stays valid while this `Function` lives.
    pub fn cu_function(&self) -> CuFunction {
        self.func.cu_function()
    }
}

/// One kernel argument, typed as the kernel's parameter.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    Buffer(&'a DeviceBuffer),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    /// A tensor map, passed by value (128 bytes) for the TMA engine.
    TensorMap(&'a crate::tma::TensorMap),
}

impl Gpu {
    /// Opens GPU `ordinal`.
    pub fn new(ordinal: usize) -> Result<Gpu, RuntimeError> {
        // SAFETY: only probes whether the driver library can be loaded.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(RuntimeError::NoDriver);
        }
        let ctx = drv(CudaContext::new(ordinal))?;
        let stream = Stream::wrap(ctx.default_stream());
        // SAFETY: reads the device's default pool handle.
        let pool = drv(unsafe { cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device()) })?;
        let gpu = Gpu {
            ctx,
            stream,
            shared: Arc::new(Shared {
                pool,
                allocations: Arc::new(Counter::default()),
                ordering: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            }),
        };
        // Keep freed memory in the pool: with the driver's default (0), every synchronisation
        // hands it back and the next allocation pays for it again.
        gpu.set_pool_release_threshold(u64::MAX)?;
        Ok(gpu)
    }

    pub fn name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "unknown GPU".into())
    }

    /// The device's ordinal (`Gpu::new(ordinal)`).
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The number of CUDA devices (0 without a driver).
    pub fn count() -> usize {
        // SAFETY: only probes whether the driver library can be loaded.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return 0;
        }
        CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
    }

    /// Whether `stream` belongs to this GPU's context.
    pub fn owns(&self, stream: &Stream) -> bool {
        *stream.ctx().as_ref() == *self.ctx.as_ref()
    }

    /// `(major, minor)` compute capability.
    pub fn compute_capability(&self) -> Result<(i32, i32), RuntimeError> {
        use cudarc::driver::sys::CUdevice_attribute_enum as D;
        Ok((
            drv(self.ctx.attribute(D::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR))?,
            drv(self.ctx.attribute(D::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))?,
        ))
    }

    /// Loads one kernel and records its resource use; raises its dynamic shared-memory limit
    /// when its static and dynamic shared memory together pass the default 48 KB (a launch
    /// past it without the raise is refused as an invalid value). `split`: programs the kernel runs for each
    /// program of a launch's grid along axis 0 (`Compiled::split`; 1 for most kernels).
    pub fn load(&self, image: Image<'_>, name: &str, dynamic_smem: u32, split: u32) -> Result<Function, RuntimeError> {
        let ptx = match image {
            Image::Ptx(text) => cudarc::nvrtc::Ptx::from_src(text),
            Image::Cubin(bytes) => cudarc::nvrtc::Ptx::from_binary(bytes.to_vec()),
        };
        let module = drv(self.ctx.load_module(ptx))?;
        let func = drv(module.load_function(name))?;
        let registers = drv(func.get_attribute(Attr::CU_FUNC_ATTRIBUTE_NUM_REGS))?;
        let local_bytes = drv(func.get_attribute(Attr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES))?;
        let static_shared_bytes = drv(func.get_attribute(Attr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES))?;
        if dynamic_smem as u64 + static_shared_bytes.max(0) as u64 > 48 * 1024 {
            use cudarc::driver::sys::CUdevice_attribute_enum as D;
            let limit = drv(self
                .ctx
                .attribute(D::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))? as u32;
            let need = dynamic_smem.saturating_add(static_shared_bytes.max(0) as u32);
            if need > limit {
                return Err(RuntimeError::SharedMemory {
                    name: name.into(),
                    need,
                    limit,
                });
            }
            drv(func.set_attribute(
                Attr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dynamic_smem as i32,
            ))?;
        }
        Ok(Function {
            func,
            name: name.into(),
            registers,
            local_bytes,
            static_shared_bytes,
            split: split.max(1),
        })
    }

    /// Launches `f` on `grid` blocks of `block` threads and waits for it to finish.
    pub fn launch(
        &self,
        f: &Function,
        grid: [u32; 3],
        block: u32,
        dynamic_smem: u32,
        args: &[KernelArg<'_>],
    ) -> Result<(), RuntimeError> {
        self.launch_async(f, grid, block, dynamic_smem, args)?;
        self.synchronize()
    }

    /// Enqueues `f` on `grid` blocks of `block` threads and returns without waiting: errors the
    /// kernel itself raises surface at the next [`Gpu::synchronize`] (or download).
    ///
    /// The buffers may be dropped as soon as this returns: the stream frees memory in order,
    /// after the kernels enqueued before the free.
    pub fn launch_async(
        &self,
        f: &Function,
        grid: [u32; 3],
        block: u32,
        dynamic_smem: u32,
        args: &[KernelArg<'_>],
    ) -> Result<(), RuntimeError> {
        self.launch_async_on(&self.stream, f, grid, block, dynamic_smem, args)
    }

    /// [`Gpu::launch_async`] on `stream`.
    pub fn launch_async_on(
        &self,
        stream: &Stream,
        f: &Function,
        grid: [u32; 3],
        block: u32,
        dynamic_smem: u32,
        args: &[KernelArg<'_>],
    ) -> Result<(), RuntimeError> {
        let grid = f.launched_grid(grid)?;
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], grid[2]),
            block_dim: (block, 1, 1),
            shared_mem_bytes: dynamic_smem,
        };
        let mut b = stream.inner.cu.launch_builder(&f.func);
        let mut ptrs = Vec::with_capacity(args.len());
        for a in args {
            ptrs.push(match a {
                KernelArg::Buffer(d) => {
                    d.used_on(stream)?;
                    d.device_ptr()
                }
                _ => 0,
            });
        }
        for (a, p) in args.iter().zip(&ptrs) {
            match a {
                KernelArg::Buffer(_) => b.arg(p),
                KernelArg::U8(v) => b.arg(v),
                KernelArg::U16(v) => b.arg(v),
                KernelArg::U32(v) => b.arg(v),
                KernelArg::U64(v) => b.arg(v),
                KernelArg::F32(v) => b.arg(v),
                KernelArg::F64(v) => b.arg(v),
                KernelArg::TensorMap(m) => b.arg(*m),
            };
        }
        // SAFETY: the caller built the arguments from the kernel's signature (count, order and
        // types); every buffer is freed in stream order, so never while the kernel runs.
        drv(unsafe { b.launch(cfg) }.map(|_| ()))
    }

    /// Waits for everything enqueued so far on the default stream; reports the first error a
    /// kernel raised.
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        self.stream.synchronize()
    }

    /// Waits for everything enqueued on every stream of this GPU.
    pub fn synchronize_all(&self) -> Result<(), RuntimeError> {
        drv(self.ctx.synchronize())
    }

    /// The driver's handle of the default stream, for code that calls the driver API itself.
    pub fn cu_stream(&self) -> cudarc::driver::sys::CUstream {
        self.stream.cu_stream()
    }

    /// The JIT's launch: no builder, no allocation; `params` holds one pointer per kernel
    /// parameter, each to that parameter's value. `grid` is the kernel's own: a split kernel
    /// runs [`Function::launched_grid`] of it, as every other launch does.
    ///
    /// # Safety
    /// `params` must match `f`'s signature in count and sizes, and every device address in them
    /// must stay allocated until the kernel has run (stream-ordered frees guarantee that).
    pub unsafe fn launch_raw(
        &self,
        stream: &Stream,
        f: &Function,
        grid: [u32; 3],
        block: u32,
        dynamic_smem: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), RuntimeError> {
        let grid = f.launched_grid(grid)?;
        // Launches may come from any thread; the context must be current on this one. The
        // thread remembers the context it bound last, so the usual launch asks the driver
        // nothing; if other code switched contexts since, the launch fails and is retried.
        let ctx = self.ctx.cu_ctx() as usize;
        let bound = BOUND.with(|b| b.get()) == ctx;
        if !bound {
            self.bind()?;
        }
        // SAFETY: the caller vouches for the parameters.
        let mut launch = || unsafe {
            cudarc::driver::result::launch_kernel(
                f.func.cu_function(),
                (grid[0], grid[1], grid[2]),
                (block, 1, 1),
                dynamic_smem,
                stream.cu_stream(),
                params,
            )
        };
        match launch() {
            Err(e) if bound && is_context_error(&e) => {
                self.bind()?;
                drv(launch())
            }
            r => drv(r),
        }
    }

    /// Makes this GPU's context current on the calling thread.
    pub fn bind(&self) -> Result<(), RuntimeError> {
        drv(self.ctx.bind_to_thread())?;
        BOUND.with(|b| b.set(self.ctx.cu_ctx() as usize));
        Ok(())
    }
}

fn is_context_error(e: &cudarc::driver::DriverError) -> bool {
    use cudarc::driver::sys::CUresult as R;
    matches!(
        e.0,
        R::CUDA_ERROR_INVALID_CONTEXT | R::CUDA_ERROR_INVALID_HANDLE | R::CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}
