//! Growable device buffers on virtual memory, for caches that grow token by token (KV caches).
//!
//! A [`GrowableBuffer`] reserves a large range of device addresses once and maps physical
//! memory into it chunk by chunk (`cuMemCreate`, `cuMemMap`, `cuMemSetAccess`): growing copies
//! nothing and the base address never moves, so kernels, graphs and page tables that hold it
//! stay valid. Shrinking unmaps whole chunks from the end. What to map or unmap is a pure
//! function of the sizes ([`plan`]), tested without a GPU.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::CudaContext;
use cudarc::driver::sys;

use crate::gpu::{Gpu, RuntimeError, drv};
use crate::memory::{Counter, Memory, StreamUses, is_oom};
use crate::stream::Stream;

/// What to do to go from `mapped` bytes to at least `want` bytes, in whole chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Map the chunks covering bytes `from..to`.
    Map {
        from: usize,
        to: usize,
    },
    /// Unmap the chunks covering bytes `from..to`.
    Unmap {
        from: usize,
        to: usize,
    },
    Nothing,
}

/// The chunks to map or unmap so that `want` bytes are mapped (rounded up to whole chunks),
/// or an error when `want` exceeds the reservation.
pub fn plan(mapped: usize, want: usize, chunk: usize, reserved: usize) -> Result<Plan, RuntimeError> {
    debug_assert!(chunk > 0 && mapped % chunk == 0 && reserved % chunk == 0);
    if want > reserved {
        return Err(RuntimeError::Reservation { want, reserved });
    }
    let target = want.div_ceil(chunk) * chunk;
    Ok(match target.cmp(&mapped) {
        std::cmp::Ordering::Greater => Plan::Map {
            from: mapped,
            to: target,
        },
        std::cmp::Ordering::Less => Plan::Unmap {
            from: target,
            to: mapped,
        },
        std::cmp::Ordering::Equal => Plan::Nothing,
    })
}

/// The reserved range and what is mapped in it; freed when the buffer and every graph that
/// uses it are gone.
pub(crate) struct Reservation {
    base: u64,
    reserved: usize,
    chunk: usize,
    mapped: AtomicUsize,
    device: sys::CUdevice,
    ctx: Arc<CudaContext>,
    counter: Arc<Counter>,
    /// Uses ordered across streams as a pool buffer's are (growing never disturbs running
    /// kernels; shrinking synchronises the device first, and the free waits for the device).
    uses: StreamUses,
}

impl Memory for Reservation {
    fn used_on(&self, stream: &Stream) -> Result<(), RuntimeError> {
        self.uses.note(stream)
    }
}

impl Reservation {
    fn prop(&self) -> sys::CUmemAllocationProp {
        alloc_prop(self.device)
    }

    /// Maps chunks over `from..to`; on failure, unmaps what this call mapped.
    fn map(&self, from: usize, to: usize) -> Result<(), RuntimeError> {
        let prop = self.prop();
        let access = sys::CUmemAccessDesc {
            location: prop.location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        let mut at = from;
        while at < to {
            let r = (|| {
                let mut handle: sys::CUmemGenericAllocationHandle = 0;
                // SAFETY: one chunk of physical memory, mapped at a chunk-aligned address inside
                // the reservation that nothing maps yet, then released: the mapping keeps it.
                unsafe {
                    sys::cuMemCreate(&mut handle, self.chunk, &prop, 0).result()?;
                    let mapped = sys::cuMemMap(self.base + at as u64, self.chunk, 0, handle, 0).result();
                    sys::cuMemRelease(handle).result()?;
                    mapped?;
                    let access = sys::cuMemSetAccess(self.base + at as u64, self.chunk, &access, 1).result();
                    if access.is_err() {
                        let _ = sys::cuMemUnmap(self.base + at as u64, self.chunk).result();
                    }
                    access
                }
            })();
            if let Err(e) = r {
                let _ = self.unmap(from, at);
                return Err(if is_oom(&e) {
                    RuntimeError::OutOfMemory {
                        what: "growable buffer chunk",
                        requested: self.chunk,
                        free: self.ctx.mem_get_info().map(|m| m.0).unwrap_or(0),
                        total: self.ctx.mem_get_info().map(|m| m.1).unwrap_or(0),
                    }
                } else {
                    RuntimeError::Driver(e.to_string())
                });
            }
            self.counter.add(1);
            at += self.chunk;
        }
        Ok(())
    }

    /// Unmaps the chunks over `from..to`, one by one.
    fn unmap(&self, from: usize, to: usize) -> Result<(), RuntimeError> {
        let mut at = from;
        while at < to {
            // SAFETY: a chunk this reservation mapped; no kernel uses it (callers synchronise).
            drv(unsafe { sys::cuMemUnmap(self.base + at as u64, self.chunk).result() })?;
            self.counter.add(-1);
            at += self.chunk;
        }
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // Kernels enqueued before may still read it.
        let _ = self.ctx.synchronize();
        let mapped = self.mapped.load(Ordering::Relaxed);
        if let Err(e) = self.unmap(0, mapped) {
            eprintln!("tile-runtime: unmapping a growable buffer failed: {e}");
        }
        // SAFETY: the whole reservation, as reserved, now unmapped.
        if let Err(e) = unsafe { sys::cuMemAddressFree(self.base, self.reserved).result() } {
            eprintln!("tile-runtime: freeing a reserved address range failed: {e}");
        }
    }
}

fn alloc_prop(device: sys::CUdevice) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct; zero is "no flags, no handle types".
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    prop.location = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: device,
    };
    prop
}

/// A device buffer that grows and shrinks in place: see the module docs.
pub struct GrowableBuffer {
    mem: Arc<Reservation>,
    /// Bytes asked for (at most the mapped bytes).
    len: usize,
}

impl std::fmt::Debug for GrowableBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GrowableBuffer[{} of {} bytes mapped at {:#x}]",
            self.len,
            self.mapped_bytes(),
            self.mem.base
        )
    }
}

impl GrowableBuffer {
    /// The device address of the first byte; it never changes.
    pub fn device_ptr(&self) -> u64 {
        self.mem.base
    }

    /// Bytes usable now (the last size asked for).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes backed by physical memory (`len` rounded up to whole chunks).
    pub fn mapped_bytes(&self) -> usize {
        self.mem.mapped.load(Ordering::Relaxed)
    }

    /// The most bytes it can grow to.
    pub fn capacity(&self) -> usize {
        self.mem.reserved
    }

    /// The size of one physical chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.mem.chunk
    }

    /// The owner of the memory, for graphs that must keep the reservation alive.
    pub fn memory(&self) -> Arc<dyn Memory> {
        self.mem.clone()
    }

    /// Makes `bytes` usable, mapping chunks as needed; what was stored stays where it is.
    /// Growing does not wait for the GPU. When the device runs out of memory midway, the chunks
    /// this call mapped are unmapped again and the buffer is as it was.
    pub fn grow_to(&mut self, bytes: usize) -> Result<(), RuntimeError> {
        let m = &self.mem;
        match plan(m.mapped.load(Ordering::Relaxed), bytes, m.chunk, m.reserved)? {
            Plan::Map { from, to } => {
                drv(m.ctx.bind_to_thread())?;
                m.map(from, to)?;
                m.mapped.store(to, Ordering::Relaxed);
            }
            Plan::Unmap { .. } | Plan::Nothing => {}
        }
        self.len = self.len.max(bytes);
        Ok(())
    }

    /// Shrinks to `bytes`, unmapping the whole chunks beyond them. Waits for the device first
    /// (a kernel still running may read them), so call it between steps, not in a hot loop.
    pub fn shrink_to(&mut self, bytes: usize) -> Result<(), RuntimeError> {
        let m = &self.mem;
        if let Plan::Unmap { from, to } = plan(m.mapped.load(Ordering::Relaxed), bytes, m.chunk, m.reserved)? {
            drv(m.ctx.bind_to_thread())?;
            drv(m.ctx.synchronize())?;
            // Chunks are unmapped from the end; on an error, what is still mapped is recorded.
            let mut at = to;
            while at > from {
                if let Err(e) = m.unmap(at - m.chunk, at) {
                    m.mapped.store(at, Ordering::Relaxed);
                    return Err(e);
                }
                at -= m.chunk;
            }
            m.mapped.store(from, Ordering::Relaxed);
        }
        self.len = self.len.min(bytes);
        Ok(())
    }
}

impl Gpu {
    /// The allocation granularity of physical memory on this GPU (the smallest chunk).
    pub fn vmm_granularity(&self) -> Result<usize, RuntimeError> {
        let prop = alloc_prop(self.ctx.cu_device());
        let mut g = 0usize;
        // SAFETY: reads one usize.
        drv(unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut g,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
            )
            .result()
        })?;
        Ok(g)
    }

    /// Reserves `capacity` bytes of addresses (rounded up to whole chunks) for a buffer that
    /// grows in chunks of `chunk` bytes (0: the granularity, 2 MiB on current GPUs; else a
    /// multiple of it). Nothing is mapped yet: [`GrowableBuffer::grow_to`] maps.
    pub fn reserve(&self, capacity: usize, chunk: usize) -> Result<GrowableBuffer, RuntimeError> {
        drv(self.ctx.bind_to_thread())?;
        let g = self.vmm_granularity()?;
        let chunk = if chunk == 0 { g } else { chunk };
        if chunk % g != 0 {
            return Err(RuntimeError::Chunk { chunk, granularity: g });
        }
        let reserved = capacity.max(1).div_ceil(chunk) * chunk;
        let mut base = 0u64;
        // SAFETY: reserves addresses only; aligned to the chunk.
        unsafe { sys::cuMemAddressReserve(&mut base, reserved, chunk, 0, 0).result() }
            .map_err(|e| RuntimeError::Driver(format!("reserving {reserved} bytes of device addresses failed: {e}")))?;
        Ok(GrowableBuffer {
            mem: Arc::new(Reservation {
                base,
                reserved,
                chunk,
                mapped: AtomicUsize::new(0),
                device: self.ctx.cu_device(),
                ctx: self.ctx.clone(),
                counter: self.shared.allocations.clone(),
                uses: StreamUses::new(None, self.shared.ordering.clone()),
            }),
            len: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB2: usize = 2 << 20;

    #[test]
    fn growing_maps_whole_chunks_from_what_is_mapped() {
        assert_eq!(plan(0, 1, MB2, 8 * MB2).unwrap(), Plan::Map { from: 0, to: MB2 });
        assert_eq!(
            plan(MB2, MB2 + 1, MB2, 8 * MB2).unwrap(),
            Plan::Map { from: MB2, to: 2 * MB2 }
        );
        assert_eq!(plan(2 * MB2, MB2 + 1, MB2, 8 * MB2).unwrap(), Plan::Nothing);
        assert_eq!(plan(0, 0, MB2, 8 * MB2).unwrap(), Plan::Nothing);
        assert_eq!(
            plan(0, 8 * MB2, MB2, 8 * MB2).unwrap(),
            Plan::Map { from: 0, to: 8 * MB2 }
        );
    }

    #[test]
    fn shrinking_unmaps_whole_chunks_past_the_size() {
        assert_eq!(
            plan(4 * MB2, MB2 + 1, MB2, 8 * MB2).unwrap(),
            Plan::Unmap {
                from: 2 * MB2,
                to: 4 * MB2
            }
        );
        assert_eq!(
            plan(4 * MB2, 0, MB2, 8 * MB2).unwrap(),
            Plan::Unmap { from: 0, to: 4 * MB2 }
        );
    }

    #[test]
    fn past_the_reservation_is_an_error_naming_both_sizes() {
        let e = plan(0, 8 * MB2 + 1, MB2, 8 * MB2).unwrap_err().to_string();
        assert!(e.contains("16777217") && e.contains("16777216"), "{e}");
    }
}
