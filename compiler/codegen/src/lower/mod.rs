//! Lowering of each IR op to LLVM IR for the NVPTX back end.
//!
//! This file holds the lowering's state ([`Lowering`]), the entry point [`lower`], the kernel and
//! region plumbing and the dispatcher [`Lowering::op`]; each op family is an `impl Lowering` block
//! of its own file: `elementwise.rs`, `memory.rs` (global memory and atomics), `shared.rs`
//! (shared memory and its barriers), `reduce.rs`, `scan.rs`, `dot.rs`, `shape.rs` (broadcasts,
//! reshapes, permutes, join/split, `arange`, program ids) and `control.rs` (loops and branches);
//! `index.rs` maps a thread's slots to tile indices and `helpers.rs` holds LLVM types,
//! intrinsics and inline asm.

mod cluster;
mod control;
mod convert;
mod debug;
mod dot;
mod elementwise;
mod helpers;
mod index;
mod math64;
mod memory;
mod pipeline;
mod reduce;
mod scan;
mod shape;
mod shared;
mod turns;

use std::collections::HashMap;

use inkwell::AddressSpace;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
use tile_gir::assign::GpuPlan;
use tile_lang::ir::*;

use crate::CodegenError;
use shared::SmemState;

type R<T> = Result<T, CodegenError>;

/// A value in registers: a scalar held alike by every thread, or a thread's slots of a tile.
#[derive(Clone, Debug)]
enum Repr<'c> {
    Scalar(BasicValueEnum<'c>),
    Tile(Vec<BasicValueEnum<'c>>),
}

const GLOBAL: u16 = 1;
const SHARED: u16 = 3;
const PTX_KERNEL: u32 = 71;

/// Lowers `k` (the stage's kernel) into `module` by the stage's plan, as a kernel whose tiles
/// spread over `threads` threads; returns the
/// dynamic shared memory it needs and the threads of its blocks (more than `threads` when a
/// producer warpgroup issues a loop's copies).
pub(crate) fn lower<'c>(
    ctx: &'c Context,
    module: &Module<'c>,
    k: &Kernel,
    threads: u32,
    target: &tile_gir::Target,
    spec: &[crate::ArgSpec],
    stage: &tile_gir::GpuStage,
    debug: bool,
) -> R<(u32, u32)> {
    let b = ctx.create_builder();
    let info = crate::axis::analyze(k, spec);
    let max_vec = crate::estimate::max_vec(k);
    let prepared = &stage.prepared;
    let plan = stage.plan.clone();
    too_large(k, &plan, threads)?;
    let mut l = Lowering {
        info,
        max_vec,
        plan,
        target,
        ctx,
        m: module,
        b,
        f: None,
        k,
        threads,
        tid: None,
        vals: HashMap::new(),
        smem: None,
        smem_bytes: 0,
        staged: HashMap::new(),
        guard: None,
        smem_state: SmemState::Fresh,
        tensor_maps: prepared.maps.len(),
        map_rows: prepared.maps.iter().map(|m| m.box_dims[1]).collect(),
        map_of: prepared.map_of.clone(),
        entry_of: prepared.entry_of.clone(),
        map_params: Vec::new(),
        in_pipeline: 0,
        pending_wgmma: Vec::new(),
        wgmma_floor: None,
        producing: false,
        ring_count: None,
        turn: None,
        exchange: None,
        split_meeting: false,
        debug,
    };
    l.kernel()?;
    Ok((l.smem_bytes.max(l.plan.pipeline_bytes), l.plan.block_threads()))
}

/// The first tile whose layout gives a thread more than [`crate::MAX_ELEMS_PER_THREAD`] elements.
fn too_large(k: &Kernel, plan: &GpuPlan, threads: u32) -> R<()> {
    let mut err = None;
    k.walk(&mut |op| {
        for r in &op.results {
            let t = k.ty(*r);
            if err.is_some() || t.is_scalar() {
                continue;
            }
            let per_thread = plan.layout(k, *r).regs();
            if per_thread > crate::MAX_ELEMS_PER_THREAD {
                let at = if op.loc == Loc::default() {
                    String::new()
                } else {
                    format!(" (`{}` at {}:{})", op.kind.name(), op.loc.line, op.loc.col)
                };
                err = Some(CodegenError::TileTooLarge {
                    shape: t.to_string(),
                    per_thread,
                    threads,
                    at,
                });
            }
        }
    });
    err.map_or(Ok(()), Err)
}

/// One kernel's lowering: the LLVM handles, the kernel, the registers of every value lowered so
/// far and the shared memory used.
struct Lowering<'c, 'a> {
    /// Largest chunk of a layout, in elements.
    max_vec: usize,
    /// What the axis analysis knows about integer and pointer values.
    info: HashMap<ValueId, crate::axis::AxisInfo>,
    /// The layout of every tile and the tensor-core plan of every `dot` (the GPU stage).
    plan: GpuPlan,
    /// The GPU compiled for (what it has in hardware: fp8 conversions, wgmma).
    target: &'a tile_gir::Target,
    ctx: &'c Context,
    m: &'a Module<'c>,
    b: Builder<'c>,
    f: Option<FunctionValue<'c>>,
    k: &'a Kernel,
    threads: u32,
    tid: Option<IntValue<'c>>,
    vals: HashMap<ValueId, Repr<'c>>,
    smem: Option<PointerValue<'c>>,
    smem_bytes: u32,
    /// Loads of the pipelined loop being lowered whose tiles are in shared memory: the byte
    /// address of this iteration's stage (their `dot` reads it; the load itself is skipped).
    staged: HashMap<ValueId, IntValue<'c>>,
    /// While a pipelined loop's copy slice evaluates a load for a later iteration: whether
    /// that iteration runs (its lanes load nothing when it does not).
    guard: Option<IntValue<'c>>,
    /// What shared memory held last, in straight-line code (see [`SmemState`]).
    smem_state: SmemState,
    /// How many tensor maps the kernel takes after its own parameters.
    tensor_maps: usize,
    /// Rows of each tensor map's box (a multicast load's map copies one program's share).
    map_rows: Vec<u32>,
    /// The tensor map of each block load the TMA engine copies.
    map_of: HashMap<ValueId, usize>,
    /// The entry index (outermost coordinate) of each TMA access whose map spans a batch of
    /// entries (`tile_gir::tma::Prepared::entry_of`).
    entry_of: HashMap<ValueId, ValueId>,
    /// The generic address of each tensor-map parameter.
    map_params: Vec<PointerValue<'c>>,
    /// How many pipelined loops enclose the op being lowered (scratch goes after their buffers).
    in_pipeline: u32,
    /// wgmma dots committed but not yet waited for, oldest first (see `settle_wgmma`): their
    /// values hold the accumulators as the instructions will leave them, read only through a
    /// `wgmma.wait_group`.
    pending_wgmma: Vec<dot::Pending<'c>>,
    /// Inside a branch of an `if`: how many of `pending_wgmma` were pending before it (they
    /// stay in flight through the branch unless it reads them or commits a dot of its own).
    wgmma_floor: Option<usize>,
    /// Whether the code being lowered is the producer warpgroup's (see `producer`).
    producing: bool,
    /// The slot counting a persistent ring's iterations (see `ring_setup`).
    ring_count: Option<PointerValue<'c>>,
    /// At the top level of the body of a loop whose consumer warpgroups take turns issuing
    /// wgmma (see `turns`): whether this warpgroup holds the turn.
    turn: Option<std::cell::Cell<bool>>,
    /// The exchange array of a kernel with cluster reductions (see `cluster`).
    exchange: Option<cluster::Exchange<'c>>,
    /// In a kernel whose loop is split over its cluster: whether the meeting begun at entry is
    /// still to be waited for (before the first write into rank 0, see `cluster::split_sum`).
    split_meeting: bool,
    /// A debug build (`CompileOptions::debug`): mbarrier waits are bounded.
    debug: bool,
}

fn llvm<T>(r: Result<T, inkwell::builder::BuilderError>) -> R<T> {
    r.map_err(|e| CodegenError::Llvm(e.to_string()))
}

impl<'c> Lowering<'c, '_> {
    fn kernel(&mut self) -> R<()> {
        let mut params: Vec<_> = self.k.params.iter().map(|p| self.ty(p.elem).into()).collect();
        let generic = self.ctx.ptr_type(AddressSpace::default());
        params.extend((0..self.tensor_maps).map(|_| inkwell::types::BasicMetadataTypeEnum::from(generic)));
        let fty = self.ctx.void_type().fn_type(&params, false);
        let f = self.m.add_function(&self.k.name, fty, Some(Linkage::External));
        f.set_call_conventions(PTX_KERNEL);
        // Tensor maps: 128 bytes passed by value, read in place by the TMA engine (never copied
        // to local memory), as `.param .align 64 .b8 [128]`.
        let map_ty = self.ctx.i8_type().array_type(128);
        for i in 0..self.tensor_maps {
            let at = inkwell::attributes::AttributeLoc::Param((self.k.params.len() + i) as u32);
            let byval = inkwell::attributes::Attribute::get_named_enum_kind_id("byval");
            f.add_attribute(at, self.ctx.create_type_attribute(byval, map_ty.into()));
            let align = inkwell::attributes::Attribute::get_named_enum_kind_id("align");
            f.add_attribute(at, self.ctx.create_enum_attribute(align, 64));
            f.add_attribute(at, self.ctx.create_string_attribute("nvvm.grid_constant", ""));
            let p = f
                .get_nth_param((self.k.params.len() + i) as u32)
                .unwrap()
                .into_pointer_value();
            p.set_name(&format!("tensor_map_{i}"));
            self.map_params.push(p);
        }
        f.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            self.ctx
                .create_string_attribute("nvvm.maxntid", &self.plan.block_threads().to_string()),
        );
        if self.producer().is_some() {
            // setmaxnreg needs a register limit at entry: one block per SM.
            f.add_attribute(
                inkwell::attributes::AttributeLoc::Function,
                self.ctx.create_string_attribute("nvvm.minctasm", "1"),
            );
        }
        self.f = Some(f);
        let entry = self.ctx.append_basic_block(f, "entry");
        self.b.position_at_end(entry);
        let smem = self.m.add_global(
            self.ctx.i8_type().array_type(0),
            Some(AddressSpace::from(SHARED)),
            "smem",
        );
        smem.set_linkage(Linkage::External);
        // wgmma's swizzled operands start on 1024-byte boundaries of the shared window.
        let wgmma = self
            .plan
            .dots
            .values()
            .flatten()
            .any(|p| p.instr == tile_gir::mma::Instr::Wgmma);
        // So do TMA stores' staging buffers.
        let tma_store = self.tma_stores();
        smem.set_alignment(if wgmma || tma_store { 1024 } else { 16 });
        self.smem = Some(smem.as_pointer_value());
        let tid = self.intr1("llvm.nvvm.read.ptx.sreg.tid.x", &[], &[])?.into_int_value();
        self.tid = Some(tid);
        for (i, p) in self.k.params.iter().enumerate() {
            let v = f.get_nth_param(i as u32).unwrap();
            v.set_name(&p.name);
            if let Elem::Ptr { mutable: false, .. } = p.elem {
                // A `*T` argument is never written during the launch (language.md, memory
                // model): `noalias readonly` lets LLVM order its loads freely and read it
                // through the non-coherent cache (`ld.global.nc`), as the hand-written loads do.
                for kind in ["noalias", "readonly"] {
                    let id = inkwell::attributes::Attribute::get_named_enum_kind_id(kind);
                    f.add_attribute(
                        inkwell::attributes::AttributeLoc::Param(i as u32),
                        self.ctx.create_enum_attribute(id, 0),
                    );
                }
            }
            self.vals.insert(p.value, Repr::Scalar(v));
        }
        self.cluster_entry(f)?;
        let body = self.k.body.clone();
        if let Some((op, pl)) = self.producer() {
            self.producer_branch(&op, &pl)?;
        }
        self.region(&body, &[], &[])?;
        if tma_store {
            // The TMA stores issued (by thread 0) are complete before the kernel ends.
            let zero = llvm(
                self.b
                    .build_int_compare(inkwell::IntPredicate::EQ, self.tid(), self.i32c(0), ""),
            )?;
            self.when(zero, |l| {
                l.intr("llvm.nvvm.cp.async.bulk.wait.group", &[], &[l.i32c(0).into()])?;
                Ok(())
            })?;
        }
        self.cluster_exit()?;
        llvm(self.b.build_return(None))?;
        Ok(())
    }

    /// Lowers a region with its arguments bound; returns the values of its `yield`, in the
    /// layouts of `yields_to` (the results of the `for` or `if` that owns the region).
    fn region(&mut self, r: &Region, args: &[Repr<'c>], yields_to: &[ValueId]) -> R<Vec<Repr<'c>>> {
        for (a, v) in r.args.iter().zip(args) {
            self.vals.insert(*a, v.clone());
        }
        // A loop body's yielded values, each with the argument it becomes next iteration (a
        // value may be yielded into several).
        let carried: Vec<(ValueId, ValueId)> = match r.ops.last() {
            Some(y) if matches!(y.kind, OpKind::Yield) && r.args.len() == y.operands.len() + 1 => {
                y.operands.iter().copied().zip(r.args[1..].iter().copied()).collect()
            }
            _ => Vec::new(),
        };
        for op in &r.ops {
            self.settle_wgmma(op)?;
            self.settle_wgmma_before_replacing(op, &carried)?;
            if let OpKind::Yield = op.kind {
                return (0..op.operands.len())
                    .map(|i| self.operand_in(op, i, yields_to))
                    .collect();
            }
            // Loads a pipeline copied ahead for a dot, and transpositions a dot reads through,
            // are not lowered here (a load staged in place is read back from its stage).
            if op.results.first().is_some_and(|r| {
                (self.staged.contains_key(r) && self.plan.is_staged_operand(*r)) || self.plan.fused_permutes.contains(r)
            }) {
                continue;
            }
            let saved = self.prepare_operands(op)?;
            self.op(op)?;
            for (v, r) in saved {
                self.vals.insert(v, r);
            }
        }
        self.settle_wgmma_at_end(&[])?;
        Ok(vec![])
    }

    /// Flattens values for phis; `rebuild` turns them back.
    fn flatten(vals: &[Repr<'c>]) -> Vec<BasicValueEnum<'c>> {
        vals.iter()
            .flat_map(|r| match r {
                Repr::Scalar(s) => vec![*s],
                Repr::Tile(t) => t.clone(),
            })
            .collect()
    }

    fn rebuild(shapes: &[Repr<'c>], flat: &[BasicValueEnum<'c>]) -> Vec<Repr<'c>> {
        let mut i = 0;
        shapes
            .iter()
            .map(|r| match r {
                Repr::Scalar(_) => {
                    i += 1;
                    Repr::Scalar(flat[i - 1])
                }
                Repr::Tile(t) => {
                    i += t.len();
                    Repr::Tile(flat[i - t.len()..i].to_vec())
                }
            })
            .collect()
    }

    fn get(&self, v: ValueId) -> Repr<'c> {
        self.vals
            .get(&v)
            .cloned()
            .expect("a verified kernel defines values before their uses")
    }

    fn set(&mut self, v: ValueId, r: Repr<'c>) {
        self.vals.insert(v, r);
    }

    /// Sets `v` from the elements this thread holds: one for a scalar, else the tile's slots.
    fn set_elems(&mut self, v: ValueId, mut elems: Vec<BasicValueEnum<'c>>) {
        let r = if self.k.ty(v).is_scalar() {
            Repr::Scalar(elems.swap_remove(0))
        } else {
            Repr::Tile(elems)
        };
        self.set(v, r);
    }

    /// The value's elements as this thread holds them (a scalar is one element).
    fn elems(&self, v: ValueId) -> Vec<BasicValueEnum<'c>> {
        match self.get(v) {
            Repr::Scalar(s) => vec![s],
            Repr::Tile(t) => t,
        }
    }

    fn scalar(&self, v: ValueId) -> BasicValueEnum<'c> {
        match self.get(v) {
            Repr::Scalar(s) => s,
            Repr::Tile(t) => t[0],
        }
    }

    fn dtype(&self, v: ValueId) -> DType {
        self.k.ty(v).dtype().unwrap_or(DType::I64)
    }

    /// Lowers one op through the method of its family, then forgets what the block reductions
    /// know about shared memory unless the op leaves it alone.
    fn op(&mut self, op: &Op) -> R<()> {
        match &op.kind {
            OpKind::Const(c) => self.constant(op, c)?,
            OpKind::ProgramId(a) | OpKind::NumPrograms(a) => self.program_id(op, *a)?,
            OpKind::Arange { start, .. } => self.arange(op, *start)?,
            OpKind::Broadcast => self.broadcast(op)?,
            OpKind::ExpandDims(_) | OpKind::Reshape => self.reshape(op)?,
            OpKind::Permute(p) => self.permute(op, p)?,
            OpKind::Join => self.join(op)?,
            OpKind::Split => self.split(op)?,
            // Exhaustive on purpose: a new op kind must say how it lowers.
            OpKind::Unary(_)
            | OpKind::Binary(_)
            | OpKind::Cmp(_)
            | OpKind::Fma
            | OpKind::Select
            | OpKind::Cast(_)
            | OpKind::Bitcast
            | OpKind::PtrAdd => self.elementwise(op)?,
            OpKind::Load { mask, other, evict } => self.load(op, *mask, *other, *evict)?,
            OpKind::Store { mask, evict } => self.store(op, *mask, *evict)?,
            OpKind::StoreBlock { .. } if op.operands.last().is_some_and(|v| self.map_of.contains_key(v)) => {
                self.store_block_tma(op)?
            }
            OpKind::LoadBlock { .. } | OpKind::StoreBlock { .. } => {
                return Err(CodegenError::unsupported(
                    "a block access outside a TMA pipeline (internal: it should have been expanded)",
                    op.kind.name(),
                    op.loc,
                ));
            }
            OpKind::Atomic { op: a, mask } => self.atomic(op, Some(*a), *mask)?,
            OpKind::AtomicCas { mask } => self.atomic(op, None, *mask)?,
            OpKind::Dot(p) => self.dot(op, *p)?,
            OpKind::Reduce { op: r, axis } => self.reduce(op, *r, *axis)?,
            OpKind::ArgReduce { max, axis } => self.arg_reduce(op, *max, *axis)?,
            OpKind::ReduceWith { axis } => self.reduce_with(op, *axis)?,
            OpKind::ClusterReduce(r) => self.cluster_reduce(op, Some(*r))?,
            OpKind::ClusterReduceWith => self.cluster_reduce(op, None)?,
            OpKind::SplitSum => self.split_sum(op)?,
            OpKind::Scan { op: r, axis, reverse } => self.scan(op, Some(*r), *axis, *reverse)?,
            OpKind::ScanWith { axis, reverse } => self.scan(op, None, *axis, *reverse)?,
            // Regions run repeatedly or conditionally: no straight-line knowledge crosses them.
            // (on the way out, the reset after the match covers them)
            OpKind::For { .. } => {
                self.smem_state = SmemState::Unknown;
                // A loop's iterations start and end with no wgmma pending.
                let floor = self.wgmma_floor.take();
                let turn = self.leave_turns()?;
                self.for_op(op)?;
                self.wgmma_floor = floor;
                self.turn = turn;
            }
            OpKind::If => {
                self.smem_state = SmemState::Unknown;
                let turn = self.leave_turns()?;
                self.if_op(op)?;
                self.turn = turn;
            }
            OpKind::Yield => {}
            OpKind::MultipleOf(_) | OpKind::MaxContiguous(_) => {
                let v = self.get(op.operands[0]);
                self.set(op.results[0], v);
            }
            // A debug build checks assertions (`debug.rs`); release code leaves them out, as
            // Triton's does. Printing stays the interpreter's.
            OpKind::Assert(msg) if self.debug => self.assert_op(op, msg)?,
            OpKind::Print(_) | OpKind::Assert(_) => {}
        }
        if !self.register_only(op) {
            self.smem_state = SmemState::Unknown;
        }
        Ok(())
    }
}
