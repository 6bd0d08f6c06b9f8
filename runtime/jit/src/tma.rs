//! Tensor maps at launch: what the compiler asked for (`tile_driver::TensorMap`, in terms of
//! the kernel's arguments) made concrete from a launch's argument values, encoded once per
//! distinct request and kept, so that launching again with the same tensors encodes nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use tile_driver::tma::{HostInt, TensorMap};
use tile_lang::ir::{DType, Elem};
use tile_runtime::{Gpu, KernelArg, RuntimeError, TensorMapRequest, TmaElem};

/// The request for `map` given the launch's integer arguments and buffers (address and length
/// in bytes) by parameter index (`None` where the parameter is not of that kind). A shape and
/// strides that reach past the end of the buffer are an error: the TMA engine would read there.
/// An outermost extent of [`HostInt::Fit`] (a map over a batch of entries) is the number of
/// whole entries the buffer holds; a buffer that holds none is an error.
pub fn request(
    map: &TensorMap,
    int: &dyn Fn(usize) -> Option<i64>,
    buffer: &dyn Fn(usize) -> Option<(u64, u64)>,
) -> Result<TensorMapRequest, String> {
    let value = |h: &HostInt, what: &str| -> Result<i64, String> {
        match h {
            HostInt::Const(c) => Ok(*c),
            HostInt::Param(p) => {
                int(*p).ok_or_else(|| format!("{what} comes from argument {p}, which is not an integer"))
            }
            // Sized from the buffer below; positive here (an entry, not an empty tensor).
            HostInt::Fit => Ok(1),
        }
    };
    let fit = map.dims.last() == Some(&HostInt::Fit);
    if map.dims[..map.dims.len().saturating_sub(1)].contains(&HostInt::Fit) || fit && map.dims.len() < 2 {
        return Err("only the outermost extent of a tensor map of rank 2 or more may be `fit`".into());
    }
    let elem = tma_elem(map.dtype).ok_or_else(|| format!("no tensor map holds {}", map.dtype))?;
    let rank = map.dims.len();
    if !(1..=5).contains(&rank) || map.strides.len() + 1 != rank || map.box_dims.len() != rank {
        return Err(format!(
            "a tensor map of rank {rank} with {} strides and {} box extents",
            map.strides.len(),
            map.box_dims.len()
        ));
    }
    let mut box_dims = [0u32; 5];
    box_dims[..rank].copy_from_slice(&map.box_dims);
    // An empty tensor (an extent of 0 or less) has no element in bounds: every box reads zeros.
    // Its map describes one box of a zeroed buffer the cache owns (address 0 here, filled in
    // by `TensorMapCache::get`), so a launch on it runs and reads 0 as the interpreter does.
    let mut empty = false;
    for d in &map.dims {
        empty |= value(d, "an extent")? <= 0;
    }
    if empty {
        let mut dims = [0u64; 5];
        let mut strides = [0u64; 4];
        let mut row = elem.bytes();
        for i in 0..rank {
            dims[i] = box_dims[i] as u64;
            row *= box_dims[i] as u64;
            if i + 1 < rank {
                strides[i] = row;
            }
        }
        return Ok(TensorMapRequest {
            elem,
            addr: 0,
            rank,
            dims,
            strides,
            box_dims,
            swizzle: map.swizzle,
        });
    }
    let mut dims = [0u64; 5];
    for (i, d) in map.dims.iter().enumerate() {
        dims[i] = value(d, "an extent")? as u64;
    }
    let mut strides = [0u64; 4];
    for (i, s) in map.strides.iter().enumerate() {
        let v = value(s, "a stride")?;
        if v <= 0 {
            let arg = match s {
                HostInt::Param(p) => format!(" (argument {p})"),
                _ => String::new(),
            };
            return Err(format!(
                "a stride of {v} elements{arg}; the TMA engine needs positive strides (`#[no_specialize(..)]` on that \
                 parameter compiles the descriptor's accesses without a tensor map)"
            ));
        }
        strides[i] = v as u64 * elem.bytes();
    }
    let (addr, len) =
        buffer(map.base).ok_or_else(|| format!("the base is argument {}, which is not a buffer", map.base))?;
    // The last byte an in-bounds element occupies (of the first entry, for a map over entries:
    // as many entries as fit after it make the outermost extent, up to the engine's 2^31
    // coordinates).
    let mut last = elem.bytes() as u128;
    for i in 0..rank {
        let stride = if i == 0 { elem.bytes() } else { strides[i - 1] };
        last += (dims[i] - 1) as u128 * stride as u128;
    }
    if fit && last <= len as u128 {
        let more = (len as u128 - last) / strides[rank - 2] as u128;
        dims[rank - 1] = (more + 1).min(1 << 31) as u64;
    }
    if last > len as u128 {
        let outer_first = |v: &[u64]| v.iter().rev().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
        let elem_strides: Vec<u64> = std::iter::once(1)
            .chain(strides[..rank - 1].iter().map(|s| s / elem.bytes()))
            .collect();
        return Err(format!(
            "the tensor descriptor over argument {} (shape [{}], strides [{}] elements) reaches {last} bytes \
             into a buffer of {len} bytes; its shape and strides must stay inside the buffer",
            map.base,
            outer_first(&dims[..rank]),
            outer_first(&elem_strides),
        ));
    }
    Ok(TensorMapRequest {
        elem,
        addr,
        rank,
        dims,
        strides,
        box_dims,
        swizzle: map.swizzle,
    })
}

/// The maps `maps` asks for, from launch arguments typed as the kernel's parameters.
pub fn encode_for_args(
    gpu: &Gpu,
    cache: &TensorMapCache,
    maps: &[TensorMap],
    params: &[Elem],
    args: &[KernelArg<'_>],
) -> Result<Vec<tile_runtime::TensorMap>, RuntimeError> {
    let int = |p: usize| -> Option<i64> {
        let Elem::Scalar(d) = *params.get(p)? else { return None };
        let bits = match *args.get(p)? {
            KernelArg::U8(v) => v as u64,
            KernelArg::U16(v) => v as u64,
            KernelArg::U32(v) => v as u64,
            KernelArg::U64(v) => v,
            _ => return None,
        };
        d.is_int().then(|| crate::args::int_value(d, bits))
    };
    let addr = |p: usize| match args.get(p)? {
        KernelArg::Buffer(b) => Some((b.device_ptr(), b.bytes() as u64)),
        _ => None,
    };
    maps.iter()
        .map(|m| {
            let r = request(m, &int, &addr).map_err(RuntimeError::TensorMap)?;
            cache.get(gpu, &r)
        })
        .collect()
}

fn tma_elem(d: DType) -> Option<TmaElem> {
    Some(match d {
        DType::U8 | DType::I8 | DType::Bool | DType::F8E4M3 | DType::F8E5M2 => TmaElem::U8,
        DType::U16 | DType::I16 => TmaElem::U16,
        DType::F16 => TmaElem::F16,
        DType::BF16 => TmaElem::BF16,
        DType::U32 => TmaElem::U32,
        DType::I32 => TmaElem::I32,
        DType::F32 => TmaElem::F32,
        DType::U64 => TmaElem::U64,
        DType::I64 => TmaElem::I64,
        DType::F64 => TmaElem::F64,
    })
}

/// Encoded maps by request. Maps are boxed so their addresses stay put while the table grows.
#[derive(Default)]
pub struct TensorMapCache {
    maps: Mutex<HashMap<TensorMapRequest, Box<tile_runtime::TensorMap>>>,
    /// Zeroed buffers behind the maps of empty tensors, by size (kept while maps may use them).
    zeros: Mutex<HashMap<u64, tile_runtime::DeviceBuffer>>,
}

/// The most distinct maps kept; past it the table starts over (maps are cheap to encode).
const MAX_MAPS: usize = 4096;

impl TensorMapCache {
    /// The encoded map for `r` (encoding it the first time), copied out.
    pub fn get(&self, gpu: &Gpu, r: &TensorMapRequest) -> Result<tile_runtime::TensorMap, RuntimeError> {
        let mut maps = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = maps.get(r) {
            return Ok(**m);
        }
        let m = if r.addr == 0 {
            // An empty tensor's map (see `request`): one box of zeros.
            let bytes = r.elem.bytes() * r.dims().iter().product::<u64>();
            let mut zeros = self.zeros.lock().unwrap_or_else(|e| e.into_inner());
            let buf = match zeros.get(&bytes) {
                Some(b) => b,
                None => {
                    let b = gpu.zeros(bytes as usize)?;
                    zeros.entry(bytes).or_insert(b)
                }
            };
            gpu.encode_tensor_map(&TensorMapRequest {
                addr: buf.device_ptr(),
                ..*r
            })?
        } else {
            gpu.encode_tensor_map(r)?
        };
        if maps.len() >= MAX_MAPS {
            maps.clear();
        }
        maps.insert(*r, Box::new(m));
        Ok(m)
    }

    pub fn len(&self) -> usize {
        self.maps.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_the_arguments_and_name_what_is_missing() {
        let map: TensorMap = "bf16 base=0 dims=arg3,arg2 strides=arg4 box=64,128 swizzle=128"
            .parse()
            .unwrap();
        let ints = |p: usize| [None, None, Some(300i64), Some(200), Some(200)][p];
        let addrs = |p: usize| (p == 0).then_some((0x1000u64, 300 * 200 * 2));
        let r = request(&map, &ints, &addrs).unwrap();
        assert_eq!(r.dims(), &[200, 300]);
        assert_eq!(r.strides(), &[400]);
        assert_eq!(r.addr, 0x1000);
        // An empty tensor: one box of a zeroed buffer (address filled in by the cache).
        let zero = |p: usize| [None, None, Some(0i64), Some(0), Some(0)][p];
        let r = request(&map, &zero, &addrs).unwrap();
        assert_eq!((r.addr, r.dims(), r.strides()), (0, &[64u64, 128][..], &[128u64][..]));
        assert_eq!(r.check(), Ok(()));
        // A buffer smaller than the shape and strides describe.
        let short = |p: usize| (p == 0).then_some((0x1000u64, 300 * 200 * 2 - 1));
        let e = request(&map, &ints, &short).unwrap_err();
        assert!(
            e.contains(
                "shape [300, 200], strides [200, 1] elements) reaches 120000 bytes into a buffer of 119999 bytes"
            ),
            "{e}"
        );
        let no_buffer = |_: usize| None;
        assert!(request(&map, &ints, &no_buffer).unwrap_err().contains("not a buffer"));
    }

    #[test]
    fn a_map_over_entries_spans_the_entries_the_buffer_holds() {
        // Entries of [300, 200] bf16 elements, 60,000 elements apart (arg 5).
        let map: TensorMap = "bf16 base=0 dims=arg3,arg2,fit strides=arg4,arg5 box=64,128,1 swizzle=128"
            .parse()
            .unwrap();
        let ints = |p: usize| [None, None, Some(300i64), Some(200), Some(200), Some(60_000)][p];
        let entry = 300 * 200 * 2;
        for (bytes, entries) in [(entry, 1), (3 * entry, 3), (3 * entry + 100, 3), (4 * entry - 1, 3)] {
            let addrs = |p: usize| (p == 0).then_some((0x1000u64, bytes));
            let r = request(&map, &ints, &addrs).unwrap();
            assert_eq!(r.dims(), &[200, 300, entries], "{bytes} bytes");
            assert_eq!(r.strides(), &[400, 120_000]);
            assert_eq!(r.check(), Ok(()));
        }
        // Not even one entry: the error names the entry's shape.
        let short = |p: usize| (p == 0).then_some((0x1000u64, entry - 1));
        let e = request(&map, &ints, &short).unwrap_err();
        assert!(e.contains("reaches 120000 bytes into a buffer of 119999 bytes"), "{e}");
        // `fit` anywhere but outermost is not a map.
        let inner: TensorMap = "bf16 base=0 dims=fit,arg2 strides=arg4 box=64,128 swizzle=128"
            .parse()
            .unwrap();
        let addrs = |p: usize| (p == 0).then_some((0x1000u64, entry));
        assert!(request(&inner, &ints, &addrs).unwrap_err().contains("outermost"));
    }
}
