//! Thread-block clusters (`#[cluster(N)]`): the kernel's cluster dimension, the cluster's entry
//! and exit meetings and the cluster reductions, through the exchange array that
//! `tile_gir::cluster::ClusterSlots` lays out (its doc says why the protocol is safe).

use inkwell::AddressSpace;
use inkwell::IntPredicate;
use inkwell::module::Linkage;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use tile_gir::cluster::{BARRIER_BYTES, ClusterSlots, SLOT_BYTES};
use tile_lang::ir::*;

use super::{Lowering, R, Repr, SHARED, llvm};
use crate::CodegenError;

/// A cluster kernel's exchange array, per site the count of its executions so far (a
/// thread-local slot that LLVM keeps in a register), and whether this program has arrived at
/// the exit meeting.
pub(super) struct Exchange<'c> {
    slots: ClusterSlots,
    array: PointerValue<'c>,
    rounds: Vec<PointerValue<'c>>,
    exit_arrived: bool,
}

impl<'c> Lowering<'c, '_> {
    /// At kernel entry: the cluster dimension on the function; for a kernel with cluster
    /// reductions, thread 0 initialises every site's two mbarriers (`N` arrivals each), then
    /// the cluster meets.
    pub(super) fn cluster_entry(&mut self, f: inkwell::values::FunctionValue<'c>) -> R<()> {
        if self.k.cluster <= 1 {
            return Ok(());
        }
        if !self.target.clusters {
            return Err(CodegenError::NoClusters {
                size: self.k.cluster,
                target: self.target.sm.into(),
            });
        }
        f.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            self.ctx
                .create_string_attribute("nvvm.cluster_dim", &format!("{},1,1", self.k.cluster)),
        );
        if tile_gir::split::is_split(self.k) {
            // Begun now, waited for before the first write into rank 0 (`split_sum`): the
            // loop runs in between.
            self.intr("llvm.nvvm.barrier.cluster.arrive.relaxed.aligned", &[], &[])?;
            self.split_meeting = true;
        }
        let Some(slots) = ClusterSlots::of(self.k) else {
            return Ok(());
        };
        let ty = self.ctx.i8_type().array_type(slots.bytes());
        let g = self.m.add_global(ty, Some(AddressSpace::from(SHARED)), "cluster_slots");
        g.set_linkage(Linkage::Internal);
        g.set_initializer(&ty.get_undef());
        g.set_alignment(8);
        let array = g.as_pointer_value();
        let i32t = self.ctx.i32_type();
        let mut rounds = Vec::new();
        for _ in &slots.sites {
            let p = self.entry_alloca(i32t.into(), "cluster_round")?;
            llvm(self.b.build_store(p, self.i32c(0)))?;
            rounds.push(p);
        }
        self.exchange = Some(Exchange {
            slots,
            array,
            rounds,
            exit_arrived: false,
        });
        let zero = llvm(self.b.build_int_compare(IntPredicate::EQ, self.tid(), self.i32c(0), ""))?;
        let size = self.k.cluster;
        self.when(zero, |l| {
            let ex = l.exchange.as_ref().unwrap();
            let bars: Vec<u32> = (0..ex.slots.sites.len()).map(|s| ex.slots.barrier(s)).collect();
            for first in bars {
                for round in 0..2 {
                    l.mbarrier_init(l.cluster_ptr(l.i32c((first + round * BARRIER_BYTES) as u64))?, size)?;
                }
            }
            l.intr("llvm.nvvm.fence.mbarrier_init.release.cluster", &[], &[])?;
            Ok(())
        })?;
        // The fence above orders the initialisation before the arrival.
        self.cluster_meeting(true)
    }

    /// Every thread of the cluster meets: arrives (`relaxed`, or releasing what it did before
    /// to the other programs), then waits for all.
    pub(super) fn cluster_meeting(&self, relaxed: bool) -> R<()> {
        let arrive = match relaxed {
            true => "llvm.nvvm.barrier.cluster.arrive.relaxed.aligned",
            false => "llvm.nvvm.barrier.cluster.arrive.aligned",
        };
        self.intr(arrive, &[], &[])?;
        self.intr("llvm.nvvm.barrier.cluster.wait.aligned", &[], &[])?;
        Ok(())
    }

    /// Before the kernel returns: the exit meeting (arriving now unless the last site did).
    pub(super) fn cluster_exit(&mut self) -> R<()> {
        let Some(ex) = self.exchange.as_ref() else {
            return Ok(());
        };
        if !ex.exit_arrived {
            self.intr("llvm.nvvm.barrier.cluster.arrive.relaxed.aligned", &[], &[])?;
        }
        self.intr("llvm.nvvm.barrier.cluster.wait.aligned", &[], &[])?;
        Ok(())
    }

    /// The address of byte `off` of the exchange array in this block's shared memory.
    fn cluster_ptr(&self, off: IntValue<'c>) -> R<PointerValue<'c>> {
        let ex = self
            .exchange
            .as_ref()
            .expect("a cluster reduction's kernel has an exchange array");
        let off = llvm(self.b.build_int_z_extend(off, self.ctx.i64_type(), ""))?;
        unsafe { llvm(self.b.build_in_bounds_gep(self.ctx.i8_type(), ex.array, &[off], "")) }
    }

    /// `cluster_sum(x)` and its kind (`r`), or `cluster_reduce(x, combine)` (`r` is `None`:
    /// region 0 combines): inside a loop, this block's threads meet (their reads of the round's
    /// slots two executions ago are over); then the first `N` threads write the values into
    /// this program's slots of the round in each program `tid` of the cluster and arrive on
    /// that program's barrier, then every thread waits on its own barrier and folds the `N`
    /// programs' values in rank order.
    pub(super) fn cluster_reduce(&mut self, op: &Op, r: Option<ReduceOp>) -> R<()> {
        let (site, counter, slot0, bar0, round_bytes, in_loop) = {
            let ex = self
                .exchange
                .as_ref()
                .expect("a cluster reduction's kernel has an exchange array");
            let site = ex
                .slots
                .site(op.results[0])
                .expect("every cluster reduction has a site");
            (
                site,
                ex.rounds[site],
                ex.slots.slot(site),
                ex.slots.barrier(site),
                ex.slots.round_bytes(site),
                ex.slots.in_loop[site],
            )
        };
        let size = self.k.cluster;
        let width = op.operands.len() as u32;
        let i32t = self.ctx.i32_type();
        let b = &self.b;
        let k = llvm(b.build_load(i32t, counter, "cluster_round"))?.into_int_value();
        llvm(b.build_store(counter, llvm(b.build_int_add(k, self.i32c(1), ""))?))?;
        let round = llvm(b.build_and(k, self.i32c(1), ""))?;
        let parity = llvm(b.build_and(llvm(b.build_right_shift(k, self.i32c(1), false, ""))?, self.i32c(1), ""))?;
        let at = |l: &Self, first: u32, stride: u32, i: IntValue<'c>| -> R<IntValue<'c>> {
            let o = llvm(l.b.build_int_mul(i, l.i32c(stride as u64), ""))?;
            llvm(l.b.build_int_add(o, l.i32c(first as u64), ""))
        };
        let bar = at(self, bar0, BARRIER_BYTES, round)?;
        let slots = at(self, slot0, round_bytes, round)?;
        let xs: Vec<BasicValueEnum<'c>> = op.operands.iter().map(|v| self.scalar(*v)).collect();
        if in_loop {
            self.barrier()?;
        }
        let rank = self
            .intr1("llvm.nvvm.read.ptx.sreg.cluster.ctarank", &[], &[])?
            .into_int_value();
        let sender = llvm(
            self.b
                .build_int_compare(IntPredicate::ULT, self.tid(), self.i32c(size as u64), ""),
        )?;
        self.when(sender, |l| {
            let mine = at(l, 0, width * SLOT_BYTES, rank)?;
            let mine = llvm(l.b.build_int_add(slots, mine, ""))?;
            for (i, x) in xs.iter().enumerate() {
                let off = llvm(l.b.build_int_add(mine, l.i32c(i as u64 * SLOT_BYTES as u64), ""))?;
                let local = l.cluster_ptr(off)?;
                let remote = l
                    .intr1("llvm.nvvm.mapa.shared.cluster", &[], &[local.into(), l.tid().into()])?
                    .into_pointer_value();
                llvm(l.b.build_store(remote, *x))?;
            }
            let bar = l.cluster_ptr(bar)?;
            let remote_bar = l
                .intr1("llvm.nvvm.mapa.shared.cluster", &[], &[bar.into(), l.tid().into()])?
                .into_pointer_value();
            l.intr(
                "llvm.nvvm.mbarrier.arrive.scope.cluster.space.cluster",
                &[],
                &[remote_bar.into(), l.i32c(1).into()],
            )?;
            Ok(())
        })?;
        let bar = self.cluster_ptr(bar)?;
        let name = r.map_or("cluster_reduce".to_string(), |r| format!("cluster_{}", r.name()));
        let why = format!(
            "for the {size} programs of its cluster at `{name}` ({}:{})",
            op.loc.line, op.loc.col
        );
        self.mbarrier_wait_scoped(bar, parity, self.i32c(site as u64), &why, true)?;
        let mut acc: Vec<BasicValueEnum<'c>> = Vec::new();
        for j in 0..size {
            let mut next = Vec::with_capacity(xs.len());
            for (i, x) in xs.iter().enumerate() {
                let off = (j * width + i as u32) * SLOT_BYTES;
                let p = self.cluster_ptr(llvm(self.b.build_int_add(slots, self.i32c(off as u64), ""))?)?;
                next.push(llvm(self.b.build_load(x.get_type(), p, ""))?);
            }
            acc = if j == 0 {
                next
            } else if let Some(r) = r {
                vec![self.binary(r.combine(), self.dtype(op.operands[0]), acc[0], next[0])?]
            } else {
                let args: Vec<Repr<'c>> = acc.iter().chain(&next).map(|v| Repr::Scalar(*v)).collect();
                let region = op.regions[0].clone();
                self.region(&region, &args, &[])?
                    .into_iter()
                    .map(|v| match v {
                        Repr::Scalar(s) => s,
                        Repr::Tile(t) => t[0],
                    })
                    .collect()
            };
        }
        for (res, v) in op.results.iter().zip(acc) {
            self.set(*res, Repr::Scalar(v));
        }
        // The last site at the top of the body: no peer writes into this program after it.
        let ex = self
            .exchange
            .as_mut()
            .expect("a cluster reduction's kernel has an exchange array");
        if site + 1 == ex.slots.sites.len() && ex.slots.last_at_top {
            ex.exit_arrived = true;
            // Relaxed: the meeting orders nothing; the barriers of each round already do.
            self.intr("llvm.nvvm.barrier.cluster.arrive.relaxed.aligned", &[], &[])?;
        }
        Ok(())
    }

    /// `split_sum(x)`, after a loop split over the cluster (`tile_gir::split`): every program
    /// but rank 0 stores its elements of `x` into rank 0's slots, slot `(rank - 1, element,
    /// thread)` so that a warp's stores are consecutive words; the cluster meets (the arrival
    /// releases the stores, the wait acquires them); each program adds the slots of its own
    /// shared memory to its elements in rank order, which in rank 0 is the sum (the others
    /// read slots nobody wrote, and run nothing after). The first sum first waits for the
    /// meeting begun at entry, so that rank 0 has started before anyone writes into it.
    pub(super) fn split_sum(&mut self, op: &Op) -> R<()> {
        let xs = match self.get(op.operands[0]) {
            Repr::Tile(t) => t,
            Repr::Scalar(s) => vec![s],
        };
        let size = self.k.cluster;
        let per_peer = xs.len() as u32 * self.threads;
        let f32t = self.ctx.f32_type();
        let ty = f32t.array_type(per_peer * (size - 1));
        let g = self.m.add_global(ty, Some(AddressSpace::from(SHARED)), "split_slots");
        g.set_linkage(Linkage::Internal);
        g.set_initializer(&ty.get_undef());
        g.set_alignment(16);
        let base = g.as_pointer_value();
        if std::mem::take(&mut self.split_meeting) {
            self.intr("llvm.nvvm.barrier.cluster.wait.aligned", &[], &[])?;
        }
        let slot = |l: &Self, peer: IntValue<'c>, i: usize| -> R<PointerValue<'c>> {
            let b = &l.b;
            let at = llvm(b.build_int_mul(peer, l.i32c(per_peer as u64), ""))?;
            let at = llvm(b.build_int_add(at, l.i32c(i as u64 * l.threads as u64), ""))?;
            let at = llvm(b.build_int_add(at, l.tid(), ""))?;
            let at = llvm(b.build_int_z_extend(at, l.ctx.i64_type(), ""))?;
            unsafe { llvm(b.build_in_bounds_gep(f32t, base, &[at], "")) }
        };
        let rank = self
            .intr1("llvm.nvvm.read.ptx.sreg.cluster.ctarank", &[], &[])?
            .into_int_value();
        let peer = llvm(self.b.build_int_compare(IntPredicate::NE, rank, self.i32c(0), ""))?;
        self.when(peer, |l| {
            let before = llvm(l.b.build_int_sub(rank, l.i32c(1), ""))?;
            for (i, x) in xs.iter().enumerate() {
                let local = slot(l, before, i)?;
                let remote = l
                    .intr1("llvm.nvvm.mapa.shared.cluster", &[], &[local.into(), l.i32c(0).into()])?
                    .into_pointer_value();
                llvm(l.b.build_store(remote, *x))?;
            }
            Ok(())
        })?;
        self.cluster_meeting(false)?;
        let mut sum = xs;
        for p in 1..size {
            for (i, acc) in sum.iter_mut().enumerate() {
                let at = slot(self, self.i32c(p as u64 - 1), i)?;
                let v = llvm(self.b.build_load(f32t, at, ""))?;
                *acc = self.binary(BinaryOp::Add, DType::F32, *acc, v)?;
            }
        }
        self.set(op.results[0], Repr::Tile(sum));
        Ok(())
    }
}
