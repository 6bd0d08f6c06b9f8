//! CUDA Graphs: work captured from a stream once, instantiated once, replayed with one call.
//!
//! [`Stream::begin_capture`] starts recording the stream's work (launches, copies) into a graph
//! instead of running it; [`Capture::finish`] instantiates it into a [`Graph`] whose
//! [`Graph::launch`] replays everything at the host cost of one call. A capture notes the
//! graph node of each launch it is told about ([`Capture::last_node`]), so that the kernel
//! parameters of that node can be changed in the instantiated graph ([`Graph::set_kernel_params`])
//! without capturing again. A graph keeps the memory its kernels use alive ([`Capture::keep`]).
//!
//! Rules the driver imposes, and what happens here: capture needs a stream of its own (not the
//! GPU's default stream); allocating on the capturing stream is refused (allocate first); a
//! capture dropped without `finish` is ended and discarded.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use cudarc::driver::CudaContext;
use cudarc::driver::sys;

use crate::gpu::{Function, RuntimeError, drv};
use crate::memory::Memory;
use crate::stream::Stream;

/// A kernel node of a captured graph, as the driver names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphNode(pub(crate) sys::CUgraphNode);

// SAFETY: a driver handle; the graph that owns it is what must not be shared unsynchronised.
unsafe impl Send for GraphNode {}
unsafe impl Sync for GraphNode {}

/// A capture in progress on a stream (see the module docs).
pub struct Capture {
    stream: Stream,
    keep: Vec<Arc<dyn Memory>>,
    ended: bool,
}

impl Stream {
    /// Starts capturing this stream's work into a graph. Only this thread's calls are
    /// restricted meanwhile (capture mode "thread local").
    pub fn begin_capture(&self) -> Result<Capture, RuntimeError> {
        if self.inner.cu.cu_stream().is_null() {
            return Err(RuntimeError::Capture(
                "the GPU's default stream cannot be captured; capture on a stream from `Gpu::new_stream`".into(),
            ));
        }
        if self.inner.capturing.swap(true, Ordering::AcqRel) {
            return Err(RuntimeError::Capture("this stream is already being captured".into()));
        }
        let r = (|| {
            drv(self.ctx().bind_to_thread())?;
            // SAFETY: a stream of this context, not capturing (checked above).
            drv(unsafe {
                cudarc::driver::result::stream::begin_capture(
                    self.cu_stream(),
                    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                )
            })
        })();
        if let Err(e) = r {
            self.inner.capturing.store(false, Ordering::Release);
            return Err(e);
        }
        Ok(Capture {
            stream: self.clone(),
            keep: Vec::new(),
            ended: false,
        })
    }
}

impl Capture {
    /// The stream being captured: enqueue the graph's work on it.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Keeps `mem` alive as long as the graph.
    pub fn keep(&mut self, mem: Arc<dyn Memory>) {
        self.keep.push(mem);
    }

    /// The node the last operation enqueued on the stream became (call it right after a launch
    /// to name that launch's node).
    pub fn last_node(&self) -> Result<GraphNode, RuntimeError> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut id: sys::cuuint64_t = 0;
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        let mut deps: *const sys::CUgraphNode = std::ptr::null();
        let mut edges: *const sys::CUgraphEdgeData = std::ptr::null();
        let mut n: usize = 0;
        // SAFETY: out-pointers only; the dependency array is the driver's, read at once.
        drv(unsafe {
            sys::cuStreamGetCaptureInfo_v3(
                self.stream.cu_stream(),
                &mut status,
                &mut id,
                &mut graph,
                &mut deps,
                &mut edges,
                &mut n,
            )
            .result()
        })?;
        if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
            return Err(RuntimeError::Capture(format!(
                "the capture is no longer active ({status:?}): an operation the driver does not allow during capture was enqueued"
            )));
        }
        if n != 1 || deps.is_null() {
            return Err(RuntimeError::Capture(format!(
                "the stream's last operation is {n} graph nodes, not one"
            )));
        }
        // SAFETY: `n` == 1 entries.
        Ok(GraphNode(unsafe { *deps }))
    }

    fn end(&mut self) -> Result<sys::CUgraph, RuntimeError> {
        self.ended = true;
        self.stream.inner.capturing.store(false, Ordering::Release);
        drv(self.stream.ctx().bind_to_thread())?;
        // SAFETY: ends the capture this value began.
        drv(unsafe { cudarc::driver::result::stream::end_capture(self.stream.cu_stream()) })
    }

    /// Ends the capture and instantiates the graph.
    pub fn finish(mut self) -> Result<Graph, RuntimeError> {
        let graph = self.end()?;
        if graph.is_null() {
            return Err(RuntimeError::Capture("the capture produced no graph".into()));
        }
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: instantiates the captured graph (flags 0).
        let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0).result() };
        if let Err(e) = r {
            // SAFETY: the graph is ours and not instantiated.
            unsafe { sys::cuGraphDestroy(graph) };
            return Err(RuntimeError::Capture(format!(
                "instantiating the captured graph failed: {e}"
            )));
        }
        Ok(Graph {
            graph,
            exec,
            ctx: self.stream.ctx().clone(),
            keep: std::mem::take(&mut self.keep),
        })
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if !self.ended {
            if let Ok(g) = self.end() {
                if !g.is_null() {
                    // SAFETY: the discarded graph is ours.
                    unsafe { sys::cuGraphDestroy(g) };
                }
            }
        }
    }
}

/// An instantiated graph: replay it with [`Graph::launch`].
pub struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    ctx: Arc<CudaContext>,
    keep: Vec<Arc<dyn Memory>>,
}

// SAFETY: the handles are used through `&self` for launches (which the driver serialises) and
// `&mut self` for updates.
unsafe impl Send for Graph {}
unsafe impl Sync for Graph {}

impl Graph {
    /// Replays the graph on `stream` (any stream of the GPU).
    pub fn launch(&self, stream: &Stream) -> Result<(), RuntimeError> {
        for m in &self.keep {
            m.used_on(stream)?;
        }
        // SAFETY: an instantiated graph of this context; the memory it uses is kept alive.
        drv(unsafe { sys::cuGraphLaunch(self.exec, stream.cu_stream()).result() })
    }

    /// Uploads the graph to the device ahead of its first launch (optional; takes that cost out
    /// of the first replay).
    pub fn upload(&self, stream: &Stream) -> Result<(), RuntimeError> {
        // SAFETY: as for launch.
        drv(unsafe { sys::cuGraphUpload(self.exec, stream.cu_stream()).result() })
    }

    /// Keeps `mem` alive as long as the graph (for memory that parameter updates point to).
    pub fn keep(&mut self, mem: Arc<dyn Memory>) {
        self.keep.push(mem);
    }

    /// Replaces the function, launch shape and parameters of kernel node `node` for later
    /// replays; the values are copied now.
    ///
    /// # Safety
    /// `params` must match `f`'s signature (one pointer per parameter, each to a value of its
    /// size), and every device address in them must stay allocated while the graph may run.
    pub unsafe fn set_kernel_params(
        &mut self,
        node: GraphNode,
        f: &Function,
        grid: [u32; 3],
        block: u32,
        dynamic_smem: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), RuntimeError> {
        let grid = f.launched_grid(grid)?;
        let p = sys::CUDA_KERNEL_NODE_PARAMS {
            func: f.cu_function(),
            gridDimX: grid[0],
            gridDimY: grid[1],
            gridDimZ: grid[2],
            blockDimX: block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: dynamic_smem,
            kernelParams: params.as_mut_ptr(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        };
        drv(self.ctx.bind_to_thread())?;
        // SAFETY: the node belongs to the graph this exec was instantiated from; the caller
        // vouches for the parameters.
        drv(unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.exec, node.0, &p).result() })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // A replay still running uses the exec; the driver defers its destruction until then.
        // SAFETY: both handles are ours.
        unsafe {
            sys::cuGraphExecDestroy(self.exec);
            sys::cuGraphDestroy(self.graph);
        }
    }
}
