//! The GPU runtime: one device with one stream, modules loaded from PTX or cubin, byte buffers,
//! launches and CUDA-event timing, through cudarc (the driver is loaded at run time, so this
//! builds and its errors are clean on machines without CUDA). It knows nothing of the tile
//! language: the JIT, typed tensors and the tuner (`tile-jit`) sit on top of it.

mod gpu;
mod timing;
mod tma;

pub use gpu::{CuFunction, DeviceBuffer, Function, Gpu, Image, KernelArg, RuntimeError, driver_result};
pub use timing::{TimingOptions, Timings};
pub use tma::{TensorMap, TensorMapRequest, TmaElem};
