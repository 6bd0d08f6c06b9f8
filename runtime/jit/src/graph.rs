//! CUDA Graphs of JIT kernels: capture launches once, replay them with one call, change a
//! node's arguments without capturing again.
//!
//! ```no_run
//! # use tile_jit::{Arg, ConstValue, DeviceTensor, Gpu, GraphCapture, Jit, JitOptions, Source};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let gpu = Gpu::new(0)?;
//! let jit = Jit::new(&gpu, Source::Static(include_str!("../../../dsl-examples/vector_add.tile")), JitOptions::default())?;
//! let add = jit.kernel("vector_add", &[("BLOCK", ConstValue::Int(1024))])?;
//! let (x, y) = (DeviceTensor::upload(&gpu, &[1.0f32; 4096])?, DeviceTensor::upload(&gpu, &[2.0f32; 4096])?);
//! let mut out = DeviceTensor::<f32>::zeros(&gpu, 4096)?;
//!
//! // Capture on a stream of its own; arguments are checked here, once.
//! let stream = gpu.new_stream()?;
//! let mut cap = GraphCapture::begin(&stream)?;
//! let node = cap.launch(&add, 4, &[Arg::buf(&x), Arg::buf(&y), Arg::buf_mut(&mut out), Arg::i32(4096)])?;
//! let mut graph = cap.finish()?;
//!
//! for _ in 0..100 {
//!     graph.launch(&stream)?; // one driver call for the whole graph
//! }
//! // Point the node at other data: checked like a launch, no new capture.
//! graph.update(node, 2, &[Arg::buf(&y), Arg::buf(&x), Arg::buf_mut(&mut out), Arg::i32(2048)])?;
//! graph.launch(&stream)?;
//! stream.synchronize()?;
//! # Ok(())
//! # }
//! ```
//!
//! A graph keeps every tensor its nodes use alive until it is dropped, and tells each the
//! stream of every replay, so dropping a tensor never frees memory a replay still reads.
//! Kernels compile on first use even inside a capture; [`JitKernel::prepare`] before the
//! capture keeps compile time out of it.

use std::sync::Arc;

use tile_runtime::{Capture, Graph, GraphNode, Memory, RuntimeError, Stream};

use crate::args::Arg;
use crate::compile::JitError;
use crate::jit::{Grid, JitKernel};

/// A node of a [`JitGraph`]: the launch it was captured from, in capture order from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeId(pub usize);

struct Node {
    kernel: JitKernel,
    node: GraphNode,
    /// The memory this node's arguments point into.
    keep: Vec<Arc<dyn Memory>>,
}

/// A capture in progress: launches through [`GraphCapture::launch`] become graph nodes.
pub struct GraphCapture {
    raw: Capture,
    nodes: Vec<Node>,
}

fn owners(args: &[Arg<'_>]) -> Vec<Arc<dyn Memory>> {
    args.iter().filter_map(|a| a.owner.cloned()).collect()
}

fn empty_grid(kernel: &JitKernel, grid: [u32; 3]) -> JitError {
    JitError::Runtime(RuntimeError::Capture(format!(
        "kernel `{}`: a graph node needs at least one program; the grid is {grid:?}",
        kernel.name()
    )))
}

impl GraphCapture {
    /// Starts capturing `stream` (one from [`Gpu::new_stream`](crate::Gpu::new_stream)).
    pub fn begin(stream: &Stream) -> Result<GraphCapture, JitError> {
        Ok(GraphCapture {
            raw: stream.begin_capture()?,
            nodes: Vec::new(),
        })
    }

    /// The stream being captured; other work enqueued on it (copies, raw launches) becomes part
    /// of the graph too, but only launches through [`GraphCapture::launch`] can be updated.
    pub fn stream(&self) -> &Stream {
        self.raw.stream()
    }

    /// Captures a launch of `kernel` as the graph's next node. The arguments are checked (and
    /// the specialisation compiled or fetched) now; replays do neither.
    pub fn launch(&mut self, kernel: &JitKernel, grid: impl Into<Grid>, args: &[Arg<'_>]) -> Result<NodeId, JitError> {
        let Grid(g) = grid.into();
        kernel.check(args)?;
        self.add(kernel, g, args)
    }

    /// Captures a launch of a kernel with `#[grid(..)]` on the grid it gives for `args`, planned
    /// for their sizes, as [`JitKernel::launch_planned_on`] launches it (what the typed
    /// launchers' `capture` calls).
    pub fn launch_planned(&mut self, kernel: &JitKernel, args: &[Arg<'_>]) -> Result<NodeId, JitError> {
        let g = kernel.grid_for(args)?;
        self.add(kernel, g.0, args)
    }

    fn add(&mut self, kernel: &JitKernel, g: [u32; 3], args: &[Arg<'_>]) -> Result<NodeId, JitError> {
        if g.contains(&0) {
            return Err(empty_grid(kernel, g));
        }
        kernel.launch_on(self.raw.stream(), g, args)?;
        let node = self.raw.last_node()?;
        self.nodes.push(Node {
            kernel: kernel.clone(),
            node,
            keep: owners(args),
        });
        Ok(NodeId(self.nodes.len() - 1))
    }

    /// Ends the capture and instantiates the graph.
    pub fn finish(self) -> Result<JitGraph, JitError> {
        let graph = self.raw.finish()?;
        let mut g = JitGraph {
            graph,
            nodes: self.nodes,
            keep: Vec::new(),
        };
        g.collect_keep();
        Ok(g)
    }
}

/// An instantiated graph of JIT launches.
pub struct JitGraph {
    graph: Graph,
    nodes: Vec<Node>,
    /// Every node's memory, once each: what a replay tells its stream to.
    keep: Vec<Arc<dyn Memory>>,
}

impl JitGraph {
    fn collect_keep(&mut self) {
        let mut keep: Vec<Arc<dyn Memory>> = Vec::new();
        for m in self.nodes.iter().flat_map(|n| &n.keep) {
            if !keep.iter().any(|k| Arc::ptr_eq(k, m)) {
                keep.push(m.clone());
            }
        }
        self.keep = keep;
    }

    /// Replays the graph on `stream`: one driver call for every node.
    pub fn launch(&self, stream: &Stream) -> Result<(), JitError> {
        for m in &self.keep {
            m.used_on(stream)?;
        }
        Ok(self.graph.launch(stream)?)
    }

    /// Uploads the graph ahead of its first replay (optional).
    pub fn upload(&self, stream: &Stream) -> Result<(), JitError> {
        Ok(self.graph.upload(stream)?)
    }

    /// How many launches were captured.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The kernel of node `node`.
    pub fn kernel(&self, node: NodeId) -> Option<&JitKernel> {
        self.nodes.get(node.0).map(|n| &n.kernel)
    }

    /// Changes the grid and arguments of node `node` for later replays, checked against the
    /// node's kernel like a launch (a mistake names the kernel and the parameter); a
    /// specialisation the new arguments select is compiled or fetched now.
    pub fn update(&mut self, node: NodeId, grid: impl Into<Grid>, args: &[Arg<'_>]) -> Result<(), JitError> {
        let Grid(g) = grid.into();
        self.set(node, None, Some(g), args)
    }

    /// [`JitGraph::update`] for a node of `kernel` (an error if the node launches another
    /// kernel); `grid`: `None` for the grid its `#[grid(..)]` gives for `args`, planned for their
    /// sizes (what the typed launchers' `update_node` calls).
    pub fn update_as(
        &mut self,
        node: NodeId,
        kernel: &JitKernel,
        grid: Option<Grid>,
        args: &[Arg<'_>],
    ) -> Result<(), JitError> {
        self.set(node, Some(kernel), grid.map(|g| g.0), args)
    }

    fn set(
        &mut self,
        node: NodeId,
        kernel: Option<&JitKernel>,
        grid: Option<[u32; 3]>,
        args: &[Arg<'_>],
    ) -> Result<(), JitError> {
        let count = self.nodes.len();
        let n = self.nodes.get(node.0).ok_or_else(|| {
            JitError::Runtime(RuntimeError::Capture(format!(
                "graph node {} does not exist; the graph has {count} node{}",
                node.0,
                if count == 1 { "" } else { "s" }
            )))
        })?;
        if let Some(k) = kernel
            && !k.same_kernel(&n.kernel)
        {
            let why = if k.name() == n.kernel.name() {
                format!(
                    "was captured from `{}` of another JIT (each `Kernels::new` or `Jit::new` is one)",
                    k.name()
                )
            } else {
                format!("launches `{}`, not `{}`", n.kernel.name(), k.name())
            };
            return Err(JitError::Runtime(RuntimeError::Capture(format!(
                "graph node {} {why}: update it through the launcher that captured it",
                node.0
            ))));
        }
        n.kernel.check(args)?;
        let g = match grid {
            Some(g) => g,
            None => n.kernel.grid_for(args)?.0,
        };
        n.kernel.check(args)?;
        if g.contains(&0) {
            return Err(empty_grid(&n.kernel, g));
        }
        n.kernel.check_grid(g)?;
        let spec = n.kernel.specialization(args, g)?;
        let loaded = &spec.loaded;
        let (gn, graph) = (n.node, &mut self.graph);
        n.kernel.with_params(loaded, args, |params| {
            // SAFETY: checked arguments, as for a launch; the memory they point into is kept
            // alive by this graph from here on.
            unsafe { graph.set_kernel_params(gn, &loaded.func, g, loaded.threads_per_block, loaded.smem_bytes, params) }
        })??;
        self.nodes[node.0].keep = owners(args);
        self.collect_keep();
        Ok(())
    }
}
