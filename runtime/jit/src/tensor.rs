//! Typed device memory: a [`DeviceTensor<T>`] knows its element dtype, so a launch can check
//! it against the kernel's `*T` parameters before anything reaches the GPU.

use std::marker::PhantomData;

use half::{bf16, f16};
use tile_lang::ir::DType;

use tile_runtime::{DeviceBuffer, Gpu, RuntimeError};

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
        DType::Bool | DType::F8E4M3 | DType::F8E5M2 => return None,
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

/// `len` elements of `T` in device memory, on one GPU's stream.
///
/// Pass it to a kernel as [`Arg::buf`](crate::Arg::buf) (read-only) or
/// [`Arg::buf_mut`](crate::Arg::buf_mut) (for `*mut T` parameters).
pub struct DeviceTensor<T: Element> {
    buf: DeviceBuffer,
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

impl<T: Element> DeviceTensor<T> {
    /// Copies `data` to a new device tensor.
    pub fn upload(gpu: &Gpu, data: &[T]) -> Result<DeviceTensor<T>, RuntimeError> {
        Ok(Self::wrap(gpu, gpu.upload(as_bytes(data))?, data.len()))
    }

    /// A new device tensor of `len` zeros (all bits zero: `0`, `0.0`).
    pub fn zeros(gpu: &Gpu, len: usize) -> Result<DeviceTensor<T>, RuntimeError> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or(RuntimeError::Length {
            expected: usize::MAX / std::mem::size_of::<T>(),
            got: len,
        })?;
        Ok(Self::wrap(gpu, gpu.zeros(bytes)?, len))
    }

    fn wrap(gpu: &Gpu, buf: DeviceBuffer, len: usize) -> DeviceTensor<T> {
        // The address never changes; read it once so that launches need not ask the driver.
        let addr = buf.device_ptr();
        DeviceTensor {
            buf,
            addr,
            len,
            gpu: gpu.clone(),
            _elem: PhantomData,
        }
    }

    /// Copies the tensor to the host, after every kernel enqueued before it has run.
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
        ] {
            assert_eq!(host_type(d), Some(name));
        }
        assert_eq!(host_type(DType::F8E4M3), None);
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
