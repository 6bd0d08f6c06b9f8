//! Typed memory: a [`DeviceTensor<T>`] (pool memory) or a [`GrowableTensor<T>`] (virtual
//! memory that grows in place) knows its element dtype, so a launch can check it against the
//! kernel's `*T` parameters before anything reaches the GPU; a [`PinnedTensor<T>`] is page-locked
//! host memory for asynchronous copies.

use std::marker::PhantomData;
use std::sync::Arc;

use half::{bf16, f16};
use tile_lang::ir::DType;

use tile_runtime::{DeviceBuffer, Gpu, GrowableBuffer, Memory, PinnedBuffer, RuntimeError, Stream};

mod sealed {
    pub trait Sealed {}
}

/// A host type that has a tile dtype: the element of a [`DeviceTensor`] and the value of a
/// scalar argument. Sealed: uploads copy the host bytes as they are, which is only right for
/// these plain types.
pub trait Element: Copy + Default + Send + Sync + 'static + sealed::Sealed {
    const DTYPE: DType;
    /// The value's bits, zero-extended to 64: what a kernel parameter of this dtype holds.
    fn to_bits(self) -> u64;
}

macro_rules! element {
    ($($t:ty => $d:ident, |$v:ident| $bits:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_bits(self) -> u64 {
                let $v = self;
                $bits
            }
        }
    )*};
}

element! {
    i8 => I8, |v| v as u8 as u64;
    i16 => I16, |v| v as u16 as u64;
    i32 => I32, |v| v as u32 as u64;
    i64 => I64, |v| v as u64;
    u8 => U8, |v| v as u64;
    u16 => U16, |v| v as u64;
    u32 => U32, |v| v as u64;
    u64 => U64, |v| v;
    f16 => F16, |v| v.to_bits() as u64;
    bf16 => BF16, |v| v.to_bits() as u64;
    f32 => F32, |v| v.to_bits() as u64;
    f64 => F64, |v| v.to_bits();
    // (`v.to_bits()` would find `Element::to_bits` first: float8's takes `&self`.)
    float8::F8E4M3 => F8E4M3, |v| float8::F8E4M3::to_bits(&v) as u64;
    float8::F8E5M2 => F8E5M2, |v| float8::F8E5M2::to_bits(&v) as u64;
}

/// The Rust type to hold elements of `d`, for messages (`None` for dtypes with no host type yet).
pub(crate) fn host_type(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::U16 => "u16",
        DType::U32 => "u32",
        DType::U64 => "u64",
        DType::F16 => "half::f16",
        DType::BF16 => "half::bf16",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F8E4M3 => "float8::F8E4M3",
        DType::F8E5M2 => "float8::F8E5M2",
        DType::Bool => return None,
    })
}

fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: every `Element` is a plain number type without padding, so its memory is
    // initialised bytes; the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

fn as_bytes_mut<T: Element>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and every bit pattern is a valid value of every `Element` type.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

mod memory_seal {
    /// Only this crate's tensors are device memory: a launch trusts their address and length
    /// (a safe function may not hand a kernel address 0 or a length it does not have).
    pub trait Sealed {}
}

/// Typed device memory a kernel can take as a `*T` argument ([`Arg::buf`](crate::Arg::buf)):
/// [`DeviceTensor`] and [`GrowableTensor`]. The trait is sealed — its address and length are
/// what every launch checks its arguments against, so no type outside this crate implements it.
pub trait DeviceMemory: memory_seal::Sealed {
    type Elem: Element;
    /// The device address of the first element.
    fn device_ptr(&self) -> u64;
    /// Elements usable now.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The owner of the memory (kept alive by graphs; told which streams use it).
    fn owner(&self) -> &Arc<dyn Memory>;
}

/// `len` elements of `T` in device memory, from the GPU's memory pool.
///
/// Pass it to a kernel as [`Arg::buf`](crate::Arg::buf) (read-only) or
/// [`Arg::buf_mut`](crate::Arg::buf_mut) (for `*mut T` parameters). It is freed when dropped (or,
/// if a graph launches kernels on it, when the graph is dropped too), in stream order after the
/// work already enqueued on every stream that used it.
pub struct DeviceTensor<T: Element> {
    buf: DeviceBuffer,
    owner: Arc<dyn Memory>,
    addr: u64,
    len: usize,
    gpu: Gpu,
    _elem: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for DeviceTensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceTensor<{}>[{}] at {:#x}", T::DTYPE, self.len, self.addr)
    }
}

fn bytes_of<T: Element>(len: usize) -> Result<usize, RuntimeError> {
    len.checked_mul(std::mem::size_of::<T>()).ok_or(RuntimeError::Length {
        expected: usize::MAX / std::mem::size_of::<T>(),
        got: len,
    })
}

impl<T: Element> DeviceTensor<T> {
    /// Copies `data` to a new device tensor (on the GPU's default stream).
    pub fn upload(gpu: &Gpu, data: &[T]) -> Result<DeviceTensor<T>, RuntimeError> {
        Self::upload_on(gpu, gpu.stream(), data)
    }

    /// A new device tensor of `len` zeros (all bits zero: `0`, `0.0`), on the default stream.
    pub fn zeros(gpu: &Gpu, len: usize) -> Result<DeviceTensor<T>, RuntimeError> {
        Self::zeros_on(gpu, gpu.stream(), len)
    }

    /// Copies `data` to a new device tensor allocated in `stream`'s order.
    pub fn upload_on(gpu: &Gpu, stream: &Stream, data: &[T]) -> Result<DeviceTensor<T>, RuntimeError> {
        Ok(Self::wrap(gpu, gpu.upload_on(stream, as_bytes(data))?, data.len()))
    }

    /// `len` zeros allocated in `stream`'s order: a temporary that costs no synchronisation.
    pub fn zeros_on(gpu: &Gpu, stream: &Stream, len: usize) -> Result<DeviceTensor<T>, RuntimeError> {
        Ok(Self::wrap(gpu, gpu.zeros_on(stream, bytes_of::<T>(len)?)?, len))
    }

    /// `len` elements allocated in `stream`'s order and not initialised (every bit pattern is
    /// a valid `T`, so reading them is defined, just meaningless): the cheapest temporary.
    pub fn uninit_on(gpu: &Gpu, stream: &Stream, len: usize) -> Result<DeviceTensor<T>, RuntimeError> {
        Ok(Self::wrap(gpu, gpu.alloc_on(stream, bytes_of::<T>(len)?)?, len))
    }

    /// The untyped buffer underneath, for runtime calls that take one (collectives).
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buf
    }

    /// [`DeviceTensor::buffer`], for calls that write it.
    pub fn buffer_mut(&mut self) -> &mut DeviceBuffer {
        &mut self.buf
    }

    fn wrap(gpu: &Gpu, buf: DeviceBuffer, len: usize) -> DeviceTensor<T> {
        // The address never changes; read it once so that launches need not ask the driver.
        let addr = buf.device_ptr();
        DeviceTensor {
            owner: buf.memory(),
            buf,
            addr,
            len,
            gpu: gpu.clone(),
            _elem: PhantomData,
        }
    }

    /// Copies the tensor to the host, after every kernel enqueued before it on any stream that
    /// used it has run.
    pub fn download(&self) -> Result<Vec<T>, RuntimeError> {
        let mut out = vec![T::default(); self.len];
        // A copy into pageable memory has finished when the call returns, but a kernel's error
        // is only reported by a synchronisation: `download_into` makes it surface here.
        self.gpu.download_into(&self.buf, as_bytes_mut(&mut out))?;
        Ok(out)
    }

    /// Overwrites the tensor with `data`, which must have the same length.
    pub fn copy_from(&mut self, data: &[T]) -> Result<(), RuntimeError> {
        if data.len() != self.len {
            return Err(RuntimeError::Length {
                expected: self.len,
                got: data.len(),
            });
        }
        self.gpu.upload_into(&mut self.buf, as_bytes(data))
    }

    /// Copies all of `src` (at most as long) to the start of this tensor on `stream`.
    pub fn copy_from_device(&mut self, src: &DeviceTensor<T>, stream: &Stream) -> Result<(), RuntimeError> {
        // Checked here, in elements: the byte-level copy would report bytes.
        if src.len > self.len {
            return Err(RuntimeError::Length {
                expected: self.len,
                got: src.len,
            });
        }
        self.gpu.copy_on(stream, &src.buf, &mut self.buf)
    }

    /// Copies `src` (of the same length) into the tensor on `stream`, asynchronously: the call
    /// returns at once and the copy overlaps work on other streams.
    pub fn copy_from_pinned(&mut self, src: &PinnedTensor<T>, stream: &Stream) -> Result<(), RuntimeError> {
        if src.len != self.len {
            return Err(RuntimeError::Length {
                expected: self.len,
                got: src.len,
            });
        }
        self.gpu.copy_to_device(stream, &src.buf, &mut self.buf)
    }

    /// Copies the tensor into `dst` (of the same length) on `stream`, asynchronously; reading
    /// `dst` on the host waits for the copy.
    pub fn copy_to_pinned(&self, dst: &mut PinnedTensor<T>, stream: &Stream) -> Result<(), RuntimeError> {
        if dst.len != self.len {
            return Err(RuntimeError::Length {
                expected: self.len,
                got: dst.len,
            });
        }
        self.gpu.copy_to_host(stream, &self.buf, &mut dst.buf)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// The device address of the first element.
    pub fn device_ptr(&self) -> u64 {
        self.addr
    }
}

impl<T: Element> memory_seal::Sealed for DeviceTensor<T> {}

impl<T: Element> DeviceMemory for DeviceTensor<T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        self.addr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn owner(&self) -> &Arc<dyn Memory> {
        &self.owner
    }
}

/// `len` elements of `T` in page-locked host memory: the source or destination of copies that
/// run asynchronously ([`DeviceTensor::copy_from_pinned`], [`DeviceTensor::copy_to_pinned`])
/// at full bandwidth. Its host view waits for copies in flight that use it.
pub struct PinnedTensor<T: Element> {
    buf: PinnedBuffer,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Element> PinnedTensor<T> {
    /// `len` zeros in pinned host memory.
    pub fn zeros(gpu: &Gpu, len: usize) -> Result<PinnedTensor<T>, RuntimeError> {
        Ok(PinnedTensor {
            buf: gpu.pinned(bytes_of::<T>(len)?)?,
            len,
            _elem: PhantomData,
        })
    }

    /// A pinned copy of `data`.
    pub fn from_slice(gpu: &Gpu, data: &[T]) -> Result<PinnedTensor<T>, RuntimeError> {
        let mut p = Self::zeros(gpu, data.len())?;
        p.as_mut_slice()?.copy_from_slice(data);
        Ok(p)
    }

    /// The elements, once the copies in flight that write them have finished.
    pub fn as_slice(&self) -> Result<&[T], RuntimeError> {
        let b = self.buf.as_slice()?;
        // SAFETY: the buffer holds `len` elements of `T` (allocated for them, page-aligned).
        Ok(unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<T>(), self.len) })
    }

    /// The elements, writable, once the copies in flight that use them have finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T], RuntimeError> {
        let len = self.len;
        let b = self.buf.as_mut_slice()?;
        // SAFETY: as above; every bit pattern is a valid `T`.
        Ok(unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<T>(), len) })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Elements of `T` in a device buffer that grows and shrinks in place on virtual memory
/// ([`tile_runtime::GrowableBuffer`]): its address never changes, growing copies nothing. For
/// KV caches and other buffers that grow step by step.
pub struct GrowableTensor<T: Element> {
    buf: GrowableBuffer,
    owner: Arc<dyn Memory>,
    gpu: Gpu,
    _elem: PhantomData<T>,
}

impl<T: Element> GrowableTensor<T> {
    /// Reserves room for up to `capacity` elements (addresses only: no memory yet) growing in
    /// chunks of `chunk_bytes` (0: the GPU's granularity, 2 MiB on current GPUs).
    pub fn reserve(gpu: &Gpu, capacity: usize, chunk_bytes: usize) -> Result<GrowableTensor<T>, RuntimeError> {
        let buf = gpu.reserve(bytes_of::<T>(capacity)?, chunk_bytes)?;
        Ok(GrowableTensor {
            owner: buf.memory(),
            buf,
            gpu: gpu.clone(),
            _elem: PhantomData,
        })
    }

    /// Makes `len` elements usable (new ones read as whatever the fresh memory holds).
    pub fn grow_to(&mut self, len: usize) -> Result<(), RuntimeError> {
        self.buf.grow_to(bytes_of::<T>(len)?)
    }

    /// Shrinks to `len` elements, returning whole chunks past them to the driver; waits for the
    /// GPU first.
    pub fn shrink_to(&mut self, len: usize) -> Result<(), RuntimeError> {
        self.buf.shrink_to(bytes_of::<T>(len)?)
    }

    /// Elements usable now.
    pub fn len(&self) -> usize {
        self.buf.len() / std::mem::size_of::<T>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most elements it can grow to.
    pub fn capacity(&self) -> usize {
        self.buf.capacity() / std::mem::size_of::<T>()
    }

    /// Bytes backed by physical memory now.
    pub fn mapped_bytes(&self) -> usize {
        self.buf.mapped_bytes()
    }

    pub fn chunk_bytes(&self) -> usize {
        self.buf.chunk_bytes()
    }

    pub fn device_ptr(&self) -> u64 {
        self.buf.device_ptr()
    }

    /// Copies the usable elements to the host, after the work enqueued on the default stream.
    pub fn download(&self) -> Result<Vec<T>, RuntimeError> {
        let mut out = vec![T::default(); self.len()];
        // SAFETY: the usable elements are mapped.
        unsafe { self.gpu.download_raw(self.buf.device_ptr(), as_bytes_mut(&mut out)) }?;
        Ok(out)
    }

    /// Writes `data` at element `offset` (on the default stream); the range must be usable.
    pub fn write_at(&mut self, offset: usize, data: &[T]) -> Result<(), RuntimeError> {
        let end = offset.checked_add(data.len()).unwrap_or(usize::MAX);
        if end > self.len() {
            return Err(RuntimeError::Length {
                expected: self.len().saturating_sub(offset),
                got: data.len(),
            });
        }
        let addr = self.buf.device_ptr() + (offset * std::mem::size_of::<T>()) as u64;
        // SAFETY: the range was checked to be usable, so it is mapped.
        unsafe { self.gpu.upload_raw(addr, as_bytes(data)) }
    }
}

impl<T: Element> memory_seal::Sealed for GrowableTensor<T> {}

impl<T: Element> DeviceMemory for GrowableTensor<T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        self.buf.device_ptr()
    }
    fn len(&self) -> usize {
        GrowableTensor::len(self)
    }
    fn owner(&self) -> &Arc<dyn Memory> {
        &self.owner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_zero_extended_two_complement() {
        assert_eq!((-1i8).to_bits(), 0xff);
        assert_eq!((-1i32).to_bits(), 0xffff_ffff);
        assert_eq!((-1i64).to_bits(), u64::MAX);
        assert_eq!(1.0f32.to_bits(), 0x3f80_0000);
        assert_eq!(Element::to_bits(f16::from_f32(1.0)), 0x3c00);
        assert_eq!(Element::to_bits(bf16::from_f32(1.0)), 0x3f80);
        assert_eq!(<f64 as Element>::to_bits(-0.0), 1 << 63);
    }

    #[test]
    fn every_host_type_names_its_dtype() {
        for (d, name) in [
            (<f32 as Element>::DTYPE, "f32"),
            (<f64 as Element>::DTYPE, "f64"),
            (<i32 as Element>::DTYPE, "i32"),
            (<i64 as Element>::DTYPE, "i64"),
            (<u32 as Element>::DTYPE, "u32"),
            (<u8 as Element>::DTYPE, "u8"),
            (<i8 as Element>::DTYPE, "i8"),
            (<u16 as Element>::DTYPE, "u16"),
            (<f16 as Element>::DTYPE, "half::f16"),
            (<bf16 as Element>::DTYPE, "half::bf16"),
            (<float8::F8E4M3 as Element>::DTYPE, "float8::F8E4M3"),
            (<float8::F8E5M2 as Element>::DTYPE, "float8::F8E5M2"),
        ] {
            assert_eq!(host_type(d), Some(name));
        }
        assert_eq!(host_type(DType::Bool), None);
    }

    #[test]
    fn byte_views_cover_the_whole_slice() {
        let v = [1.0f32, 2.0];
        assert_eq!(as_bytes(&v), [0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
        let mut h = [f16::ZERO; 3];
        as_bytes_mut(&mut h)[..2].copy_from_slice(&0x3c00u16.to_le_bytes());
        assert_eq!(h[0], f16::ONE);
    }
}
