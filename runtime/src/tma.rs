//! Tensor maps for the TMA engine: the driver's rules, checked before calling it (so that a bad
//! map is an error that says which rule, not `CUDA_ERROR_INVALID_VALUE`), and the encoding
//! through `cuTensorMapEncodeTiled`.

use std::ffi::c_void;

use cudarc::driver::sys;

use crate::gpu::{Gpu, RuntimeError};

/// Element types a tensor map can describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TmaElem {
    U8,
    U16,
    U32,
    I32,
    U64,
    I64,
    F16,
    BF16,
    F32,
    F64,
}

impl TmaElem {
    pub fn bytes(self) -> u64 {
        match self {
            TmaElem::U8 => 1,
            TmaElem::U16 | TmaElem::F16 | TmaElem::BF16 => 2,
            TmaElem::U32 | TmaElem::I32 | TmaElem::F32 => 4,
            TmaElem::U64 | TmaElem::I64 | TmaElem::F64 => 8,
        }
    }

    fn driver(self) -> sys::CUtensorMapDataType {
        use sys::CUtensorMapDataType as D;
        match self {
            TmaElem::U8 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            TmaElem::U16 => D::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            TmaElem::U32 => D::CU_TENSOR_MAP_DATA_TYPE_UINT32,
            TmaElem::I32 => D::CU_TENSOR_MAP_DATA_TYPE_INT32,
            TmaElem::U64 => D::CU_TENSOR_MAP_DATA_TYPE_UINT64,
            TmaElem::I64 => D::CU_TENSOR_MAP_DATA_TYPE_INT64,
            TmaElem::F16 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            TmaElem::BF16 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            TmaElem::F32 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            TmaElem::F64 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        }
    }
}

/// A tiled tensor map to encode: dimensions innermost first, strides (of every dimension but
/// the innermost) in bytes; out-of-bounds elements of a box read as zero. Fixed-size, so that
/// building one for a launch allocates nothing; entries past `rank` are ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorMapRequest {
    pub elem: TmaElem,
    pub addr: u64,
    pub rank: usize,
    pub dims: [u64; 5],
    pub strides: [u64; 4],
    pub box_dims: [u32; 5],
    /// Swizzle span in bytes: 0 (none), 32, 64 or 128.
    pub swizzle: u32,
}

impl TensorMapRequest {
    pub fn dims(&self) -> &[u64] {
        &self.dims[..self.rank.min(5)]
    }

    pub fn strides(&self) -> &[u64] {
        &self.strides[..self.rank.clamp(1, 5) - 1]
    }

    pub fn box_dims(&self) -> &[u32] {
        &self.box_dims[..self.rank.min(5)]
    }

    /// The driver's rules for a tiled map without interleave, each failure named.
    pub fn check(&self) -> Result<(), String> {
        let rank = self.rank;
        if !(1..=5).contains(&rank) {
            return Err(format!("a tensor map has 1 to 5 dimensions, not {rank}"));
        }
        if !self.addr.is_multiple_of(16) {
            return Err(format!("the base address {:#x} is not 16-byte aligned", self.addr));
        }
        for (i, d) in self.dims().iter().enumerate() {
            if *d == 0 || *d > 1 << 32 {
                return Err(format!("dimension {i} has extent {d}; extents are 1 to 2^32"));
            }
        }
        for (i, s) in self.strides().iter().enumerate() {
            if !s.is_multiple_of(16) || *s >= 1 << 40 {
                return Err(format!(
                    "the stride of dimension {} is {s} bytes; strides are multiples of 16 below 2^40",
                    i + 1
                ));
            }
        }
        for (i, b) in self.box_dims().iter().enumerate() {
            if *b == 0 || *b > 256 {
                return Err(format!("box extent {b} along dimension {i}; box extents are 1 to 256"));
            }
        }
        let inner = self.box_dims[0] as u64 * self.elem.bytes();
        if !inner.is_multiple_of(16) {
            return Err(format!(
                "the box's rows are {inner} bytes; they must be a multiple of 16"
            ));
        }
        match self.swizzle {
            0 => {}
            32 | 64 | 128 if inner <= self.swizzle as u64 => {}
            32 | 64 | 128 => {
                return Err(format!(
                    "the box's rows are {inner} bytes, wider than the {}-byte swizzle span",
                    self.swizzle
                ));
            }
            s => return Err(format!("swizzle of {s} bytes; the modes are 32, 64 and 128")),
        }
        Ok(())
    }
}

/// An encoded tensor map: 128 opaque bytes, passed to a kernel by value.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct TensorMap(pub(crate) sys::CUtensorMap);

impl std::fmt::Debug for TensorMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TensorMap(..)")
    }
}

// SAFETY: a plain 128-byte value the driver copies into the kernel's parameter space.
unsafe impl cudarc::driver::DeviceRepr for TensorMap {}

impl TensorMap {
    /// A pointer to the map's bytes, for launches that pass parameters by address.
    pub fn as_param(&self) -> *mut c_void {
        &self.0 as *const sys::CUtensorMap as *mut c_void
    }
}

impl Gpu {
    /// Encodes a tiled tensor map (after checking the driver's rules).
    pub fn encode_tensor_map(&self, r: &TensorMapRequest) -> Result<TensorMap, RuntimeError> {
        r.check().map_err(RuntimeError::TensorMap)?;
        let rank = r.rank;
        let swizzle = match r.swizzle {
            32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            _ => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        };
        let elem_strides = [1u32; 5];
        // SAFETY: the map is written by the driver; every array has the rank's length (checked).
        let mut map: sys::CUtensorMap = unsafe { std::mem::zeroed() };
        let res = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                r.elem.driver(),
                rank as u32,
                r.addr as *mut c_void,
                r.dims.as_ptr(),
                r.strides.as_ptr(),
                r.box_dims.as_ptr(),
                elem_strides.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        if res != sys::CUresult::CUDA_SUCCESS {
            return Err(RuntimeError::TensorMap(format!(
                "the driver refused the tensor map {r:?}: {res:?}"
            )));
        }
        Ok(TensorMap(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> TensorMapRequest {
        TensorMapRequest {
            elem: TmaElem::BF16,
            addr: 0x7f00_0000_0000,
            rank: 2,
            dims: [4096, 4096, 0, 0, 0],
            strides: [8192, 0, 0, 0],
            box_dims: [64, 128, 0, 0, 0],
            swizzle: 128,
        }
    }

    #[test]
    fn the_driver_rules_name_what_is_wrong() {
        assert_eq!(ok().check(), Ok(()));
        let cases: Vec<(fn(&mut TensorMapRequest), &str)> = vec![
            (|r| r.addr += 4, "16-byte aligned"),
            (|r| r.strides[0] = 252, "multiples of 16"),
            (|r| r.box_dims[1] = 257, "1 to 256"),
            (|r| r.box_dims[0] = 4, "multiple of 16"),
            (|r| r.box_dims[0] = 128, "wider than the 128-byte swizzle"),
            (|r| r.swizzle = 48, "modes are"),
            (|r| r.dims[1] = 0, "extents are 1 to 2^32"),
            (|r| r.rank = 6, "1 to 5 dimensions"),
            (|r| r.rank = 0, "1 to 5 dimensions"),
        ];
        for (break_it, says) in cases {
            let mut r = ok();
            break_it(&mut r);
            let e = r.check().unwrap_err();
            assert!(e.contains(says), "{e:?} should say {says:?}");
        }
    }
}
