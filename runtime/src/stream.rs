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
