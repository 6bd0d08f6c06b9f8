//! Software pipelining of loops that feed tensor cores: which loads are copied into shared memory
//! `stages - 1` iterations ahead (with `cp.async`) and where their stage buffers live.
//!
//! A load is pipelined when it sits at the top level of a `for` body, its only use is operand A
//! or B of a `dot` that has a [`MmaPlan`](crate::mma::MmaPlan) in the same body, its `other` is
//! absent or zero (masked elements are zero-filled), and its pointer and mask are computed from
//! the loop's index, carried values advanced by pure ops or by loads through buffers the loop
//! writes nothing to (a block table's page ids: an indirect load), and values from outside the
//! loop. The lowering then evaluates those ops for a later iteration (the "slice") to issue its
//! copies; a load in the slice reads only where that iteration runs (its index below the
//! loop's bound), so nothing past the loop's end is read:
//! - prologue: iterations `0 .. stages-1` are issued before the loop, one commit group each;
//! - iteration `i`: wait until at most `stages - 2` groups are pending, barrier, issue iteration
//!   `i + stages - 1` into the stage iteration `i - 1` used, commit; the `dot` reads stage
//!   `i mod stages` with `ldmatrix` directly;
//! - with 4 or more stages, a wgmma whose accumulator is only carried to itself stays in flight
//!   into the next iteration (`LoopPipeline::async_dots`): copies then run `stages - 2` ahead,
//!   so that the stage refilled is the one iteration `i - 2` read, whose instructions are done;
//! - copies for iterations past the end are predicated off (they zero-fill), and the loop ends
//!   with a wait for all groups;
//! - when the TMA engine copies every staged load, the stages form a full/empty mbarrier ring
//!   ([`LoopPipeline::ring`]) and the loop has no block-wide barrier: warps release a stage once
//!   the instructions reading it are done, and thread 0 waits for that release before refilling;
//! - a ring loop at the top of the kernel gets a producer warpgroup ([`Producer`]) when
//!   `#[warp_specialize]` asks for it, or by default when the kernel's shared memory leaves
//!   room for one block per SM anyway ([`specialize`]): 128 more threads, one of which issues every copy, so that the warps
//!   computing (the consumers) never wait to refill a stage;
//! - so does a ring loop inside a loop at the top of the kernel (a persistent kernel's loop
//!   over output tiles, [`TileLoop`]): the producer runs that loop too, and the ring goes on
//!   from one tile to the next, so that the next tile's copies land while the consumers finish
//!   the last one.
//!
//! A tensor-core operand defined before such a loop (attention's Q) is written to its own
//! buffer once, before the loop, instead of once per iteration.
//!
//! A loop without tensor-core dots (a row loop of a memory-bound kernel) pipelines its plain
//! loads the same way ([`StagedLoad::dot`] is `None`): any `other`, any number of uses, any
//! layout. Their stages hold the tiles in logical order; where the load stands, each thread
//! reads its elements back from the stage (after the iteration's wait and barrier) and puts
//! `other` where the mask is false. Not staged: loads with an eviction hint (cp.async carries
//! none yet), loads of booleans or pointers, and loads from a buffer the loop also writes
//! (their value could depend on the loop's own earlier stores; buffers behind different
//! parameters are taken not to overlap, as everywhere in the language).
//!
//! Stage buffers of all pipelined loops form the pipeline region at the start of shared memory
//! (one after another; loops that stage only plain loads share it); scratch (conversions,
//! reductions, unpipelined dot operands) lives after it.

use std::collections::{HashMap, HashSet};

use tile_lang::ir::{ConstValue, DType, Elem, Evict, Kernel, Op, OpKind, Region, ValueId};

use crate::mma::{Instr, MmaPlan};
use crate::tma::TmaBoxes;
use crate::{Refusal, Target};

/// A load whose tile is copied ahead into shared memory: for a tensor-core `dot`, or in a loop
/// without one, to be read back where the load stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedLoad {
    /// The load's result.
    pub load: ValueId,
    /// The result of the `dot` that reads it; `None`: the tile is laid out in shared memory in
    /// its logical (row-major) order, and read back into the load's own layout where the load
    /// stands (each element at its flat index), masked elements replaced by `other`.
    pub dot: Option<ValueId>,
    /// 0: the dot's A operand, 1: its B operand (0 when read in place).
    pub operand: usize,
    /// Byte offset of its buffer inside one stage.
    pub offset: u32,
    /// A block load (`load_block`) the TMA engine copies, in these boxes; `None`: `cp.async`.
    pub tma: Option<TmaBoxes>,
    /// Copied once for the whole thread-block cluster ([`multicast`]): each program issues its
    /// share of the boxes' rows, which the TMA engine writes into every program's stage.
    pub multicast: bool,
}

/// One pipelined loop (keyed by its body's index argument in [`GpuPlan::pipelines`](crate::assign::GpuPlan)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopPipeline {
    pub stages: u32,
    pub loads: Vec<StagedLoad>,
    /// Tensor-core operands defined before the loop, written once before it (`load` is the
    /// operand; offsets count from the end of the stages).
    pub resident: Vec<StagedLoad>,
    pub resident_bytes: u32,
    /// Bytes of one stage (all staged loads).
    pub stage_bytes: u32,
    /// Where this loop's stages start in the pipeline region.
    pub base: u32,
    /// Body ops (indices into the body's ops, in order) that compute the staged loads' operands
    /// (pointers, masks, `other`).
    pub issue_ops: Vec<usize>,
    /// Body ops that compute the next value of each carried value the issue ops read.
    pub advance_ops: Vec<usize>,
    /// Carried values (index among the loop's carried values) the issue ops read.
    pub carried: Vec<usize>,
    /// How many iterations ahead the copies run: `stages - 1`, or `stages - 2` when a wgmma
    /// stays in flight across iterations (its stage must not be refilled until it is done), or
    /// `stages` with a producer (whose waits for each stage's release guard the refills).
    pub ahead: u32,
    /// wgmma dots whose accumulator is only carried to the next iteration's same dot: each
    /// iteration waits for the previous iteration's instructions only (`wait_group 1`), and the
    /// loop's end waits for all. By dot result, with the carried value's index.
    pub async_dots: Vec<(ValueId, usize)>,
    /// The producer warpgroup that issues the copies, when the loop is warp-specialised.
    pub producer: Option<Producer>,
}

/// Warp specialisation of a ring loop: the block gets a fourth (or second) warpgroup after the
/// kernel's warps, the producer. It evaluates the scalar values the loop's copies need
/// (`preamble`), waits once for the consumers to reach the loop (named barrier 1), then one of
/// its threads runs the loop's iterations issuing copies only: it waits for a stage's release
/// (its empty barrier), arms the full barrier and issues the stage's boxes, up to `stages`
/// iterations ahead of the slowest consumer warp. The consumers (the kernel's warps, which run
/// everything else) wait on full barriers and release stages as in any ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Producer {
    /// Ops of the kernel's top-level body (indices, in order) the producer evaluates before
    /// its loop: the scalars the loop's bounds and copies read.
    pub preamble: Vec<usize>,
    /// The loop around the ring loop that the producer runs too, when there is one.
    pub tile_loop: Option<TileLoop>,
    /// Registers per thread after `setmaxnreg`, of the producer and of each consumer; `None`
    /// when one consumer warpgroup already has every register it can address (255).
    pub regs: Option<(u32, u32)>,
    /// Whether the consumer warpgroups take turns issuing the loop's wgmma ([`pingpong`]).
    pub pingpong: bool,
}

/// A loop at the top of the kernel around a warp-specialised ring loop (a persistent kernel:
/// each program loops over output tiles, the ring loop over one tile's K steps), which the
/// producer runs too. The ring then carries on from one run of the ring loop to the next: its
/// barriers are set up once, before the tile loop, and a stage and its phase count the ring
/// loop's iterations over every run so far. The producer fills the next tile's first stages
/// while the consumers finish the last tile (its epilogue).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileLoop {
    /// The tile loop's index argument.
    pub iv: ValueId,
    /// Its index among the kernel body's ops.
    pub at: usize,
    /// The ring loop's index among the tile loop body's ops.
    pub ring_at: usize,
    /// Ops of the tile loop's body (indices, in order) the producer evaluates for each tile
    /// before the ring loop: the scalars its bounds and copies read.
    pub preamble: Vec<usize>,
}

/// Threads in the producer warpgroup.
pub const PRODUCER_THREADS: u32 = 128;

/// Registers per thread of a producer warpgroup (it only computes addresses).
const PRODUCER_REGS: u32 = 24;

impl LoopPipeline {
    pub fn bytes(&self) -> u32 {
        self.stages * self.stage_bytes + self.resident_bytes + self.barrier_bytes()
    }

    /// Whether the TMA engine copies some of the staged loads (their stages then complete on
    /// one mbarrier each, after the resident operands).
    pub fn tma(&self) -> bool {
        self.loads.iter().any(|l| l.tma.is_some())
    }

    /// Whether the stages form a full/empty mbarrier ring: every staged load is copied by the
    /// TMA engine, so no thread copies and no iteration needs a block-wide barrier. A stage's
    /// "full" barrier completes when its bytes land; its "empty" barrier when every warp has
    /// finished the instructions that read it (one arrival per warp), and thread 0 waits for
    /// that before refilling it. Warps (and warpgroups) then drift apart by up to `ahead`
    /// iterations instead of meeting at a barrier every iteration.
    pub fn ring(&self) -> bool {
        !self.loads.is_empty() && self.loads.iter().all(|l| l.tma.is_some())
    }

    /// Whether some staged load is multicast across the cluster ([`multicast`]): the stages'
    /// empty barriers then count the consumer warps of every program of the cluster.
    pub fn multicasts(&self) -> bool {
        self.loads.iter().any(|l| l.multicast)
    }

    /// The tile loop around this loop that its producer runs too, when the ring goes on from
    /// one run of the loop to the next ([`TileLoop`]).
    pub fn tile_loop(&self) -> Option<&TileLoop> {
        self.producer.as_ref().and_then(|p| p.tile_loop.as_ref())
    }

    /// Whether the loop's consumer warpgroups take turns issuing its wgmma
    /// ([`Producer::pingpong`]).
    pub fn takes_turns(&self) -> bool {
        self.producer.as_ref().is_some_and(|p| p.pingpong)
    }

    /// Whether the loop runs only when it has iterations (its results are otherwise its initial
    /// values): with a wgmma in flight across iterations (so that nothing defines the
    /// accumulators between a wgmma and its wait), and with a producer (which then skips its
    /// loop too, so that both sides meet at the named barrier or neither does).
    pub fn guarded(&self) -> bool {
        !self.async_dots.is_empty() || self.producer.is_some()
    }

    /// Bytes the TMA engine writes into one stage (what each stage's mbarrier expects).
    pub fn tma_bytes(&self) -> u32 {
        self.loads.iter().filter_map(|l| l.tma).map(|b| b.bytes()).sum()
    }

    fn barrier_bytes(&self) -> u32 {
        match (self.tma(), self.ring()) {
            (true, true) => 16 * self.stages,
            (true, false) => 8 * self.stages,
            _ => 0,
        }
    }

    /// Where stage `stage`'s (full) mbarrier lives in shared memory (the loop copies with TMA).
    pub fn barrier_addr(&self) -> u32 {
        self.base + self.stages * self.stage_bytes + self.resident_bytes
    }

    /// Where the empty mbarriers of a [`ring`](Self::ring) start (after the full ones).
    pub fn empty_addr(&self) -> u32 {
        self.barrier_addr() + 8 * self.stages
    }

    /// Where a resident operand's buffer starts in shared memory.
    pub fn resident_addr(&self, r: &StagedLoad) -> u32 {
        self.base + self.stages * self.stage_bytes + r.offset
    }
}

/// Finds the pipelined loops of `k`; `stages` is the kernel's default (a loop's
/// `#[stages(..)]` overrides it), `dots` the tensor-core plans by dot result. Returns the loops
/// and the size of the pipeline region.
pub fn plan(
    k: &Kernel,
    stages: u32,
    dots: &HashMap<ValueId, MmaPlan>,
    transposed_b: &HashMap<ValueId, ValueId>,
    refusals: &mut Vec<Refusal>,
) -> (HashMap<ValueId, LoopPipeline>, u32) {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    k.walk(&mut |op| {
        for v in &op.operands {
            *uses.entry(*v).or_default() += 1;
        }
    });
    let mut consts: HashMap<ValueId, bool> = HashMap::new();
    k.walk(&mut |op| match &op.kind {
        OpKind::Const(c) => {
            let zero = match c {
                ConstValue::Int(i) => *i == 0,
                ConstValue::Float(f) => *f == 0.0 && f.is_sign_positive(),
                ConstValue::Bool(b) => !*b,
                _ => false,
            };
            consts.insert(op.results[0], zero);
        }
        OpKind::Broadcast => {
            if let Some(z) = consts.get(&op.operands[0]).copied() {
                consts.insert(op.results[0], z);
            }
        }
        _ => {}
    });
    let mut out = HashMap::new();
    let mut base = 0u32;
    // Each loop, its stages, and whether plain loads may be staged in it: not inside a loop
    // that holds a dot (staging an inner loop would take the pipelining from the outer one).
    fn collect(r: &Region, stages: u32, in_dot_loop: bool, out: &mut Vec<(Op, u32, bool)>) {
        for op in &r.ops {
            let mut inner = in_dot_loop;
            if let OpKind::For { stages: s, .. } = op.kind {
                out.push((op.clone(), s.unwrap_or(stages), !in_dot_loop));
                inner |= holds_dot(&op.regions[0]);
            }
            for sub in &op.regions {
                collect(sub, stages, inner, out);
            }
        }
    }
    let mut loops = Vec::new();
    collect(&k.body, stages, false, &mut loops);
    let origins = Origins::of(k);
    // wgmma reads its operands by descriptors whose swizzle acts on absolute address bits:
    // every buffer (and the scratch after the region) starts on its alignment.
    let align = dots.values().map(|d| d.smem_align()).max().unwrap_or(16);
    let planned: Vec<(Op, Option<LoopPipeline>)> = loops
        .into_iter()
        .map(|(op, s, plain)| {
            if s < 2 {
                return (op, None);
            }
            let mut notes = Vec::new();
            let p = match plan_loop(
                k,
                &op,
                s,
                dots,
                transposed_b,
                (&uses, &consts),
                (&origins, plain),
                &mut notes,
            ) {
                Ok(p) => Some(p),
                Err(why) => {
                    notes.push(Refusal {
                        loc: op.loc,
                        path: "pipelining",
                        why: format!("the loop runs unpipelined (for {s} stages): {why}"),
                        asked: false,
                    });
                    None
                }
            };
            refusals.extend(notes);
            (op, p)
        })
        .collect();
    let ivs: HashSet<ValueId> = planned
        .iter()
        .filter(|(_, p)| p.is_some())
        .map(|(op, _)| op.regions[0].args[0])
        .collect();
    // Loops that stage only plain loads (no tensor-core operands, so no producer) share one
    // region: pipelined loops never nest, and each starts with a barrier after which no warp
    // still reads an earlier loop's stages.
    let shared = planned
        .iter()
        .filter_map(|(_, p)| p.as_ref())
        .all(|p| p.loads.iter().all(|l| l.dot.is_none()));
    let mut end = 0u32;
    for (op, p) in planned {
        let Some(mut p) = p else { continue };
        // The innermost loop is pipelined where loops nest (a persistent kernel's tile loop
        // around its K loop): stages for both would take shared memory twice.
        fn holds(op: &Op, ivs: &HashSet<ValueId>) -> bool {
            op.regions
                .iter()
                .flat_map(|r| &r.ops)
                .any(|o| (matches!(o.kind, OpKind::For { .. }) && ivs.contains(&o.regions[0].args[0])) || holds(o, ivs))
        }
        if holds(&op, &ivs) {
            continue;
        }
        p.base = base;
        end = end.max(base + p.bytes().next_multiple_of(align));
        if !shared {
            base = end;
        }
        out.insert(op.regions[0].args[0], p);
    }
    (out, end.next_multiple_of(align))
}

/// Gives a producer warpgroup to the first ring loop at the top of `k`'s body, or directly
/// inside a loop at its top ([`TileLoop`]), that can have one ([`Producer`]) where
/// `#[warp_specialize]` asks for it, and by default where the kernel's `smem` bytes of shared
/// memory leave room for one block per SM anyway: the producer's register split assumes one
/// (with a second block resident, as attention's at head dim 64, it measured 18% slower on the
/// H200). A ring loop inside a tile loop gets none when scratch outside it reuses its buffers
/// (`alias_scratch`): the producer fills them for the next tile meanwhile. Then a loop of
/// fewer than 4 stages keeps a wgmma in flight only under a producer. Its consumers take
/// turns issuing the loop's wgmma where [`pingpong`] says so.
#[allow(clippy::too_many_arguments)]
pub fn specialize(
    k: &Kernel,
    loops: &mut HashMap<ValueId, LoopPipeline>,
    dots: &HashMap<ValueId, MmaPlan>,
    warps: u32,
    target: &Target,
    smem: u32,
    alias_scratch: bool,
    refusals: &mut Vec<Refusal>,
) {
    let refuse = |op: &Op, why: String| {
        let asked = matches!(
            op.kind,
            OpKind::For {
                warp_specialize: Some(true),
                ..
            }
        );
        Refusal {
            loc: op.loc,
            path: "producer warpgroup",
            why,
            asked,
        }
    };
    // The threads of a kernel with cluster reductions all meet at the cluster's barriers,
    // which a producer warpgroup running its own loop would never reach.
    if crate::cluster::ClusterSlots::of(k).is_some() {
        k.walk(&mut |op| {
            if matches!(
                op.kind,
                OpKind::For {
                    warp_specialize: Some(true),
                    ..
                }
            ) {
                refusals.push(refuse(
                    op,
                    "the kernel has cluster reductions, which every thread of a program meets".into(),
                ));
            }
        });
        return;
    }
    let one_block = target.blocks_by_smem(smem) < 2;
    let mut given = false;
    'give: for (at, op) in k.body.ops.iter().enumerate() {
        let OpKind::For { .. } = op.kind else { continue };
        // The loop itself, else a loop directly inside it (with the outer loop as its tile loop).
        let mut rings: Vec<(Option<usize>, &Op)> = vec![(None, op)];
        if !loops.contains_key(&op.regions[0].args[0]) && !alias_scratch {
            rings.extend(
                op.regions[0]
                    .ops
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| matches!(o.kind, OpKind::For { .. }))
                    .map(|(j, o)| (Some(j), o)),
            );
        }
        for (ring_at, ring) in rings {
            let OpKind::For {
                warp_specialize,
                pingpong: asked,
                ..
            } = ring.kind
            else {
                continue;
            };
            let Some(p) = loops.get_mut(&ring.regions[0].args[0]) else {
                if warp_specialize == Some(true) {
                    refusals.push(refuse(
                        ring,
                        "the loop is not pipelined (see its pipelining note)".into(),
                    ));
                }
                continue;
            };
            if !p.ring() {
                if warp_specialize == Some(true) || (one_block && p.tma()) {
                    refusals.push(refuse(
                        ring,
                        "not every staged load of the loop is copied by TMA (a producer issues TMA copies only; see the TMA notes)".into(),
                    ));
                }
                continue;
            }
            if !warp_specialize.unwrap_or(one_block) {
                refusals.push(refuse(
                    ring,
                    if warp_specialize == Some(false) && crate::split::is_split(k) {
                        "the loop is split over a cluster (`split`), whose sum every thread of the block reaches".into()
                    } else if warp_specialize == Some(false) {
                        "`#[warp_specialize(false)]`".into()
                    } else {
                        format!(
                            "the kernel's {smem} B of shared memory leave room for {} blocks per SM, where warps of other blocks hide the copies; `#[warp_specialize]` on the loop asks for one",
                            target.blocks_by_smem(smem)
                        )
                    },
                ));
                continue;
            }
            let outer = ring_at.map(|j| (at, j));
            match producer(k, outer, ring, p, warps, target) {
                Ok(mut pr) => {
                    pr.pingpong = pingpong(ring, asked, warps, dots);
                    p.producer = Some(pr);
                    p.ahead = p.stages;
                    given = true;
                    break 'give;
                }
                Err(why) => refusals.push(refuse(ring, why)),
            }
        }
    }
    let _ = given;
    // With 3 stages, a wgmma stays in flight only where a producer guards the refills.
    for p in loops.values_mut() {
        if p.stages < 4 && p.producer.is_none() && !p.async_dots.is_empty() {
            p.async_dots.clear();
            p.ahead = p.stages - 1;
        }
    }
}

/// The smallest span of rows, in bytes, at which a box may be split among the programs of a
/// cluster: the TMA engine's swizzle pattern repeats every 1024 bytes (8 rows of 128 bytes),
/// so each share written at a multiple of it lands as it would in the whole box.
const SWIZZLE_REPEAT: u32 = 1024;

/// TMA multicast in a kernel of thread-block clusters (`#[cluster(N)]`, sm_90): a ring loop at
/// the top of the kernel's body (so every program runs it; not a persistent kernel's ring inside
/// a tile loop) whose bounds are the same in every program of a cluster copies each block load
/// whose coordinates are too (`ir::uniform::ClusterUniform`: a GEMM whose cluster computes
/// vertically adjacent tiles shares their B blocks) once for the whole cluster. Each program
/// issues `1/N` of the box rows with `.multicast::cluster` into the same stage of every
/// program's shared memory, where the bytes complete each program's own full barrier (each
/// still expects the whole stage). A stage is refilled by all N programs, so its empty barrier
/// counts the consumer warps of every program (each warp releases it in all N), and no program
/// overwrites a stage another still reads. A box qualifies when its rows split into N shares of
/// whole swizzle repeats ([`SWIZZLE_REPEAT`]).
///
/// The cluster meets before such a loop, every thread of it: so no loop multicasts in a kernel
/// whose producer warpgroup serves another loop (it would be waiting for that loop's consumers
/// and never reach the meeting), nor in a kernel with cluster reductions (whose exit meeting may
/// already have been arrived at).
pub fn multicast(k: &Kernel, loops: &mut HashMap<ValueId, LoopPipeline>, target: &Target) {
    let n = k.cluster;
    if n <= 1 || !target.clusters || crate::cluster::ClusterSlots::of(k).is_some() {
        return;
    }
    let produced = loops.iter().find(|(_, p)| p.producer.is_some()).map(|(iv, _)| *iv);
    let u = tile_lang::ir::uniform::ClusterUniform::of(k);
    // Loops at the top of the body: every program runs each once (the language has no early
    // return), under no control flow.
    for op in &k.body.ops {
        let OpKind::For { .. } = op.kind else { continue };
        let body = &op.regions[0];
        let iv = body.args[0];
        let Some(p) = loops.get_mut(&iv) else { continue };
        if !p.ring() || !u.is_uniform(iv) || produced.is_some_and(|v| v != iv) {
            continue;
        }
        for ld in &mut p.loads {
            let Some(b) = ld.tma else { continue };
            let Some(lop) = body.ops.iter().find(|o| o.results.contains(&ld.load)) else {
                continue;
            };
            let same = tile_lang::ir::block::operands(lop)
                .coords
                .iter()
                .all(|c| u.is_uniform(*c));
            let share = b.rows / n;
            ld.multicast = same && b.rows % n == 0 && (share * b.swizzle) % SWIZZLE_REPEAT == 0;
        }
    }
}

/// The pipeline of loop `op`, or why it has none; `notes` gets the dot operands it does not
/// stage and why (the loop may still be pipelined for the others).
#[allow(clippy::too_many_arguments)]
fn plan_loop(
    k: &Kernel,
    op: &Op,
    stages: u32,
    dots: &HashMap<ValueId, MmaPlan>,
    transposed_b: &HashMap<ValueId, ValueId>,
    (uses, zero): (&HashMap<ValueId, usize>, &HashMap<ValueId, bool>),
    (origins, plain): (&Origins, bool),
    notes: &mut Vec<Refusal>,
) -> Result<LoopPipeline, String> {
    let body = &op.regions[0];
    let plain = plain.then_some(origins);
    // Buffers the loop writes (`None`: a pointer of unknown origin, possibly any of them).
    let written = origins.written(body);
    let read_only = |ptr: ValueId| {
        let root = origins.root(ptr);
        !written.iter().any(|w| w.is_none() || root.is_none() || *w == root)
    };
    let yield_op = body.yield_op().ok_or("the loop body has no yield")?;
    let not_staged = |l: &Op, why: String| Refusal {
        loc: l.loc,
        path: "pipelining",
        why,
        asked: false,
    };
    let def: HashMap<ValueId, usize> = body
        .ops
        .iter()
        .enumerate()
        .flat_map(|(i, o)| o.results.iter().map(move |r| (*r, i)))
        .collect();
    let mut loads = Vec::new();
    let mut resident: Vec<StagedLoad> = Vec::new();
    let mut offset = 0u32;
    let mut roffset = 0u32;
    let mut loop_align = 16u32;
    for o in &body.ops {
        let OpKind::Dot(_) = o.kind else { continue };
        let Some(mma) = dots.get(&o.results[0]) else { continue };
        for operand in 0..2 {
            // B given as trans(x): x is what goes to shared memory.
            let v = match transposed_b.get(&o.results[0]) {
                Some(x) if operand == 1 => *x,
                _ => o.operands[operand],
            };
            let bytes = (if operand == 0 { mma.m * mma.k } else { mma.k * mma.n } * mma.input.bytes()) as u32;
            let align = mma.smem_align();
            loop_align = loop_align.max(align);
            // A tile from before the loop: written to shared memory once, before it.
            if !def.contains_key(&v) && !body.args.contains(&v) {
                if !resident.iter().any(|r| r.load == v) {
                    roffset = roffset.next_multiple_of(align);
                    resident.push(StagedLoad {
                        load: v,
                        dot: Some(o.results[0]),
                        operand,
                        offset: roffset,
                        tma: None,
                        multicast: false,
                    });
                    roffset += bytes;
                }
                continue;
            }
            let Some(&li) = def.get(&v) else { continue };
            let l = &body.ops[li];
            let operand_name = ["A", "B"][operand];
            if uses.get(&v) != Some(&1) {
                notes.push(not_staged(
                    l,
                    format!(
                        "operand {operand_name} of the dot at {}:{} is used elsewhere too, so it is not copied ahead",
                        o.loc.line, o.loc.col
                    ),
                ));
                continue;
            }
            let tma = match l.kind {
                OpKind::Load { mask, other, .. } => {
                    if other && zero.get(&l.operands[1 + mask as usize]) != Some(&true) {
                        notes.push(not_staged(
                            l,
                            format!("operand {operand_name}'s load has an `other` that is not zero (a staged copy fills masked lanes with 0)"),
                        ));
                        continue;
                    }
                    None
                }
                // Block loads are staged for wgmma only, whose buffers the TMA engine can fill.
                OpKind::LoadBlock { rank: 2 } if mma.instr == Instr::Wgmma => {
                    let swz = mma.operand_smem(operand, transposed_b.contains_key(&o.results[0]));
                    match TmaBoxes::for_swizzle(&swz, mma.input) {
                        Ok(b) => Some(b),
                        Err(why) => {
                            notes.push(not_staged(l, format!("operand {operand_name}'s block: {why}")));
                            continue;
                        }
                    }
                }
                OpKind::LoadBlock { rank: 2 } => {
                    notes.push(not_staged(
                        l,
                        format!(
                            "operand {operand_name} is a descriptor load and the dot runs on mma.sync: descriptor loads are staged (by TMA) for wgmma dots only (sm_90a, 64-row warpgroup blocks); it is expanded into pointer loads and copied in the loop"
                        ),
                    ));
                    continue;
                }
                OpKind::LoadBlock { rank } => {
                    notes.push(not_staged(
                        l,
                        format!("operand {operand_name} is a rank-{rank} descriptor load: only 2-D blocks are staged (a block with unit dimensions reshaped into the dot is not); for one matrix of a batch, describe it in 2-D from a base moved to the entry (`a + bid * stride_ab`), which takes a tensor map over the entries"),
                    ));
                    continue;
                }
                // Computed in the loop (attention's P): nothing to copy.
                _ => continue,
            };
            offset = offset.next_multiple_of(align);
            loads.push(StagedLoad {
                load: v,
                dot: Some(o.results[0]),
                operand,
                offset,
                tma,
                multicast: false,
            });
            offset += bytes;
        }
    }
    // Plain loads are staged only in loops without dots at any depth (a persistent kernel's tile
    // loop around a K loop keeps its own loads where they stand), and not inside one.
    if plain.is_some() && loads.is_empty() && resident.is_empty() && !holds_dot(body) {
        for l in &body.ops {
            let OpKind::Load {
                evict: Evict::Normal, ..
            } = l.kind
            else {
                continue;
            };
            let t = k.ty(l.results[0]);
            let elem = match t.elem {
                Elem::Scalar(d) if d != DType::Bool => d,
                _ => continue,
            };
            if t.is_scalar()
                || !read_only(l.operands[0])
                || slice(body, &def, yield_op, &l.operands, &read_only).is_err()
            {
                continue;
            }
            offset = offset.next_multiple_of(16);
            loads.push(StagedLoad {
                load: l.results[0],
                dot: None,
                operand: 0,
                offset,
                tma: None,
                multicast: false,
            });
            offset += (t.numel() * elem.bytes()) as u32;
        }
    }
    if loads.is_empty() {
        return Err(if holds_dot(body) || !resident.is_empty() {
            "no operand of its dots is a load it can copy ahead".into()
        } else if plain.is_none() {
            "it is inside a loop holding a dot, whose pipeline it would take".into()
        } else {
            "none of its loads can be copied ahead (scalars, bool or pointer tiles, hinted loads, and buffers the loop writes are not)".into()
        });
    }
    // The slice: the body ops computing the loads' pointers and masks, and the next values of
    // the carried values they read (closed under both). Pointer, mask and `other`: a copy too
    // narrow for cp.async runs the load itself.
    let roots: Vec<ValueId> = loads
        .iter()
        .flat_map(|s| body.ops[def[&s.load]].operands.iter().copied())
        .collect();
    let (issue, advance, carried) = slice(body, &def, yield_op, &roots, &read_only).map_err(|at| {
        let o = &body.ops[at];
        format!(
            "the loads' addresses or masks depend on `{}` at {}:{}, which cannot be evaluated iterations ahead (a load is, when the loop writes nothing through its buffer: a block table's entries, read through a `*T` the loop does not store to)",
            o.kind.name(),
            o.loc.line,
            o.loc.col
        )
    })?;
    // A wgmma accumulating into a carried value that nothing else reads can stay in flight while
    // the next iteration copies and waits, when stages are left to spare: with 3, copies would
    // run only one iteration ahead (measured slower on the H200 than waiting for each dot), so
    // there it stays in flight only with a producer ([`specialize`] settles it).
    let mut async_dots = Vec::new();
    if stages >= 3 {
        for o in &body.ops {
            let OpKind::Dot(_) = o.kind else { continue };
            let r = o.results[0];
            if dots.get(&r).is_none_or(|d| d.instr != Instr::Wgmma) {
                continue;
            }
            let Some(j) = yield_op.operands.iter().position(|v| *v == r) else {
                continue;
            };
            let carried_in = body.args[j + 1];
            if uses.get(&r) == Some(&1) && uses.get(&carried_in) == Some(&1) && o.operands[2] == carried_in {
                async_dots.push((r, j));
            }
        }
    }
    let mut issue_ops: Vec<usize> = issue.into_iter().collect();
    issue_ops.sort_unstable();
    let mut advance_ops: Vec<usize> = advance.into_iter().collect();
    advance_ops.sort_unstable();
    let mut carried: Vec<usize> = carried.into_iter().collect();
    carried.sort_unstable();
    Ok(LoopPipeline {
        stages,
        loads,
        resident,
        resident_bytes: roffset.next_multiple_of(loop_align),
        stage_bytes: offset.next_multiple_of(loop_align),
        base: 0,
        issue_ops,
        advance_ops,
        carried,
        ahead: if async_dots.is_empty() { stages - 1 } else { stages - 2 },
        async_dots,
        producer: None,
    })
}

/// The producer of ring loop `op` (planned as `p`) in blocks of `warps` warps, if the loop can
/// have one: it sits at the top of the kernel's body (`outer` is `None`), or is op `j` of the
/// body of the loop at the top `outer = Some((at, j))` (its tile loop), and its bounds and the
/// values its copies read are scalars computed before it by ops the producer can evaluate
/// again (no memory, no regions): at the top of the body, or in the tile loop's body from its
/// index and such values (not from values the tile loop carries).
fn producer(
    k: &Kernel,
    outer: Option<(usize, usize)>,
    op: &Op,
    p: &LoopPipeline,
    warps: u32,
    target: &Target,
) -> Result<Producer, String> {
    if warps != 4 && warps != 8 {
        return Err(format!(
            "the kernel runs on {warps} warps; a producer serves 4 or 8 (one or two consumer warpgroups)"
        ));
    }
    let top = &k.body.ops;
    let at = match outer {
        Some((at, _)) => at,
        None => {
            let iv = op.regions[0].args[0];
            top.iter()
                .position(|o| matches!(o.kind, OpKind::For { .. }) && o.regions[0].args[0] == iv)
                .ok_or("the loop is not at the top of the kernel's body, nor directly inside a loop there")?
        }
    };
    // Why an op the copies depend on keeps the producer from evaluating them itself.
    let blocked = |o: &Op, what: &str| {
        format!(
            "the loop's {what} depend on `{}` at {}:{}, which the producer cannot evaluate (it computes scalars from arguments and constants before the loop; a value loaded from memory, an offsets array or a block table, is not supported yet)",
            o.kind.name(),
            o.loc.line,
            o.loc.col
        )
    };
    let def: HashMap<ValueId, usize> = top[..at]
        .iter()
        .enumerate()
        .flat_map(|(i, o)| o.results.iter().map(move |r| (*r, i)))
        .collect();
    // The tile loop's body before the ring loop.
    let tile_body = outer.map(|(at, j)| (&top[at].regions[0], j));
    let tile_def: HashMap<ValueId, usize> = tile_body
        .map(|(b, j)| {
            b.ops[..j]
                .iter()
                .enumerate()
                .flat_map(|(i, o)| o.results.iter().map(move |r| (*r, i)))
                .collect()
        })
        .unwrap_or_default();
    let body = &op.regions[0];
    let slice = p.issue_ops.iter().chain(&p.advance_ops).map(|&i| &body.ops[i]);
    let mut work: Vec<ValueId> = op.operands[..3].to_vec();
    work.extend(p.carried.iter().map(|&j| op.operands[3 + j]));
    // The staged loads' own operands (a coordinate may come straight from before the loop).
    for o in &body.ops {
        if p.loads.iter().any(|l| o.results.first() == Some(&l.load)) {
            work.extend(&o.operands);
        }
    }
    for o in slice {
        if matches!(o.kind, OpKind::Load { .. }) {
            return Err(format!(
                "the loop's copy addresses read memory (the load at {}:{}); a producer evaluates no loads yet",
                o.loc.line, o.loc.col
            ));
        }
        if o.results.iter().any(|r| !k.ty(*r).is_scalar()) {
            return Err(format!(
                "the loop's copy addresses are tiles (`{}` at {}:{}); a producer issues copies from scalar coordinates",
                o.kind.name(),
                o.loc.line,
                o.loc.col
            ));
        }
        work.extend(&o.operands);
    }
    if let Some((at, _)) = outer {
        work.extend(&top[at].operands[..3]);
    }
    // What the producer evaluates itself: pure scalar ops. (Scalar loads through read-only
    // pointers — a grouped GEMM's offsets — would be safe to evaluate again, but the producer
    // branch has not run a load on a GPU yet: tests/gpu/loaded_bounds.tile is the check to run
    // before allowing them.)
    let evaluable = |o: &Op| recomputable(&o.kind) && o.results.iter().all(|r| k.ty(*r).is_scalar());
    let (mut preamble, mut per_tile): (HashSet<usize>, HashSet<usize>) = Default::default();
    while let Some(v) = work.pop() {
        if let Some((b, _)) = tile_body {
            if let Some(&i) = tile_def.get(&v) {
                if !per_tile.insert(i) {
                    continue;
                }
                if !evaluable(&b.ops[i]) {
                    return Err(blocked(&b.ops[i], "bounds or copy coordinates"));
                }
                work.extend(&b.ops[i].operands);
                continue;
            }
            // Values the tile loop carries change from tile to tile out of the producer's sight.
            if b.args[1..].contains(&v) {
                return Err(
                    "the loop's bounds or copy coordinates read a value the tile loop around it carries".into(),
                );
            }
        }
        let Some(&i) = def.get(&v) else { continue };
        if !preamble.insert(i) {
            continue;
        }
        if !evaluable(&top[i]) {
            return Err(blocked(&top[i], "bounds or copy coordinates"));
        }
        work.extend(&top[i].operands);
    }
    let sorted = |s: HashSet<usize>| {
        let mut v: Vec<usize> = s.into_iter().collect();
        v.sort_unstable();
        v
    };
    let tile_loop = outer.map(|(at, ring_at)| TileLoop {
        iv: top[at].regions[0].args[0],
        at,
        ring_at,
        preamble: sorted(per_tile),
    });
    // One block per SM: the consumers take the registers the producer leaves, at most 240 each
    // (setmaxnreg counts in 8s).
    let consumers = warps * target.warp_size;
    let regs = (warps == 8).then(|| {
        let each = ((target.regs_per_sm - PRODUCER_THREADS * PRODUCER_REGS) / consumers).min(240) / 8 * 8;
        (PRODUCER_REGS, each)
    });
    Ok(Producer {
        preamble: sorted(preamble),
        tile_loop,
        regs,
        pingpong: false,
    })
}

/// Whether the consumer warpgroups of the warp-specialised loop `op` take turns issuing its
/// wgmma (ping-pong): in each iteration a warpgroup waits for its turn before its first wgmma
/// and hands the turn on to the next before it waits for one, so that the tensor cores run one
/// warpgroup's products while the other computes on its last results (attention's softmax)
/// instead of both warpgroups computing, then both multiplying. Where `#[pingpong]` asks for
/// it, with two consumer warpgroups or more, each on its own rows of every dot in the loop,
/// and every dot at the top of the loop's body, so that each warpgroup takes the same turns in
/// every iteration. Not by default: on the H200 (2026-12-02, runs 62 and 63, docs/gpu.md)
/// attention_rotated at head dim 128, whose loop already overlaps its softmax with the products
/// within each warpgroup, ran 1-3% slower with turns, attention_tma (two turns per iteration,
/// which keep the warpgroups in step) 11-12% slower, and a GEMM no faster.
fn pingpong(op: &Op, asked: Option<bool>, warps: u32, dots: &HashMap<ValueId, MmaPlan>) -> bool {
    let groups = (warps / 4) as usize;
    let body = &op.regions[0];
    let own_rows = |o: &Op| {
        dots.get(&o.results[0])
            .is_some_and(|d| d.instr == Instr::Wgmma && d.warps_m == groups && d.warps_n == 1)
    };
    let mut dots_at_top = body.ops.iter().filter(|o| matches!(o.kind, OpKind::Dot(_))).peekable();
    asked == Some(true)
        && groups >= 2
        && dots_at_top.peek().is_some()
        && dots_at_top.all(own_rows)
        && !body.ops.iter().any(|o| o.regions.iter().any(holds_dot))
}

/// The body ops (indices) that compute `roots` for a later iteration, the ops that compute the
/// next values of the carried values those read, and the carried values (indices) read; the
/// index of an op among them that cannot be evaluated again ([`recomputable`]) otherwise.
fn slice(
    body: &Region,
    def: &HashMap<ValueId, usize>,
    yield_op: &Op,
    roots: &[ValueId],
    read_only: &dyn Fn(ValueId) -> bool,
) -> Result<(HashSet<usize>, HashSet<usize>, HashSet<usize>), usize> {
    let carried_args: HashMap<ValueId, usize> = body.args[1..].iter().enumerate().map(|(i, a)| (*a, i)).collect();
    let mut issue: HashSet<usize> = HashSet::new();
    let mut advance: HashSet<usize> = HashSet::new();
    let mut carried: HashSet<usize> = HashSet::new();
    let mut work: Vec<(ValueId, bool)> = roots.iter().map(|v| (*v, true)).collect();
    while let Some((v, for_issue)) = work.pop() {
        if let Some(&j) = carried_args.get(&v) {
            if carried.insert(j) {
                work.push((yield_op.operands[j], false));
            }
            continue;
        }
        let Some(&i) = def.get(&v) else { continue };
        let set = if for_issue { &mut issue } else { &mut advance };
        if !set.insert(i) {
            continue;
        }
        // A load through a buffer the loop does not write reads the same for a later
        // iteration evaluated early (the lowering guards it with that iteration's range, so
        // nothing past the loop's end is read).
        let o = &body.ops[i];
        let reload = matches!(o.kind, OpKind::Load { .. }) && read_only(o.operands[0]);
        if !recomputable(&o.kind) && !reload {
            return Err(i);
        }
        work.extend(body.ops[i].operands.iter().map(|o| (*o, for_issue)));
    }
    Ok((issue, advance, carried))
}

/// Where pointers come from: each value's source through pointer arithmetic and shape changes,
/// and every value a loop-carried pointer takes (its initial value and what the body yields),
/// built once per kernel.
struct Origins {
    /// The operand a pointer-preserving op passes on (`None`: any other op).
    through: HashMap<ValueId, Option<ValueId>>,
    /// A loop's carried argument: its initial value and the value the body yields for it.
    carried: HashMap<ValueId, [ValueId; 2]>,
    params: HashSet<ValueId>,
}

impl Origins {
    fn of(k: &Kernel) -> Self {
        let mut through = HashMap::new();
        let mut carried = HashMap::new();
        k.walk(&mut |op| {
            let passes = matches!(
                op.kind,
                OpKind::PtrAdd
                    | OpKind::Broadcast
                    | OpKind::ExpandDims(_)
                    | OpKind::Reshape
                    | OpKind::MultipleOf(_)
                    | OpKind::MaxContiguous(_)
            );
            for r in &op.results {
                through.insert(*r, passes.then(|| op.operands[0]));
            }
            if let OpKind::For { .. } = op.kind {
                let body = &op.regions[0];
                if let Some(y) = body.yield_op() {
                    for (j, a) in body.args[1..].iter().enumerate() {
                        carried.insert(*a, [op.operands[3 + j], y.operands[j]]);
                    }
                }
            }
        });
        Origins {
            through,
            carried,
            params: k.params.iter().map(|p| p.value).collect(),
        }
    }

    /// The kernel parameter a pointer (tile) is computed from; `None` when it comes from
    /// anything else (a `select` between buffers, a loaded pointer), or is carried by a loop
    /// and takes values from more than one parameter.
    fn root(&self, v: ValueId) -> Option<ValueId> {
        let mut seen = HashSet::new();
        let mut found = HashSet::new();
        let mut work = vec![v];
        while let Some(v) = work.pop() {
            if !seen.insert(v) {
                continue;
            }
            if self.params.contains(&v) {
                found.insert(v);
            } else if let Some(both) = self.carried.get(&v) {
                work.extend(both);
            } else {
                work.push(self.through.get(&v).copied().flatten()?);
            }
        }
        (found.len() == 1).then(|| *found.iter().next().expect("one root"))
    }

    /// The buffers (by [`Self::root`]) that `body` writes, its nested regions included.
    fn written(&self, body: &Region) -> Vec<Option<ValueId>> {
        fn go(o: &Origins, r: &Region, out: &mut Vec<Option<ValueId>>) {
            for op in &r.ops {
                if matches!(
                    op.kind,
                    OpKind::Store { .. } | OpKind::StoreBlock { .. } | OpKind::Atomic { .. } | OpKind::AtomicCas { .. }
                ) {
                    out.push(o.root(op.operands[0]));
                }
                for sub in &op.regions {
                    go(o, sub, out);
                }
            }
        }
        let mut out = Vec::new();
        go(self, body, &mut out);
        out
    }
}

/// Whether a dot sits in `r`, at any depth.
fn holds_dot(r: &Region) -> bool {
    r.ops
        .iter()
        .any(|o| matches!(o.kind, OpKind::Dot(_)) || o.regions.iter().any(holds_dot))
}

/// Ops the lowering may evaluate again for a later iteration: pure, without regions, touching
/// no memory.
fn recomputable(k: &OpKind) -> bool {
    k.is_elementwise()
        || matches!(
            k,
            OpKind::Const(_)
                | OpKind::ProgramId(_)
                | OpKind::NumPrograms(_)
                | OpKind::Arange { .. }
                | OpKind::Broadcast
                | OpKind::ExpandDims(_)
                | OpKind::Reshape
                | OpKind::PtrAdd
                | OpKind::MultipleOf(_)
                | OpKind::MaxContiguous(_)
        )
}
