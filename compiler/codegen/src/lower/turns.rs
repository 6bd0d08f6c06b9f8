//! Ping-pong between consumer warpgroups (`tile_gir::pipeline::Producer::pingpong`): in the
//! body of a warp-specialised loop, the consumer warpgroups take turns issuing wgmma. The turn
//! goes round warpgroups 0, 1, .. on named barriers [`FIRST_TURN_BARRIER`] + g, each of 256
//! threads: warpgroup g `bar.sync`s on its own (its 128 threads, and the 128 of the warpgroup
//! that handed the turn on) before its first wgmma of a stretch, and `bar.arrive`s on the next
//! warpgroup's before it waits for a wgmma, meets a block-wide barrier or enters a nested
//! region. Warpgroup 0 gives itself the first turn before the loop (before the tile loop of a
//! persistent kernel: the turns carry on from tile to tile). Every warpgroup lowers the same
//! body, so each takes and hands on the turn the same number of times per iteration; the last
//! hand-on of the kernel is never taken, which leaves its barrier with 128 arrivals at exit.

use std::cell::Cell;

use inkwell::IntPredicate;

use tile_gir::pipeline::LoopPipeline;

use super::{Lowering, R, llvm};

/// The named barrier of consumer warpgroup 0's turn (0 is the block's, 1 the producer's start).
const FIRST_TURN_BARRIER: u64 = 2;

/// Threads that meet at a turn barrier: the warpgroup taking the turn and the one handing it on.
const TURN_THREADS: u32 = 256;

impl<'c> Lowering<'c, '_> {
    /// Before the loop `pl` (or the tile loop around it), on the consumers: when it takes turns,
    /// warpgroup 0 arrives on its own turn barrier, so that its first `bar.sync` there goes
    /// through.
    pub(super) fn first_turn(&mut self, pl: &LoopPipeline) -> R<()> {
        if !pl.takes_turns() {
            return Ok(());
        }
        let first = llvm(
            self.b
                .build_int_compare(IntPredicate::ULT, self.tid(), self.i32c(128), ""),
        )?;
        self.when(first, |l| {
            l.named_barrier(false, l.i32c(FIRST_TURN_BARRIER), TURN_THREADS)
        })
    }

    /// Lowers `body` (a loop body's top-level ops) with turns taken and handed on when `on`;
    /// the turn is handed on at its end if still held.
    pub(super) fn with_turns<T>(&mut self, on: bool, body: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        if !on {
            return body(self);
        }
        let outer = self.turn.replace(Cell::new(false));
        let r = body(self);
        let end = self.pass_turn();
        self.turn = outer;
        let r = r?;
        end?;
        Ok(r)
    }

    /// Before a wgmma is issued: waits for this warpgroup's turn unless it holds it.
    pub(super) fn take_turn(&self) -> R<()> {
        let Some(t) = &self.turn else { return Ok(()) };
        if t.get() {
            return Ok(());
        }
        t.set(true);
        let g = self.group()?;
        let id = llvm(self.b.build_int_add(g, self.i32c(FIRST_TURN_BARRIER), ""))?;
        self.named_barrier(true, id, TURN_THREADS)
    }

    /// Before a nested region (an `if` or a loop inside the body): the turn is handed on and
    /// nothing inside takes it; returns what to restore after it.
    pub(super) fn leave_turns(&mut self) -> R<Option<Cell<bool>>> {
        self.pass_turn()?;
        Ok(self.turn.take())
    }

    /// Before a wgmma wait, a block-wide barrier or a nested region: hands the turn on to the
    /// next warpgroup if this one holds it.
    pub(super) fn pass_turn(&self) -> R<()> {
        let Some(t) = &self.turn else { return Ok(()) };
        if !t.replace(false) {
            return Ok(());
        }
        let groups = self.i32c((self.threads / 128) as u64);
        let next = llvm(self.b.build_int_add(self.group()?, self.i32c(1), ""))?;
        let next = llvm(self.b.build_int_unsigned_rem(next, groups, ""))?;
        let id = llvm(self.b.build_int_add(next, self.i32c(FIRST_TURN_BARRIER), ""))?;
        self.named_barrier(false, id, TURN_THREADS)
    }

    /// This thread's consumer warpgroup.
    fn group(&self) -> R<inkwell::values::IntValue<'c>> {
        llvm(self.b.build_int_unsigned_div(self.tid(), self.i32c(128), "wg"))
    }
}
