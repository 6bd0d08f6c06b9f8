//! The static estimates for one checked kernel at one block size: registers per thread (a
//! liveness walk over tile values), shared memory (the codegen's own rule, `estimate.rs`), and
//! the work of one program (bytes, thread-instructions, shared-memory traffic) for the roofline.

use std::collections::{HashMap, HashSet};

use tile_gir::assign::GpuPlan;
use tile_gir::estimate;
use tile_gir::mma::Instr;
use tile_lang::ir::{BinaryOp, CmpOp, ConstValue, DType, Elem, Kernel, Op, OpKind, Region, ValueId};

/// Registers every kernel needs besides its tile values: thread and block ids, the shared-memory
/// base, addresses and loop counters. Fitted against ptxas on the examples (docs/optimizer.md).
pub const BASE_REGS: u32 = 16;

/// 32-bit registers one element of `e` takes (pointers and 64-bit values take two).
fn words(e: Elem) -> usize {
    match e {
        Elem::Ptr { .. } => 2,
        Elem::Scalar(d) if d.bits() == 64 => 2,
        Elem::Scalar(_) => 1,
    }
}

/// Every value an op reads, its nested regions included, except the reads in `skip` (by the
/// reading op's first result and the value read).
fn all_uses(op: &Op, skip: &HashSet<(ValueId, ValueId)>, out: &mut HashSet<ValueId>) {
    op.each_read(&mut |by, v| {
        if by.results.first().is_none_or(|r| !skip.contains(&(*r, v))) {
            out.insert(v);
        }
    });
}

/// The reads of a pipelined loop's resident operands (tiles from before the loop that its
/// tensor-core dots read): the lowering writes them to shared memory once, before the loop, and
/// the dots read them there, so their registers die at the loop. By reading op and value: the
/// dot, or the `trans` it reads B through.
fn resident_reads(k: &Kernel, plan: &GpuPlan) -> HashSet<(ValueId, ValueId)> {
    let mut skip = HashSet::new();
    k.walk(&mut |op| {
        let OpKind::For { .. } = op.kind else { return };
        let body = &op.regions[0];
        let Some(pl) = body.args.first().and_then(|i| plan.pipelines.get(i)) else {
            return;
        };
        let resident: HashSet<ValueId> = pl.resident.iter().map(|r| r.load).collect();
        for o in &body.ops {
            let OpKind::Dot(_) = o.kind else { continue };
            let dot = o.results[0];
            for v in &o.operands[..2] {
                if resident.contains(v) {
                    skip.insert((dot, *v));
                }
            }
            if let Some(x) = plan.transposed_b.get(&dot).filter(|x| resident.contains(x)) {
                skip.insert((o.operands[1], *x));
                skip.insert((dot, o.operands[1]));
            }
        }
    });
    skip
}

struct Regs<'a> {
    k: &'a Kernel,
    threads: u32,
    max_vec: usize,
    /// Constants are immediates in the PTX: they take no register.
    consts: HashSet<ValueId>,
    /// Tiles computed from indices alone (see [`index_tiles`]).
    index: HashSet<ValueId>,
    /// Scalars broadcast to a tile: every element is the one register of the scalar.
    splats: HashSet<ValueId>,
    /// Broadcasts in registers, by the number of distinct source registers they repeat.
    repeats: HashMap<ValueId, usize>,
    /// Loads a pipelined loop copies into shared memory with cp.async: never in registers.
    staged: HashSet<ValueId>,
    /// Pointer tiles used only to address such copies (and advanced for the next iteration):
    /// the lowering reads one pointer per 16-byte chunk, so only those stay live.
    copy_ptrs: HashSet<ValueId>,
    /// Reads that need no register (see [`resident_reads`]).
    resident_reads: HashSet<(ValueId, ValueId)>,
    /// Elementwise temporaries that never hold a whole tile (see [`transient_tiles`]).
    transient: HashSet<ValueId>,
    plan: &'a GpuPlan,
}

impl Regs<'_> {
    fn cost(&self, v: ValueId) -> usize {
        if self.consts.contains(&v) || self.transient.contains(&v) {
            return 0;
        }
        let t = self.k.ty(v);
        if self.splats.contains(&v) {
            return words(t.elem);
        }
        if let Some(n) = self.repeats.get(&v) {
            return n * words(t.elem);
        }
        if self.staged.contains(&v) {
            return 0;
        }
        // A tile the plan gave a layout of its own holds what that layout gives a thread (a row
        // vector in a row layout has copies in every warp).
        let elems = match self.plan.layouts.get(&v) {
            Some(l) => l.regs(),
            None => estimate::elems_per_thread(&t.shape, self.threads, self.max_vec),
        };
        // Index tiles are recomputed per vector access (broadcasts of them are computed in
        // registers at each index, see `GpuPlan::recompute_ops`).
        let held = if self.index.contains(&v) || self.copy_ptrs.contains(&v) {
            elems.div_ceil(self.max_vec)
        } else {
            elems
        };
        held * words(t.elem)
    }

    /// Registers an op needs while it runs besides its operands and results: a tensor-core
    /// `dot`'s operand fragments for one k-step (4 per m16 tile of A, 4 per pair of n8 tiles of
    /// B) on mma.sync; wgmma reads its operands from shared memory and holds two descriptors.
    fn temporaries(&self, op: &Op) -> usize {
        let OpKind::Dot(_) = op.kind else { return 0 };
        // Besides the fragments: the thread's parts of the ldmatrix and swizzled-store addresses
        // of both operands (fitted on attention, where ptxas held ~8 more than the fragments).
        const MMA_ADDRESS_REGS: usize = 8;
        match self.plan.mma(op.results[0]) {
            Some(p) if p.instr == Instr::Wgmma => 4 + MMA_ADDRESS_REGS,
            Some(p) => 4 * p.tiles_m() + 4 * p.b_pairs() + MMA_ADDRESS_REGS,
            None => 0,
        }
    }

    /// Every value the ops of `r` read (nested regions included).
    fn region_reads(&self, r: &Region) -> HashSet<ValueId> {
        let mut u = HashSet::new();
        for op in &r.ops {
            all_uses(op, &self.resident_reads, &mut u);
        }
        u
    }

    fn sum(&self, vs: impl Iterator<Item = ValueId>) -> usize {
        vs.map(|v| self.cost(v)).sum()
    }

    /// The peak of registers live in `r` (values defined in `defs` or `r`), on top of `outer`
    /// registers held by enclosing regions across the whole of `r`.
    fn peak(&self, r: &Region, defs: &[ValueId], outer: usize) -> usize {
        let uses: Vec<HashSet<ValueId>> = r
            .ops
            .iter()
            .map(|op| {
                let mut u = HashSet::new();
                all_uses(op, &self.resident_reads, &mut u);
                u
            })
            .collect();
        // The last op reading each value, found once (not by a search per value and op).
        let mut last_use: HashMap<ValueId, usize> = HashMap::new();
        for (i, u) in uses.iter().enumerate() {
            for v in u {
                last_use.insert(*v, i);
            }
        }
        let last = |v: ValueId| last_use.get(&v).copied();
        let mut live: HashSet<ValueId> = defs.iter().copied().filter(|v| last(*v).is_some()).collect();
        // The registers `live` holds, kept as values come and go.
        let mut live_sum = self.sum(live.iter().copied());
        let mut peak = outer + live_sum;
        for (i, op) in r.ops.iter().enumerate() {
            let live_in = live_sum;
            for sub in &op.regions {
                // Inside a loop or branch, everything live across the op stays live. So do the
                // values a loop's body reads from here (every iteration reads them); a branch
                // runs once, and a value it reads last dies at its last use inside.
                let across = |v: &ValueId| last(*v).is_some_and(|l| l > i);
                let once = matches!(op.kind, OpKind::If);
                let reads = self.region_reads(sub);
                let held: HashSet<ValueId> = live
                    .iter()
                    .copied()
                    .filter(|v| across(v) || (!once && reads.contains(v)))
                    .collect();
                let mut defs = sub.args.clone();
                if once {
                    defs.extend(live.iter().copied().filter(|v| !across(v) && reads.contains(v)));
                }
                peak = peak.max(self.peak(sub, &defs, outer + self.sum(held.into_iter())));
            }
            live.retain(|v| {
                let keep = last(*v).is_some_and(|l| l > i);
                if !keep {
                    live_sum -= self.cost(*v);
                }
                keep
            });
            for res in &op.results {
                if last(*res).is_some() && live.insert(*res) {
                    live_sum += self.cost(*res);
                }
            }
            let live_out = live_sum;
            let defined: usize = self.sum(op.results.iter().copied());
            peak = peak.max(outer + live_in.max(live_out).max(defined) + self.temporaries(op));
        }
        peak
    }
}

/// Tiles computed from indices alone: `arange`, program ids, constants and scalars, through
/// elementwise ops, broadcasts, reshapes and pointer adds. ptxas does not keep such a tile's
/// elements in registers: it recomputes one address or predicate per vector access from the
/// thread index, so the model charges one value per vector chunk for 1-D tiles (measured: the
/// per-element charge overestimated softmax and vector_add by up to 300 registers,
/// docs/optimizer.md).
fn index_tiles(k: &Kernel) -> HashSet<ValueId> {
    let mut index: HashSet<ValueId> = HashSet::new();
    k.walk(&mut |op| {
        let derived = match op.kind {
            OpKind::Const(_) | OpKind::ProgramId(_) | OpKind::NumPrograms(_) | OpKind::Arange { .. } => true,
            OpKind::Broadcast
            | OpKind::ExpandDims(_)
            | OpKind::Reshape
            | OpKind::Unary(_)
            | OpKind::Binary(_)
            | OpKind::Cmp(_)
            | OpKind::Select
            | OpKind::Cast(_)
            | OpKind::Fma
            | OpKind::PtrAdd => op
                .operands
                .iter()
                .all(|v| index.contains(v) || k.ty(*v).shape.is_empty()),
            _ => false,
        };
        if derived {
            index.extend(op.results.iter().copied());
        }
    });
    index
}

/// Tiles an elementwise op (or a broadcast) computes and only elementwise ops and stores read, all before the
/// next op that needs whole tiles (a load, a reduction, a loop...: anything but elementwise
/// ops, stores, constants, broadcasts, `expand_dims` and indices) in the same region. ptxas
/// computes such a chain element by element, in place of the operands that die in it: the
/// tiles it holds are those that cross the chain's ends (loaded rows, a loop's running
/// statistics), not each step's result. layernorm_fixed's first pass: five tile temporaries a
/// chunk in SSA, ptxas holds the running mean, M2 and the chunk loaded (docs/optimizer.md).
fn transient_tiles(k: &Kernel) -> HashSet<ValueId> {
    fn region(k: &Kernel, r: &Region, out: &mut HashSet<ValueId>) {
        let elementwise = |op: &Op| op.kind.is_elementwise() || matches!(op.kind, OpKind::PtrAdd);
        // Scalar arithmetic is elementwise too; a reduction to a scalar still needs the tile.
        let whole = |op: &Op| {
            !(elementwise(op)
                || matches!(
                    op.kind,
                    OpKind::Const(_)
                        | OpKind::ProgramId(_)
                        | OpKind::NumPrograms(_)
                        | OpKind::Broadcast
                        | OpKind::ExpandDims(_)
                        | OpKind::Arange { .. }
                        | OpKind::MultipleOf(_)
                        | OpKind::MaxContiguous(_)
                        | OpKind::Store { .. }
                ))
        };
        // The index of the first op at or after each op that needs whole tiles.
        let mut next_whole = vec![r.ops.len(); r.ops.len() + 1];
        for i in (0..r.ops.len()).rev() {
            next_whole[i] = if whole(&r.ops[i]) { i } else { next_whole[i + 1] };
        }
        let mut def: HashMap<ValueId, usize> = HashMap::new();
        let mut ok: HashMap<ValueId, bool> = HashMap::new();
        for (i, op) in r.ops.iter().enumerate() {
            let mut reads = HashSet::new();
            all_uses(op, &HashSet::new(), &mut reads);
            for v in reads {
                if let (Some(d), Some(flag)) = (def.get(&v), ok.get_mut(&v)) {
                    let in_chain = (elementwise(op) || matches!(op.kind, OpKind::Store { .. }))
                        && op.operands.contains(&v)
                        && next_whole[d + 1] > i;
                    *flag &= in_chain;
                }
            }
            // A broadcast read only in the chain is materialised element by element too (a
            // per-row scale over a wgmma accumulator: fp8_gemm's 128 x 256 epilogue, ~110
            // registers over ptxas's count when charged whole).
            let starts = elementwise(op) || matches!(op.kind, OpKind::Broadcast);
            if starts && !k.ty(op.results[0]).is_scalar() {
                def.insert(op.results[0], i);
                ok.insert(op.results[0], true);
            }
            for sub in &op.regions {
                region(k, sub, out);
            }
        }
        out.extend(ok.into_iter().filter(|(_, f)| *f).map(|(v, _)| v));
    }
    // A `yield` is not in a chain: a loop's carried value is a whole tile.
    let mut out = HashSet::new();
    region(k, &k.body, &mut out);
    out
}

/// Pointer tiles whose every use addresses a staged load's copies: the load's pointer, a
/// `ptr + offset` that is itself such a tile, or a loop-carried value that is one (its initial
/// value, next value and argument).
fn copy_pointers(k: &Kernel, staged: &HashSet<ValueId>) -> HashSet<ValueId> {
    // Each use as what the rules below read of it: the kind of op (a staged load's result
    // counts as such), its first operand and first result.
    #[derive(Clone, Copy)]
    enum Use {
        Load { staged: bool },
        PtrAdd,
        Carry,
        Other,
    }
    let mut users: HashMap<ValueId, Vec<(Use, ValueId, Option<ValueId>)>> = HashMap::new();
    let mut carried: Vec<(ValueId, ValueId, ValueId, ValueId)> = Vec::new();
    k.walk(&mut |op| {
        let kind = match op.kind {
            OpKind::Load { .. } => Use::Load {
                staged: staged.contains(&op.results[0]),
            },
            OpKind::PtrAdd => Use::PtrAdd,
            OpKind::Yield | OpKind::For { .. } => Use::Carry,
            _ => Use::Other,
        };
        for v in &op.operands {
            users
                .entry(*v)
                .or_default()
                .push((kind, op.operands[0], op.results.first().copied()));
        }
        if let OpKind::For { .. } = op.kind {
            let body = &op.regions[0];
            if let Some(y) = body.yield_op() {
                for (j, arg) in body.args[1..].iter().enumerate() {
                    carried.push((op.operands[3 + j], *arg, y.operands[j], op.results[j]));
                }
            }
        }
    });
    let is_ptr_tile = |v: ValueId| k.ty(v).elem.is_ptr() && !k.ty(v).is_scalar();
    // Optimistic fixed point: start from every pointer tile, drop those with another use.
    let mut set: HashSet<ValueId> = users.keys().copied().filter(|v| is_ptr_tile(*v)).collect();
    for (init, arg, next, res) in &carried {
        if is_ptr_tile(*arg) {
            set.extend([*init, *arg, *next, *res]);
        }
    }
    loop {
        let before = set.len();
        let snapshot = set.clone();
        set.retain(|v| {
            users
                .get(v)
                .into_iter()
                .flatten()
                .all(|(kind, first, result)| match kind {
                    Use::Load { staged } => first == v && *staged,
                    Use::PtrAdd => first == v && result.is_some_and(|r| snapshot.contains(&r)),
                    Use::Carry => carried
                        .iter()
                        .any(|(i, a, n, _)| (*i == *v || *n == *v) && snapshot.contains(a)),
                    Use::Other => false,
                })
        });
        for (init, arg, next, res) in &carried {
            if !(set.contains(init) && set.contains(arg) && set.contains(next)) {
                for v in [init, arg, next, res] {
                    set.remove(v);
                }
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

/// Estimated 32-bit registers per thread for `k` in blocks of `threads` threads.
pub fn registers(k: &Kernel, plan: &GpuPlan) -> u32 {
    let threads = plan.threads;
    let (mut consts, mut splats, mut repeats) = (HashSet::new(), HashSet::new(), HashMap::new());
    k.walk(&mut |op| match op.kind {
        OpKind::Const(_) => consts.extend(op.results.iter().copied()),
        OpKind::Broadcast if k.ty(op.operands[0]).shape.is_empty() => splats.extend(op.results.iter().copied()),
        // A broadcast in registers repeats its source's registers (a per-row statistic over
        // the row): it holds only the distinct ones.
        OpKind::Broadcast => {
            if let Some(distinct) = plan.broadcast_distinct(k, op) {
                repeats.insert(op.results[0], distinct);
            }
        }
        _ => {}
    });
    // Tiles a pipeline copies to shared memory (by cp.async or the TMA engine) for a dot never
    // live in registers.
    let mut staged = HashSet::new();
    k.walk(&mut |op| {
        if matches!(op.kind, OpKind::Load { .. } | OpKind::LoadBlock { .. }) && plan.is_staged_operand(op.results[0]) {
            staged.insert(op.results[0]);
        }
    });
    let copy_ptrs = copy_pointers(k, &staged);
    // Nor does a `trans(x)` a dot reads as B stored `[n, k]` (never computed).
    staged.extend(plan.fused_permutes.iter().copied());
    let r = Regs {
        k,
        threads,
        max_vec: estimate::max_vec(k),
        consts,
        index: index_tiles(k),
        splats,
        repeats,
        staged,
        copy_ptrs,
        resident_reads: resident_reads(k, plan),
        transient: transient_tiles(k),
        plan,
    };
    let mut defs: Vec<ValueId> = k.params.iter().map(|p| p.value).collect();
    defs.extend(k.body.args.iter().copied());
    // A pipelined loop holds the pointers of the iteration it copies ahead besides its own.
    let mut ahead = 0;
    k.walk(&mut |op| {
        if matches!(op.kind, OpKind::Load { .. }) && r.plan.is_staged(op.results[0]) {
            ahead += r.cost(op.operands[0]);
        }
    });
    BASE_REGS + (r.peak(&k.body, &defs, 0) + ahead) as u32
}

/// The work of one program, summed over its loops' trip counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Work {
    /// Bytes loaded and stored in global memory: whole tiles, except the lanes a mask
    /// `start + arange(0, B) < n` turns off where `start` and `n` are known
    /// ([`CostWalk::lanes_in_bounds`]; other masks are charged every lane), a load that other
    /// programs make too counted once per group of programs that share it (the rest hit L2;
    /// see [`program_axes`]).
    pub dram_bytes: f64,
    /// Every byte loaded and stored, hits in L2 included.
    pub l2_bytes: f64,
    /// Thread-instructions: elementwise ops per element each thread holds, dot FMAs.
    pub insts: f64,
    /// Bytes written to and read from shared memory.
    pub smem_bytes: f64,
    /// Flops of dots that run on tensor cores with `mma.sync`.
    pub mma_flops: f64,
    /// Flops of dots that run on tensor cores with `wgmma`.
    pub wgmma_flops: f64,
    /// The most global-load bytes one program issues in one straight stretch of code (the body,
    /// or one iteration of a loop): what it can have in flight at once.
    pub burst_bytes: f64,
    /// Bytes a program loads again through an address it loaded before (the same expression of
    /// the same values; loops of the same range count as one): a second pass over a row,
    /// unrolled or not. Not in `dram_bytes`: DRAM moves them again only where L2 lost them,
    /// which depends on how many programs are resident ([`super::estimate`]).
    pub reread_bytes: f64,
}

/// Runtime values the cost walk may use: scalar arguments by parameter, the grid, and what the
/// arguments are known to satisfy (one per parameter; `None`: integers by their value, pointers
/// 16-byte aligned).
pub struct Launch {
    pub scalars: HashMap<ValueId, i64>,
    pub grid: [u32; 3],
    pub specialization: Option<Vec<tile_gir::ArgSpec>>,
}

/// The extra DRAM time of a tile access whose per-thread piece is narrower than 8 bytes (one
/// f32 or bf16 per thread): measured on the H200, vector_add at one f32 per thread took 0.92 ms
/// where every wider configuration took 0.74 ms (docs/optimizer.md).
pub const NARROW_ACCESS_COST: f64 = 1.25;

/// Loop trips when a bound is not known statically (read from memory: a sequence's length, a
/// group's size). A loop that streams data runs many iterations; with one, the model saw a
/// pipeline's prologue and its stages' shared memory as pure cost and chose the fewest stages
/// for a decode loop over thousands of tokens. The time estimated for such a kernel is a guess.
const UNKNOWN_TRIPS: i64 = 16;

struct CostWalk<'a> {
    k: &'a Kernel,
    /// The lowering's decisions (which dots run on which tensor-core instruction).
    plan: &'a GpuPlan,
    threads: u32,
    max_vec: usize,
    known: HashMap<ValueId, i64>,
    grid: [u32; 3],
    work: Work,
    /// Global-load bytes of the region being walked (one entry per nesting level).
    level_bytes: Vec<f64>,
    /// Bytes each op moves through scratch shared memory ([`estimate::scratch_uses`]), by the
    /// op's address in `k` (borrowed for the whole walk).
    scratch: HashMap<*const Op, f64>,
    /// The program axes each value depends on ([`program_axes`]).
    axes: HashMap<ValueId, u8>,
    /// Structural keys of values computed by pure ops ([`CostWalk::key`]).
    keys: HashMap<ValueId, u64>,
    /// Keys of the addresses this program has loaded (loads no other program makes).
    loaded: HashSet<u64>,
    /// The op that defines each value (for reading masks).
    defs: HashMap<ValueId, &'a Op>,
    /// The range of each loop index whose bounds are known: (start, end, step).
    loops: HashMap<ValueId, (i64, i64, i64)>,
}

impl<'a> CostWalk<'a> {
    /// A key equal for two values computed by the same pure ops from the same parameters,
    /// constants and loop indices (the index of loops over the same range counts as one); any
    /// other value (a load, a carried value, an op with regions) is its own key.
    fn key(&self, v: ValueId) -> u64 {
        self.keys.get(&v).copied().unwrap_or_else(|| hash_of(&("value", v.0)))
    }

    /// A scalar broadcast to a tile: the scalar; any other value: itself.
    fn splat_source(&self, v: ValueId) -> ValueId {
        match self.defs.get(&v) {
            Some(d) if matches!(d.kind, OpKind::Broadcast) && self.k.ty(d.operands[0]).is_scalar() => d.operands[0],
            _ => v,
        }
    }

    /// Every value a scalar takes: one when it is known; each value of a loop index over a
    /// known range, plus a known constant added to it.
    fn scalar_values(&self, s: ValueId) -> Option<Vec<i64>> {
        if let Some(x) = self.known.get(&s) {
            return Some(vec![*x]);
        }
        let range = |iv: ValueId| {
            let (lo, hi, step) = *self.loops.get(&iv)?;
            (step > 0 && (hi - lo) / step <= 1 << 16).then(|| (lo..hi).step_by(step as usize).collect::<Vec<_>>())
        };
        if let Some(r) = range(s) {
            return Some(r);
        }
        let d = self.defs.get(&s)?;
        let (OpKind::Binary(BinaryOp::Add), ab) = (&d.kind, &d.operands) else {
            return None;
        };
        [(ab[0], ab[1]), (ab[1], ab[0])].into_iter().find_map(|(a, b)| {
            let c = *self.known.get(&b)?;
            Some(range(a)?.into_iter().map(|x| x + c).collect())
        })
    }

    /// The share of a tile's lanes that a mask `start + arange(0, B) < n` lets through, over
    /// every `start` the op sees (a known scalar, or a loop index plus a constant, not depending
    /// on the program), with `n` known: masked-off lanes move no bytes (the loop that runs one
    /// chunk past a row to load ahead moves nothing in its last trip). Other masks: `None`,
    /// every lane charged.
    fn lanes_in_bounds(&self, mask: ValueId) -> Option<f64> {
        let d = self.defs.get(&mask)?;
        let (OpKind::Cmp(CmpOp::Lt), ops) = (&d.kind, &d.operands) else {
            return None;
        };
        let n = *self.known.get(&self.splat_source(ops[1]))?;
        let arange = |v: ValueId| match self.defs.get(&v).map(|d| &d.kind) {
            Some(OpKind::Arange { start: 0, end }) => Some(*end),
            _ => None,
        };
        let index = self.defs.get(&ops[0])?;
        let (starts, width) = match (arange(ops[0]), &index.kind) {
            (Some(width), _) => (vec![0], width),
            (None, OpKind::Binary(BinaryOp::Add)) => {
                let ab = &index.operands;
                let (s, width) = match (arange(ab[0]), arange(ab[1])) {
                    (_, Some(w)) => (self.splat_source(ab[0]), w),
                    (Some(w), None) => (self.splat_source(ab[1]), w),
                    (None, None) => return None,
                };
                // A start that depends on the program: the walk sees one program (the middle
                // one), whose lanes say nothing of the grid's tail.
                if !self.k.ty(s).is_scalar() || self.axes.get(&s).is_some_and(|a| *a != 0) {
                    return None;
                }
                (self.scalar_values(s)?, width)
            }
            _ => return None,
        };
        let live: i64 = starts.iter().map(|x| (n - x).clamp(0, width)).sum();
        Some(live as f64 / (starts.len() as f64 * width as f64))
    }

    /// Records what defines `op`'s results (the op, their structural keys) and, for a loop,
    /// its index's key.
    fn record(&mut self, op: &'a Op) {
        let pure = op.regions.is_empty()
            && !matches!(
                op.kind,
                OpKind::Load { .. }
                    | OpKind::LoadBlock { .. }
                    | OpKind::Atomic { .. }
                    | OpKind::AtomicCas { .. }
                    | OpKind::Store { .. }
            );
        let operands: Vec<u64> = op.operands.iter().map(|v| self.key(*v)).collect();
        if let Some(r) = op.results.first() {
            self.defs.insert(*r, op);
        }
        if pure {
            let kind = format!("{:?}", op.kind);
            for (i, r) in op.results.iter().enumerate() {
                let ty = format!("{:?}", self.k.ty(*r));
                self.keys.insert(*r, hash_of(&(&kind, &operands, i, ty)));
            }
        }
        if matches!(op.kind, OpKind::For { .. })
            && let Some(index) = op.regions[0].args.first()
        {
            self.keys.insert(*index, hash_of(&("loop index", &operands[..3])));
        }
    }

    /// How many programs load the same bytes as this one through an address computed from
    /// `operands`: the programs along every grid axis the address does not depend on.
    fn sharing(&self, operands: &[ValueId]) -> f64 {
        let axes = operands
            .iter()
            .fold(0u8, |a, v| a | self.axes.get(v).copied().unwrap_or(0));
        (0..3)
            .filter(|a| axes & (1 << a) == 0)
            .map(|a| self.grid[a].max(1) as f64)
            .product()
    }

    fn thread_elems(&self, v: ValueId) -> f64 {
        let t = self.k.ty(v);
        (estimate::elems_per_thread(&t.shape, self.threads, self.max_vec) * self.threads as usize) as f64
    }

    fn region(&mut self, r: &'a Region, m: f64) {
        self.level_bytes.push(0.0);
        for op in &r.ops {
            self.op(op, m);
        }
        let here = self.level_bytes.pop().unwrap_or(0.0);
        self.work.burst_bytes = self.work.burst_bytes.max(here);
    }

    fn op(&mut self, op: &'a Op, m: f64) {
        let k = self.k;
        let numel = |v: ValueId| k.ty(v).numel() as f64;
        let bytes = |v: ValueId| match k.ty(v).elem {
            Elem::Ptr { .. } => 8.0,
            Elem::Scalar(d) => d.bytes() as f64,
        };
        let pointee = |v: ValueId| match k.ty(v).elem {
            Elem::Ptr { pointee, .. } => pointee.bytes() as f64,
            Elem::Scalar(d) => d.bytes() as f64,
        };
        let known = |w: &Self, v: ValueId| w.known.get(&v).copied();
        self.record(op);
        match &op.kind {
            OpKind::Const(ConstValue::Int(i)) => {
                self.known.insert(op.results[0], *i);
            }
            OpKind::Const(ConstValue::Bool(b)) => {
                self.known.insert(op.results[0], *b as i64);
            }
            // A representative program: the middle one (a causal loop bounded by the program's
            // own rows then runs half the blocks, its average; the first program would run one).
            OpKind::ProgramId(a) => {
                self.known.insert(op.results[0], (self.grid[*a as usize] / 2) as i64);
            }
            OpKind::NumPrograms(a) => {
                self.known.insert(op.results[0], self.grid[*a as usize] as i64);
            }
            OpKind::Binary(b) if k.ty(op.results[0]).is_scalar() => {
                if let (Some(x), Some(y)) = (known(self, op.operands[0]), known(self, op.operands[1])) {
                    let v = match b {
                        BinaryOp::Add => Some(x.wrapping_add(y)),
                        BinaryOp::Sub => Some(x.wrapping_sub(y)),
                        BinaryOp::Mul => Some(x.wrapping_mul(y)),
                        BinaryOp::Div if y != 0 => Some(x.div_euclid(y)),
                        BinaryOp::Rem if y != 0 => Some(x.rem_euclid(y)),
                        BinaryOp::Max => Some(x.max(y)),
                        BinaryOp::Min => Some(x.min(y)),
                        _ => None,
                    };
                    if let Some(v) = v {
                        self.known.insert(op.results[0], v);
                    }
                }
                self.work.insts += self.threads as f64 * m;
            }
            OpKind::Cast(_) | OpKind::MultipleOf(_) | OpKind::MaxContiguous(_)
                if k.ty(op.results[0]).is_scalar()
                    && k.ty(op.results[0])
                        .dtype()
                        .is_some_and(|d| d.is_int() && d != DType::Bool) =>
            {
                if let Some(x) = known(self, op.operands[0]) {
                    self.known.insert(op.results[0], x);
                }
            }
            _ => {}
        }
        // Bytes of a global access, charged extra when each thread moves less than 8 bytes.
        let access = |w: &Self, tile: ValueId, ptr: ValueId| {
            let t = k.ty(tile);
            let piece = estimate::elems_per_thread(&t.shape, w.threads, w.max_vec).min(w.max_vec) as f64 * pointee(ptr);
            let cost = if !t.shape.is_empty() && piece < 8.0 {
                NARROW_ACCESS_COST
            } else {
                1.0
            };
            numel(tile) * pointee(ptr) * cost
        };
        match &op.kind {
            // A block the TMA engine copies (the only block loads left after `prepare`): whole
            // rows, no pointer registers.
            OpKind::LoadBlock { .. } => {
                let b = numel(op.results[0]) * pointee(op.operands[0]);
                let shared = self.sharing(&op.operands);
                self.work.dram_bytes += b * m / shared;
                self.work.l2_bytes += b * m;
                if let Some(l) = self.level_bytes.last_mut() {
                    *l += b;
                }
            }
            OpKind::Load { mask, .. } => {
                let live = if *mask {
                    self.lanes_in_bounds(op.operands[1]).unwrap_or(1.0)
                } else {
                    1.0
                };
                let b = access(self, op.results[0], op.operands[0]) * live;
                let shared = self.sharing(&op.operands[..1]);
                if shared <= 1.0 && !self.loaded.insert(self.key(op.operands[0])) {
                    self.work.reread_bytes += b * m;
                } else {
                    self.work.dram_bytes += b * m / shared;
                }
                self.work.l2_bytes += b * m;
                if let Some(b) = self.level_bytes.last_mut() {
                    *b += numel(op.results[0]) * pointee(op.operands[0]);
                }
            }
            OpKind::Store { .. } | OpKind::Atomic { .. } | OpKind::AtomicCas { .. } => {
                let value = op.operands[if matches!(op.kind, OpKind::AtomicCas { .. }) {
                    2
                } else {
                    1
                }];
                let live = match op.kind {
                    OpKind::Store { mask: true, .. } => self.lanes_in_bounds(op.operands[2]).unwrap_or(1.0),
                    _ => 1.0,
                };
                let b = access(self, value, op.operands[0]) * m * live;
                self.work.dram_bytes += b;
                self.work.l2_bytes += b;
            }
            OpKind::Dot(_) => {
                let (a, b) = (k.ty(op.operands[0]), k.ty(op.operands[1]));
                let (mm, kk, nn) = (a.shape[0] as f64, a.shape[1] as f64, b.shape[1] as f64);
                let sz = bytes(op.operands[0]);
                match self.plan.mma(op.results[0]) {
                    Some(p) => {
                        match p.instr {
                            Instr::MmaSync => self.work.mma_flops += 2.0 * mm * nn * kk * m,
                            // An 8-bit wgmma does twice the flops of a 16-bit one in the same
                            // time: counted at the 16-bit rate, as half as many.
                            Instr::Wgmma => {
                                self.work.wgmma_flops += 2.0 * mm * nn * kk * m * p.input.bytes() as f64 / 2.0
                            }
                        }
                        // Operands written once, then each warp (mma.sync) or warpgroup (wgmma)
                        // reads its rows of A and its columns of B; A held in registers (the
                        // chained product's P) is neither written nor read there.
                        let a = if self.plan.a_in_registers(k, op).is_some() {
                            0.0
                        } else {
                            mm * kk * (1.0 + p.warps_n as f64)
                        };
                        let b = kk * nn * (1.0 + p.warps_m as f64);
                        self.work.smem_bytes += (a + b) * sz * m;
                    }
                    None => {
                        self.work.insts += mm * nn * kk * m;
                        // Both operands written once, then every product reads one element of each.
                        self.work.smem_bytes += ((mm * kk + kk * nn) * sz + 2.0 * mm * nn * kk * sz) * m;
                    }
                }
            }
            OpKind::Broadcast
            | OpKind::ExpandDims(_)
            | OpKind::Reshape
            | OpKind::Permute(_)
            | OpKind::Join
            | OpKind::Split
            | OpKind::Reduce { .. }
            | OpKind::ReduceWith { .. }
            | OpKind::ArgReduce { .. }
            | OpKind::Scan { .. }
            | OpKind::ScanWith { .. } => {
                // Every tile a reduction folds together (one, except for tuple reductions).
                for &src in &op.operands {
                    if !k.ty(src).is_scalar() {
                        self.work.insts += self.thread_elems(src) * m;
                    }
                }
            }
            OpKind::Unary(_)
            | OpKind::Cmp(_)
            | OpKind::Fma
            | OpKind::Select
            | OpKind::Cast(_)
            | OpKind::Bitcast
            | OpKind::PtrAdd
            | OpKind::Arange { .. } => self.work.insts += self.thread_elems(op.results[0]) * m,
            OpKind::Binary(_) if !k.ty(op.results[0]).is_scalar() => {
                self.work.insts += self.thread_elems(op.results[0]) * m
            }
            _ => {}
        }
        // Data moved through scratch (layout conversions, staged reductions, scans, permutes):
        // written once, read once.
        if !matches!(op.kind, OpKind::Dot(_)) {
            self.work.smem_bytes += 2.0 * self.scratch.get(&std::ptr::from_ref(op)).copied().unwrap_or(0.0) * m;
        }
        match &op.kind {
            OpKind::For { .. } => {
                let b: Vec<Option<i64>> = op.operands[..3].iter().map(|v| known(self, *v)).collect();
                let trips = match (b[0], b[1], b[2]) {
                    (Some(lo), Some(hi), Some(step)) if step > 0 => {
                        self.loops.insert(op.regions[0].args[0], (lo, hi, step));
                        ((hi - lo).max(0) + step - 1) / step
                    }
                    _ => UNKNOWN_TRIPS,
                };
                self.region(&op.regions[0], m * trips as f64);
            }
            // Both arms are charged: the model does not know which one runs.
            _ => {
                for r in &op.regions {
                    self.region(r, m);
                }
                // An `if` choosing between known integers is known as the larger (a grouped
                // GEMM's `if row0 < end { cdiv(K, BK) } else { 0 }` runs cdiv(K, BK) trips in
                // the programs that do the work, which a trip count must follow as BK does).
                if matches!(op.kind, OpKind::If) && op.regions.len() == 2 {
                    fn yields(r: &Region) -> Option<&Op> {
                        r.yield_op()
                    }
                    if let (Some(a), Some(b)) = (yields(&op.regions[0]), yields(&op.regions[1])) {
                        for (i, &res) in op.results.iter().enumerate() {
                            let arm = |y: &Op| y.operands.get(i).and_then(|&v| known(self, v));
                            if let (Some(x), Some(y)) = (arm(a), arm(b)) {
                                self.known.insert(res, x.max(y));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The grid axes each value of `k` depends on (bit `a`: `program_id(a)`), through every op, a
/// loop's index (its start and step, not its bound) and carried values, and an `if`'s
/// condition and yields. Attention's K and V blocks depend on the head (axis 1) but not on
/// the query block (axis 0): every program of a head loads them, and all but the first find
/// them in L2.
fn program_axes(k: &Kernel) -> HashMap<ValueId, u8> {
    fn of(dep: &HashMap<ValueId, u8>, vs: &[ValueId]) -> u8 {
        vs.iter().fold(0, |a, v| a | dep.get(v).copied().unwrap_or(0))
    }
    fn set(dep: &mut HashMap<ValueId, u8>, v: ValueId, m: u8, changed: &mut bool) {
        let e = dep.entry(v).or_insert(0);
        if *e | m != *e {
            *e |= m;
            *changed = true;
        }
    }
    fn region(r: &Region, dep: &mut HashMap<ValueId, u8>, changed: &mut bool) {
        for op in &r.ops {
            match op.kind {
                OpKind::For { .. } => {
                    let body = &op.regions[0];
                    let index = of(dep, &[op.operands[0], op.operands[2]]);
                    set(dep, body.args[0], index, changed);
                    let yields = body.yield_op();
                    for (j, arg) in body.args[1..].iter().enumerate() {
                        let mut m = of(dep, &[op.operands[3 + j]]);
                        if let Some(y) = yields {
                            m |= of(dep, &y.operands[j..j + 1]);
                        }
                        set(dep, *arg, m, changed);
                        set(dep, op.results[j], m, changed);
                    }
                    region(body, dep, changed);
                }
                OpKind::If => {
                    let mut m = of(dep, &op.operands);
                    for b in &op.regions {
                        region(b, dep, changed);
                        if let Some(y) = b.yield_op() {
                            m |= of(dep, &y.operands);
                        }
                    }
                    for r in &op.results {
                        set(dep, *r, m, changed);
                    }
                }
                _ => {
                    let mut m = of(dep, &op.operands);
                    if let OpKind::ProgramId(a) = op.kind {
                        m |= 1 << a;
                    }
                    for r in &op.results {
                        set(dep, *r, m, changed);
                    }
                    for sub in &op.regions {
                        region(sub, dep, changed);
                    }
                }
            }
        }
    }
    let mut dep = HashMap::new();
    loop {
        let mut changed = false;
        region(&k.body, &mut dep, &mut changed);
        if !changed {
            return dep;
        }
    }
}

/// The work of one program of `k` in blocks of `threads` threads.
pub fn work(k: &Kernel, plan: &GpuPlan, launch: &Launch) -> Work {
    let mut w = CostWalk {
        k,
        plan,
        threads: plan.threads,
        max_vec: estimate::max_vec(k),
        known: launch.scalars.clone(),
        grid: launch.grid,
        work: Work::default(),
        level_bytes: Vec::new(),
        scratch: HashMap::new(),
        axes: program_axes(k),
        keys: HashMap::new(),
        loaded: HashSet::new(),
        defs: HashMap::new(),
        loops: HashMap::new(),
    };
    estimate::scratch_uses(k, plan, &mut |op, bytes, _| {
        *w.scratch.entry(std::ptr::from_ref(op)).or_default() += bytes as f64;
    });
    w.region(&k.body, 1.0);
    w.work
}

fn hash_of(x: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(x)
}
