//! Pipelined loops (see `tile_gir::pipeline`): the tensor-core operands a loop loads are copied
//! into shared memory `stages - 1` iterations ahead with `cp.async`, by evaluating the ops that
//! compute their pointers and masks for the later iteration. Block loads the TMA engine copies
//! (see `tile_gir::tma`) are issued by thread 0 as `cp.async.bulk.tensor` boxes that complete on
//! their stage's mbarrier (armed with the stage's byte count); every thread waits on the
//! barrier's phase for the iteration (`iteration / stages` mod 2) before reading the stage.
//! When TMA copies every staged load (a ring), each warp's lane 0 also arrives on the stage's
//! empty barrier once the instructions reading it are done, thread 0 waits on it before
//! refilling the stage, and the iterations have no block-wide barrier. A ring that multicasts
//! across a cluster (`tile_gir::pipeline::multicast`) has lanes `0..N` release the stage in each
//! program of the cluster, and each program copy its share of a multicast block into all. A warp-specialised ring
//! (`tile_gir::pipeline::Producer`) leaves the copies to a producer warpgroup after the
//! kernel's warps (`producer_branch`): the kernel's warps only wait on full barriers and
//! release stages. A producer that also runs the loop around its ring loop (a persistent
//! kernel's tile loop, `tile_gir::pipeline::TileLoop`) keeps the ring going from one tile to
//! the next: the barriers are set up once, before the tile loop (`ring_setup`), and both sides
//! count the ring loop's iterations over every tile so far (`ring_count`), from which the stage
//! and its phase follow.

use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::{AddressSpace, IntPredicate};
use tile_gir::linear::LinearLayout;
use tile_gir::pipeline::LoopPipeline;
use tile_lang::ir::*;

use super::{GLOBAL, Lowering, R, Repr, llvm};

/// How long one `mbarrier.try_wait` may suspend its thread, in nanoseconds (the thread wakes
/// as soon as the phase completes; the wait loops after the hint runs out).
const WAIT_SUSPEND_NS: u32 = 10_000_000;

/// The named barrier the producer waits on once, for the consumers to reach the loop.
const PRODUCER_START: u64 = 1;

/// A `for`'s lower and upper bounds, step, signedness and initial values (`loop_operands`).
type LoopBounds<'c> = (IntValue<'c>, IntValue<'c>, IntValue<'c>, bool, Vec<Repr<'c>>);

impl<'c> Lowering<'c, '_> {
    pub(super) fn for_pipelined(&mut self, op: &Op, pl: &LoopPipeline) -> R<()> {
        self.in_pipeline += 1;
        let r = self.loop_operands(op).and_then(|bounds| {
            if pl.guarded() {
                self.unless_empty(op, pl, bounds)
            } else {
                self.for_pipelined_inner(op, pl, bounds)
            }
        });
        self.in_pipeline -= 1;
        r
    }

    /// Whether a loop from `lo` to `hi` has iterations.
    fn has_iterations(&self, lo: IntValue<'c>, hi: IntValue<'c>, signed: bool) -> R<IntValue<'c>> {
        let pred = if signed { IntPredicate::SLT } else { IntPredicate::ULT };
        llvm(self.b.build_int_compare(pred, lo, hi, "runs"))
    }

    /// A guarded loop (`LoopPipeline::guarded`) runs only when it has iterations; otherwise its
    /// results are its initial values. With a wgmma in flight, the wait after the loop then
    /// sees the accumulators from the loop alone: were the initial values (zeros set before
    /// the loop) to reach it too, ptxas would find instructions defining the accumulators
    /// between a wgmma and its wait and serialise every wgmma of the kernel (C7515).
    fn unless_empty(&mut self, op: &Op, pl: &LoopPipeline, bounds: LoopBounds<'c>) -> R<()> {
        let (lo, hi, _, signed, inits) = bounds.clone();
        let runs = self.has_iterations(lo, hi, signed)?;
        let out = self.either(
            runs,
            |l| {
                l.for_pipelined_inner(op, pl, bounds)?;
                Ok(op.results.iter().map(|r| l.get(*r)).collect())
            },
            |_| Ok(inits),
        )?;
        for (r, v) in op.results.iter().zip(out) {
            self.set(*r, v);
        }
        Ok(())
    }

    fn for_pipelined_inner(&mut self, op: &Op, pl: &LoopPipeline, bounds: LoopBounds<'c>) -> R<()> {
        let (lo, hi, step, signed, inits) = bounds;
        let s = pl.stages;
        // Operands wgmma reads (through the async proxy) are fenced after they land.
        let wgmma = pl.loads.iter().chain(&pl.resident).any(|ld| {
            ld.dot
                .and_then(|d| self.plan.mma(d))
                .is_some_and(|p| p.instr == tile_gir::mma::Instr::Wgmma)
        });
        let tma = pl.tma();
        let ring = pl.ring();
        let cp = pl.loads.iter().any(|l| l.tma.is_none());
        // Inside a tile loop the producer runs too, the ring was set up before that loop.
        let tiles = pl.tile_loop().is_some();
        if tma && !tiles {
            self.init_barriers(pl)?;
        }
        // Warps still reading the buffers from an earlier run of this loop (a loop inside
        // another) finish before they are written again (a ring's stages wait for their
        // release instead).
        if !tiles || !pl.resident.is_empty() {
            self.barrier()?;
        }
        // Operands from before the loop: written once.
        for r in &pl.resident {
            let dot = r.dot.expect("resident operands feed tensor-core dots");
            let plan = self
                .plan
                .mma(dot)
                .expect("resident operands feed tensor-core dots")
                .clone();
            let swz = self.operand_swizzle(&plan, dot, r.operand);
            let at = self.i32c(pl.resident_addr(r) as u64);
            self.operand_to_smem_at(r.load, &swz, at)?;
        }
        if ring && !pl.resident.is_empty() {
            // No barrier inside a ring's iterations: the resident operands are made visible
            // (to wgmma's async proxy too) once, here.
            if wgmma {
                self.fence_proxy_async()?;
            }
            self.barrier()?;
        }
        let produced = pl.producer.is_some();
        if produced && !tiles {
            // The producer's first copy waits for every warp to be here: past the barriers'
            // initialisation and any use of the buffers before the loop.
            self.named_barrier(false, self.i32c(PRODUCER_START), self.threads + 32)?;
            self.first_turn(pl)?;
        }
        // The ring's iterations before this run of the loop.
        let base = if tiles { self.ring_count_load()? } else { self.i32c(0) };
        // Prologue: iterations 0 .. ahead into stages 0 .. ahead (the producer's own work when
        // there is one).
        let ahead = if produced { 0 } else { pl.ahead };
        let mut args = vec![Repr::Scalar(lo.into())];
        args.extend(inits.iter().cloned());
        for st in 0..ahead {
            if st > 0 {
                args = self.advance(op, pl, &args, (step, hi, signed))?;
            }
            self.issue(op, pl, &args, self.i32c(st as u64), hi, signed, None)?;
            if cp {
                self.cp_async_commit()?;
            }
        }
        // A multicasting loop's warps release only the stages some program refills (iteration
        // `r`'s, when iteration `r + stages` exists): a release after that would reach a
        // program of the cluster that may have finished.
        let trips = match pl.multicasts() {
            true => Some(self.trips(lo, hi, step, signed)?),
            false => None,
        };
        let body = op.regions[0].clone();
        let mut flat = Self::flatten(&inits);
        // A copy slice that loads (a block table's page ids) is not evaluated afresh from each
        // iteration's arguments: the carried values of the iteration `ahead` later are carried
        // by the loop, and each iteration advances them once, for the next iteration's copy, so
        // that the index load is issued an iteration before its value is needed.
        let loads_ahead = !produced
            && ahead > 0
            && pl
                .advance_ops
                .iter()
                .any(|&i| matches!(body.ops[i].kind, OpKind::Load { .. }));
        let future_carried: Vec<Repr<'c>> = if loads_ahead {
            let future = self.advance(op, pl, &args, (step, hi, signed))?;
            pl.carried.iter().map(|&j| future[j + 1].clone()).collect()
        } else {
            Vec::new()
        };
        let n_inits = flat.len();
        flat.extend(Self::flatten(&future_carried));
        let out = self.counted_loop(lo, hi, step, signed, flat, &mut |l, i, cur| {
            let mut args = vec![Repr::Scalar(i.into())];
            args.extend(Self::rebuild(&inits, &cur[..n_inits]));
            let mut next_future = Vec::new();
            // Iteration `it` reads stage it % s and refills stage (it + ahead) % s, which
            // iteration it - 1 read (it - 2 when a wgmma stays in flight: the previous
            // iteration's wait_group 1 finished it): the barrier after the wait covers both.
            let local = l.iteration(i, lo, step, signed)?;
            let it = llvm(l.b.build_int_add(base, local, ""))?;
            let sc = l.i32c(s as u64);
            let read = llvm(l.b.build_int_unsigned_rem(it, sc, ""))?;
            let later = llvm(l.b.build_int_add(it, l.i32c(ahead as u64), ""))?;
            let write = llvm(l.b.build_int_unsigned_rem(later, sc, ""))?;
            if cp {
                l.cp_async_wait(ahead - 1)?;
            }
            // Generic-proxy writes (cp.async copies, resident operands) made visible to wgmma.
            if wgmma && !ring && (cp || !pl.resident.is_empty()) {
                l.fence_proxy_async()?;
            }
            if tma {
                let phase = llvm(l.b.build_int_unsigned_div(it, sc, ""))?;
                let parity = llvm(l.b.build_and(phase, l.i32c(1), ""))?;
                let bar = l.barrier_ptr(pl, read)?;
                let why = format!(
                    "of the loop at line {} to be filled: its TMA copies never landed",
                    op.loc.line
                );
                l.mbarrier_wait(bar, parity, read, &why)?;
            }
            if !ring {
                l.barrier()?;
            }
            if !produced {
                let mut future = args.clone();
                if loads_ahead {
                    let span = step.get_type().const_int(ahead as u64, false);
                    let span = llvm(l.b.build_int_mul(step, span, ""))?;
                    future[0] = Repr::Scalar(llvm(l.b.build_int_add(i, span, ""))?.into());
                    for (&j, v) in pl.carried.iter().zip(Self::rebuild(&future_carried, &cur[n_inits..])) {
                        future[j + 1] = v;
                    }
                } else {
                    for _ in 0..ahead {
                        future = l.advance(op, pl, &future, (step, hi, signed))?;
                    }
                }
                // In a ring, the stage refilled was last read `stages` iterations earlier (if
                // ever): thread 0 waits for that use's release, completion number later /
                // stages - 1.
                let release = ring.then_some(later);
                l.issue(op, pl, &future, write, hi, signed, release)?;
                if loads_ahead {
                    let next = l.advance(op, pl, &future, (step, hi, signed))?;
                    next_future = pl.carried.iter().map(|&j| next[j + 1].clone()).collect();
                }
            }
            if cp {
                l.cp_async_commit()?;
            }
            for ld in &pl.loads {
                let at = l.stage_addr(pl, read, ld.offset)?;
                l.staged.insert(ld.load, at);
            }
            for r in &pl.resident {
                l.staged.insert(r.load, l.i32c(pl.resident_addr(r) as u64));
            }
            let y = l.with_turns(pl.takes_turns(), |l| l.region(&body, &args, &op.results));
            for ld in pl.loads.iter().chain(&pl.resident) {
                l.staged.remove(&ld.load);
            }
            let y = y?;
            if ring {
                // The stage whose readers are done: this iteration's, or with a wgmma still in
                // flight, the previous iteration's (this iteration's wait_group 1 retired it).
                let last = |l: &Self, released: IntValue<'c>| -> R<Option<IntValue<'c>>> {
                    let Some(trips) = trips else { return Ok(None) };
                    let next = llvm(l.b.build_int_add(released, sc, ""))?;
                    Ok(Some(llvm(l.b.build_int_compare(IntPredicate::SGE, next, trips, ""))?))
                };
                if pl.async_dots.is_empty() {
                    let skip = last(l, local)?;
                    l.release_stage(pl, read, skip)?;
                } else {
                    let prev = llvm(l.b.build_int_add(it, l.i32c((s - 1) as u64), ""))?;
                    let prev = llvm(l.b.build_int_unsigned_rem(prev, sc, ""))?;
                    // (The previous run's last stage was released after its final wait.)
                    let first = llvm(l.b.build_int_compare(IntPredicate::EQ, local, l.i32c(0), ""))?;
                    let released = llvm(l.b.build_int_sub(local, l.i32c(1), ""))?;
                    let skip = match last(l, released)? {
                        Some(tail) => llvm(l.b.build_or(first, tail, ""))?,
                        None => first,
                    };
                    l.release_stage(pl, prev, Some(skip))?;
                }
            }
            let mut out = Self::flatten(&y);
            out.extend(Self::flatten(&next_future));
            Ok(out)
        })?;
        if cp {
            self.cp_async_wait(0)?;
        }
        let mut results = Self::rebuild(&inits, &out[..n_inits]);
        // Accumulators still in flight: wait for every group, passing them through the wait.
        for (_, j) in &pl.async_dots {
            if let Repr::Tile(acc) = &results[*j] {
                results[*j] = Repr::Tile(self.wgmma_wait(acc)?);
            }
        }
        if tiles {
            // The ring goes on with the next tile: the last iteration's stage, still held by a
            // wgmma in flight, is released now that every wgmma is done.
            let trips = self.trips(lo, hi, step, signed)?;
            let next = llvm(self.b.build_int_add(base, trips, ""))?;
            if !pl.async_dots.is_empty() {
                let last = llvm(self.b.build_int_sub(next, self.i32c(1), ""))?;
                let stage = llvm(self.b.build_int_unsigned_rem(last, self.i32c(s as u64), ""))?;
                self.release_stage(pl, stage, None)?;
            }
            self.ring_count_store(next)?;
        }
        // The mbarriers are invalidated once no thread waits on them; when scratch after the loop
        // reuses the buffers (`alias_scratch`), every warp is done with them first.
        if tma && !tiles {
            self.barrier()?;
            let zero = llvm(self.b.build_int_compare(IntPredicate::EQ, self.tid(), self.i32c(0), ""))?;
            self.when(zero, |l| {
                for st in 0..s {
                    let bar = l.barrier_ptr(pl, l.i32c(st as u64))?;
                    l.intr("llvm.nvvm.mbarrier.inval.shared", &[], &[bar.into()])?;
                    if ring {
                        let empty = l.empty_ptr(pl, l.i32c(st as u64))?;
                        l.intr("llvm.nvvm.mbarrier.inval.shared", &[], &[empty.into()])?;
                    }
                }
                Ok(())
            })?;
        }
        if self.plan.alias_scratch {
            self.barrier()?;
        }
        for (r, v) in op.results.iter().zip(results) {
            self.set(*r, v);
        }
        Ok(())
    }

    /// How operand `operand` (0: A, 1: B) of the dot with result `dot` is laid out in shared
    /// memory.
    fn operand_swizzle(&self, plan: &tile_gir::mma::MmaPlan, dot: ValueId, operand: usize) -> tile_gir::mma::Swizzle {
        plan.operand_smem(operand, self.plan.transposed_b.contains_key(&dot))
    }

    /// `bar.sync` (`wait`) or `bar.arrive` on named barrier `id` for `threads` threads.
    pub(super) fn named_barrier(&self, wait: bool, id: IntValue<'c>, threads: u32) -> R<()> {
        let name = if wait {
            "llvm.nvvm.barrier.cta.sync.aligned.count"
        } else {
            "llvm.nvvm.barrier.cta.arrive.aligned.count"
        };
        self.intr(name, &[], &[id.into(), self.i32c(threads as u64).into()])?;
        Ok(())
    }

    /// The warp-specialised loop (at the top of the kernel's body, or directly inside a tile
    /// loop there), if there is one.
    pub(super) fn producer(&self) -> Option<(Op, LoopPipeline)> {
        self.plan.pipelines.values().find_map(|pl| {
            let pr = pl.producer.as_ref()?;
            let body = match &pr.tile_loop {
                Some(t) => &self.k.body.ops[t.at].regions[0],
                None => &self.k.body,
            };
            let op = body.ops.iter().find(|o| {
                matches!(o.kind, OpKind::For { .. }) && self.plan.pipelines.get(&o.regions[0].args[0]) == Some(pl)
            })?;
            Some((op.clone(), pl.clone()))
        })
    }

    /// Before the tile loop `op` of a persistent producer (`TileLoop`), on the kernel's warps:
    /// the ring's barriers are set up, its iteration count starts at 0, and the producer is
    /// let go (it waits for this once, at its start).
    pub(super) fn ring_setup(&mut self, op: &Op) -> R<()> {
        let Some((_, pl)) = self.producer() else { return Ok(()) };
        if pl.tile_loop().is_none_or(|t| t.iv != op.regions[0].args[0]) {
            return Ok(());
        }
        self.init_barriers(&pl)?;
        self.ring_count_store(self.i32c(0))?;
        self.barrier()?;
        self.named_barrier(false, self.i32c(PRODUCER_START), self.threads + 32)?;
        self.first_turn(&pl)
    }

    /// Thread 0 initialises the loop's mbarriers: one per stage, completed by the TMA bytes of
    /// its copies (count 1: the issuing thread's arrive); in a ring, one empty barrier per stage
    /// (one arrival per warp, of every program of the cluster when the loop multicasts). A
    /// multicasting loop's cluster then meets, so that no copy or release reaches a program's
    /// barriers before they are set up.
    fn init_barriers(&mut self, pl: &LoopPipeline) -> R<()> {
        let zero = llvm(self.b.build_int_compare(IntPredicate::EQ, self.tid(), self.i32c(0), ""))?;
        let warps = self.threads / self.target.warp_size * self.releasers(pl);
        let ring = pl.ring();
        self.when(zero, |l| {
            for st in 0..pl.stages {
                l.mbarrier_init(l.barrier_ptr(pl, l.i32c(st as u64))?, 1)?;
                if ring {
                    l.mbarrier_init(l.empty_ptr(pl, l.i32c(st as u64))?, warps)?;
                }
            }
            l.intr("llvm.nvvm.fence.mbarrier_init.release.cluster", &[], &[])?;
            Ok(())
        })?;
        if pl.multicasts() {
            // Released: an earlier use of the buffers is ordered before the peers' copies.
            self.cluster_meeting(false)?;
        }
        Ok(())
    }

    /// The programs whose warps release each stage of `pl`: the whole cluster when the loop
    /// multicasts, else this one.
    fn releasers(&self, pl: &LoopPipeline) -> u32 {
        if pl.multicasts() { self.k.cluster } else { 1 }
    }

    /// Initialises the mbarrier at `bar` to complete a phase after `count` arrivals.
    pub(super) fn mbarrier_init(&self, bar: inkwell::values::PointerValue<'c>, count: u32) -> R<()> {
        self.intr(
            "llvm.nvvm.mbarrier.init.shared",
            &[],
            &[bar.into(), self.i32c(count as u64).into()],
        )?;
        Ok(())
    }

    /// The ring's iterations so far (a persistent producer's; each side keeps its own count in
    /// this thread-local slot).
    fn ring_count_ptr(&mut self) -> R<inkwell::values::PointerValue<'c>> {
        if let Some(p) = self.ring_count {
            return Ok(p);
        }
        let p = self.entry_alloca(self.ctx.i32_type().into(), "ring_count")?;
        self.ring_count = Some(p);
        Ok(p)
    }

    fn ring_count_load(&mut self) -> R<IntValue<'c>> {
        let p = self.ring_count_ptr()?;
        Ok(llvm(self.b.build_load(self.ctx.i32_type(), p, "ring_base"))?.into_int_value())
    }

    fn ring_count_store(&mut self, v: IntValue<'c>) -> R<()> {
        let p = self.ring_count_ptr()?;
        llvm(self.b.build_store(p, v))?;
        Ok(())
    }

    /// A local slot of type `ty`, allocated at the kernel's entry (where LLVM promotes it to
    /// registers).
    pub(super) fn entry_alloca(
        &mut self,
        ty: inkwell::types::BasicTypeEnum<'c>,
        name: &str,
    ) -> R<inkwell::values::PointerValue<'c>> {
        let here = self.b.get_insert_block().expect("inside the kernel");
        let entry = self.func().get_first_basic_block().expect("the kernel has an entry");
        match entry.get_first_instruction() {
            Some(i) => self.b.position_before(&i),
            None => self.b.position_at_end(entry),
        }
        let p = llvm(self.b.build_alloca(ty, name))?;
        self.b.position_at_end(here);
        Ok(p)
    }

    /// How many iterations a loop from `lo` to `hi` by `step` runs, as i32.
    fn trips(&self, lo: IntValue<'c>, hi: IntValue<'c>, step: IntValue<'c>, signed: bool) -> R<IntValue<'c>> {
        let runs = self.has_iterations(lo, hi, signed)?;
        let d = llvm(self.b.build_int_sub(hi, lo, ""))?;
        let d = llvm(self.b.build_int_sub(d, lo.get_type().const_int(1, false), ""))?;
        let q = if signed {
            llvm(self.b.build_int_signed_div(d, step, ""))?
        } else {
            llvm(self.b.build_int_unsigned_div(d, step, ""))?
        };
        let q = llvm(self.b.build_int_truncate_or_bit_cast(q, self.ctx.i32_type(), ""))?;
        let n = llvm(self.b.build_int_add(q, self.i32c(1), ""))?;
        Ok(llvm(self.b.build_select(runs, n, self.i32c(0), ""))?.into_int_value())
    }

    /// The producer warpgroup's whole program, at the kernel's entry: threads past the kernel's
    /// own give up registers and evaluate the scalars the loop's copies read; the first waits
    /// for the kernel's warps to reach the loop, then runs the loop's iterations issuing the
    /// copies (waiting for each stage's release from its second use on); then they return.
    /// The kernel's warps take the registers given up and go on with the kernel.
    pub(super) fn producer_branch(&mut self, op: &Op, pl: &LoopPipeline) -> R<()> {
        let pr = pl.producer.clone().expect("a warp-specialised loop");
        let f = self.func();
        let produce = self.ctx.append_basic_block(f, "producer");
        let consume = self.ctx.append_basic_block(f, "consumers");
        let is_producer =
            llvm(
                self.b
                    .build_int_compare(IntPredicate::UGE, self.tid(), self.i32c(self.threads as u64), ""),
            )?;
        llvm(self.b.build_conditional_branch(is_producer, produce, consume))?;
        self.b.position_at_end(produce);
        if let Some((p, _)) = pr.regs {
            self.setmaxnreg("dec", p)?;
        }
        let outer = self.vals.clone();
        self.producing = true;
        let r = self.produce(op, pl, &pr.preamble);
        self.producing = false;
        self.vals = outer;
        r?;
        llvm(self.b.build_return(None))?;
        self.b.position_at_end(consume);
        if let Some((_, c)) = pr.regs {
            self.setmaxnreg("inc", c)?;
        }
        Ok(())
    }

    /// `setmaxnreg.{dec,inc}`: this warpgroup's registers per thread become `regs`.
    fn setmaxnreg(&self, how: &str, regs: u32) -> R<()> {
        let name = format!("llvm.nvvm.setmaxnreg.{how}.sync.aligned.u32");
        self.intr(&name, &[], &[self.i32c(regs as u64).into()])?;
        Ok(())
    }

    /// The producer's loop (see `producer_branch`).
    fn produce(&mut self, op: &Op, pl: &LoopPipeline, preamble: &[usize]) -> R<()> {
        let top = self.k.body.ops.clone();
        for &i in preamble {
            self.op(&top[i])?;
        }
        let first = llvm(
            self.b
                .build_int_compare(IntPredicate::EQ, self.tid(), self.i32c(self.threads as u64), ""),
        )?;
        let warp =
            llvm(
                self.b
                    .build_int_compare(IntPredicate::ULT, self.tid(), self.i32c((self.threads + 32) as u64), ""),
            )?;
        if let Some(t) = pl.tile_loop().cloned() {
            // The kernel's warps let the producer go once, before their tile loop.
            return self.when(warp, |l| {
                l.named_barrier(true, l.i32c(PRODUCER_START), l.threads + 32)?;
                l.when(first, |l| l.produce_tiles(op, pl, &t))
            });
        }
        // The loop is guarded: the kernel's warps meet the producer only when it has iterations.
        let signed = !self.dtype(op.operands[0]).is_unsigned();
        let bound = |l: &Self, i: usize| l.scalar(op.operands[i]).into_int_value();
        let (lo, hi, step) = (bound(self, 0), bound(self, 1), bound(self, 2));
        let runs = self.has_iterations(lo, hi, signed)?;
        if pl.multicasts() {
            // The producer's threads meet the cluster too (its consumers do after setting up
            // their barriers), when the loop runs.
            self.when(runs, |l| l.cluster_meeting(false))?;
        }
        let warp = llvm(self.b.build_and(warp, runs, ""))?;
        self.when(warp, |l| {
            l.named_barrier(true, l.i32c(PRODUCER_START), l.threads + 32)?;
            l.when(first, |l| l.produce_loop(op, pl, (lo, hi, step, signed)))
        })
    }

    /// A persistent producer's tile loop: for each tile, the scalars the ring loop's copies
    /// read, then the ring loop's copies, counted on from the tiles before.
    fn produce_tiles(&mut self, op: &Op, pl: &LoopPipeline, t: &tile_gir::pipeline::TileLoop) -> R<()> {
        let outer = self.k.body.ops[t.at].clone();
        let signed = !self.dtype(outer.operands[0]).is_unsigned();
        let bound = |l: &Self, o: &Op, i: usize| l.scalar(o.operands[i]).into_int_value();
        let (lo, hi, step) = (bound(self, &outer, 0), bound(self, &outer, 1), bound(self, &outer, 2));
        self.ring_count_store(self.i32c(0))?;
        let body = outer.regions[0].clone();
        self.counted_loop(lo, hi, step, signed, Vec::new(), &mut |l, i, _| {
            l.vals.insert(t.iv, Repr::Scalar(i.into()));
            for &j in &t.preamble {
                l.op(&body.ops[j])?;
            }
            let signed = !l.dtype(op.operands[0]).is_unsigned();
            let (lo, hi, step) = (bound(l, op, 0), bound(l, op, 1), bound(l, op, 2));
            let runs = l.has_iterations(lo, hi, signed)?;
            l.when(runs, |l| l.produce_loop(op, pl, (lo, hi, step, signed)))?;
            let base = l.ring_count_load()?;
            let trips = l.trips(lo, hi, step, signed)?;
            let next = llvm(l.b.build_int_add(base, trips, ""))?;
            l.ring_count_store(next)?;
            Ok(Vec::new())
        })?;
        Ok(())
    }

    fn produce_loop(
        &mut self,
        op: &Op,
        pl: &LoopPipeline,
        (lo, hi, step, signed): (IntValue<'c>, IntValue<'c>, IntValue<'c>, bool),
    ) -> R<()> {
        let tiles = pl.tile_loop().is_some();
        let base = if tiles { self.ring_count_load()? } else { self.i32c(0) };
        // The body's arguments: the index and the carried values the copies read (scalars);
        // the others are never read here, a zero stands in for them.
        let carried: Vec<Repr<'c>> = pl
            .carried
            .iter()
            .map(|&j| self.operand_in(op, 3 + j, &[]))
            .collect::<R<_>>()?;
        let inits = vec![Repr::Scalar(self.i32c(0).into()); op.operands.len() - 3];
        let flat = Self::flatten(&carried);
        let s = self.i32c(pl.stages as u64);
        self.counted_loop(lo, hi, step, signed, flat, &mut |l, i, cur| {
            let mut args = vec![Repr::Scalar(i.into())];
            args.extend(inits.iter().cloned());
            for (&j, v) in pl.carried.iter().zip(Self::rebuild(&carried, &cur)) {
                args[j + 1] = v;
            }
            let it = l.iteration(i, lo, step, signed)?;
            let it = llvm(l.b.build_int_add(base, it, ""))?;
            let stage = llvm(l.b.build_int_unsigned_rem(it, s, ""))?;
            l.issue(op, pl, &args, stage, hi, signed, Some(it))?;
            let next = l.advance(op, pl, &args, (step, hi, signed))?;
            let next: Vec<Repr<'c>> = pl.carried.iter().map(|&j| next[j + 1].clone()).collect();
            Ok(Self::flatten(&next))
        })?;
        Ok(())
    }

    /// The iteration number (from 0) of index `i` of a loop from `lo` by `step`, as i32.
    fn iteration(&self, i: IntValue<'c>, lo: IntValue<'c>, step: IntValue<'c>, signed: bool) -> R<IntValue<'c>> {
        let d = llvm(self.b.build_int_sub(i, lo, ""))?;
        let it = if signed {
            llvm(self.b.build_int_signed_div(d, step, ""))?
        } else {
            llvm(self.b.build_int_unsigned_div(d, step, ""))?
        };
        llvm(self.b.build_int_truncate_or_bit_cast(it, self.ctx.i32_type(), ""))
    }

    /// Stage `stage`'s empty mbarrier (a ring's).
    fn empty_ptr(&self, pl: &LoopPipeline, stage: IntValue<'c>) -> R<inkwell::values::PointerValue<'c>> {
        self.mbarrier_of(pl.empty_addr(), stage)
    }

    /// Every warp's lane 0 arrives on stage `stage`'s empty barrier once the whole warp is here
    /// (skipped where `skip` holds). In a multicasting loop lane `q` arrives on program `q`'s
    /// barrier, for each program `q` of the cluster: each of them refills the stage in all.
    fn release_stage(&mut self, pl: &LoopPipeline, stage: IntValue<'c>, skip: Option<IntValue<'c>>) -> R<()> {
        self.intr("llvm.nvvm.bar.warp.sync", &[], &[self.i32c(0xffff_ffff).into()])?;
        let lane = llvm(self.b.build_and(self.tid(), self.i32c(31), ""))?;
        let n = self.releasers(pl);
        let mut go = llvm(
            self.b
                .build_int_compare(IntPredicate::ULT, lane, self.i32c(n as u64), ""),
        )?;
        if let Some(skip) = skip {
            let not = llvm(self.b.build_not(skip, ""))?;
            go = llvm(self.b.build_and(go, not, ""))?;
        }
        let empty = self.empty_ptr(pl, stage)?;
        self.when(go, |l| {
            if n == 1 {
                l.intr1("llvm.nvvm.mbarrier.arrive.shared", &[], &[empty.into()])?;
                return Ok(());
            }
            let remote = l
                .intr1("llvm.nvvm.mapa.shared.cluster", &[], &[empty.into(), lane.into()])?
                .into_pointer_value();
            // Release at CTA scope, as the local arrive does (the stage's readers, wgmma retired
            // by their wait, are this block's own), and the producer waits at CTA scope: with
            // both at cluster scope the multicast GEMM ran 26-40% slower on the H200
            // (docs/gpu.md, "TMA multicast").
            l.intr(
                "llvm.nvvm.mbarrier.arrive.scope.cta.space.cluster",
                &[],
                &[remote.into(), l.i32c(1).into()],
            )?;
            Ok(())
        })
    }

    /// Stage `stage`'s mbarrier.
    fn barrier_ptr(&self, pl: &LoopPipeline, stage: IntValue<'c>) -> R<inkwell::values::PointerValue<'c>> {
        self.mbarrier_of(pl.barrier_addr(), stage)
    }

    /// The mbarrier of stage `stage` in an array of them (8 bytes each) at shared byte `first`.
    fn mbarrier_of(&self, first: u32, stage: IntValue<'c>) -> R<inkwell::values::PointerValue<'c>> {
        let off = llvm(self.b.build_int_mul(stage, self.i32c(8), ""))?;
        let off = llvm(self.b.build_int_add(off, self.i32c(first as u64), ""))?;
        self.smem_abs_ptr(off)
    }

    /// Spins until the mbarrier at `bar` has completed the phase of parity `parity`. In a debug
    /// build the wait is bounded: after [`crate::DEBUG_WAIT_TIMEOUT_NS`] without completion the
    /// thread prints which block, thread, stage (`stage`) and phase it was waiting for and
    /// `why` (what should have completed it), and traps, so that a pipeline bug ends the launch
    /// with an error instead of hanging the GPU.
    fn mbarrier_wait(
        &mut self,
        bar: inkwell::values::PointerValue<'c>,
        parity: IntValue<'c>,
        stage: IntValue<'c>,
        why: &str,
    ) -> R<()> {
        self.mbarrier_wait_scoped(bar, parity, stage, why, false)
    }

    /// [`Self::mbarrier_wait`], acquiring at cluster scope when `cluster` (the barrier's phase is
    /// completed by other blocks of the cluster, whose writes the waiter then sees).
    pub(super) fn mbarrier_wait_scoped(
        &mut self,
        bar: inkwell::values::PointerValue<'c>,
        parity: IntValue<'c>,
        stage: IntValue<'c>,
        why: &str,
        cluster: bool,
    ) -> R<()> {
        let f = self.func();
        let timer = "llvm.nvvm.read.ptx.sreg.globaltimer";
        let start = match self.debug {
            true => Some(self.intr1(timer, &[], &[])?.into_int_value()),
            false => None,
        };
        let spin = self.ctx.append_basic_block(f, "mbar_wait");
        let done = self.ctx.append_basic_block(f, "mbar_done");
        llvm(self.b.build_unconditional_branch(spin))?;
        self.b.position_at_end(spin);
        // With a suspend-time hint the waiting thread sleeps until the phase completes (or the
        // hint runs out) instead of returning at once: a spinning producer took a quarter of
        // its scheduler's issue slots from the consumer warps beside it (docs/gpu.md, "Waits
        // that sleep").
        let ok = self
            .intr1(
                if cluster {
                    "llvm.nvvm.mbarrier.try.wait.parity.tl.scope.cluster.space.cta"
                } else {
                    "llvm.nvvm.mbarrier.try.wait.parity.tl.scope.cta.space.cta"
                },
                &[],
                &[bar.into(), parity.into(), self.i32c(WAIT_SUSPEND_NS as u64).into()],
            )?
            .into_int_value();
        let Some(start) = start else {
            llvm(self.b.build_conditional_branch(ok, done, spin))?;
            self.b.position_at_end(done);
            return Ok(());
        };
        let check = self.ctx.append_basic_block(f, "mbar_check");
        let stuck = self.ctx.append_basic_block(f, "mbar_stuck");
        llvm(self.b.build_conditional_branch(ok, done, check))?;
        self.b.position_at_end(check);
        let now = self.intr1(timer, &[], &[])?.into_int_value();
        let waited = llvm(self.b.build_int_sub(now, start, ""))?;
        let limit = self.ctx.i64_type().const_int(crate::DEBUG_WAIT_TIMEOUT_NS, false);
        let late = llvm(self.b.build_int_compare(IntPredicate::UGT, waited, limit, ""))?;
        llvm(self.b.build_conditional_branch(late, stuck, spin))?;
        self.b.position_at_end(stuck);
        let mut args = Vec::new();
        for axis in ["x", "y", "z"] {
            let id = format!("llvm.nvvm.read.ptx.sreg.ctaid.{axis}");
            args.push(self.intr1(&id, &[], &[])?.into_int_value());
        }
        args.extend([self.tid(), stage, parity]);
        let message = format!(
            "tile debug: kernel `{}`, block (%u, %u, %u), thread %u: waited {} s for stage %u \
             (mbarrier phase parity %u) {why}; trapping\n",
            self.k.name,
            crate::DEBUG_WAIT_TIMEOUT_NS / 1_000_000_000
        );
        self.print_and_trap(&message, &args)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// `vprintf(format, args)` from the first lane of each warp (the others wait alike), then
    /// `trap`: ends the block it is lowered in.
    fn print_and_trap(&mut self, format: &str, args: &[IntValue<'c>]) -> R<()> {
        self.print_and_trap_from(format, args, true)
    }

    /// `vprintf(format, args)` (from the first lane of each warp when `lane0`, else from the
    /// calling thread), then `trap`: ends the block it is lowered in.
    pub(super) fn print_and_trap_from(&mut self, format: &str, args: &[IntValue<'c>], lane0: bool) -> R<()> {
        let text = self.ctx.const_string(format.as_bytes(), true);
        let g = self
            .m
            .add_global(text.get_type(), Some(AddressSpace::from(GLOBAL)), "debug_message");
        g.set_initializer(&text);
        g.set_constant(true);
        g.set_linkage(inkwell::module::Linkage::Private);
        let generic = self.ctx.ptr_type(AddressSpace::default());
        let fmt = llvm(self.b.build_address_space_cast(g.as_pointer_value(), generic, ""))?;
        // The arguments, 32 bits each, in a local buffer allocated at the kernel's entry.
        let i32t = self.ctx.i32_type();
        let ty = i32t.array_type(args.len() as u32);
        let buf = self.entry_alloca(ty.into(), "debug_args")?;
        for (i, a) in args.iter().enumerate() {
            let at = unsafe {
                llvm(
                    self.b
                        .build_in_bounds_gep(ty, buf, &[self.i32c(0), self.i32c(i as u64)], ""),
                )?
            };
            llvm(self.b.build_store(at, *a))?;
        }
        let vprintf = self.m.get_function("vprintf").unwrap_or_else(|| {
            let fty = i32t.fn_type(&[generic.into(), generic.into()], false);
            self.m
                .add_function("vprintf", fty, Some(inkwell::module::Linkage::External))
        });
        if lane0 {
            let lane = llvm(self.b.build_and(self.tid(), self.i32c(31), ""))?;
            let first = llvm(self.b.build_int_compare(IntPredicate::EQ, lane, self.i32c(0), ""))?;
            self.when(first, |l| {
                llvm(l.b.build_call(vprintf, &[fmt.into(), buf.into()], ""))?;
                Ok(())
            })?;
        } else {
            llvm(self.b.build_call(vprintf, &[fmt.into(), buf.into()], ""))?;
        }
        self.intr("llvm.trap", &[], &[])?;
        llvm(self.b.build_unreachable())?;
        Ok(())
    }

    /// The byte address of a staged buffer in stage `stage`.
    fn stage_addr(&self, pl: &LoopPipeline, stage: IntValue<'c>, offset: u32) -> R<IntValue<'c>> {
        let s = llvm(self.b.build_int_mul(stage, self.i32c(pl.stage_bytes as u64), ""))?;
        llvm(self.b.build_int_add(s, self.i32c((pl.base + offset) as u64), ""))
    }

    /// Lowers body ops `ops` (indices) with the body's arguments bound to `args`; the loads
    /// among them (through buffers the loop does not write) read only where `in_range`, the
    /// iteration's index being below the loop's bound.
    fn lower_slice(&mut self, body: &Region, ops: &[usize], args: &[Repr<'c>], in_range: IntValue<'c>) -> R<()> {
        for (a, v) in body.args.iter().zip(args) {
            self.vals.insert(*a, v.clone());
        }
        for &i in ops {
            let op = &body.ops[i];
            let saved = self.prepare_operands(op)?;
            self.guard = matches!(op.kind, OpKind::Load { .. }).then_some(in_range);
            let r = self.op(op);
            self.guard = None;
            r?;
            for (v, r) in saved {
                self.vals.insert(v, r);
            }
        }
        Ok(())
    }

    /// Whether the iteration whose arguments are `args` runs: its index is below `hi`.
    fn in_range(&self, args: &[Repr<'c>], hi: IntValue<'c>, signed: bool) -> R<IntValue<'c>> {
        let Repr::Scalar(iv) = args[0].clone() else {
            unreachable!("the index is a scalar")
        };
        let pred = if signed { IntPredicate::SLT } else { IntPredicate::ULT };
        llvm(self.b.build_int_compare(pred, iv.into_int_value(), hi, "ahead"))
    }

    /// The body's arguments one iteration later (only the carried values the copies read).
    fn advance(
        &mut self,
        op: &Op,
        pl: &LoopPipeline,
        args: &[Repr<'c>],
        (step, hi, signed): (IntValue<'c>, IntValue<'c>, bool),
    ) -> R<Vec<Repr<'c>>> {
        let body = &op.regions[0];
        let in_range = self.in_range(args, hi, signed)?;
        self.lower_slice(body, &pl.advance_ops, args, in_range)?;
        let y = body.ops.last().expect("a loop body ends in yield");
        let mut next = args.to_vec();
        let iv = args[0].clone();
        let Repr::Scalar(iv) = iv else {
            unreachable!("the index is a scalar")
        };
        next[0] = Repr::Scalar(llvm(self.b.build_int_add(iv.into_int_value(), step, ""))?.into());
        for &j in &pl.carried {
            next[j + 1] = self.operand_in(y, j, &op.results)?;
        }
        Ok(next)
    }

    /// Issues the staged loads of the iteration whose arguments are `args` into stage `stage`
    /// (nothing is read past the loop's end: those copies zero-fill).
    fn issue(
        &mut self,
        op: &Op,
        pl: &LoopPipeline,
        args: &[Repr<'c>],
        stage: IntValue<'c>,
        hi: IntValue<'c>,
        signed: bool,
        release: Option<IntValue<'c>>,
    ) -> R<()> {
        let body = &op.regions[0];
        let in_range = self.in_range(args, hi, signed)?;
        self.lower_slice(body, &pl.issue_ops, args, in_range)?;
        let defs: std::collections::HashMap<ValueId, &Op> = body
            .ops
            .iter()
            .flat_map(|o| o.results.iter().map(move |r| (*r, o)))
            .collect();
        for ld in pl.loads.iter().filter(|l| l.tma.is_none()) {
            let lop = defs[&ld.load];
            let base = self.stage_addr(pl, stage, ld.offset)?;
            let Some(dot) = ld.dot else {
                self.issue_in_place(lop, base, in_range)?;
                continue;
            };
            let plan = self.plan.mma(dot).expect("staged loads feed tensor-core dots").clone();
            let swz = self.operand_swizzle(&plan, dot, ld.operand);
            let t = self.k.ty(ld.load).clone();
            let has_mask = matches!(lop.kind, OpKind::Load { mask: true, .. });
            let mask_v = has_mask.then(|| lop.operands[1]);
            let esz = Self::smem_size(t.elem);
            let w = self.vector_width(lop.operands[0], mask_v, t.elem);
            let lay = LinearLayout::blocked(&t.shape, self.threads, self.max_vec);
            let run = lay.contiguous_run().min(w).min(swz.vec);
            if run as u32 * esz >= 4 {
                let ptrs = self.elems(lop.operands[0]);
                let masks = mask_v.map(|m| self.elems(m));
                let phys = lay.then(&swz.map());
                self.copy_runs(&lay, &phys, &ptrs, masks.as_deref(), run, esz, base, in_range)?;
            } else {
                // Too narrow for cp.async: an ordinary load, then a store into the stage.
                let saved = self.prepare_operands(lop)?;
                self.when(in_range, |l| {
                    l.op(lop)?;
                    l.operand_to_smem_at(ld.load, &swz, base)
                })?;
                for (v, r) in saved {
                    self.vals.insert(v, r);
                }
            }
        }
        if pl.tma() {
            // Thread 0 (the producer's first) arms the stage's barrier with the bytes to come and
            // issues every box.
            let first = if self.producing { self.threads } else { 0 };
            let zero = llvm(
                self.b
                    .build_int_compare(IntPredicate::EQ, self.tid(), self.i32c(first as u64), ""),
            )?;
            let go = llvm(self.b.build_and(zero, in_range, ""))?;
            let bar = self.barrier_ptr(pl, stage)?;
            let mut copies = Vec::new();
            for ld in &pl.loads {
                let Some(boxes) = ld.tma else { continue };
                let lop = defs[&ld.load];
                let o = block::operands(lop);
                let coord = |l: &Self, v: ValueId| -> R<IntValue<'c>> {
                    let c = l.scalar(v).into_int_value();
                    llvm(l.b.build_int_truncate_or_bit_cast(c, l.ctx.i32_type(), ""))
                };
                let (row, col) = (coord(self, o.coords[0])?, coord(self, o.coords[1])?);
                let entry = self.entry_of.get(&ld.load).map(|e| coord(self, *e)).transpose()?;
                let base = self.stage_addr(pl, stage, ld.offset)?;
                let map = self.map_of[&ld.load];
                // The map's box holds all of the block's rows, or one program's share of them.
                let rows = self.map_rows[map];
                debug_assert_eq!(
                    boxes.rows % rows,
                    0,
                    "a map's box holds whole shares of the block's rows"
                );
                let shares = boxes.rows / rows;
                let multicast = ld.multicast && shares == self.k.cluster;
                copies.push((
                    boxes,
                    rows,
                    shares,
                    multicast,
                    row,
                    col,
                    entry,
                    base,
                    self.map_params[map],
                ));
            }
            let rank = match copies.iter().any(|c| c.3) {
                true => Some(
                    self.intr1("llvm.nvvm.read.ptx.sreg.cluster.ctarank", &[], &[])?
                        .into_int_value(),
                ),
                false => None,
            };
            let bytes = pl.tma_bytes();
            self.when(go, |l| {
                if let Some(later) = release {
                    // `later`: the iteration issued. Its stage's use `later / stages - 1` (the
                    // completion to wait for) exists from the second round of stages on.
                    let sc = l.i32c(pl.stages as u64);
                    let round = llvm(l.b.build_int_unsigned_div(later, sc, ""))?;
                    let used = llvm(l.b.build_int_compare(IntPredicate::NE, round, l.i32c(0), ""))?;
                    let parity = llvm(l.b.build_int_add(round, l.i32c(1), ""))?;
                    let parity = llvm(l.b.build_and(parity, l.i32c(1), ""))?;
                    let empty = l.empty_ptr(pl, stage)?;
                    let why = format!(
                        "of the loop at line {} to be released: some warp never finished reading it",
                        op.loc.line
                    );
                    l.when(used, |l| l.mbarrier_wait(empty, parity, stage, &why))?;
                }
                l.intr1(
                    "llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta",
                    &[],
                    &[bar.into(), l.i32c(bytes as u64).into()],
                )?;
                for &(boxes, rows, shares, multicast, row, col, entry, base, map) in &copies {
                    // Share `q` of a box: its rows `q * rows ..`, bytes `q * rows * row ..` of
                    // the box's part of the buffer. A multicast load copies this program's
                    // share into every program of the cluster; any other, every share here.
                    let mine: Vec<IntValue<'c>> = match (multicast, rank) {
                        (true, Some(r)) => vec![r],
                        _ => (0..shares).map(|q| l.i32c(q as u64)).collect(),
                    };
                    let mask = match multicast {
                        true => (1u64 << l.k.cluster) - 1,
                        false => 0,
                    };
                    for j in 0..boxes.boxes {
                        for &q in &mine {
                            let skip = llvm(l.b.build_int_mul(q, l.i32c((rows * boxes.swizzle) as u64), ""))?;
                            let off = llvm(l.b.build_int_add(base, l.i32c((j * boxes.box_bytes) as u64), ""))?;
                            let off = llvm(l.b.build_int_add(off, skip, ""))?;
                            let dst = l.smem_abs_ptr(off)?;
                            let dst = llvm(l.b.build_address_space_cast(
                                dst,
                                l.ctx.ptr_type(inkwell::AddressSpace::from(7u16)),
                                "",
                            ))?;
                            let c = llvm(l.b.build_int_add(col, l.i32c((j * boxes.cols) as u64), ""))?;
                            let down = llvm(l.b.build_int_mul(q, l.i32c(rows as u64), ""))?;
                            let r = llvm(l.b.build_int_add(row, down, ""))?;
                            // A map over a batch of entries: the entry is the outermost coordinate.
                            let mut args: Vec<BasicValueEnum<'c>> =
                                vec![dst.into(), bar.into(), map.into(), c.into(), r.into()];
                            args.extend(entry.map(BasicValueEnum::from));
                            args.extend::<[BasicValueEnum<'c>; 5]>([
                                l.ctx.i16_type().const_int(mask, false).into(),
                                l.ctx.i64_type().const_zero().into(),
                                l.ctx.bool_type().const_int(multicast as u64, false).into(),
                                l.ctx.bool_type().const_zero().into(),
                                l.i32c(0).into(),
                            ]);
                            let name = match entry {
                                None => "llvm.nvvm.cp.async.bulk.tensor.g2s.tile.2d",
                                Some(_) => "llvm.nvvm.cp.async.bulk.tensor.g2s.tile.3d",
                            };
                            l.intr(name, &[], &args)?;
                        }
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Copies a load staged in place (`StagedLoad::dot` is `None`) into the stage at `base`: each
    /// owner of a run of the load's layout copies it with one `cp.async` to the run's flat index
    /// (zero-filled where masked off or past the loop's end, `in_range` false). A load too
    /// narrow for cp.async ([`Self::staged_run`]) is left to run where it stands.
    fn issue_in_place(&mut self, lop: &Op, base: IntValue<'c>, in_range: IntValue<'c>) -> R<()> {
        let Some(run) = self.staged_run(lop) else {
            return Ok(());
        };
        let OpKind::Load { mask, .. } = lop.kind else {
            unreachable!("only loads are staged")
        };
        let v = lop.results[0];
        let esz = Self::smem_size(self.k.ty(v).elem);
        let lay = self.lin(v);
        // The pointers and the mask; `other` is applied where the load is read back.
        let saved = self.prepare_some(lop, 0..if mask { 2 } else { 1 })?;
        let ptrs = self.elems(lop.operands[0]);
        let masks = mask.then(|| self.elems(lop.operands[1]));
        self.copy_runs(&lay, &lay, &ptrs, masks.as_deref(), run, esz, base, in_range)?;
        for (v, r) in saved {
            self.vals.insert(v, r);
        }
        Ok(())
    }

    /// One `cp.async` of `run` elements (of `esz` bytes) per run of a tile in layout `lay` whose
    /// pointers are `ptrs`, by the threads owning them, to the run's element in the stage at
    /// `base` as `phys` places it (`lay` itself, or composed with a swizzle); zero-filled where
    /// the mask (one value per run, or a scalar) is false or the iteration is past the end.
    #[allow(clippy::too_many_arguments)]
    fn copy_runs(
        &mut self,
        lay: &LinearLayout,
        phys: &LinearLayout,
        ptrs: &[BasicValueEnum<'c>],
        masks: Option<&[BasicValueEnum<'c>]>,
        run: usize,
        esz: u32,
        base: IntValue<'c>,
        in_range: IntValue<'c>,
    ) -> R<()> {
        let part = self.thread_part(phys)?;
        let own = self.owns(lay)?;
        self.when(own, |l| {
            for g in 0..ptrs.len() / run {
                let dst = l.smem_elem_at(l.at(part, phys.reg_part(g * run))?, esz, base)?;
                let ok = match masks {
                    Some(m) => llvm(l.b.build_and(m[(g * run).min(m.len() - 1)].into_int_value(), in_range, ""))?,
                    None => in_range,
                };
                l.cp_async(dst, ptrs[g * run], run as u32 * esz, ok)?;
            }
            Ok(())
        })
    }

    /// Whether the kernel stores a tile through the TMA engine (`tile_gir::tma::prepare`).
    pub(super) fn tma_stores(&self) -> bool {
        let mut any = false;
        self.k.walk(&mut |op| {
            any |= matches!(op.kind, OpKind::StoreBlock { .. })
                && op.operands.last().is_some_and(|v| self.map_of.contains_key(v))
        });
        any
    }

    /// A TMA store (`store_block` kept by `tile_gir::tma::prepare`): every thread writes its
    /// elements into the staging buffer (`tile_gir::tma::store_boxes`: swizzled column blocks,
    /// at the first 1024-byte boundary of scratch), the writes are made visible to the async
    /// proxy, and thread 0 issues one box per column block (the engine drops what falls outside
    /// the tensor), then waits only until the engine has read the buffer: the global writes go
    /// on while the kernel does (the kernel's end waits for them). Scratch users after it start
    /// with a barrier, as after any use of shared memory.
    pub(super) fn store_block_tma(&mut self, op: &Op) -> R<()> {
        let o = block::operands(op);
        let v = o.value.expect("a store has a value");
        let (swz, boxes) = tile_gir::tma::store_boxes(self.k, v).expect("prepare kept a store with boxes");
        let map = self.map_params[self.map_of[&v]];
        let inside = self.in_pipeline > 0;
        let off = tile_gir::estimate::tma_store_offset(&self.plan, inside);
        self.need_smem(off + boxes.bytes());
        let at = self.plan.scratch_base(inside) + off;
        // Earlier readers of scratch (and of the buffer, a previous store's) are done.
        self.barrier()?;
        self.operand_to_smem_at(v, &swz, self.i32c(at as u64))?;
        self.fence_proxy_async()?;
        self.barrier()?;
        let coord = |l: &Self, v: ValueId| -> R<IntValue<'c>> {
            let c = l.scalar(v).into_int_value();
            llvm(l.b.build_int_truncate_or_bit_cast(c, l.ctx.i32_type(), ""))
        };
        let (row, col) = (coord(self, o.coords[0])?, coord(self, o.coords[1])?);
        let entry = self.entry_of.get(&v).map(|e| coord(self, *e)).transpose()?;
        let zero = llvm(self.b.build_int_compare(IntPredicate::EQ, self.tid(), self.i32c(0), ""))?;
        self.when(zero, |l| {
            for j in 0..boxes.boxes {
                let src = l.smem_abs_ptr(l.i32c((at + j * boxes.box_bytes) as u64))?;
                let c = llvm(l.b.build_int_add(col, l.i32c((j * boxes.cols) as u64), ""))?;
                // A map over a batch of entries: the entry is the outermost coordinate.
                let mut args: Vec<BasicValueEnum<'c>> = vec![src.into(), map.into(), c.into(), row.into()];
                args.extend(entry.map(BasicValueEnum::from));
                args.extend::<[BasicValueEnum<'c>; 2]>([
                    l.ctx.i64_type().const_zero().into(),
                    l.ctx.bool_type().const_zero().into(),
                ]);
                let name = match entry {
                    None => "llvm.nvvm.cp.async.bulk.tensor.s2g.tile.2d",
                    Some(_) => "llvm.nvvm.cp.async.bulk.tensor.s2g.tile.3d",
                };
                l.intr(name, &[], &args)?;
            }
            l.intr("llvm.nvvm.cp.async.bulk.commit.group", &[], &[])?;
            l.intr("llvm.nvvm.cp.async.bulk.wait.group.read", &[], &[l.i32c(0).into()])?;
            Ok(())
        })?;
        self.smem_state = super::shared::SmemState::Unknown;
        Ok(())
    }

    /// `cp.async` of `bytes` (4, 8 or 16) from global `src` to shared `dst`; zero-fills when
    /// `ok` is false (reading nothing).
    fn cp_async(
        &self,
        dst: inkwell::values::PointerValue<'c>,
        src: BasicValueEnum<'c>,
        bytes: u32,
        ok: IntValue<'c>,
    ) -> R<()> {
        let size = llvm(self.b.build_select(ok, self.i32c(bytes as u64), self.i32c(0), ""))?;
        let kind = if bytes == 16 { "cg" } else { "ca" };
        let name = format!("llvm.nvvm.cp.async.{kind}.shared.global.{bytes}.s");
        self.intr(&name, &[], &[dst.into(), src, size])?;
        Ok(())
    }

    fn cp_async_commit(&self) -> R<()> {
        self.intr("llvm.nvvm.cp.async.commit.group", &[], &[])?;
        Ok(())
    }

    /// Waits until at most `n` groups of this thread's copies are pending.
    fn cp_async_wait(&self, n: u32) -> R<()> {
        self.intr("llvm.nvvm.cp.async.wait.group", &[], &[self.i32c(n as u64).into()])?;
        Ok(())
    }
}
