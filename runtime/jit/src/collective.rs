//! NCCL collectives on typed device tensors ([`tile_runtime::nccl`] underneath): the element
//! type comes from the tensors, the counts from their lengths, which must fit the collective.
//!
//! ```no_run
//! use tile_jit::collective::{self, ReduceOp};
//! use tile_jit::{DeviceTensor, Gpu};
//!
//! # fn main() -> Result<(), tile_jit::RuntimeError> {
//! let gpus: Vec<Gpu> = (0..Gpu::count()).map(Gpu::new).collect::<Result<_, _>>()?;
//! let comms = collective::init_all(&gpus)?;
//! let mut parts: Vec<DeviceTensor<f32>> =
//!     gpus.iter().map(|g| DeviceTensor::upload(g, &[1.0; 1024])).collect::<Result<_, _>>()?;
//! // Every rank at once, in one group: every rank ends with the sum.
//! let mut ranks: Vec<_> = comms.iter().zip(&mut parts).map(|(c, t)| (c, t, c.gpu().stream())).collect();
//! collective::all_reduce_in_place_all(&mut ranks, ReduceOp::Sum)?;
//! # Ok(())
//! # }
//! ```

use tile_lang::ir::DType;
pub use tile_runtime::nccl::{group, nccl_version};
pub use tile_runtime::{CollectiveType, Communicator, MemSyncDomain, ReduceOp};
use tile_runtime::{Gpu, RuntimeError, Stream};

use crate::tensor::{DeviceTensor, Element};

/// One communicator per GPU of `gpus` (one process drives them all), rank `i` on `gpus[i]`.
pub fn init_all(gpus: &[Gpu]) -> Result<Vec<Communicator>, RuntimeError> {
    Communicator::init_all(gpus)
}

/// NCCL's element type for `T`.
fn ty<T: Element>() -> Result<CollectiveType, RuntimeError> {
    Ok(match T::DTYPE {
        DType::I8 => CollectiveType::I8,
        DType::U8 => CollectiveType::U8,
        DType::I32 => CollectiveType::I32,
        DType::U32 => CollectiveType::U32,
        DType::I64 => CollectiveType::I64,
        DType::U64 => CollectiveType::U64,
        DType::F16 => CollectiveType::F16,
        DType::BF16 => CollectiveType::BF16,
        DType::F32 => CollectiveType::F32,
        DType::F64 => CollectiveType::F64,
        d => {
            return Err(RuntimeError::Nccl(format!(
                "NCCL has no {d} type; its collectives take i8, u8, i32, u32, i64, u64, f16, bf16, f32, f64"
            )));
        }
    })
}

fn lengths(what: &str, want: usize, got: usize, which: &str) -> Result<(), RuntimeError> {
    if want == got {
        Ok(())
    } else {
        Err(RuntimeError::Nccl(format!(
            "{what}: the {which} tensor has {got} elements; it must have {want}"
        )))
    }
}

/// Every rank's `send` combined with `op` into every rank's `recv` (same length).
pub fn all_reduce<T: Element>(
    comm: &Communicator,
    send: &DeviceTensor<T>,
    recv: &mut DeviceTensor<T>,
    op: ReduceOp,
    stream: &Stream,
) -> Result<(), RuntimeError> {
    lengths("all-reduce", send.len(), recv.len(), "receive")?;
    comm.all_reduce(send.buffer(), recv.buffer_mut(), send.len(), (ty::<T>()?, op), stream)
}

/// [`all_reduce`] with the result written over `buf`.
pub fn all_reduce_in_place<T: Element>(
    comm: &Communicator,
    buf: &mut DeviceTensor<T>,
    op: ReduceOp,
    stream: &Stream,
) -> Result<(), RuntimeError> {
    let n = buf.len();
    comm.all_reduce_in_place(buf.buffer_mut(), n, (ty::<T>()?, op), stream)
}

/// [`all_reduce_in_place`] on every rank at once, `ranks[i]` = (communicator, tensor, stream),
/// in one [`group`]: every rank's arguments are checked before NCCL sees any (a refusal midway
/// through a group would leave the ranks already issued waiting for their partners). The
/// tensors must have one length.
pub fn all_reduce_in_place_all<T: Element>(
    ranks: &mut [(&Communicator, &mut DeviceTensor<T>, &Stream)],
    op: ReduceOp,
) -> Result<(), RuntimeError> {
    let n = ranks.first().map_or(0, |r| r.1.len());
    for (_, t, _) in ranks.iter() {
        lengths("all-reduce", n, t.len(), "rank's")?;
    }
    let mut bufs: Vec<_> = ranks.iter_mut().map(|(c, t, s)| (*c, t.buffer_mut(), *s)).collect();
    tile_runtime::nccl::all_reduce_in_place_all(&mut bufs, n, (ty::<T>()?, op))
}

/// Every rank's `send`, concatenated in rank order into every rank's `recv` (`size` times as
/// long).
pub fn all_gather<T: Element>(
    comm: &Communicator,
    send: &DeviceTensor<T>,
    recv: &mut DeviceTensor<T>,
    stream: &Stream,
) -> Result<(), RuntimeError> {
    lengths(
        "all-gather",
        send.len().saturating_mul(comm.size()),
        recv.len(),
        "receive",
    )?;
    comm.all_gather(send.buffer(), recv.buffer_mut(), send.len(), ty::<T>()?, stream)
}

/// The ranks' `send` (`size` blocks of `recv.len()`) combined with `op`; rank `r` receives
/// block `r`.
pub fn reduce_scatter<T: Element>(
    comm: &Communicator,
    send: &DeviceTensor<T>,
    recv: &mut DeviceTensor<T>,
    op: ReduceOp,
    stream: &Stream,
) -> Result<(), RuntimeError> {
    let n = recv.len();
    lengths("reduce-scatter", n.saturating_mul(comm.size()), send.len(), "send")?;
    comm.reduce_scatter(send.buffer(), recv.buffer_mut(), n, (ty::<T>()?, op), stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_nccl_is_an_error_that_says_what_to_do() {
        match nccl_version() {
            Err(e) => {
                assert!(matches!(e, RuntimeError::NoNccl), "{e}");
                assert!(e.to_string().contains("LD_LIBRARY_PATH"), "{e}");
            }
            Ok((major, _, _)) => assert!(major >= 2),
        }
        // Types NCCL lacks are named.
        let e = ty::<i16>().unwrap_err().to_string();
        assert!(e.contains("NCCL has no i16 type"), "{e}");
        assert_eq!(ty::<half::bf16>().unwrap(), CollectiveType::BF16);
    }
}
