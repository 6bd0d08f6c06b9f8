//! Device and pinned host memory.
//!
//! Device buffers come from the device's stream-ordered memory pool (`cuMemAllocAsync` on a
//! stream, `cuMemFreeAsync` on a stream): a temporary costs no synchronisation, and with the
//! pool's release threshold raised (what [`Gpu::new`] does) freed memory stays in the pool for
//! the next allocation instead of going back to the driver at every synchronisation.
//!
//! Ownership: a buffer is freed exactly once, when its last owner goes (the [`DeviceBuffer`],
//! or a graph that launches kernels on it). It remembers every stream it was used on; the free
//! is enqueued on the stream that used it last, after the work already enqueued on each of the
//! others, so no kernel still running can see its memory reused.
//!
//! Every allocation this crate makes (pool buffers, pinned host buffers, physical chunks of
//! growable buffers) is counted: [`Gpu::live_allocations`], for tests that check nothing leaks.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, DriverError};

use crate::gpu::{Gpu, RuntimeError, drv};
use crate::stream::{Event, Stream};

/// Counts what is allocated, per context.
#[derive(Default)]
pub(crate) struct Counter(AtomicIsize);

impl Counter {
    pub(crate) fn add(&self, n: isize) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> isize {
        self.0.load(Ordering::Relaxed)
    }
}

/// Something a kernel argument points into: kept alive by graphs that launch kernels on it, and
/// told about every stream a kernel or copy using it is enqueued on.
pub trait Memory: Send + Sync {
    /// A kernel or copy using this memory is about to be enqueued on `stream`: work enqueued on
    /// `stream` from now on waits for the work enqueued so far on the other streams that used
    /// it (see [`Gpu::set_stream_ordering`]), and its free waits for `stream`'s.
    fn used_on(&self, stream: &Stream) -> Result<(), RuntimeError>;
}

/// The streams a buffer was used on, in order (the last one is where it is freed), and the
/// ordering of its uses across them.
pub(crate) struct StreamUses {
    /// The raw handle of the stream used last, so that a use on the same stream (the common
    /// case) costs one atomic load.
    last: AtomicUsize,
    streams: Mutex<Vec<Stream>>,
    /// Whether a use on one stream waits for the uses on others ([`Gpu::set_stream_ordering`]).
    ordering: Arc<AtomicBool>,
}

impl StreamUses {
    /// Uses that start on `stream` (an allocation's), or on none yet.
    pub(crate) fn new(stream: Option<&Stream>, ordering: Arc<AtomicBool>) -> StreamUses {
        StreamUses {
            last: AtomicUsize::new(stream.map_or(usize::MAX, |s| s.cu_stream() as usize)),
            streams: Mutex::new(stream.into_iter().cloned().collect()),
            ordering,
        }
    }

    /// See [`Memory::used_on`].
    pub(crate) fn note(&self, stream: &Stream) -> Result<(), RuntimeError> {
        let raw = stream.cu_stream() as usize;
        if self.last.load(Ordering::Relaxed) == raw {
            return Ok(());
        }
        let mut streams = lock(&self.streams);
        let on = self.ordering.load(Ordering::Relaxed);
        // A stream a graph capture records cannot wait for work outside it, nor be waited
        // for: the graph's own edges order its nodes, and its replay is ordered like a launch.
        let capture = stream.is_capturing() || streams.iter().any(|s| s != stream && s.is_capturing());
        if on && !capture {
            order_after(stream, &streams)?;
            // Everything the other streams did with the buffer now comes before `stream`'s
            // next work, its free included: `stream` alone stands for them.
            streams.clear();
        } else {
            streams.retain(|s| s != stream);
        }
        streams.push(stream.clone());
        // After a use left unordered by a capture, the next use takes this slow path even on the
        // same stream (a replay there must still wait for the uses before the capture).
        let last = if on && capture { usize::MAX } else { raw };
        self.last.store(last, Ordering::Relaxed);
        Ok(())
    }

    /// Makes `on` wait for the work enqueued so far on every other stream that used the buffer,
    /// whatever the ordering setting (a copy to or from the host), and notes `on` as standing for
    /// them.
    fn order_all(&self, on: &Stream) -> Result<(), RuntimeError> {
        let mut streams = lock(&self.streams);
        order_after(on, &streams)?;
        streams.clear();
        streams.push(on.clone());
        self.last.store(on.cu_stream() as usize, Ordering::Relaxed);
        Ok(())
    }

    fn take(&self) -> Vec<Stream> {
        std::mem::take(&mut *lock(&self.streams))
    }
}

/// One pool allocation.
pub(crate) struct Allocation {
    ptr: u64,
    bytes: usize,
    ctx: Arc<CudaContext>,
    counter: Arc<Counter>,
    uses: StreamUses,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Memory for Allocation {
    fn used_on(&self, stream: &Stream) -> Result<(), RuntimeError> {
        self.uses.note(stream)
    }
}

/// Makes `on` wait for the work enqueued so far on each of `streams` (but itself).
fn order_after(on: &Stream, streams: &[Stream]) -> Result<(), RuntimeError> {
    for s in streams {
        if s != on {
            on.wait_for(s)?;
        }
    }
    Ok(())
}

impl Allocation {
    /// Makes `on` wait for every use of this buffer on other streams so far, and notes `on`.
    pub(crate) fn order_after_uses(&self, on: &Stream) -> Result<(), RuntimeError> {
        self.uses.order_all(on)
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        let streams = self.uses.take();
        let Some(free_on) = streams.last() else { return };
        // Errors here cannot be returned; the context records them for its next call.
        let r = (|| -> Result<(), RuntimeError> {
            drv(self.ctx.bind_to_thread())?;
            order_after(free_on, &streams)?;
            // SAFETY: the pointer came from cuMemAllocAsync and is freed once, here, after the
            // work on every stream that used it.
            drv(unsafe { cudarc::driver::result::free_async(self.ptr, free_on.cu_stream()) })
        })();
        if let Err(RuntimeError::Driver(e)) = r {
            eprintln!(
                "tile-runtime: freeing {} bytes of device memory failed: {e}",
                self.bytes
            );
        }
        self.counter.add(-1);
    }
}

/// Device memory (bytes), from the device's memory pool.
pub struct DeviceBuffer {
    pub(crate) mem: Arc<Allocation>,
    pub(crate) len: usize,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer[{} bytes at {:#x}]", self.len, self.mem.ptr)
    }
}

impl DeviceBuffer {
    /// The device address of the first byte.
    pub fn device_ptr(&self) -> u64 {
        self.mem.ptr
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.len
    }

    /// The owner of the memory, for graphs that must keep it alive and launches that must say
    /// which streams use it.
    pub fn memory(&self) -> Arc<dyn Memory> {
        self.mem.clone()
    }

    /// Whether the buffer was allocated on `gpu`'s device.
    pub fn is_on(&self, gpu: &crate::Gpu) -> bool {
        *self.mem.ctx.as_ref() == *gpu.ctx.as_ref()
    }

    /// Notes that work using this buffer was enqueued on `stream` (launches do this for their
    /// arguments), so that its free waits for that work.
    pub fn used_on(&self, stream: &Stream) -> Result<(), RuntimeError> {
        self.mem.used_on(stream)
    }
}

pub(crate) fn is_oom(e: &DriverError) -> bool {
    e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
}

impl Gpu {
    /// The error for `requested` bytes that did not fit, with what the device has free.
    pub(crate) fn out_of_memory(&self, requested: usize, what: &'static str) -> RuntimeError {
        let (free, total) = self.ctx.mem_get_info().unwrap_or((0, 0));
        RuntimeError::OutOfMemory {
            what,
            requested,
            free,
            total,
        }
    }

    /// `bytes` of uninitialised device memory from the pool, allocated in `stream`'s order (a
    /// zero-length buffer holds one byte nothing reads). When the pool cannot grow, its unused
    /// cache is released to the driver and the allocation tried once more before reporting
    /// [`RuntimeError::OutOfMemory`].
    pub fn alloc_on(&self, stream: &Stream, bytes: usize) -> Result<DeviceBuffer, RuntimeError> {
        if stream.is_capturing() {
            return Err(RuntimeError::Capture(
                "cannot allocate on a stream while a graph is being captured on it; allocate the buffers the graph uses before `begin_capture`".into(),
            ));
        }
        drv(self.ctx.bind_to_thread())?;
        let size = bytes.max(1);
        // SAFETY: a plain stream-ordered allocation; the pointer is owned by the Allocation.
        let alloc = || unsafe { cudarc::driver::result::malloc_async(stream.cu_stream(), size) };
        let ptr = match alloc() {
            Ok(p) => p,
            Err(e) if is_oom(&e) => {
                self.trim_pool(0)?;
                alloc().map_err(|e| {
                    if is_oom(&e) {
                        self.out_of_memory(size, "device buffer")
                    } else {
                        RuntimeError::Driver(e.to_string())
                    }
                })?
            }
            Err(e) => return Err(RuntimeError::Driver(e.to_string())),
        };
        self.shared.allocations.add(1);
        Ok(DeviceBuffer {
            mem: Arc::new(Allocation {
                ptr,
                bytes: size,
                ctx: self.ctx.clone(),
                counter: self.shared.allocations.clone(),
                uses: StreamUses::new(Some(stream), self.shared.ordering.clone()),
            }),
            len: bytes,
        })
    }

    /// `bytes` zero bytes of device memory, in `stream`'s order.
    pub fn zeros_on(&self, stream: &Stream, bytes: usize) -> Result<DeviceBuffer, RuntimeError> {
        let b = self.alloc_on(stream, bytes)?;
        // SAFETY: the range lies in the allocation just made.
        drv(unsafe { cudarc::driver::result::memset_d8_async(b.mem.ptr, 0, b.mem.bytes, stream.cu_stream()) })?;
        Ok(b)
    }

    /// A copy of `bytes` in device memory, in `stream`'s order. The host bytes may be dropped
    /// when this returns (the driver stages pageable memory).
    pub fn upload_on(&self, stream: &Stream, bytes: &[u8]) -> Result<DeviceBuffer, RuntimeError> {
        let b = self.alloc_on(stream, bytes.len())?;
        if !bytes.is_empty() {
            // SAFETY: the destination holds `bytes.len()` bytes.
            drv(unsafe { cudarc::driver::result::memcpy_htod_async(b.mem.ptr, bytes, stream.cu_stream()) })?;
        }
        Ok(b)
    }

    pub fn upload(&self, bytes: &[u8]) -> Result<DeviceBuffer, RuntimeError> {
        self.upload_on(&self.stream, bytes)
    }

    /// `bytes` zero bytes of device memory.
    pub fn zeros(&self, bytes: usize) -> Result<DeviceBuffer, RuntimeError> {
        self.zeros_on(&self.stream, bytes)
    }

    pub fn download(&self, buf: &DeviceBuffer) -> Result<Vec<u8>, RuntimeError> {
        let mut v = vec![0u8; buf.len];
        self.download_into(buf, &mut v)?;
        Ok(v)
    }

    /// Copies the start of `buf` into `out` after everything enqueued before on any stream that
    /// used `buf`, and synchronises, so that a kernel's error surfaces here.
    pub fn download_into(&self, buf: &DeviceBuffer, out: &mut [u8]) -> Result<(), RuntimeError> {
        if out.len() > buf.len {
            return Err(RuntimeError::Length {
                expected: buf.len,
                got: out.len(),
            });
        }
        let s = &self.stream;
        drv(self.ctx.bind_to_thread())?;
        buf.mem.order_after_uses(s)?;
        if !out.is_empty() {
            // SAFETY: `out` is at most the buffer's length; the copy finishes before the
            // synchronisation below returns, while `out` is borrowed.
            drv(unsafe { cudarc::driver::result::memcpy_dtoh_async(out, buf.mem.ptr, s.cu_stream()) })?;
        }
        s.synchronize()
    }

    /// Copies `out.len()` bytes from device address `src` to `out` on the default stream, after
    /// the work enqueued on it, and synchronises.
    ///
    /// # Safety
    /// `src..src + out.len()` must be mapped device memory of this GPU.
    pub unsafe fn download_raw(&self, src: u64, out: &mut [u8]) -> Result<(), RuntimeError> {
        drv(self.ctx.bind_to_thread())?;
        if !out.is_empty() {
            // SAFETY: the caller vouches for the source range; `out` outlives the synchronisation.
            drv(unsafe { cudarc::driver::result::memcpy_dtoh_async(out, src, self.stream.cu_stream()) })?;
        }
        self.stream.synchronize()
    }

    /// Copies `bytes` to device address `dst` on the default stream.
    ///
    /// # Safety
    /// `dst..dst + bytes.len()` must be mapped device memory of this GPU that no kernel running
    /// meanwhile uses.
    pub unsafe fn upload_raw(&self, dst: u64, bytes: &[u8]) -> Result<(), RuntimeError> {
        drv(self.ctx.bind_to_thread())?;
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller vouches for the range; pageable bytes are staged before return.
        drv(unsafe { cudarc::driver::result::memcpy_htod_async(dst, bytes, self.stream.cu_stream()) })
    }

    /// Overwrites the start of `buf` with `bytes`, after the work enqueued so far on every
    /// stream that used it.
    pub fn upload_into(&self, buf: &mut DeviceBuffer, bytes: &[u8]) -> Result<(), RuntimeError> {
        if bytes.len() > buf.len {
            return Err(RuntimeError::Length {
                expected: buf.len,
                got: bytes.len(),
            });
        }
        let s = &self.stream;
        drv(self.ctx.bind_to_thread())?;
        buf.mem.order_after_uses(s)?;
        if !bytes.is_empty() {
            // SAFETY: the destination holds at least `bytes.len()` bytes.
            drv(unsafe { cudarc::driver::result::memcpy_htod_async(buf.mem.ptr, bytes, s.cu_stream()) })?;
        }
        Ok(())
    }

    /// Copies `src` to the start of `dst` on `stream` (device to device).
    pub fn copy_on(&self, stream: &Stream, src: &DeviceBuffer, dst: &mut DeviceBuffer) -> Result<(), RuntimeError> {
        if src.len > dst.len {
            return Err(RuntimeError::Length {
                expected: dst.len,
                got: src.len,
            });
        }
        drv(self.ctx.bind_to_thread())?;
        src.used_on(stream)?;
        dst.used_on(stream)?;
        // SAFETY: both ranges lie in live allocations.
        drv(unsafe { cudarc::driver::result::memcpy_dtod_async(dst.mem.ptr, src.mem.ptr, src.len, stream.cu_stream()) })
    }

    /// Zeroes `buf` on `stream`.
    pub fn memset_zero_on(&self, stream: &Stream, buf: &mut DeviceBuffer) -> Result<(), RuntimeError> {
        drv(self.ctx.bind_to_thread())?;
        buf.used_on(stream)?;
        // SAFETY: the range is the allocation.
        drv(unsafe { cudarc::driver::result::memset_d8_async(buf.mem.ptr, 0, buf.mem.bytes, stream.cu_stream()) })
    }

    /// Whether device buffers order their uses across streams (on by default): a kernel or copy
    /// enqueued on one stream waits for the work enqueued before on the other streams that used
    /// one of its buffers (an upload on one stream and a launch reading it on another need no
    /// synchronisation between them). A stream that stays with a buffer pays one atomic load per
    /// use; a change of stream costs an event. Off, only frees are ordered, and a program orders
    /// its streams itself ([`Stream::wait_for`], [`Stream::wait`]). The setting is the GPU's (every
    /// clone of this `Gpu`), read at each use.
    pub fn set_stream_ordering(&self, on: bool) {
        self.shared.ordering.store(on, Ordering::Relaxed);
    }

    /// How many allocations this runtime holds on this GPU now: pool buffers, pinned host
    /// buffers and mapped chunks of growable buffers. Tests compare it before and after.
    pub fn live_allocations(&self) -> isize {
        self.shared.allocations.get()
    }

    /// Sets the pool's release threshold: memory the pool holds beyond it goes back to the
    /// driver at the next synchronisation. [`Gpu::new`] sets it to `u64::MAX` (keep everything,
    /// as a caching allocator does); [`Gpu::trim_pool`] releases on demand.
    pub fn set_pool_release_threshold(&self, bytes: u64) -> Result<(), RuntimeError> {
        let mut v = bytes;
        // SAFETY: the attribute takes a u64 by pointer.
        drv(unsafe {
            cudarc::driver::result::mem_pool::set_attribute(
                self.shared.pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut v as *mut u64).cast::<c_void>(),
            )
        })
    }

    /// Releases the pool's unused memory to the driver, keeping at least `keep` bytes.
    pub fn trim_pool(&self, keep: usize) -> Result<(), RuntimeError> {
        // SAFETY: trims the device's own pool; memory in use is never released.
        drv(unsafe { cudarc::driver::result::mem_pool::trim_to(self.shared.pool, keep) })
    }

    /// Bytes the pool holds now (in use plus cached), and of those in use.
    pub fn pool_bytes(&self) -> Result<(u64, u64), RuntimeError> {
        let get = |attr| {
            let mut v = 0u64;
            // SAFETY: these attributes are u64s, read by pointer.
            drv(unsafe {
                cudarc::driver::result::mem_pool::get_attribute(
                    self.shared.pool,
                    attr,
                    (&mut v as *mut u64).cast::<c_void>(),
                )
            })
            .map(|_| v)
        };
        use sys::CUmemPool_attribute as A;
        Ok((
            get(A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
            get(A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
        ))
    }
}

/// Page-locked host memory: copies between it and the device run asynchronously at full
/// bandwidth and overlap kernels. The host's view waits for copies still in flight, so reading
/// it never races with a copy writing it (and writing it never races with one reading it).
pub struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
    ctx: Arc<CudaContext>,
    counter: Arc<Counter>,
    /// Copies in flight that read or write this buffer.
    pending: Mutex<Vec<Event>>,
}

// SAFETY: the buffer is plain host memory owned by this value; access goes through `&`/`&mut`.
unsafe impl Send for PinnedBuffer {}
unsafe impl Sync for PinnedBuffer {}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer[{} bytes]", self.len)
    }
}

impl PinnedBuffer {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Waits for the copies in flight that use this buffer.
    pub fn wait(&self) -> Result<(), RuntimeError> {
        let pending = std::mem::take(&mut *lock(&self.pending));
        for e in &pending {
            e.synchronize()?;
        }
        Ok(())
    }

    /// The bytes, after the copies in flight have finished.
    pub fn as_slice(&self) -> Result<&[u8], RuntimeError> {
        self.wait()?;
        // SAFETY: `len` bytes allocated by cuMemHostAlloc, no copy in flight (waited above) and
        // none can start while this shared borrow lives (copies into it need `&mut self`).
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The bytes, writable, after the copies in flight have finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8], RuntimeError> {
        self.wait()?;
        // SAFETY: as above, and the borrow is exclusive.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    fn note(&self, stream: &Stream) -> Result<(), RuntimeError> {
        let e = stream.record()?;
        lock(&self.pending).push(e);
        Ok(())
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // A copy in flight must finish before the memory goes.
        let _ = self.wait();
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by cuMemHostAlloc; no copy uses it any more.
        if let Err(e) = unsafe { cudarc::driver::result::free_host(self.ptr.cast()) } {
            eprintln!("tile-runtime: freeing {} bytes of pinned memory failed: {e}", self.len);
        }
        self.counter.add(-1);
    }
}

impl Gpu {
    /// `bytes` of page-locked host memory, zeroed.
    pub fn pinned(&self, bytes: usize) -> Result<PinnedBuffer, RuntimeError> {
        drv(self.ctx.bind_to_thread())?;
        let size = bytes.max(1);
        // SAFETY: flags 0: portable to this context, cached (the host reads it fast).
        let ptr = unsafe { cudarc::driver::result::malloc_host(size, 0) }.map_err(|e| {
            if is_oom(&e) {
                self.out_of_memory(size, "pinned host buffer")
            } else {
                RuntimeError::Driver(e.to_string())
            }
        })?;
        // SAFETY: `size` bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, size) };
        self.shared.allocations.add(1);
        Ok(PinnedBuffer {
            ptr: ptr.cast(),
            len: bytes,
            ctx: self.ctx.clone(),
            counter: self.shared.allocations.clone(),
            pending: Mutex::new(Vec::new()),
        })
    }

    /// Copies `src` (all of it) to the start of `dst` on `stream`, asynchronously: the call
    /// returns at once; `src` stays borrowed by the copy until it has finished (its host view
    /// waits for it, and so does dropping it).
    pub fn copy_to_device(
        &self,
        stream: &Stream,
        src: &PinnedBuffer,
        dst: &mut DeviceBuffer,
    ) -> Result<(), RuntimeError> {
        if src.len > dst.len {
            return Err(RuntimeError::Length {
                expected: dst.len,
                got: src.len,
            });
        }
        drv(self.ctx.bind_to_thread())?;
        dst.used_on(stream)?;
        if src.len > 0 {
            // SAFETY: both ranges are live; the pinned source outlives the copy (see `note`).
            drv(unsafe {
                sys::cuMemcpyHtoDAsync_v2(dst.mem.ptr, src.ptr.cast::<c_void>(), src.len, stream.cu_stream()).result()
            })?;
        }
        src.note(stream)
    }

    /// Copies the start of `src` into all of `dst` on `stream`, asynchronously; `dst`'s host
    /// view waits for the copy.
    pub fn copy_to_host(
        &self,
        stream: &Stream,
        src: &DeviceBuffer,
        dst: &mut PinnedBuffer,
    ) -> Result<(), RuntimeError> {
        if dst.len > src.len {
            return Err(RuntimeError::Length {
                expected: src.len,
                got: dst.len,
            });
        }
        drv(self.ctx.bind_to_thread())?;
        src.used_on(stream)?;
        if dst.len > 0 {
            // SAFETY: both ranges are live; the pinned destination outlives the copy.
            drv(unsafe {
                sys::cuMemcpyDtoHAsync_v2(dst.ptr.cast::<c_void>(), src.mem.ptr, dst.len, stream.cu_stream()).result()
            })?;
        }
        dst.note(stream)
    }
}
