//! The GPU: one context and one stream, modules loaded from PTX or cubin, byte buffers and
//! launches. Everything that touches the driver goes through this crate (typed tensors in
//! `tile-jit` through [`Gpu::stream`]).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute_enum as Attr;
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

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
}

/// A cudarc driver result as this crate's error.
pub fn driver_result<T>(r: Result<T, cudarc::driver::DriverError>) -> Result<T, RuntimeError> {
    r.map_err(|e| RuntimeError::Driver(e.to_string()))
}

pub(crate) use driver_result as drv;

/// A GPU with one stream. Cloning is cheap and shares the context and the stream.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
}

impl Gpu {
    /// The cudarc stream every launch and copy goes to, for typed memory built on this layer.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
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
}

impl Function {
    /// The driver's handle, for code that launches through the driver API itself (benchmarks,
    /// interop). It stays valid while this `Function` lives.
    pub fn cu_function(&self) -> CuFunction {
        self.func.cu_function()
    }
}

/// Device memory (bytes).
#[derive(Debug)]
pub struct DeviceBuffer {
    slice: CudaSlice<u8>,
    pub len: usize,
}

impl DeviceBuffer {
    /// The device address of the first byte.
    pub fn device_ptr(&self) -> u64 {
        self.slice.device_ptr(&self.slice.stream().clone()).0
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
        let stream = ctx.default_stream();
        Ok(Gpu { ctx, stream })
    }

    pub fn name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "unknown GPU".into())
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
    /// when it needs more than the default 48 KB.
    pub fn load(&self, image: Image<'_>, name: &str, dynamic_smem: u32) -> Result<Function, RuntimeError> {
        let ptx = match image {
            Image::Ptx(text) => cudarc::nvrtc::Ptx::from_src(text),
            Image::Cubin(bytes) => cudarc::nvrtc::Ptx::from_binary(bytes.to_vec()),
        };
        let module = drv(self.ctx.load_module(ptx))?;
        let func = drv(module.load_function(name))?;
        let registers = drv(func.get_attribute(Attr::CU_FUNC_ATTRIBUTE_NUM_REGS))?;
        let local_bytes = drv(func.get_attribute(Attr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES))?;
        let static_shared_bytes = drv(func.get_attribute(Attr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES))?;
        if dynamic_smem > 48 * 1024 {
            use cudarc::driver::sys::CUdevice_attribute_enum as D;
            let limit = drv(self
                .ctx
                .attribute(D::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))? as u32;
            if dynamic_smem > limit {
                return Err(RuntimeError::SharedMemory {
                    name: name.into(),
                    need: dynamic_smem,
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
        })
    }

    pub fn upload(&self, bytes: &[u8]) -> Result<DeviceBuffer, RuntimeError> {
        // A zero-length allocation is not allowed; keep one byte nothing reads.
        let data: Vec<u8> = if bytes.is_empty() { vec![0] } else { bytes.to_vec() };
        let slice = drv(self.stream.clone_htod(&data))?;
        Ok(DeviceBuffer {
            slice,
            len: bytes.len(),
        })
    }

    pub fn download(&self, buf: &DeviceBuffer) -> Result<Vec<u8>, RuntimeError> {
        let mut v = drv(self.stream.clone_dtoh(&buf.slice))?;
        v.truncate(buf.len);
        Ok(v)
    }

    /// `bytes` zero bytes of device memory.
    pub fn zeros(&self, bytes: usize) -> Result<DeviceBuffer, RuntimeError> {
        // A zero-length allocation is not allowed; keep one byte nothing reads.
        let slice = drv(self.stream.alloc_zeros::<u8>(bytes.max(1)))?;
        Ok(DeviceBuffer { slice, len: bytes })
    }

    /// Copies `buf` into `out` (of `buf.len` bytes) after everything enqueued before, and
    /// synchronises, so that a kernel's error surfaces here.
    pub fn download_into(&self, buf: &DeviceBuffer, out: &mut [u8]) -> Result<(), RuntimeError> {
        if !out.is_empty() {
            drv(self.stream.memcpy_dtoh(&buf.slice.slice(..out.len()), out))?;
        }
        self.synchronize()
    }

    /// Overwrites the start of `buf` with `bytes`, in stream order.
    pub fn upload_into(&self, buf: &mut DeviceBuffer, bytes: &[u8]) -> Result<(), RuntimeError> {
        if !bytes.is_empty() {
            drv(self.stream.memcpy_htod(bytes, &mut buf.slice.slice_mut(..bytes.len())))?;
        }
        Ok(())
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
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], grid[2]),
            block_dim: (block, 1, 1),
            shared_mem_bytes: dynamic_smem,
        };
        let mut b = self.stream.launch_builder(&f.func);
        for a in args {
            match a {
                KernelArg::Buffer(d) => b.arg(&d.slice),
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

    /// Waits for everything enqueued so far; reports the first error a kernel raised.
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        drv(self.stream.synchronize())
    }

    /// The driver's handle of the stream every launch and copy goes to (the context's default
    /// stream), for code that calls the driver API itself.
    pub fn cu_stream(&self) -> cudarc::driver::sys::CUstream {
        self.stream.cu_stream()
    }

    /// The JIT's launch: no builder, no allocation; `params` holds one pointer per kernel
    /// parameter, each to that parameter's value.
    ///
    /// # Safety
    /// `params` must match `f`'s signature in count and sizes, and every device address in them
    /// must stay allocated until the kernel has run (stream-ordered frees guarantee that).
    pub unsafe fn launch_raw(
        &self,
        f: &Function,
        grid: [u32; 3],
        block: u32,
        dynamic_smem: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), RuntimeError> {
        // Launches may come from any thread; the context must be current on this one.
        drv(self.ctx.bind_to_thread())?;
        drv(unsafe {
            cudarc::driver::result::launch_kernel(
                f.func.cu_function(),
                (grid[0], grid[1], grid[2]),
                (block, 1, 1),
                dynamic_smem,
                self.stream.cu_stream(),
                params,
            )
        })
    }
}
