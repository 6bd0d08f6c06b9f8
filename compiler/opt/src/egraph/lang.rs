//! The e-graph language: one node per pure IR op the rules look at, typed constants, type
//! leaves, and two catch-all nodes — `Pure` (a pure op the rules do not inspect; nodes with the
//! same key and children are merged, which is CSE) and `Opaque` (side effects, region-holding
//! ops and values from outside the region; every key is unique, so they never merge).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use egg::{Id, define_language};
use tile_lang::ir::{BinaryOp, CmpOp, DType, Elem, Type, UnaryOp};
use tile_lang::ir::{Scalar, scalar};

define_language! {
    pub enum TileLang {
        "add" = Add([Id; 2]),
        "sub" = Sub([Id; 2]),
        "mul" = Mul([Id; 2]),
        "div" = Div([Id; 2]),
        "rem" = Rem([Id; 2]),
        "and" = And([Id; 2]),
        "or" = Or([Id; 2]),
        "xor" = Xor([Id; 2]),
        "shl" = Shl([Id; 2]),
        "shr" = Shr([Id; 2]),
        "max" = Max([Id; 2]),
        "min" = Min([Id; 2]),
        "eq" = Eq([Id; 2]),
        "ne" = Ne([Id; 2]),
        "lt" = Lt([Id; 2]),
        "le" = Le([Id; 2]),
        "gt" = Gt([Id; 2]),
        "ge" = Ge([Id; 2]),
        "neg" = Neg(Id),
        "not" = Not(Id),
        "abs" = Abs(Id),
        "floor" = Floor(Id),
        "ceil" = Ceil(Id),
        "exp" = Exp(Id),
        "exp2" = Exp2(Id),
        "log" = Log(Id),
        "log2" = Log2(Id),
        "sqrt" = Sqrt(Id),
        "rsqrt" = Rsqrt(Id),
        "sin" = Sin(Id),
        "cos" = Cos(Id),
        "tanh" = Tanh(Id),
        "erf" = Erf(Id),
        "sigmoid" = Sigmoid(Id),
        "fma" = Fma([Id; 3]),
        "select" = Select([Id; 3]),
        // (type, x): the type leaf is the result type.
        "cast" = Cast([Id; 2]),
        "cast_rtz" = CastRtz([Id; 2]),
        "broadcast" = Broadcast([Id; 2]),
        Const(Konst),
        Ty(TyLit),
        Pure(PureKey, Vec<Id>),
        Opaque(OpaqueKey, Vec<Id>),
    }
}

/// A type usable as e-node data (the IR's `Type` has no order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TyLit(pub Type);

fn ty_key(t: &Type) -> (u8, DType, bool, &[usize]) {
    match t.elem {
        Elem::Scalar(d) => (0, d, false, &t.shape),
        Elem::Ptr { pointee, mutable } => (1, pointee, mutable, &t.shape),
    }
}

impl Ord for TyLit {
    fn cmp(&self, o: &Self) -> Ordering {
        ty_key(&self.0).cmp(&ty_key(&o.0))
    }
}
impl PartialOrd for TyLit {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl fmt::Display for TyLit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
// Patterns never spell literals: rules test constants through conditions on the analysis.
impl FromStr for TyLit {
    type Err = ();
    fn from_str(_: &str) -> Result<Self, ()> {
        Err(())
    }
}

/// A constant tile: every element equal, held as the dtype's bit pattern so that `-0.0` and
/// `0.0` (and NaN payloads) stay distinct.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Konst {
    pub bits: u64,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl Konst {
    pub fn new(dtype: DType, shape: Vec<usize>, v: Scalar) -> Konst {
        Konst {
            bits: scalar::to_bits(dtype, v),
            dtype,
            shape,
        }
    }
    pub fn value(&self) -> Scalar {
        scalar::from_bits(self.dtype, self.bits)
    }
    pub fn ty(&self) -> Type {
        Type::tile(self.dtype, self.shape.clone())
    }
}
impl fmt::Display for Konst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}:{}", self.value(), self.ty())
    }
}
impl FromStr for Konst {
    type Err = ();
    fn from_str(_: &str) -> Result<Self, ()> {
        Err(())
    }
}

macro_rules! key {
    ($name:ident, $p:literal) => {
        /// An index into the region's side table.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($p, "{}"), self.0)
            }
        }
        impl FromStr for $name {
            type Err = ();
            fn from_str(_: &str) -> Result<Self, ()> {
                Err(())
            }
        }
    };
}
key!(PureKey, "pure#");
key!(OpaqueKey, "opaque#");

impl TileLang {
    pub fn binary(op: BinaryOp, c: [Id; 2]) -> TileLang {
        use BinaryOp::*;
        match op {
            Add => TileLang::Add(c),
            Sub => TileLang::Sub(c),
            Mul => TileLang::Mul(c),
            Div => TileLang::Div(c),
            Rem => TileLang::Rem(c),
            And => TileLang::And(c),
            Or => TileLang::Or(c),
            Xor => TileLang::Xor(c),
            Shl => TileLang::Shl(c),
            Shr => TileLang::Shr(c),
            Max => TileLang::Max(c),
            Min => TileLang::Min(c),
        }
    }

    pub fn cmp(op: CmpOp, c: [Id; 2]) -> TileLang {
        match op {
            CmpOp::Eq => TileLang::Eq(c),
            CmpOp::Ne => TileLang::Ne(c),
            CmpOp::Lt => TileLang::Lt(c),
            CmpOp::Le => TileLang::Le(c),
            CmpOp::Gt => TileLang::Gt(c),
            CmpOp::Ge => TileLang::Ge(c),
        }
    }

    pub fn unary(op: UnaryOp, x: Id) -> TileLang {
        use UnaryOp::*;
        match op {
            Neg => TileLang::Neg(x),
            Not => TileLang::Not(x),
            Abs => TileLang::Abs(x),
            Floor => TileLang::Floor(x),
            Ceil => TileLang::Ceil(x),
            Exp => TileLang::Exp(x),
            Exp2 => TileLang::Exp2(x),
            Log => TileLang::Log(x),
            Log2 => TileLang::Log2(x),
            Sqrt => TileLang::Sqrt(x),
            Rsqrt => TileLang::Rsqrt(x),
            Sin => TileLang::Sin(x),
            Cos => TileLang::Cos(x),
            Tanh => TileLang::Tanh(x),
            Erf => TileLang::Erf(x),
            Sigmoid => TileLang::Sigmoid(x),
        }
    }

    /// The node as an IR op family, for conversion back and for constant folding.
    pub fn class(&self) -> NodeClass {
        use TileLang as T;
        match *self {
            T::Add(c) => NodeClass::Binary(BinaryOp::Add, c),
            T::Sub(c) => NodeClass::Binary(BinaryOp::Sub, c),
            T::Mul(c) => NodeClass::Binary(BinaryOp::Mul, c),
            T::Div(c) => NodeClass::Binary(BinaryOp::Div, c),
            T::Rem(c) => NodeClass::Binary(BinaryOp::Rem, c),
            T::And(c) => NodeClass::Binary(BinaryOp::And, c),
            T::Or(c) => NodeClass::Binary(BinaryOp::Or, c),
            T::Xor(c) => NodeClass::Binary(BinaryOp::Xor, c),
            T::Shl(c) => NodeClass::Binary(BinaryOp::Shl, c),
            T::Shr(c) => NodeClass::Binary(BinaryOp::Shr, c),
            T::Max(c) => NodeClass::Binary(BinaryOp::Max, c),
            T::Min(c) => NodeClass::Binary(BinaryOp::Min, c),
            T::Eq(c) => NodeClass::Cmp(CmpOp::Eq, c),
            T::Ne(c) => NodeClass::Cmp(CmpOp::Ne, c),
            T::Lt(c) => NodeClass::Cmp(CmpOp::Lt, c),
            T::Le(c) => NodeClass::Cmp(CmpOp::Le, c),
            T::Gt(c) => NodeClass::Cmp(CmpOp::Gt, c),
            T::Ge(c) => NodeClass::Cmp(CmpOp::Ge, c),
            T::Neg(x) => NodeClass::Unary(UnaryOp::Neg, x),
            T::Not(x) => NodeClass::Unary(UnaryOp::Not, x),
            T::Abs(x) => NodeClass::Unary(UnaryOp::Abs, x),
            T::Floor(x) => NodeClass::Unary(UnaryOp::Floor, x),
            T::Ceil(x) => NodeClass::Unary(UnaryOp::Ceil, x),
            T::Exp(x) => NodeClass::Unary(UnaryOp::Exp, x),
            T::Exp2(x) => NodeClass::Unary(UnaryOp::Exp2, x),
            T::Log(x) => NodeClass::Unary(UnaryOp::Log, x),
            T::Log2(x) => NodeClass::Unary(UnaryOp::Log2, x),
            T::Sqrt(x) => NodeClass::Unary(UnaryOp::Sqrt, x),
            T::Rsqrt(x) => NodeClass::Unary(UnaryOp::Rsqrt, x),
            T::Sin(x) => NodeClass::Unary(UnaryOp::Sin, x),
            T::Cos(x) => NodeClass::Unary(UnaryOp::Cos, x),
            T::Tanh(x) => NodeClass::Unary(UnaryOp::Tanh, x),
            T::Erf(x) => NodeClass::Unary(UnaryOp::Erf, x),
            T::Sigmoid(x) => NodeClass::Unary(UnaryOp::Sigmoid, x),
            T::Fma(c) => NodeClass::Fma(c),
            T::Select(c) => NodeClass::Select(c),
            T::Cast([t, x]) => NodeClass::Cast(false, t, x),
            T::CastRtz([t, x]) => NodeClass::Cast(true, t, x),
            T::Broadcast([t, x]) => NodeClass::Broadcast(t, x),
            T::Const(_) => NodeClass::Const,
            T::Ty(_) => NodeClass::Ty,
            T::Pure(k, _) => NodeClass::Pure(k),
            T::Opaque(k, _) => NodeClass::Opaque(k),
        }
    }
}

/// A node viewed by op family.
#[derive(Clone, Copy, Debug)]
pub enum NodeClass {
    Binary(BinaryOp, [Id; 2]),
    Cmp(CmpOp, [Id; 2]),
    Unary(UnaryOp, Id),
    Fma([Id; 3]),
    Select([Id; 3]),
    /// (round toward zero, type leaf, operand)
    Cast(bool, Id, Id),
    Broadcast(Id, Id),
    Const,
    Ty,
    Pure(PureKey),
    Opaque(OpaqueKey),
}
