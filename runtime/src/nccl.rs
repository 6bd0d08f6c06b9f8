//! NCCL collectives among the GPUs of one host, on the runtime's streams, through cudarc's NCCL
//! bindings (the library is loaded at run time: everything builds without it, and a machine
//! without it gets [`RuntimeError::NoNccl`] instead of a panic).
//!
//! One process drives every GPU: [`Communicator::init_all`] makes one communicator per GPU, and
//! a collective is issued once per rank, inside [`group`] so that NCCL launches them together.
//! Buffers are noted as used on the collective's stream, as a kernel launch notes them, so that
//! freeing them waits for the collective.

use std::ffi::CStr;

use cudarc::nccl::sys;

use crate::memory::DeviceBuffer;
use crate::{Gpu, RuntimeError, Stream};

/// The element types NCCL reduces and moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveType {
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    BF16,
    F32,
    F64,
}

impl CollectiveType {
    pub fn bytes(self) -> usize {
        use CollectiveType::*;
        match self {
            I8 | U8 => 1,
            F16 | BF16 => 2,
            I32 | U32 | F32 => 4,
            I64 | U64 | F64 => 8,
        }
    }

    fn sys(self) -> sys::ncclDataType_t {
        use CollectiveType::*;
        use sys::ncclDataType_t as T;
        match self {
            I8 => T::ncclInt8,
            U8 => T::ncclUint8,
            I32 => T::ncclInt32,
            U32 => T::ncclUint32,
            I64 => T::ncclInt64,
            U64 => T::ncclUint64,
            F16 => T::ncclFloat16,
            BF16 => T::ncclBfloat16,
            F32 => T::ncclFloat32,
            F64 => T::ncclFloat64,
        }
    }
}

/// How a reduction combines the ranks' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// The sum divided by the number of ranks.
    Avg,
}

impl ReduceOp {
    fn sys(self) -> sys::ncclRedOp_t {
        use sys::ncclRedOp_t as R;
        match self {
            ReduceOp::Sum => R::ncclSum,
            ReduceOp::Prod => R::ncclProd,
            ReduceOp::Max => R::ncclMax,
            ReduceOp::Min => R::ncclMin,
            ReduceOp::Avg => R::ncclAvg,
        }
    }
}

/// NCCL's result as this crate's error, with NCCL's own message.
fn check(what: &str, r: sys::ncclResult_t) -> Result<(), RuntimeError> {
    if r == sys::ncclResult_t::ncclSuccess {
        return Ok(());
    }
    // SAFETY: the library is loaded (every caller went through `loaded`); NCCL returns a static
    // string for every result code.
    let message = unsafe { CStr::from_ptr(sys::ncclGetErrorString(r)) }
        .to_string_lossy()
        .into_owned();
    Err(RuntimeError::Nccl(format!("{what}: {message} ({r:?})")))
}

/// Whether NCCL can be loaded; every entry point asks first, since cudarc panics on a missing
/// library.
fn loaded() -> Result<(), RuntimeError> {
    // SAFETY: only tries to open the library.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(RuntimeError::NoNccl)
    }
}

/// NCCL's version as `(major, minor, patch)`.
pub fn nccl_version() -> Result<(u32, u32, u32), RuntimeError> {
    loaded()?;
    let mut v = 0;
    // SAFETY: the library is loaded; `v` outlives the call.
    check("ncclGetVersion", unsafe { sys::ncclGetVersion(&mut v) })?;
    let v = v as u32;
    // Since 2.9: major * 10000 + minor * 100 + patch.
    Ok((v / 10000, v / 100 % 100, v % 100))
}

/// Runs `f`, which issues one collective per rank, between `ncclGroupStart` and `ncclGroupEnd`:
/// what one thread driving several GPUs must do, or the first rank's call waits for the others
/// forever. Check every rank's arguments before the first call (the all-rank functions of
/// `tile_jit::collective` do): a call refused midway leaves the ranks already issued waiting for
/// their partners when the group ends.
pub fn group<R>(f: impl FnOnce() -> Result<R, RuntimeError>) -> Result<R, RuntimeError> {
    loaded()?;
    // SAFETY: the library is loaded.
    check("ncclGroupStart", unsafe { sys::ncclGroupStart() })?;
    let r = f();
    // SAFETY: as above; ends the group even when `f` failed, so that NCCL is left usable.
    let end = check("ncclGroupEnd", unsafe { sys::ncclGroupEnd() });
    let r = r?;
    end.map(|()| r)
}

/// The in-place all-reduce on every rank at once, `ranks[i]` = (communicator, buffer, stream):
/// every rank's arguments are checked before NCCL sees any, then the calls are issued in one
/// [`group`].
pub fn all_reduce_in_place_all(
    ranks: &mut [(&Communicator, &mut DeviceBuffer, &Stream)],
    count: usize,
    (ty, op): (CollectiveType, ReduceOp),
) -> Result<(), RuntimeError> {
    // Every rank of one communicator, once each: a partial group would wait for the others.
    let mut seen: Vec<usize> = ranks.iter().map(|(c, _, _)| c.rank).collect();
    seen.sort_unstable();
    let size = ranks.first().map_or(0, |r| r.0.size);
    if ranks.iter().any(|(c, _, _)| c.size != size) || seen != (0..size).collect::<Vec<_>>() {
        return Err(RuntimeError::Nccl(format!(
            "all-reduce on every rank: got ranks {seen:?}; each of the communicator's {size} ranks must appear once"
        )));
    }
    for (c, buf, stream) in ranks.iter() {
        c.prepare("all-reduce", stream, &[("buffer", buf, count)], ty)?;
    }
    group(|| {
        for (c, buf, stream) in ranks.iter_mut() {
            let at = buf.device_ptr();
            c.all_reduce_at((at, buf), count, (ty, op), stream)?;
        }
        Ok(())
    })
}

/// One GPU's member of a communicator. Send, not Sync: NCCL allows a communicator to be used
/// from another thread, not from two at once.
pub struct Communicator {
    comm: sys::ncclComm_t,
    gpu: Gpu,
    rank: usize,
    size: usize,
}

// SAFETY: an NCCL communicator is a handle NCCL allows any thread to use, one at a time; `&mut`
// is not needed because every use takes `&self` from one thread (the type is not Sync).
unsafe impl Send for Communicator {}

impl Communicator {
    /// One communicator per GPU of `gpus` (`ncclCommInitAll`), rank `i` on `gpus[i]`. The GPUs
    /// must be distinct devices: NCCL refuses two ranks on one GPU.
    pub fn init_all(gpus: &[Gpu]) -> Result<Vec<Communicator>, RuntimeError> {
        loaded()?;
        let devices: Vec<i32> = gpus.iter().map(|g| g.ordinal() as i32).collect();
        let mut seen = devices.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != devices.len() || devices.is_empty() {
            return Err(RuntimeError::Nccl(format!(
                "a communicator needs one or more distinct GPUs; got ordinals {devices:?}"
            )));
        }
        let mut comms = vec![std::ptr::null_mut(); gpus.len()];
        // SAFETY: `comms` has room for one handle per device, `devices` lists them; NCCL
        // initialises every handle or returns an error.
        check("ncclCommInitAll", unsafe {
            sys::ncclCommInitAll(comms.as_mut_ptr(), gpus.len() as i32, devices.as_ptr())
        })?;
        Ok(comms
            .into_iter()
            .zip(gpus)
            .enumerate()
            .map(|(rank, (comm, gpu))| Communicator {
                comm,
                gpu: gpu.clone(),
                rank,
                size: gpus.len(),
            })
            .collect())
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Makes `bufs` ready for a collective on `stream`: that the stream and the buffers are this
    /// rank's GPU's and each buffer holds its `elems` elements of `ty`, then each buffer noted as
    /// used on the stream (so that freeing it waits for the collective).
    fn prepare(
        &self,
        what: &str,
        stream: &Stream,
        bufs: &[(&str, &DeviceBuffer, usize)],
        ty: CollectiveType,
    ) -> Result<(), RuntimeError> {
        if !self.gpu.owns(stream) {
            return Err(RuntimeError::Nccl(format!(
                "{what} on rank {}: the stream is not on this rank's GPU {}",
                self.rank,
                self.gpu.ordinal()
            )));
        }
        for (name, b, elems) in bufs {
            if !b.is_on(&self.gpu) {
                return Err(RuntimeError::Nccl(format!(
                    "{what} on rank {}: the {name} buffer is not on this rank's GPU {}",
                    self.rank,
                    self.gpu.ordinal()
                )));
            }
            let need = elems.checked_mul(ty.bytes()).unwrap_or(usize::MAX);
            if b.bytes() < need {
                return Err(RuntimeError::Nccl(format!(
                    "{what} on rank {}: the {name} buffer holds {} bytes; {elems} elements of {ty:?} need {need}",
                    self.rank,
                    b.bytes()
                )));
            }
        }
        for (_, b, _) in bufs {
            b.used_on(stream)?;
        }
        Ok(())
    }

    /// Every rank's `count` elements of `send` combined with `op`, into every rank's `recv`.
    pub fn all_reduce(
        &self,
        send: &DeviceBuffer,
        recv: &mut DeviceBuffer,
        count: usize,
        (ty, op): (CollectiveType, ReduceOp),
        stream: &Stream,
    ) -> Result<(), RuntimeError> {
        self.prepare(
            "all-reduce",
            stream,
            &[("send", send, count), ("receive", recv, count)],
            ty,
        )?;
        self.all_reduce_at((send.device_ptr(), recv), count, (ty, op), stream)
    }

    /// [`Communicator::all_reduce`] with the result written over `buf`.
    pub fn all_reduce_in_place(
        &self,
        buf: &mut DeviceBuffer,
        count: usize,
        (ty, op): (CollectiveType, ReduceOp),
        stream: &Stream,
    ) -> Result<(), RuntimeError> {
        self.prepare("all-reduce", stream, &[("buffer", buf, count)], ty)?;
        self.all_reduce_at((buf.device_ptr(), buf), count, (ty, op), stream)
    }

    /// `ncclAllReduce` from address `send` into `recv`, both made ready by the caller (`prepare`).
    fn all_reduce_at(
        &self,
        (send, recv): (u64, &mut DeviceBuffer),
        count: usize,
        (ty, op): (CollectiveType, ReduceOp),
        stream: &Stream,
    ) -> Result<(), RuntimeError> {
        // SAFETY: both addresses are live device memory of at least `count` elements on this
        // rank's GPU (`prepare`: device, size and use, by the callers), kept alive until the stream is past the
        // collective (noted as used on it); equal addresses are NCCL's in-place form.
        check("ncclAllReduce", unsafe {
            sys::ncclAllReduce(
                send as *const _,
                recv.device_ptr() as *mut _,
                count,
                ty.sys(),
                op.sys(),
                self.comm,
                stream.cu_stream() as _,
            )
        })
    }

    /// Every rank's `count` elements of `send`, concatenated in rank order into every rank's
    /// `recv` (`count * size` elements).
    pub fn all_gather(
        &self,
        send: &DeviceBuffer,
        recv: &mut DeviceBuffer,
        count: usize,
        ty: CollectiveType,
        stream: &Stream,
    ) -> Result<(), RuntimeError> {
        let all = count.saturating_mul(self.size);
        self.prepare(
            "all-gather",
            stream,
            &[("send", send, count), ("receive", recv, all)],
            ty,
        )?;
        // SAFETY: as in `all_reduce`; `recv` holds `count * size` elements (checked).
        check("ncclAllGather", unsafe {
            sys::ncclAllGather(
                send.device_ptr() as *const _,
                recv.device_ptr() as *mut _,
                count,
                ty.sys(),
                self.comm,
                stream.cu_stream() as _,
            )
        })
    }

    /// The ranks' `count * size` elements of `send` combined with `op`; rank `r` receives
    /// block `r` (`count` elements) in `recv`.
    pub fn reduce_scatter(
        &self,
        send: &DeviceBuffer,
        recv: &mut DeviceBuffer,
        count: usize,
        (ty, op): (CollectiveType, ReduceOp),
        stream: &Stream,
    ) -> Result<(), RuntimeError> {
        let all = count.saturating_mul(self.size);
        self.prepare(
            "reduce-scatter",
            stream,
            &[("send", send, all), ("receive", recv, count)],
            ty,
        )?;
        // SAFETY: as in `all_gather`, with the sizes swapped.
        check("ncclReduceScatter", unsafe {
            sys::ncclReduceScatter(
                send.device_ptr() as *const _,
                recv.device_ptr() as *mut _,
                count,
                ty.sys(),
                op.sys(),
                self.comm,
                stream.cu_stream() as _,
            )
        })
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        // SAFETY: the handle came from ncclCommInitAll and is destroyed once; NCCL waits for
        // its outstanding operations.
        unsafe {
            sys::ncclCommDestroy(self.comm);
        }
    }
}
