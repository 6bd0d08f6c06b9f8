//! Launch arguments and their checking against a kernel's signature.
//!
//! Checking is a pure function of the signature and the arguments ([`check_args`]), run before
//! anything reaches the GPU, so every mistake it catches is testable without one.

use std::marker::PhantomData;
use std::sync::Arc;

use half::{bf16, f16};
use tile_driver::ArgSpec;
use tile_lang::ir::reach::Reach;
use tile_lang::ir::{DType, Elem};

use tile_runtime::{DeviceBuffer, KernelArg, Memory};

use crate::tensor::{DeviceMemory, DeviceTensor, Element, host_type};

/// The most parameters a JIT kernel may have: each launch's specialisation key packs two bits
/// per parameter into a `u128`, and the parameter values live in fixed arrays on the stack.
pub const MAX_PARAMS: usize = 64;

/// One kernel parameter as the JIT sees it: its name and element type (`*f32`, `*mut f32`,
/// `i32`, ...), and for a pointer whose offsets are all 32-bit, how many elements the kernel can
/// address through it ([`tile_lang::ir::reach`]): a longer tensor is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSig {
    pub name: String,
    pub elem: Elem,
    pub reach: Option<Reach>,
}

impl std::fmt::Display for ParamSig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.elem)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ArgKind {
    /// `bytes`: the buffer's length, for the checks tensor maps get at launch.
    Buffer {
        addr: u64,
        bytes: u64,
        dtype: DType,
        mutable: bool,
    },
    Scalar {
        dtype: DType,
        bits: u64,
    },
}

/// One launch argument: a view of a device tensor (read-only or mutable) or a scalar of a
/// given dtype. The lifetime ties a buffer argument to the borrow of its tensor, so a tensor
/// cannot be dropped or mutably aliased while an argument list refers to it.
#[derive(Clone, Copy)]
pub struct Arg<'a> {
    pub(crate) kind: ArgKind,
    /// What a buffer argument points into: launches tell it their stream, graphs keep it.
    pub(crate) owner: Option<&'a Arc<dyn Memory>>,
    _borrow: PhantomData<&'a ()>,
}

impl std::fmt::Debug for Arg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arg").field("kind", &self.kind).finish()
    }
}

impl<'a> Arg<'a> {
    fn new(kind: ArgKind) -> Arg<'a> {
        Arg {
            kind,
            owner: None,
            _borrow: PhantomData,
        }
    }

    fn view<M: DeviceMemory>(t: &'a M, mutable: bool) -> Arg<'a> {
        let dtype = <M::Elem as Element>::DTYPE;
        Arg {
            owner: Some(t.owner()),
            ..Arg::new(ArgKind::Buffer {
                addr: t.device_ptr(),
                bytes: (t.len() * dtype.bytes()) as u64,
                dtype,
                mutable,
            })
        }
    }

    /// A read-only view of `t` (a [`DeviceTensor`] or a [`GrowableTensor`](crate::GrowableTensor)):
    /// valid for `*T` parameters.
    pub fn buf<M: DeviceMemory>(t: &'a M) -> Arg<'a> {
        Arg::view(t, false)
    }

    /// A mutable view of `t`: valid for `*T` and `*mut T` parameters.
    pub fn buf_mut<M: DeviceMemory>(t: &'a mut M) -> Arg<'a> {
        Arg::view(&*t, true)
    }

    /// A scalar of `T`'s dtype.
    pub fn scalar<T: Element>(v: T) -> Arg<'a> {
        Arg::new(ArgKind::Scalar {
            dtype: T::DTYPE,
            bits: v.to_bits(),
        })
    }

    /// A scalar given by its bit pattern (any dtype: an fp8 value as its 8 bits, say); bits above
    /// the dtype's width are dropped.
    pub fn scalar_bits(dtype: DType, bits: u64) -> Arg<'a> {
        let mask = if dtype.bits() == 64 {
            u64::MAX
        } else {
            (1u64 << dtype.bits()) - 1
        };
        Arg::new(ArgKind::Scalar {
            dtype,
            bits: bits & mask,
        })
    }

    pub fn bool(v: bool) -> Arg<'a> {
        Arg::scalar_bits(DType::Bool, v as u64)
    }
    /// An `f8e4m3` scalar (`float8::F8E4M3::from_f32(..)` rounds to nearest and saturates, as
    /// the language's conversions do).
    pub fn f8e4m3(v: float8::F8E4M3) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn f8e5m2(v: float8::F8E5M2) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn i8(v: i8) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn i16(v: i16) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn i32(v: i32) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn i64(v: i64) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn u8(v: u8) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn u16(v: u16) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn u32(v: u32) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn u64(v: u64) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn f16(v: f16) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn bf16(v: bf16) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn f32(v: f32) -> Arg<'a> {
        Arg::scalar(v)
    }
    pub fn f64(v: f64) -> Arg<'a> {
        Arg::scalar(v)
    }

    /// What this argument is, for messages: "a read-only view of an f32 buffer", "an i64 scalar".
    pub fn describe(&self) -> String {
        match self.kind {
            ArgKind::Buffer { dtype, mutable, .. } => format!(
                "a {} view of {} {dtype} buffer",
                if mutable { "mutable" } else { "read-only" },
                article(dtype)
            ),
            ArgKind::Scalar { dtype, .. } => format!("{} {dtype} scalar", article(dtype)),
        }
    }

    /// A buffer argument of 1 MiB at a made-up address, for checking tests that have no GPU.
    #[cfg(test)]
    pub(crate) fn fake_buffer(dtype: DType, mutable: bool, addr: u64) -> Arg<'static> {
        Arg::new(ArgKind::Buffer {
            addr,
            bytes: 1 << 20,
            dtype,
            mutable,
        })
    }
}

impl<'a, T: Element> From<&'a DeviceTensor<T>> for Arg<'a> {
    fn from(t: &'a DeviceTensor<T>) -> Arg<'a> {
        Arg::buf(t)
    }
}

impl<'a, T: Element> From<&'a mut DeviceTensor<T>> for Arg<'a> {
    fn from(t: &'a mut DeviceTensor<T>) -> Arg<'a> {
        Arg::buf_mut(t)
    }
}

macro_rules! from_scalar {
    ($($t:ty),*) => {$(
        impl From<$t> for Arg<'_> {
            fn from(v: $t) -> Self {
                Arg::scalar(v)
            }
        }
    )*};
}
from_scalar!(
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    f16,
    bf16,
    f32,
    f64,
    float8::F8E4M3,
    float8::F8E5M2
);

impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::bool(v)
    }
}

fn article(d: DType) -> &'static str {
    // "an i32", "an f32", "an u8" reads wrong: only the vowel sounds of the spelled-out names.
    match d.name().as_bytes()[0] {
        b'i' | b'f' => "an",
        _ => "a",
    }
}

/// How to pass a scalar of `d`: `Arg::i32(..)`, `Arg::f8e4m3(..)`.
fn scalar_ctor(d: DType) -> String {
    format!("Arg::{}(..)", d.name())
}

/// The device tensor to pass for a `*d` parameter.
fn tensor_of(d: DType) -> String {
    match host_type(d) {
        Some(t) => format!("a `DeviceTensor<{t}>`"),
        None => format!("a buffer of {d} (no host type holds {d} yet)"),
    }
}

/// A launch argument that does not fit the kernel's signature. Every variant names the kernel,
/// the parameter (and its 0-based position), what was given and what would be valid.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ArgError {
    #[error("kernel `{kernel}` takes {expected} argument{} ({signature}); got {got}", if *.expected == 1 { "" } else { "s" })]
    Count {
        kernel: String,
        expected: usize,
        got: usize,
        signature: String,
    },
    #[error("kernel `{kernel}`: argument {} `{param}: {expected}` takes a device buffer; got {got}; pass {}", .index + 1, tensor_of(*.pointee))]
    ExpectedBuffer {
        kernel: String,
        param: String,
        index: usize,
        expected: Elem,
        pointee: DType,
        got: String,
    },
    #[error("kernel `{kernel}`: argument {} `{param}: {expected}` takes a scalar; got {got}; pass `{}`", .index + 1, scalar_ctor(*.expected))]
    ExpectedScalar {
        kernel: String,
        param: String,
        index: usize,
        expected: DType,
        got: String,
    },
    #[error("kernel `{kernel}`: argument {} `{param}: {expected}` takes {} {expected} scalar; got {} {got} scalar; pass `{}`", .index + 1, article(*.expected), article(*.got), scalar_ctor(*.expected))]
    ScalarDType {
        kernel: String,
        param: String,
        index: usize,
        expected: DType,
        got: DType,
    },
    #[error("kernel `{kernel}`: argument {} `{param}: {expected}` takes a buffer of {pointee}; got {} {got} buffer; pass {}", .index + 1, article(*.got), tensor_of(*.pointee))]
    BufferDType {
        kernel: String,
        param: String,
        index: usize,
        expected: Elem,
        pointee: DType,
        got: DType,
    },
    #[error("kernel `{kernel}`: argument {} `{param}: {expected}` is written by the kernel; got a read-only view of {} {pointee} buffer; pass `Arg::buf_mut(&mut ..)`", .index + 1, article(*.pointee))]
    ReadOnly {
        kernel: String,
        param: String,
        index: usize,
        expected: Elem,
        pointee: DType,
    },
    #[error("kernel `{kernel}`: argument {} `{param}: {expected}` has {len} elements, but the kernel computes its offsets into `{param}` in {} (the add at {}:{}), so it addresses at most {} of them; compute those offsets in i64 (an `i64` size or stride parameter, or `.to(i64)`)", .index + 1, .reach.offset_dtype, .reach.loc.line, .reach.loc.col, .reach.elements())]
    BeyondReach {
        kernel: String,
        param: String,
        index: usize,
        expected: Elem,
        len: u64,
        reach: Reach,
    },
    #[error("kernel `{kernel}`: argument {} `{param}` has {len} elements, but the tensor descriptor made of it at {}:{} spans {need} ({shape}); pass a buffer that long, or sizes and strides that fit it", .index + 1, .loc.line, .loc.col)]
    DescriptorTooShort {
        kernel: String,
        param: String,
        index: usize,
        len: u64,
        need: u64,
        /// The descriptor's extents and strides at this launch (`shape [1000, 4096] strides [4096, 1]`).
        shape: String,
        loc: tile_lang::ir::Loc,
    },
    #[error("kernel `{kernel}`: argument {} `{read}` is read-only, and its buffer overlaps the one passed as argument {} `{written}`, which the kernel writes; loads through a read-only argument may run before that argument's stores (ld.global.nc); pass the buffer once, as the `*mut` argument, or pass a copy", .read_index + 1, .written_index + 1)]
    Overlap {
        kernel: String,
        read: String,
        read_index: usize,
        written: String,
        written_index: usize,
    },
    #[error("kernel `{kernel}` has {count} parameters; the JIT launches kernels with at most {max}")]
    TooManyParams { kernel: String, count: usize, max: usize },
}

/// The signature as written: `x: *f32, y: *f32, out: *mut f32, n: i32`.
pub fn signature(params: &[ParamSig]) -> String {
    params.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
}

/// Checks `args` against kernel `kernel`'s parameters: count, buffer or scalar, dtype, and
/// mutability (a `*mut T` parameter needs a mutable view). A pure function: no GPU involved.
pub fn check_args(kernel: &str, params: &[ParamSig], args: &[Arg<'_>]) -> Result<(), ArgError> {
    if params.len() > MAX_PARAMS {
        return Err(ArgError::TooManyParams {
            kernel: kernel.into(),
            count: params.len(),
            max: MAX_PARAMS,
        });
    }
    if args.len() != params.len() {
        return Err(ArgError::Count {
            kernel: kernel.into(),
            expected: params.len(),
            got: args.len(),
            signature: signature(params),
        });
    }
    for (index, (p, a)) in params.iter().zip(args).enumerate() {
        match (p.elem, a.kind) {
            (
                Elem::Ptr { pointee, mutable },
                ArgKind::Buffer {
                    dtype,
                    mutable: given_mut,
                    bytes,
                    ..
                },
            ) => {
                if dtype != pointee {
                    return Err(ArgError::BufferDType {
                        kernel: kernel.into(),
                        param: p.name.clone(),
                        index,
                        expected: p.elem,
                        pointee,
                        got: dtype,
                    });
                }
                if mutable && !given_mut {
                    return Err(ArgError::ReadOnly {
                        kernel: kernel.into(),
                        param: p.name.clone(),
                        index,
                        expected: p.elem,
                        pointee,
                    });
                }
                let len = bytes / dtype.bytes() as u64;
                if let Some(reach) = p.reach.filter(|r| len > r.elements()) {
                    return Err(ArgError::BeyondReach {
                        kernel: kernel.into(),
                        param: p.name.clone(),
                        index,
                        expected: p.elem,
                        len,
                        reach,
                    });
                }
            }
            (Elem::Ptr { pointee, .. }, ArgKind::Scalar { .. }) => {
                return Err(ArgError::ExpectedBuffer {
                    kernel: kernel.into(),
                    param: p.name.clone(),
                    index,
                    expected: p.elem,
                    pointee,
                    got: a.describe(),
                });
            }
            (Elem::Scalar(expected), ArgKind::Buffer { .. }) => {
                return Err(ArgError::ExpectedScalar {
                    kernel: kernel.into(),
                    param: p.name.clone(),
                    index,
                    expected,
                    got: a.describe(),
                });
            }
            (Elem::Scalar(expected), ArgKind::Scalar { dtype, .. }) => {
                if dtype != expected {
                    return Err(ArgError::ScalarDType {
                        kernel: kernel.into(),
                        param: p.name.clone(),
                        index,
                        expected,
                        got: dtype,
                    });
                }
            }
        }
    }
    check_overlap(kernel, params, args)
}

/// A buffer passed as a read-only `*T` argument must not overlap one passed as a `*mut T`
/// argument: the kernel is compiled on the promise that nothing writes its `*T` buffers
/// (language.md, memory model). Borrowed views cannot break it; raw views can.
fn check_overlap(kernel: &str, params: &[ParamSig], args: &[Arg<'_>]) -> Result<(), ArgError> {
    let range = |a: &Arg<'_>| match a.kind {
        // An empty buffer holds nothing to overlap.
        ArgKind::Buffer { addr, bytes, .. } if bytes > 0 => Some(addr..addr.saturating_add(bytes)),
        ArgKind::Buffer { .. } | ArgKind::Scalar { .. } => None,
    };
    for (ri, (rp, ra)) in params.iter().zip(args).enumerate() {
        let (Elem::Ptr { mutable: false, .. }, Some(r)) = (rp.elem, range(ra)) else {
            continue;
        };
        for (wi, (wp, wa)) in params.iter().zip(args).enumerate() {
            if let (Elem::Ptr { mutable: true, .. }, Some(w)) = (wp.elem, range(wa))
                && r.start < w.end
                && w.start < r.end
            {
                return Err(ArgError::Overlap {
                    kernel: kernel.into(),
                    read: rp.to_string(),
                    read_index: ri,
                    written: wp.to_string(),
                    written_index: wi,
                });
            }
        }
    }
    Ok(())
}

/// The value of an integer scalar argument, or `None` for a buffer or a float.
pub(crate) fn int_arg(a: &Arg<'_>) -> Option<i64> {
    match a.kind {
        ArgKind::Scalar { dtype, bits } if dtype.is_int() || dtype.is_bool() => Some(int_value(dtype, bits)),
        _ => None,
    }
}

/// The integer an integer scalar holds (sign-extended for signed dtypes).
pub(crate) fn int_value(dtype: DType, bits: u64) -> i64 {
    match dtype {
        DType::I8 => bits as u8 as i8 as i64,
        DType::I16 => bits as u16 as i16 as i64,
        DType::I32 => bits as u32 as i32 as i64,
        _ => bits as i64,
    }
}

/// What codegen may assume about one argument (Triton's specialisation): integers equal to 1
/// or divisible by 16, buffers aligned to 16 bytes. Floats and bools promise nothing.
pub fn arg_spec(a: &Arg<'_>) -> ArgSpec {
    match a.kind {
        ArgKind::Buffer { addr, .. } => ArgSpec::of_ptr(addr),
        ArgKind::Scalar { dtype, bits } if dtype.is_int() => ArgSpec::of_int(int_value(dtype, bits)),
        ArgKind::Scalar { .. } => ArgSpec::default(),
    }
}

/// [`arg_spec`] of argument `i`, or no facts where bit `i` of `unspecialized` is set (a
/// parameter `#[no_specialize(..)]` names).
pub(crate) fn arg_spec_unless(a: &Arg<'_>, i: usize, unspecialized: u64) -> ArgSpec {
    match i < 64 && unspecialized >> i & 1 == 1 {
        true => ArgSpec::default(),
        false => arg_spec(a),
    }
}

/// Every descriptor of `extents` (the kernel's block accesses the host can size) fits the
/// buffer it is based on at this launch of checked `args`: lowered through TMA or through
/// pointer arithmetic, a descriptor access reads and writes only inside the tensor it describes.
pub(crate) fn check_extents(
    kernel: &str,
    params: &[ParamSig],
    extents: &[tile_driver::tma::BlockExtent],
    args: &[Arg<'_>],
) -> Result<(), ArgError> {
    for e in extents {
        let ArgKind::Buffer { bytes, dtype, .. } = args.get(e.base).map(|a| a.kind).unwrap_or(ArgKind::Scalar {
            dtype: DType::I32,
            bits: 0,
        }) else {
            continue;
        };
        let int = |i: usize| args.get(i).and_then(int_arg);
        let Some(need) = e.elements(&int) else {
            continue;
        };
        let len = bytes / dtype.bytes().max(1) as u64;
        if need > len {
            let value = |h: &tile_driver::tma::HostInt| match h {
                tile_driver::tma::HostInt::Param(p) => int(*p).map_or("?".into(), |v| v.to_string()),
                tile_driver::tma::HostInt::Const(c) => c.to_string(),
                tile_driver::tma::HostInt::Fit => "fit".into(),
            };
            let list = |v: &[tile_driver::tma::HostInt]| v.iter().map(value).collect::<Vec<_>>().join(", ");
            return Err(ArgError::DescriptorTooShort {
                kernel: kernel.to_string(),
                param: params.get(e.base).map_or_else(String::new, |p| p.name.clone()),
                index: e.base,
                len,
                need,
                shape: format!("shape [{}] strides [{}]", list(&e.dims), list(&e.strides)),
                loc: e.loc,
            });
        }
    }
    Ok(())
}

/// The specialisation of a launch packed two bits per argument: the in-memory cache's key on
/// the hot path, computed without allocating. Only meaningful for checked arguments (at most
/// [`MAX_PARAMS`] of them).
pub(crate) fn spec_key(args: &[Arg<'_>], unspecialized: u64) -> u128 {
    let mut key = 0u128;
    for (i, a) in args.iter().enumerate() {
        let s = arg_spec_unless(a, i, unspecialized);
        // `equals_one` excludes the divisibility facts, and divisibility by 16 implies it by 8,
        // so four codes suffice.
        let code: u128 = if s.equals_one {
            2
        } else if s.divisible_by_16 {
            1
        } else if s.divisible_by_8 {
            3
        } else {
            0
        };
        key |= code << (2 * i);
    }
    key
}

/// The specialisation tags of a launch (`dd-1`...): part of the disk cache key and of names.
pub fn spec_tags(specs: &[ArgSpec]) -> String {
    specs.iter().map(ArgSpec::tag).collect()
}

/// An argument's value as the kernel parameter holds it: a device address or a scalar's bits.
/// Kernel parameters are read by the driver in their own width from the start of each slot,
/// which on a little-endian host is the low bytes of the `u64`.
pub(crate) fn value(a: &Arg<'_>) -> u64 {
    match a.kind {
        ArgKind::Buffer { addr, .. } => addr,
        ArgKind::Scalar { bits, .. } => bits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A descriptor access is held to the tensor it describes whichever way it is lowered: at
    /// N = 1000 (no TMA: 2000-byte rows are not 16-element multiples) a too-short A is refused
    /// as at N = 1040.
    #[test]
    fn descriptors_are_checked_against_their_buffers() {
        use tile_lang::ir::ConstValue;
        let src = include_str!("../../../dsl-examples/matmul.tile");
        let ast = tile_lang::syntax::parse(src).unwrap();
        let bindings = vec![
            ("BM".to_string(), ConstValue::Int(64)),
            ("BN".to_string(), ConstValue::Int(64)),
            ("BK".to_string(), ConstValue::Int(32)),
        ];
        let k = tile_lang::check::check_kernel(src, &ast, "matmul_tma", &bindings).unwrap();
        let extents = tile_driver::tma::block_extents(&k);
        assert_eq!(extents.len(), 3, "{extents:?}");
        let params: Vec<ParamSig> = k
            .params
            .iter()
            .map(|p| ParamSig {
                name: p.name.clone(),
                elem: p.elem,
                reach: None,
            })
            .collect();
        let buf = |elements: u64| {
            Arg::new(ArgKind::Buffer {
                addr: 1 << 34,
                bytes: elements * 2,
                dtype: DType::BF16,
                mutable: true,
            })
        };
        let (m, n, kk) = (256u64, 1000u64, 512u64);
        let args = |a_len: u64| {
            [
                buf(a_len),
                buf(kk * n),
                buf(m * n),
                Arg::i32(m as i32),
                Arg::i32(n as i32),
                Arg::i32(kk as i32),
                Arg::i32(kk as i32),
                Arg::i32(1),
                Arg::i32(n as i32),
                Arg::i32(1),
                Arg::i32(n as i32),
                Arg::i32(1),
            ]
        };
        assert_eq!(check_extents("matmul_tma", &params, &extents, &args(m * kk)), Ok(()));
        let e = check_extents("matmul_tma", &params, &extents, &args(m * kk - 1)).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "kernel `matmul_tma`: argument 1 `a` has {} elements, but the tensor descriptor made of it at",
                m * kk - 1
            )) && e
                .to_string()
                .contains("spans 131072 (shape [256, 512] strides [512, 1])"),
            "{e}"
        );
        // Nothing to access: an empty K reads nothing of A.
        let mut empty = args(0);
        empty[5] = Arg::i32(0);
        empty[6] = Arg::i32(0);
        assert_eq!(check_extents("matmul_tma", &params, &extents[..1], &empty), Ok(()));
    }

    fn sig(params: &[(&str, Elem)]) -> Vec<ParamSig> {
        params
            .iter()
            .map(|(n, e)| ParamSig {
                name: n.to_string(),
                elem: *e,
                reach: None,
            })
            .collect()
    }

    fn ptr(pointee: DType, mutable: bool) -> Elem {
        Elem::Ptr { pointee, mutable }
    }

    /// `vector_add(x: *f32, y: *f32, out: *mut f32, n: i32)`.
    fn vector_add() -> Vec<ParamSig> {
        sig(&[
            ("x", ptr(DType::F32, false)),
            ("y", ptr(DType::F32, false)),
            ("out", ptr(DType::F32, true)),
            ("n", Elem::Scalar(DType::I32)),
        ])
    }

    /// A buffer of its own: every call gets the next 1 MiB.
    fn f32_buf(mutable: bool) -> Arg<'static> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0x7000_0000);
        Arg::fake_buffer(DType::F32, mutable, NEXT.fetch_add(1 << 20, Ordering::Relaxed))
    }

    fn check(args: &[Arg<'_>]) -> Result<(), ArgError> {
        check_args("vector_add", &vector_add(), args)
    }

    #[test]
    fn matching_arguments_pass() {
        assert_eq!(
            check(&[f32_buf(false), f32_buf(false), f32_buf(true), Arg::i32(10)]),
            Ok(())
        );
        // A mutable view is also fine where the kernel only reads.
        assert_eq!(
            check(&[f32_buf(true), f32_buf(true), f32_buf(true), 10i32.into()]),
            Ok(())
        );
    }

    #[test]
    fn wrong_count_names_the_signature() {
        let e = check(&[f32_buf(false), f32_buf(false), f32_buf(true)]).unwrap_err();
        assert_eq!(
            e,
            ArgError::Count {
                kernel: "vector_add".into(),
                expected: 4,
                got: 3,
                signature: "x: *f32, y: *f32, out: *mut f32, n: i32".into(),
            }
        );
        assert_eq!(
            e.to_string(),
            "kernel `vector_add` takes 4 arguments (x: *f32, y: *f32, out: *mut f32, n: i32); got 3"
        );
        let e = check(&[f32_buf(false), f32_buf(false), f32_buf(true), Arg::i32(1), Arg::i32(2)]).unwrap_err();
        assert!(matches!(e, ArgError::Count { got: 5, .. }));
    }

    #[test]
    fn scalar_where_a_buffer_is_expected() {
        let e = check(&[Arg::f32(1.0), f32_buf(false), f32_buf(true), Arg::i32(1)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel `vector_add`: argument 1 `x: *f32` takes a device buffer; got an f32 scalar; \
             pass a `DeviceTensor<f32>`"
        );
        assert!(matches!(e, ArgError::ExpectedBuffer { index: 0, .. }));
    }

    #[test]
    fn buffer_of_the_wrong_dtype() {
        let e = check(&[
            f32_buf(false),
            Arg::fake_buffer(DType::F16, false, 0x1000),
            f32_buf(true),
            Arg::i32(1),
        ])
        .unwrap_err();
        assert_eq!(
            e,
            ArgError::BufferDType {
                kernel: "vector_add".into(),
                param: "y".into(),
                index: 1,
                expected: ptr(DType::F32, false),
                pointee: DType::F32,
                got: DType::F16,
            }
        );
        assert_eq!(
            e.to_string(),
            "kernel `vector_add`: argument 2 `y: *f32` takes a buffer of f32; got an f16 buffer; \
             pass a `DeviceTensor<f32>`"
        );
    }

    #[test]
    fn read_only_view_for_a_mut_pointer() {
        let e = check(&[f32_buf(false), f32_buf(false), f32_buf(false), Arg::i32(1)]).unwrap_err();
        assert_eq!(
            e,
            ArgError::ReadOnly {
                kernel: "vector_add".into(),
                param: "out".into(),
                index: 2,
                expected: ptr(DType::F32, true),
                pointee: DType::F32,
            }
        );
        assert_eq!(
            e.to_string(),
            "kernel `vector_add`: argument 3 `out: *mut f32` is written by the kernel; got a read-only view \
             of an f32 buffer; pass `Arg::buf_mut(&mut ..)`"
        );
    }

    #[test]
    fn a_read_only_buffer_overlapping_a_written_one_is_refused() {
        let x = Arg::fake_buffer(DType::F32, false, 0x10_0000);
        let y = f32_buf(false);
        // `out` starts inside `x`'s 1 MiB.
        let out = Arg::fake_buffer(DType::F32, true, 0x10_0000 + 4096);
        let e = check(&[x, y, out, Arg::i32(1)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel `vector_add`: argument 1 `x: *f32` is read-only, and its buffer overlaps the one passed \
             as argument 3 `out: *mut f32`, which the kernel writes; loads through a read-only argument may \
             run before that argument's stores (ld.global.nc); pass the buffer once, as the `*mut` argument, \
             or pass a copy"
        );
        // Adjacent buffers do not overlap; two read-only arguments may share a buffer.
        let out = Arg::fake_buffer(DType::F32, true, 0x10_0000 + (1 << 20));
        assert_eq!(check(&[x, x, out, Arg::i32(1)]), Ok(()));
        // An empty buffer overlaps nothing, wherever it points.
        let empty = Arg::new(ArgKind::Buffer {
            addr: 0x10_0000 + 4096,
            bytes: 0,
            dtype: DType::F32,
            mutable: false,
        });
        let out = Arg::fake_buffer(DType::F32, true, 0x10_0000);
        assert_eq!(check(&[empty, y, out, Arg::i32(1)]), Ok(()));
    }

    /// vector_add as the JIT compiles it: offsets `program_id(0) * BLOCK + arange(..)` in i32.
    #[test]
    fn a_tensor_longer_than_the_kernel_can_address_is_refused() {
        let src = include_str!("../../../dsl-examples/vector_add.tile");
        let ast = tile_lang::syntax::parse(src).unwrap();
        let bindings = vec![("BLOCK".to_string(), tile_lang::ir::ConstValue::Int(1024))];
        let k = tile_lang::check::check_kernel(src, &ast, "vector_add", &bindings).unwrap();
        let params: Vec<ParamSig> = k
            .params
            .iter()
            .zip(tile_lang::ir::reach::pointer_reach(&k))
            .map(|(p, reach)| ParamSig {
                name: p.name.clone(),
                elem: p.elem,
                reach,
            })
            .collect();
        // Buffers of their own, 16 GiB apart.
        let of_len_at = |len: u64, at: u64| {
            Arg::new(ArgKind::Buffer {
                addr: at << 34,
                bytes: len * 4,
                dtype: DType::F32,
                mutable: false,
            })
        };
        let of_len = |len: u64| of_len_at(len, 1);
        let out = |len: u64| Arg {
            kind: match of_len_at(len, 3).kind {
                ArgKind::Buffer { addr, bytes, dtype, .. } => ArgKind::Buffer {
                    addr,
                    bytes,
                    dtype,
                    mutable: true,
                },
                k => k,
            },
            ..of_len(len)
        };
        let fits = 1u64 << 31;
        assert_eq!(
            check_args(
                "vector_add",
                &params,
                &[of_len(fits), of_len_at(fits, 2), out(fits), Arg::i32(0)]
            ),
            Ok(())
        );
        let e = check_args(
            "vector_add",
            &params,
            &[of_len(fits), of_len_at(fits + 1, 2), out(fits), Arg::i32(0)],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel `vector_add`: argument 2 `y: *f32` has 2147483649 elements, but the kernel computes its \
             offsets into `y` in i32 (the add at 12:51), so it addresses at most 2147483648 of them; compute \
             those offsets in i64 (an `i64` size or stride parameter, or `.to(i64)`)"
        );
    }

    #[test]
    fn dtype_is_checked_before_mutability() {
        // A read-only f16 view for `*mut f32`: the dtype is the more fundamental mistake.
        let e = check(&[
            f32_buf(false),
            f32_buf(false),
            Arg::fake_buffer(DType::F16, false, 0),
            Arg::i32(1),
        ])
        .unwrap_err();
        assert!(matches!(e, ArgError::BufferDType { index: 2, .. }));
    }

    #[test]
    fn buffer_where_a_scalar_is_expected() {
        let e = check(&[f32_buf(false), f32_buf(false), f32_buf(true), f32_buf(false)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel `vector_add`: argument 4 `n: i32` takes a scalar; got a read-only view of an f32 buffer; \
             pass `Arg::i32(..)`"
        );
        assert!(matches!(
            e,
            ArgError::ExpectedScalar {
                index: 3,
                expected: DType::I32,
                ..
            }
        ));
    }

    #[test]
    fn scalar_of_the_wrong_dtype() {
        let e = check(&[f32_buf(false), f32_buf(false), f32_buf(true), Arg::i64(1)]).unwrap_err();
        assert_eq!(
            e,
            ArgError::ScalarDType {
                kernel: "vector_add".into(),
                param: "n".into(),
                index: 3,
                expected: DType::I32,
                got: DType::I64,
            }
        );
        assert_eq!(
            e.to_string(),
            "kernel `vector_add`: argument 4 `n: i32` takes an i32 scalar; got an i64 scalar; pass `Arg::i32(..)`"
        );
        // Floats are not integers, and unsigned is not signed.
        assert!(check(&[f32_buf(false), f32_buf(false), f32_buf(true), Arg::f32(1.0)]).is_err());
        assert!(check(&[f32_buf(false), f32_buf(false), f32_buf(true), Arg::u32(1)]).is_err());
    }

    #[test]
    fn fp8_parameters_take_float8_values() {
        let params = sig(&[("scale", Elem::Scalar(DType::F8E4M3))]);
        let e = check_args("k", &params, &[Arg::f32(1.0)]).unwrap_err();
        assert!(e.to_string().ends_with("pass `Arg::f8e4m3(..)`"), "{e}");
        let one = Arg::f8e4m3(float8::F8E4M3::from_f32(1.0));
        assert!(matches!(
            one.kind,
            ArgKind::Scalar {
                dtype: DType::F8E4M3,
                bits: 0x38
            }
        ));
        assert_eq!(check_args("k", &params, &[one]), Ok(()));
        // Saturating, as the language's conversions: 1000 is past e4m3's 448.
        let big = Arg::f8e4m3(float8::F8E4M3::from_f32(1000.0));
        assert!(matches!(big.kind, ArgKind::Scalar { bits: 0x7e, .. }));
        assert_eq!(
            check_args("k", &params, &[Arg::scalar_bits(DType::F8E4M3, 0x38)]),
            Ok(())
        );
        let params = sig(&[("p", ptr(DType::F8E5M2, false))]);
        let e = check_args("k", &params, &[Arg::i32(0)]).unwrap_err();
        assert!(e.to_string().contains("a `DeviceTensor<float8::F8E5M2>`"), "{e}");
    }

    #[test]
    fn too_many_parameters() {
        let params: Vec<_> = (0..MAX_PARAMS + 1)
            .map(|i| ParamSig {
                name: format!("p{i}"),
                elem: Elem::Scalar(DType::I32),
                reach: None,
            })
            .collect();
        let args = vec![Arg::i32(0); MAX_PARAMS + 1];
        assert!(matches!(
            check_args("k", &params, &args),
            Err(ArgError::TooManyParams { count: 65, max: 64, .. })
        ));
    }

    #[test]
    fn specialisation_follows_values_and_alignment() {
        let a = [
            Arg::fake_buffer(DType::F32, false, 0x1000),
            Arg::fake_buffer(DType::F32, false, 0x1004),
            Arg::i32(1),
            Arg::i32(32),
            Arg::i32(-16),
            Arg::i32(7),
            Arg::f32(16.0),
            Arg::u64(u64::MAX - 15),
        ];
        let specs: Vec<_> = a.iter().map(arg_spec).collect();
        assert_eq!(spec_tags(&specs), "d-1dd--d");
        // The packed key distinguishes exactly what the tags do.
        assert_eq!(spec_key(&a, 0), 0b01_00_00_01_01_10_00_01);
        assert_ne!(spec_key(&[Arg::i32(1)], 0), spec_key(&[Arg::i32(16)], 0));
        assert_eq!(spec_key(&[Arg::i32(3)], 0), spec_key(&[Arg::i32(5)], 0));
        // A parameter kept out of specialisation: every value gets the same key.
        assert_eq!(spec_key(&[Arg::i32(1)], 1), spec_key(&[Arg::i32(16)], 1));
    }

    #[test]
    fn scalar_bits_are_masked_to_the_dtype() {
        assert_eq!(
            Arg::scalar_bits(DType::F8E4M3, 0x1ff).kind,
            ArgKind::Scalar {
                dtype: DType::F8E4M3,
                bits: 0xff
            }
        );
        let v = [Arg::i32(-1), Arg::bool(true), Arg::fake_buffer(DType::U8, true, 0xabc0)].map(|a| value(&a));
        assert_eq!(v, [0xffff_ffff, 1, 0xabc0]);
    }
}

/// A scalar kernel argument of dtype `d` holding `v` (as the interpreter holds values): its bits,
/// in the width the kernel's parameter has.
pub fn scalar_arg(d: DType, v: tile_lang::ir::Scalar) -> KernelArg<'static> {
    let bits = tile_lang::ir::scalar::to_bits(d, v);
    match d.bits() {
        8 => KernelArg::U8(bits as u8),
        16 => KernelArg::U16(bits as u16),
        32 if d == DType::F32 => KernelArg::F32(f32::from_bits(bits as u32)),
        32 => KernelArg::U32(bits as u32),
        _ if d == DType::F64 => KernelArg::F64(f64::from_bits(bits)),
        _ => KernelArg::U64(bits),
    }
}

/// A run-spec plan's arguments for a launch: buffers in order from `bufs`, scalars by value.
pub fn plan_args<'b>(args: &[tile_lang::spec::PlanArg], bufs: &'b [DeviceBuffer]) -> Vec<KernelArg<'b>> {
    let mut next = 0;
    args.iter()
        .map(|a| match a {
            tile_lang::spec::PlanArg::Buffer { .. } => {
                next += 1;
                KernelArg::Buffer(&bufs[next - 1])
            }
            tile_lang::spec::PlanArg::Scalar { dtype, value, .. } => scalar_arg(*dtype, *value),
        })
        .collect()
}
