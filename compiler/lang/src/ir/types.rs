//! Element types and tile types.

use std::fmt;

/// A scalar element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F8E4M3,
    F8E5M2,
    F16,
    BF16,
    F32,
    F64,
}

impl DType {
    pub const ALL: [DType; 15] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    pub fn name(self) -> &'static str {
        use DType::*;
        match self {
            Bool => "bool",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            F8E4M3 => "f8e4m3",
            F8E5M2 => "f8e5m2",
            F16 => "f16",
            BF16 => "bf16",
            F32 => "f32",
            F64 => "f64",
        }
    }

    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Width in bits (bool is stored as one byte).
    pub fn bits(self) -> u32 {
        use DType::*;
        match self {
            Bool | I8 | U8 | F8E4M3 | F8E5M2 => 8,
            I16 | U16 | F16 | BF16 => 16,
            I32 | U32 | F32 => 32,
            I64 | U64 | F64 => 64,
        }
    }

    pub fn bytes(self) -> usize {
        self.bits() as usize / 8
    }

    /// The 8-bit float formats (`f8e4m3`, `f8e5m2`).
    pub fn is_fp8(self) -> bool {
        matches!(self, DType::F8E4M3 | DType::F8E5M2)
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F8E4M3 | DType::F8E5M2 | DType::F16 | DType::BF16 | DType::F32 | DType::F64
        )
    }

    pub fn is_int(self) -> bool {
        self.is_signed() || self.is_unsigned()
    }

    pub fn is_signed(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// Whether converting an integer of this dtype to the integer dtype `to` keeps every value
    /// (i32 to i64, u32 to i64, u8 to u16; not i32 to u64, not i64 to i32).
    pub fn int_widens_to(self, to: DType) -> bool {
        self.is_int()
            && to.is_int()
            && to.bits() >= self.bits()
            && (self.is_signed() == to.is_signed() || self.is_unsigned() && to.bits() > self.bits())
    }

    /// The unsigned or signed integer type of the same width (for bitcasts).
    pub fn int_of_width(bits: u32, signed: bool) -> Option<DType> {
        use DType::*;
        Some(match (bits, signed) {
            (8, true) => I8,
            (16, true) => I16,
            (32, true) => I32,
            (64, true) => I64,
            (8, false) => U8,
            (16, false) => U16,
            (32, false) => U32,
            (64, false) => U64,
            _ => return None,
        })
    }

    /// Float types ordered by the promotion lattice; fp8 and 16-bit floats rank below f32.
    fn float_rank(self) -> u32 {
        use DType::*;
        match self {
            F8E4M3 | F8E5M2 => 1,
            F16 | BF16 => 2,
            F32 => 3,
            F64 => 4,
            _ => 0,
        }
    }

    /// The common type of two operands of a binary operation (see docs/language.md, "Type
    /// promotion").
    pub fn promote(a: DType, b: DType) -> DType {
        use DType::*;
        if a == b {
            return a;
        }
        match (a.is_float(), b.is_float()) {
            (true, true) => {
                let (ra, rb) = (a.float_rank(), b.float_rank());
                if ra == rb {
                    // f16 with bf16, or the two fp8 formats: neither holds the other.
                    if ra == 1 { F16 } else { F32 }
                } else if ra > rb {
                    a
                } else {
                    b
                }
            }
            (true, false) => a,
            (false, true) => b,
            (false, false) => {
                if a.is_bool() {
                    return b;
                }
                if b.is_bool() {
                    return a;
                }
                let (wa, wb) = (a.bits(), b.bits());
                if a.is_signed() == b.is_signed() {
                    return if wa >= wb { a } else { b };
                }
                let (s, u) = if a.is_signed() { (a, b) } else { (b, a) };
                if u.bits() >= s.bits() { u } else { s }
            }
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one element of a tile is: a number or a pointer into global memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    Scalar(DType),
    Ptr { pointee: DType, mutable: bool },
}

impl Elem {
    pub fn dtype(self) -> Option<DType> {
        match self {
            Elem::Scalar(d) => Some(d),
            Elem::Ptr { .. } => None,
        }
    }

    pub fn is_ptr(self) -> bool {
        matches!(self, Elem::Ptr { .. })
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elem::Scalar(d) => write!(f, "{d}"),
            Elem::Ptr { pointee, mutable: true } => write!(f, "*mut {pointee}"),
            Elem::Ptr {
                pointee,
                mutable: false,
            } => write!(f, "*{pointee}"),
        }
    }
}

/// The type of an IR value: an element type and a static shape (`[]` for a scalar).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    pub elem: Elem,
    pub shape: Vec<usize>,
}

impl Type {
    pub fn scalar(d: DType) -> Type {
        Type {
            elem: Elem::Scalar(d),
            shape: vec![],
        }
    }

    pub fn tile(d: DType, shape: Vec<usize>) -> Type {
        Type {
            elem: Elem::Scalar(d),
            shape,
        }
    }

    pub fn with_elem(&self, elem: Elem) -> Type {
        Type {
            elem,
            shape: self.shape.clone(),
        }
    }

    pub fn with_dtype(&self, d: DType) -> Type {
        self.with_elem(Elem::Scalar(d))
    }

    pub fn with_shape(&self, shape: Vec<usize>) -> Type {
        Type { elem: self.elem, shape }
    }

    pub fn dtype(&self) -> Option<DType> {
        self.elem.dtype()
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.elem {
            Elem::Ptr { .. } if !self.shape.is_empty() => write!(f, "({})", self.elem)?,
            _ => write!(f, "{}", self.elem)?,
        }
        if !self.shape.is_empty() {
            let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
            write!(f, "[{}]", dims.join(", "))?;
        }
        Ok(())
    }
}

/// Broadcast two shapes numpy-style (right-aligned; a dimension of 1 stretches).
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return None;
        };
    }
    Some(out)
}

/// A compile-time constant value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ConstValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    DType(DType),
}

impl fmt::Display for ConstValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstValue::Int(v) => write!(f, "{v}"),
            ConstValue::Float(v) => write!(f, "{}", fmt_float(*v)),
            ConstValue::Bool(v) => write!(f, "{v}"),
            ConstValue::DType(d) => write!(f, "{d}"),
        }
    }
}

/// A float printed so that it parses back to the same bits (`inf`, `-inf`, `nan` spelled out).
pub fn fmt_float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        let s = format!("{v:?}");
        if s.contains('.') || s.contains('e') {
            s
        } else {
            format!("{s}.0")
        }
    }
}
