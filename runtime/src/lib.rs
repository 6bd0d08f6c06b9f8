//! The GPU runtime: a device with its streams and events, modules loaded from PTX or cubin,
//! launches, pool-allocated device buffers, pinned host buffers, growable buffers on virtual
//! memory, CUDA Graphs, and CUDA-event timing, through cudarc (the driver is loaded at run time, so this
//! builds and its errors are clean on machines without CUDA). It knows nothing of the tile
//! language: the JIT, typed tensors and the tuner (`tile-jit`) sit on top of it.

mod gpu;
mod graph;
mod memory;
pub mod nccl;
mod stream;
mod timing;
mod tma;
pub mod vmm;

pub use gpu::{CuFunction, Function, Gpu, Image, KernelArg, RuntimeError, driver_result, split_grid};
pub use graph::{Capture, Graph, GraphNode};
pub use memory::{DeviceBuffer, Memory, PinnedBuffer};
pub use nccl::{CollectiveType, Communicator, ReduceOp};
pub use stream::{Event, MemSyncDomain, Stream};
pub use timing::{TimingOptions, Timings};
pub use tma::{TensorMap, TensorMapRequest, TmaElem};
pub use vmm::GrowableBuffer;
