//! The tile IR: SSA values that are whole tiles with static shapes, ops on them, and structured
//! control flow (`for` with loop-carried values, `if` with results) as nested regions.
//!
//! Invariants (checked by [`verify`]): every value is defined once, before its uses, in the same
//! region or an enclosing one; elementwise ops take operands of identical type (the checker has
//! already inserted broadcasts and casts); every tile dimension is a power of two.
//!
//! The text form (`Display` / [`parse_kernel`]) round-trips exactly.

pub mod block;
pub mod floats;
mod parse;
mod print;
pub mod reach;
pub mod scalar;
pub mod types;
pub mod uniform;
mod verify;

pub use parse::{ParseError, parse_kernel};
pub use scalar::Scalar;
pub use types::*;
pub use verify::{VerifyError, verify};

/// An SSA value: an index into [`Kernel::values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// A line and column in the `.tile` source, kept on ops for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Loc {
    pub line: u32,
    pub col: u32,
}

/// The deepest software pipeline a kernel or loop may ask for (`#[stages(..)]`, `--num-stages`):
/// stages run from 1 (no pipelining) to this.
pub const MAX_STAGES: u32 = 8;

/// A kernel specialised for one binding of its compile-time parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<KernelParam>,
    /// The compile-time parameters and the values they are bound to, in declaration order.
    pub consts: Vec<(String, ConstValue)>,
    /// `num_warps` candidates from `#[warps(..)]` (empty: the compiler's default).
    pub warps: Vec<u32>,
    /// `num_stages` candidates from `#[stages(..)]`.
    pub stages: Vec<u32>,
    /// Programs per thread-block cluster along grid axis 0, from `#[cluster(N)]` (1: none).
    /// Programs `c * N .. c * N + N` form cluster `c`; `cluster_*` reductions combine their values.
    pub cluster: u32,
    pub body: Region,
    /// Type of every value, indexed by [`ValueId`].
    pub values: Vec<Type>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct KernelParam {
    pub name: String,
    pub elem: Elem,
    pub value: ValueId,
    /// Whether launches specialise on the argument's value (equal to 1, divisible by 16 or 8);
    /// `false` for the parameters `#[no_specialize(..)]` names (printed `no_specialize(..)`).
    pub specialize: bool,
}

/// A list of ops with arguments (the induction variable and carried values of a loop body, the
/// two operands of a reduction's combine function).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Region {
    pub args: Vec<ValueId>,
    pub ops: Vec<Op>,
}

impl Region {
    /// The `yield` that ends this region (a loop body or an `if` branch), if it has one.
    pub fn yield_op(&self) -> Option<&Op> {
        self.ops.last().filter(|y| matches!(y.kind, OpKind::Yield))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    pub operands: Vec<ValueId>,
    pub results: Vec<ValueId>,
    pub regions: Vec<Region>,
    pub loc: Loc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    /// Logical not on bool, bitwise not on integers.
    Not,
    Abs,
    Floor,
    Ceil,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tanh,
    Erf,
    Sigmoid,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Max,
    Min,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    And,
    Or,
    Xor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Max,
    Min,
    And,
    Or,
    Xor,
    Xchg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// Round to nearest, ties to even.
    Rne,
    /// Round toward zero.
    Rtz,
}

/// How a load or store asks the caches to keep the lines it touches (`evict: "first"` or
/// `"last"`): a hint to L1 and L2 that changes no value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Evict {
    /// The caches' own policy.
    #[default]
    Normal,
    /// Evicted before other lines: data read or written once (a stream).
    First,
    /// Kept longer than other lines: data read again soon (a second pass over a row).
    Last,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 products rounded as IEEE f32.
    Ieee,
    /// f32 inputs rounded to tf32 (10-bit mantissa) before the product.
    Tf32,
}

/// What an op does. Operands and results are listed per variant.
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// `() -> scalar`.
    Const(ConstValue),
    /// `() -> i32`: this program's index along `axis`.
    ProgramId(u8),
    /// `() -> i32`: the grid's size along `axis`.
    NumPrograms(u8),
    /// `() -> i32[end - start]`.
    Arange { start: i64, end: i64 },
    /// `(x) -> x` broadcast to the result shape (rank may grow on the left; size-1 dims stretch).
    Broadcast,
    /// `(x) -> x` with a size-1 axis inserted at `axis`.
    ExpandDims(usize),
    /// `(x) -> x` with the same elements in row-major order and a new shape.
    Reshape,
    /// `(x) -> x` with axes permuted: result axis `i` is input axis `perm[i]`.
    Permute(Vec<usize>),
    /// `(a, b) -> [.., 2]`: stacks along a new last axis.
    Join,
    /// `(x[.., 2]) -> (a, b)`.
    Split,
    /// `(x) -> y`, same type.
    Unary(UnaryOp),
    /// `(a, b) -> c`, all of one type.
    Binary(BinaryOp),
    /// `(a, b) -> bool`.
    Cmp(CmpOp),
    /// `(a, b, c) -> a * b + c`, rounded once.
    Fma,
    /// `(cond, a, b) -> where cond then a else b`.
    Select,
    /// `(x) -> x` converted to the result's element type.
    Cast(Rounding),
    /// `(x) -> x` reinterpreted bit for bit as the result's element type.
    Bitcast,
    /// `(ptr, offset) -> ptr`: advance by `offset` elements (the offset is widened to 64 bits).
    PtrAdd,
    /// `(ptr[, mask][, other]) -> value`.
    Load { mask: bool, other: bool, evict: Evict },
    /// `(ptr, value[, mask]) -> ()`.
    Store { mask: bool, evict: Evict },
    /// `(ptr, shape[rank], strides[rank], coords[rank]) -> block`: the block of a tensor at
    /// `coords`, zero where out of bounds (see [`block`]).
    LoadBlock { rank: usize },
    /// `(ptr, shape[rank], strides[rank], coords[rank], value) -> ()`: writes the in-bounds
    /// elements of a block (see [`block`]).
    StoreBlock { rank: usize },
    /// `(ptr, value[, mask]) -> old value`.
    Atomic { op: AtomicOp, mask: bool },
    /// `(ptr, compare, value[, mask]) -> old value`.
    AtomicCas { mask: bool },
    /// `(a[M, K], b[K, N], acc[M, N]) -> [M, N]` accumulating in the result dtype.
    Dot(Precision),
    /// `(x) -> x` with `axis` removed; small ints accumulate in i32, floats below f32 in f32.
    Reduce { op: ReduceOp, axis: usize },
    /// `(x) -> i32` index of the first maximum (`max`) or minimum along `axis`.
    ArgReduce { max: bool, axis: usize },
    /// `(x) -> x` with `axis` removed, combining with region 0 (two scalar args, yields one).
    ReduceWith { axis: usize },
    /// `(x) -> x`, scalar: `x` combined over the programs of this program's cluster, in the
    /// order of their program ids (the same result in each of them). Every program of a cluster
    /// must reach it (see [`Kernel::cluster`]).
    ClusterReduce(ReduceOp),
    /// `(x...) -> x...`, scalars: the values combined over the programs of this program's
    /// cluster by region 0 (`2k` scalar args: the accumulated values then the next program's;
    /// yields `k`), in the order of their program ids, the same in each of them.
    ClusterReduceWith,
    /// `(x) -> x`, a tile: the sum of `x` over the programs of this program's cluster, in rank
    /// order, in the cluster's first program (rank 0); in the others the result is undefined.
    /// Not in the language: the GPU stage splits a loop's iterations over a cluster
    /// (`tile_gir::split`) and sums the loop's accumulators with it. Every program of the
    /// cluster reaches it once, outside every loop and branch.
    SplitSum,
    /// `(x) -> x` inclusive prefix sums or products along `axis`.
    Scan { op: ReduceOp, axis: usize, reverse: bool },
    /// `(x) -> x` inclusive scan combining with region 0.
    ScanWith { axis: usize, reverse: bool },
    /// `(start, end, step, init...) -> final...`; region 0 has args `(i, carried...)` and
    /// yields the next carried values. `stages`: `#[stages(N)]`; `warp_specialize`:
    /// `#[warp_specialize(..)]` (a producer warpgroup issues the loop's TMA copies);
    /// `pingpong`: `#[pingpong(..)]` (consumer warpgroups take turns issuing the loop's wgmma).
    For {
        stages: Option<u32>,
        warp_specialize: Option<bool>,
        pingpong: Option<bool>,
    },
    /// `(cond) -> results`; region 0 is `then`, region 1 `else`; each yields the results.
    If,
    /// `(values...)`: ends a region.
    Yield,
    /// `(x) -> x`: the compiler may assume every element is a multiple of the value.
    MultipleOf(u64),
    /// `(x) -> x`: the compiler may assume runs of this many consecutive elements along the last
    /// axis are consecutive integers.
    MaxContiguous(u64),
    /// `(values...) -> ()`: prints from every program (debug builds).
    Print(String),
    /// `(cond) -> ()`: fails the launch where an element is false (debug builds).
    Assert(String),
}

impl Kernel {
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.values[v.0 as usize]
    }

    /// Whether a grid of `x` programs along axis 0 can launch the kernel: one that runs in
    /// clusters (`#[cluster(N)]`) needs a multiple of `N`. The error says so, without the
    /// kernel's name (callers add it where they do not name the kernel already).
    pub fn check_cluster_grid(&self, x: u32) -> Result<(), String> {
        let n = self.cluster;
        if n > 1 && !x.is_multiple_of(n) {
            return Err(format!(
                "runs in clusters of {n} programs (`#[cluster({n})]`): the grid's first extent {x} is not a \
                 multiple of {n}"
            ));
        }
        Ok(())
    }

    /// Calls `f` on every op, depth first, in program order.
    pub fn walk(&self, f: &mut dyn FnMut(&Op)) {
        fn go(r: &Region, f: &mut dyn FnMut(&Op)) {
            for op in &r.ops {
                f(op);
                for sub in &op.regions {
                    go(sub, f);
                }
            }
        }
        go(&self.body, f);
    }
}

/// Appends ops to a list, each defining one new value of the kernel: what passes that rewrite
/// the IR (block accesses expanded, loops split) build with.
pub struct OpBuilder<'a> {
    /// The kernel's value types; a new value is pushed here.
    pub values: &'a mut Vec<Type>,
    pub ops: &'a mut Vec<Op>,
    /// The source location every new op gets.
    pub loc: Loc,
}

impl OpBuilder<'_> {
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.values[v.0 as usize]
    }

    /// A new op of one result of type `ty`.
    pub fn op(&mut self, kind: OpKind, operands: Vec<ValueId>, ty: Type) -> ValueId {
        let v = ValueId(self.values.len() as u32);
        self.values.push(ty);
        self.ops.push(Op {
            kind,
            operands,
            results: vec![v],
            regions: vec![],
            loc: self.loc,
        });
        v
    }

    /// Scalar `x` broadcast to `shape`.
    pub fn splat(&mut self, x: ValueId, shape: &[usize]) -> ValueId {
        let t = self.ty(x).with_shape(shape.to_vec());
        self.op(OpKind::Broadcast, vec![x], t)
    }
}

impl Op {
    /// Calls `f` with every value this op reads, its nested regions' ops included, and the op
    /// that reads it (this one or a nested one).
    pub fn each_read(&self, f: &mut dyn FnMut(&Op, ValueId)) {
        for v in &self.operands {
            f(self, *v);
        }
        for r in &self.regions {
            for o in &r.ops {
                o.each_read(f);
            }
        }
    }
}

impl OpKind {
    /// Whether the op applies one function element by element to operands of one shape (the
    /// result has their shape): arithmetic, comparisons, `fma`, `select`, casts and bitcasts.
    /// Pointer offsets (`PtrAdd`) are elementwise too but are not listed: callers that take them
    /// say so.
    pub fn is_elementwise(&self) -> bool {
        use OpKind::*;
        matches!(self, Unary(_) | Binary(_) | Cmp(_) | Fma | Select | Cast(_) | Bitcast)
    }

    /// Whether the op has an effect beyond its results (writes memory, prints, fails the launch,
    /// ends a region): such ops are never removed as dead code.
    pub fn has_effects(&self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Store { .. }
                | StoreBlock { .. }
                | Atomic { .. }
                | AtomicCas { .. }
                | ClusterReduce(_)
                | ClusterReduceWith
                | SplitSum
                | Print(_)
                | Assert(_)
                | Yield
        )
    }

    /// The op's name in the text form.
    pub fn name(&self) -> &'static str {
        use OpKind::*;
        match self {
            Const(_) => "const",
            ProgramId(_) => "program_id",
            NumPrograms(_) => "num_programs",
            Arange { .. } => "arange",
            Broadcast => "broadcast",
            ExpandDims(_) => "expand_dims",
            Reshape => "reshape",
            Permute(_) => "permute",
            Join => "join",
            Split => "split",
            Unary(u) => u.name(),
            Binary(b) => b.name(),
            Cmp(c) => c.name(),
            Fma => "fma",
            Select => "select",
            Cast(_) => "cast",
            Bitcast => "bitcast",
            PtrAdd => "ptr_add",
            Load { .. } => "load",
            Store { .. } => "store",
            LoadBlock { .. } => "load_block",
            StoreBlock { .. } => "store_block",
            Atomic { .. } => "atomic",
            AtomicCas { .. } => "atomic_cas",
            Dot(_) => "dot",
            Reduce { .. } => "reduce",
            ArgReduce { max: true, .. } => "argmax",
            ArgReduce { max: false, .. } => "argmin",
            ReduceWith { .. } => "reduce_with",
            ClusterReduce(_) => "cluster_reduce",
            ClusterReduceWith => "cluster_reduce_with",
            SplitSum => "split_sum",
            Scan { .. } => "scan",
            ScanWith { .. } => "scan_with",
            For { .. } => "for",
            If => "if",
            Yield => "yield",
            MultipleOf(_) => "multiple_of",
            MaxContiguous(_) => "max_contiguous",
            Print(_) => "print",
            Assert(_) => "assert",
        }
    }
}

macro_rules! names {
    ($ty:ident { $($v:ident => $s:literal),* $(,)? }) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$v),*];
            pub fn name(self) -> &'static str {
                match self { $($ty::$v => $s),* }
            }
            pub fn from_name(s: &str) -> Option<$ty> {
                match s { $($s => Some($ty::$v),)* _ => None }
            }
        }
    };
}

names!(UnaryOp {
    Neg => "neg", Not => "not", Abs => "abs", Floor => "floor", Ceil => "ceil", Exp => "exp",
    Exp2 => "exp2", Log => "log", Log2 => "log2", Sqrt => "sqrt", Rsqrt => "rsqrt", Sin => "sin",
    Cos => "cos", Tanh => "tanh", Erf => "erf", Sigmoid => "sigmoid",
});
names!(BinaryOp {
    Add => "add", Sub => "sub", Mul => "mul", Div => "div", Rem => "rem", And => "and",
    Or => "or", Xor => "xor", Shl => "shl", Shr => "shr", Max => "max", Min => "min",
});
names!(CmpOp { Eq => "eq", Ne => "ne", Lt => "lt", Le => "le", Gt => "gt", Ge => "ge" });
impl ReduceOp {
    /// The binary op a reduction or scan combines elements with.
    pub fn combine(self) -> BinaryOp {
        match self {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
            ReduceOp::And => BinaryOp::And,
            ReduceOp::Or => BinaryOp::Or,
            ReduceOp::Xor => BinaryOp::Xor,
        }
    }
}

names!(ReduceOp {
    Sum => "sum", Prod => "prod", Max => "max", Min => "min", And => "and", Or => "or",
    Xor => "xor",
});
names!(AtomicOp {
    Add => "add", Max => "max", Min => "min", And => "and", Or => "or", Xor => "xor",
    Xchg => "xchg",
});
names!(Rounding { Rne => "rne", Rtz => "rtz" });
names!(Evict { Normal => "normal", First => "first", Last => "last" });
names!(Precision { Ieee => "ieee", Tf32 => "tf32" });
