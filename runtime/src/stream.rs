//! Streams and events. A [`Stream`] is an ordered queue of GPU work; launches, copies,
//! allocations and frees take one. An [`Event`] marks a point in a stream: another stream can
//! wait for it, the host can wait for it, and two events time the work between them.
//!
//! Ordering work *between* streams is the caller's, with events. Freeing memory is the
//! runtime's: a buffer used on several streams is freed after the work on every one of them
//! (see [`crate::memory`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use crate::gpu::{Gpu, RuntimeError, drv};

pub(crate) struct StreamInner {
    pub(crate) cu: Arc<CudaStream>,
    /// Set while a [`Capture`](crate::Capture) records this stream's work into a graph.
    pub(crate) capturing: AtomicBool,
}

/// The memory-synchronisation domain of a stream's kernels ([`Stream::set_mem_sync_domain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemSyncDomain {
    /// Where kernels run unless told otherwise.
    Default,
    /// Where NCCL runs its kernels by default.
    Remote,
}

/// A CUDA stream. Cloning is cheap and names the same stream; the stream is destroyed when the
/// last clone (and every buffer that must be freed on it) is gone.
#[derive(Clone)]
pub struct Stream {
    pub(crate) inner: Arc<StreamInner>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({:p})", self.cu_stream())
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Stream) -> bool {
        self.cu_stream() == other.cu_stream()
    }
}

impl Stream {
    pub(crate) fn wrap(cu: Arc<CudaStream>) -> Stream {
        Stream {
            inner: Arc::new(StreamInner {
                cu,
                capturing: AtomicBool::new(false),
            }),
        }
    }

    /// The driver's handle, for code that calls the driver API itself.
    pub fn cu_stream(&self) -> cudarc::driver::sys::CUstream {
        self.inner.cu.cu_stream()
    }

    pub(crate) fn ctx(&self) -> &Arc<CudaContext> {
        self.inner.cu.context()
    }

    /// Puts every kernel launched on this stream from now on into memory-synchronisation
    /// `domain` (compute capability 9.0 and newer). A kernel's memory fences then wait only for
    /// writes made in its own domain: compute kernels in the default domain do not wait for the
    /// traffic of NCCL's kernels, which NCCL launches in the remote one (its
    /// `NCCL_MEM_SYNC_DOMAIN`, 1 by default). The attribute belongs to the stream, so launches
    /// cost the same. The device's default stream cannot take it: use a stream of your own.
    pub fn set_mem_sync_domain(&self, domain: MemSyncDomain) -> Result<(), RuntimeError> {
        use cudarc::driver::sys;
        self.domain_attribute_allowed()?;
        // SAFETY: a zeroed attribute value is valid for every field; only the domain is set.
        let mut value: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
        value.memSyncDomain = match domain {
            MemSyncDomain::Default => sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT,
            MemSyncDomain::Remote => sys::CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE,
        };
        drv(self.ctx().bind_to_thread())?;
        // SAFETY: the stream is live; `value` outlives the call.
        let r = unsafe {
            sys::cuStreamSetAttribute(
                self.cu_stream(),
                sys::CUstreamAttrID::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
                &value,
            )
        };
        drv(r.result())
    }

    /// Which of the GPU's hardware domains the kernels launched on this stream use for each
    /// logical domain (compute capability 9.0 and newer; Hopper has four): by default the
    /// logical default domain is hardware domain 0 and the remote one 1. Mapping both of a
    /// stream's domains apart from NCCL's keeps even its "remote" kernels out of NCCL's way.
    pub fn set_mem_sync_domain_map(&self, default: u8, remote: u8) -> Result<(), RuntimeError> {
        use cudarc::driver::sys;
        self.domain_attribute_allowed()?;
        // SAFETY: a zeroed attribute value is valid for every field; only the map is set.
        let mut value: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
        value.memSyncDomainMap = sys::CUlaunchMemSyncDomainMap {
            default_: default,
            remote,
        };
        drv(self.ctx().bind_to_thread())?;
        // SAFETY: the stream is live; `value` outlives the call.
        let r = unsafe {
            sys::cuStreamSetAttribute(
                self.cu_stream(),
                sys::CUstreamAttrID::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
                &value,
            )
        };
        drv(r.result())
    }

    /// That this stream can take a memory-synchronisation attribute: Hopper or newer, not the
    /// default stream.
    fn domain_attribute_allowed(&self) -> Result<(), RuntimeError> {
        let (major, _) = drv(self.ctx().compute_capability())?;
        if major < 9 {
            return Err(RuntimeError::Unsupported(format!(
                "memory synchronisation domains need compute capability 9.0 or newer; this GPU has {major}.x"
            )));
        }
        if self.cu_stream().is_null() {
            return Err(RuntimeError::Unsupported(
                "the default stream takes no memory synchronisation domain; set it on `gpu.new_stream()`".into(),
            ));
        }
        Ok(())
    }

    /// Whether a graph capture is recording this stream.
    pub fn is_capturing(&self) -> bool {
        self.inner.capturing.load(Ordering::Relaxed)
    }

    /// Waits on the host until everything enqueued on this stream has run; reports the first
    /// error a kernel raised.
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        drv(self.inner.cu.synchronize())
    }

    /// Records a new event at this point of the stream (one that can also time).
    pub fn record(&self) -> Result<Event, RuntimeError> {
        let e = Event::new(self.ctx())?;
        e.record(self)?;
        Ok(e)
    }

    /// Makes later work on this stream wait until `event` has completed (no host wait).
    pub fn wait(&self, event: &Event) -> Result<(), RuntimeError> {
        drv(self.inner.cu.wait(&event.0))
    }

    /// Makes later work on this stream wait for everything enqueued on `other` so far.
    pub fn wait_for(&self, other: &Stream) -> Result<(), RuntimeError> {
        if self == other {
            return Ok(());
        }
        self.wait(&other.record()?)
    }
}

/// A point in a stream, recorded by [`Stream::record`] or [`Event::record`].
pub struct Event(pub(crate) CudaEvent);

impl Event {
    fn new(ctx: &Arc<CudaContext>) -> Result<Event, RuntimeError> {
        drv(ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))).map(Event)
    }

    /// Records the event again, at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<(), RuntimeError> {
        drv(self.0.record(&stream.inner.cu))
    }

    /// Waits on the host until the work before the event has run.
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        drv(self.0.synchronize())
    }

    /// Whether the work before the event has run (no wait).
    pub fn is_complete(&self) -> bool {
        self.0.is_complete()
    }

    /// Milliseconds on the GPU from this event to `later` (both must have completed).
    pub fn elapsed_ms(&self, later: &Event) -> Result<f32, RuntimeError> {
        drv(self.0.elapsed_ms(&later.0))
    }
}

impl Gpu {
    /// A new stream that does not synchronise with the default one: work on it overlaps work on
    /// other streams unless events order them.
    pub fn new_stream(&self) -> Result<Stream, RuntimeError> {
        drv(self.ctx.new_stream()).map(Stream::wrap)
    }

    /// A new event (with timing) to record on any stream of this GPU.
    pub fn new_event(&self) -> Result<Event, RuntimeError> {
        Event::new(&self.ctx)
    }
}
