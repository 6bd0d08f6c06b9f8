//! `dot`: on tensor cores when the GPU plan has a [`MmaPlan`] for it (operands written to
//! swizzled shared memory, fragments read with `ldmatrix`, `mma.sync.m16n8k16` into the
//! accumulator layout), else both operands through shared memory and a plain FMA loop over the
//! inner dimension.

use std::collections::HashSet;

use inkwell::AddressSpace;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue};
use tile_gir::mma::{Instr, MmaPlan, Swizzle, WgmmaOperand};
use tile_lang::ir::*;

use super::{Lowering, R, Repr, SHARED, llvm};

/// A wgmma dot committed and not yet waited for.
#[derive(Clone)]
pub(super) struct Pending<'c> {
    /// The dot's result.
    pub(super) result: ValueId,
    /// Its A operand when read from registers (attention's P).
    pub(super) a_regs: Option<ValueId>,
    /// A's fragment registers, which the instructions read until they are done.
    pub(super) frags: Vec<BasicValueEnum<'c>>,
}

/// The wgmma dots pending at a point (oldest first, with the A fragments each reads from
/// registers) and their values there.
pub(super) type PendingWgmma<'c> = (Vec<Pending<'c>>, Vec<(ValueId, Repr<'c>)>);

impl<'c> Lowering<'c, '_> {
    pub(super) fn dot(&mut self, op: &Op, p: Precision) -> R<()> {
        if let Some(plan) = self.plan.mma(op.results[0]).cloned() {
            return match plan.instr {
                Instr::MmaSync => self.dot_mma(op, &plan),
                Instr::Wgmma => self.dot_wgmma(op, &plan),
            };
        }
        let (a, b, c) = (op.operands[0], op.operands[1], op.operands[2]);
        let (ta, tb) = (self.k.ty(a).clone(), self.k.ty(b).clone());
        let (m, kk, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
        let din = ta.dtype().unwrap();
        let dacc = self.dtype(c);
        let sz = Self::smem_size(ta.elem);
        let b_base = (m * kk) as u32 * sz;
        self.need_smem(b_base + (kk * n) as u32 * sz);
        self.barrier()?;
        self.tile_to_smem(a, 0)?;
        self.tile_to_smem(b, b_base)?;
        self.barrier()?;
        let rt = self.k.ty(op.results[0]).clone();
        let lay = self.layout(&rt);
        let acc0 = self.elems(c);
        let mut rows = Vec::new();
        let mut cols = Vec::new();
        for i in 0..lay.per_thread() {
            let e = self.flat(&lay, i)?;
            let idx = self.unflatten(&lay, e)?;
            rows.push(llvm(self.b.build_int_mul(idx[0], self.i32c(kk as u64), ""))?);
            cols.push(idx[1]);
        }
        let acc_t = self.ty(Elem::Scalar(dacc));
        let loc = op.loc;
        let out = self.counted_loop(
            self.i32c(0),
            self.i32c(kk as u64),
            self.i32c(1),
            true,
            acc0,
            &mut |l, k, accs| {
                let mut next = Vec::new();
                for (s, acc) in accs.iter().enumerate() {
                    let ai = llvm(l.b.build_int_add(rows[s], k, ""))?;
                    let bi = llvm(l.b.build_int_add(llvm(l.b.build_int_mul(k, l.i32c(n as u64), ""))?, cols[s], ""))?;
                    let x = l.smem_load(ta.elem, 0, ai)?;
                    let y = l.smem_load(ta.elem, b_base, bi)?;
                    if dacc.is_int() {
                        let x = llvm(l.b.build_int_s_extend(x.into_int_value(), acc_t.into_int_type(), ""))?;
                        let y = llvm(l.b.build_int_s_extend(y.into_int_value(), acc_t.into_int_type(), ""))?;
                        let pr = llvm(l.b.build_int_mul(x, y, ""))?;
                        next.push(llvm(l.b.build_int_add(acc.into_int_value(), pr, ""))?.into());
                    } else {
                        let mut x = l.cast(din, dacc, x, loc)?;
                        let mut y = l.cast(din, dacc, y, loc)?;
                        if p == Precision::Tf32 {
                            x = l
                                .asm(Some(l.ctx.f32_type().into()), "cvt.rna.tf32.f32 $0, $1;", "=f,f", &[x])?
                                .unwrap();
                            y = l
                                .asm(Some(l.ctx.f32_type().into()), "cvt.rna.tf32.f32 $0, $1;", "=f,f", &[y])?
                                .unwrap();
                        }
                        next.push(l.intr1("llvm.fma", &[acc_t], &[x, y, *acc])?);
                    }
                }
                Ok(next)
            },
        )?;
        self.set(op.results[0], Repr::Tile(out));
        Ok(())
    }
}

impl<'c> Lowering<'c, '_> {
    fn dot_mma(&mut self, op: &Op, plan: &MmaPlan) -> R<()> {
        let (a, b, c) = (op.operands[0], op.operands[1], op.operands[2]);
        // dot(a, trans(x)): x goes to shared memory as it is, [n, k].
        let (b, bt) = match self.plan.transposed_b.get(&op.results[0]) {
            Some(x) => (*x, true),
            None => (b, false),
        };
        let b_swz = if bt { plan.bt_smem() } else { plan.b_smem() };
        let (sa, sb) = (self.staged.get(&a).copied(), self.staged.get(&b).copied());
        // A already in the fragments' layout (attention's P) is packed from registers.
        let a_regs = if sa.is_none() {
            self.plan.a_in_registers(self.k, op)
        } else {
            None
        };
        // Operands a pipelined loop did not copy ahead go through scratch: the previous readers
        // (an earlier iteration's ldmatrix) must be done before they are overwritten.
        let scratch = self.plan.scratch_base(self.in_pipeline > 0);
        let b_off = plan.b_offset() as u32;
        if (sa.is_none() && a_regs.is_none()) || sb.is_none() {
            self.need_smem(plan.smem_bytes() as u32);
            self.barrier()?;
            if sa.is_none() && a_regs.is_none() {
                self.operand_to_smem(a, &plan.a_smem(), scratch)?;
            }
            if sb.is_none() {
                self.operand_to_smem(b, &b_swz, scratch + b_off)?;
            }
            self.barrier()?;
        }
        let a_base = sa.unwrap_or(self.i32c(scratch as u64));
        let b_base = sb.unwrap_or(self.i32c((scratch + b_off) as u64));
        let mut acc = self.elems(c);
        let a_vals = if a_regs.is_some() { self.elems(a) } else { Vec::new() };
        let a_rows = plan.a_rows().then(&plan.a_smem().map());
        let b_rows = if bt { plan.bt_rows() } else { plan.b_rows() }.then(&b_swz.map());
        let (a_part, b_part) = (self.thread_part(&a_rows)?, self.thread_part(&b_rows)?);
        let (tm, tn, pairs) = (plan.tiles_m(), plan.tiles_n(), plan.b_pairs());
        for kk in 0..plan.steps_k() {
            let mut af = Vec::with_capacity(tm);
            for mi in 0..tm {
                af.push(match &a_regs {
                    Some(map) => self.pack_fragment(&a_vals, map, 8 * (mi + tm * kk))?,
                    None => {
                        let e = self.at(a_part, a_rows.reg_part(mi + tm * kk))?;
                        self.ldmatrix(e, a_base, false)?
                    }
                });
            }
            let mut bf = Vec::with_capacity(pairs);
            for nj in 0..pairs {
                let e = self.at(b_part, b_rows.reg_part(nj + pairs * kk))?;
                bf.push(self.ldmatrix(e, b_base, !bt)?);
            }
            for mi in 0..tm {
                for ni in 0..tn {
                    let r0 = 4 * (ni + tn * mi);
                    let bb = &bf[ni / 2][2 * (ni % 2)..2 * (ni % 2) + 2];
                    let d = self.mma(plan.input, &af[mi], bb, &acc[r0..r0 + 4])?;
                    acc[r0..r0 + 4].copy_from_slice(&d);
                }
            }
        }
        self.set(op.results[0], Repr::Tile(acc));
        Ok(())
    }

    /// `dot` on `wgmma.mma_async`: both operands in shared memory (copied ahead by a pipelined
    /// loop, or written to scratch here), each warpgroup's m64 instructions read them through
    /// descriptors, and the accumulators come back after a `wgmma.wait_group`: right away when
    /// the dot wrote its operands to scratch, else where its result is first used
    /// ([`settle_wgmma`](Self::settle_wgmma)), so that later instructions (another dot, a
    /// softmax) run while it computes.
    fn dot_wgmma(&mut self, op: &Op, plan: &MmaPlan) -> R<()> {
        let (a, b, c) = (op.operands[0], op.operands[1], op.operands[2]);
        let (b, bt) = match self.plan.transposed_b.get(&op.results[0]) {
            Some(x) => (*x, true),
            None => (b, false),
        };
        let (sa, sb) = (self.staged.get(&a).copied(), self.staged.get(&b).copied());
        // A already in the fragments' layout (attention's P) is read from registers.
        let a_regs = if sa.is_none() {
            self.plan.a_in_registers(self.k, op)
        } else {
            None
        };
        let a_in_smem = a_regs.is_none();
        let scratch = self.plan.scratch_base(self.in_pipeline > 0);
        let b_off = plan.b_offset() as u32;
        let in_flight = self
            .plan
            .pipelines
            .values()
            .any(|p| p.async_dots.iter().any(|(d, _)| *d == op.results[0]));
        let uses_scratch = (sa.is_none() && a_in_smem) || sb.is_none();
        let lazy = !in_flight && !uses_scratch;
        if !lazy {
            // Its waits count every group committed before: those are waited for first.
            self.wait_wgmma(self.pending_wgmma.len())?;
        }
        if uses_scratch {
            self.need_smem(plan.smem_bytes() as u32);
            self.barrier()?;
            if sa.is_none() && a_in_smem {
                self.operand_to_smem(a, &plan.a_smem(), scratch)?;
            }
            if sb.is_none() {
                let swz = if bt { plan.bt_smem() } else { plan.b_smem() };
                self.operand_to_smem(b, &swz, scratch + b_off)?;
            }
            self.fence_proxy_async()?;
            self.barrier()?;
        }
        let a_base = sa.unwrap_or(self.i32c(scratch as u64));
        let b_base = sb.unwrap_or(self.i32c((scratch + b_off) as u64));
        // This warp's warpgroup, and its place in the warpgroup grid (groups along M first).
        let tid = self.tid.expect("read at kernel entry");
        let group = llvm(self.b.build_int_unsigned_div(tid, self.i32c(128), ""))?;
        let wm = self.i32c(plan.warps_m as u64);
        let gm = llvm(self.b.build_int_unsigned_rem(group, wm, ""))?;
        let gn = llvm(self.b.build_int_unsigned_div(group, wm, ""))?;
        let (da, db) = (plan.wgmma_a(), plan.wgmma_b(bt));
        let a_desc = if a_in_smem {
            Some(self.wgmma_desc(&da, a_base, gm)?)
        } else {
            None
        };
        let b_desc = self.wgmma_desc(&db, b_base, gn)?;
        let a_vals = if a_in_smem { Vec::new() } else { self.elems(a) };
        let mut acc = self.elems(c);
        let per = plan.instr_n() / 2;
        let tm = plan.tiles_m();
        self.take_turn()?;
        self.intr("llvm.nvvm.wgmma.fence.sync.aligned", &[], &[])?;
        // A's fragment registers, which the instructions read until they are done.
        let mut a_frags: Vec<BasicValueEnum<'c>> = Vec::new();
        for kk in 0..plan.steps_k() {
            for mi in 0..tm {
                let a_op = match (&a_desc, &a_regs) {
                    (Some(d), _) => {
                        WgmmaA::Desc(self.desc_plus(*d, mi as u32 * da.tile_step + da.k_offset(kk as u32))?)
                    }
                    (None, Some(map)) => {
                        let f = self.pack_fragment(&a_vals, map, 8 * (mi + tm * kk))?;
                        a_frags.extend(f.iter().copied());
                        WgmmaA::Regs(f)
                    }
                    (None, None) => unreachable!("A is in shared memory or registers"),
                };
                let bd = self.desc_plus(b_desc, db.k_offset(kk as u32))?;
                let r = per * mi..per * (mi + 1);
                let d = self.wgmma(plan, !bt, a_op, bd, &acc[r.clone()])?;
                acc[r].copy_from_slice(&d);
            }
        }
        self.intr("llvm.nvvm.wgmma.commit_group.sync.aligned", &[], &[])?;
        // In a pipelined loop that only carries the accumulator to this dot again, the group
        // stays in flight (the loop waits for it at its end); a dot that read only stage and
        // resident buffers (or registers) is waited for at its result's first use; else here.
        let acc = if in_flight {
            self.pass_turn()?;
            self.asm(None, "wgmma.wait_group.sync.aligned 1;", "", &[])?;
            acc
        } else if lazy {
            self.pending_wgmma.push(Pending {
                result: op.results[0],
                a_regs: a_regs.is_some().then_some(a),
                frags: a_frags,
            });
            acc
        } else {
            self.wgmma_wait(&acc)?
        };
        self.set(op.results[0], Repr::Tile(acc));
        Ok(())
    }

    /// Before `op`: waits for the pending wgmma dots it reads (and the older ones, which
    /// `wait_group` retires in order). An `if` waits for those its branches read, the others
    /// stay in flight through it (see [`if_op`](Self::if_op)); a loop waits for all of them
    /// (its iterations start and end with none pending); so does a `yield` (see
    /// [`settle_wgmma_at_end`](Self::settle_wgmma_at_end)).
    pub(super) fn settle_wgmma(&mut self, op: &Op) -> R<()> {
        if self.pending_wgmma.is_empty() {
            return Ok(());
        }
        if let OpKind::Yield = op.kind {
            return self.settle_wgmma_at_end(&op.operands);
        }
        let upto = if matches!(op.kind, OpKind::If) {
            let mut read = HashSet::new();
            op.each_read(&mut |_, v| {
                read.insert(v);
            });
            match self.pending_wgmma.iter().rposition(|p| read.contains(&p.result)) {
                Some(i) => i + 1,
                None => return Ok(()),
            }
        } else if !op.regions.is_empty() {
            self.pending_wgmma.len()
        } else {
            match self.pending_wgmma.iter().rposition(|p| op.operands.contains(&p.result)) {
                Some(i) => i + 1,
                None => return Ok(()),
            }
        };
        self.wait_wgmma(upto)
    }

    /// Before `op` defines the next iteration's value of a loop-carried A operand that a pending
    /// wgmma reads from registers (`carried`: each yielded value with the argument it becomes): waits
    /// for that dot. Its wait names the fragment registers for LLVM, not in the PTX, so ptxas
    /// would let the new value take the registers the instructions still read, and serialise
    /// every wgmma of the kernel (C7513; attention_rotated's cp.async ring converted P before
    /// its `acc * alpha` waited).
    pub(super) fn settle_wgmma_before_replacing(&mut self, op: &Op, carried: &[(ValueId, ValueId)]) -> R<()> {
        let replaced: Vec<ValueId> = carried
            .iter()
            .filter(|(y, _)| op.results.contains(y))
            .map(|&(_, arg)| arg)
            .collect();
        if replaced.is_empty() {
            return Ok(());
        }
        match self
            .pending_wgmma
            .iter()
            .rposition(|p| p.a_regs.is_some_and(|a| replaced.contains(&a)))
        {
            Some(i) => self.wait_wgmma(i + 1),
            None => Ok(()),
        }
    }

    /// At the end of a region (its `yield`, which hands on `yielded`): a loop body waits for
    /// every pending wgmma dot. A branch of an `if` waits only for those it yields when it
    /// committed none of its own; else for all (`wait_group` cannot retire a younger group
    /// before an older one).
    pub(super) fn settle_wgmma_at_end(&mut self, yielded: &[ValueId]) -> R<()> {
        let upto = match self.wgmma_floor {
            Some(floor) if self.pending_wgmma.len() == floor => self
                .pending_wgmma
                .iter()
                .rposition(|p| yielded.contains(&p.result))
                .map_or(0, |i| i + 1),
            _ => self.pending_wgmma.len(),
        };
        self.wait_wgmma(upto)
    }

    /// The wgmma dots pending before an `if`, and their values, for each branch to start from
    /// and for the code after it: a branch may have waited for them (when it committed a dot
    /// of its own), but the other path has not, and values set in a branch do not reach past
    /// it. Waiting again after the `if` for a group already retired costs nothing.
    pub(super) fn pending_before_branch(&self) -> PendingWgmma<'c> {
        let vals = self
            .pending_wgmma
            .iter()
            .map(|p| (p.result, self.get(p.result)))
            .collect();
        (self.pending_wgmma.clone(), vals)
    }

    pub(super) fn restore_pending(&mut self, saved: &PendingWgmma<'c>) {
        self.pending_wgmma = saved.0.clone();
        for (v, r) in &saved.1 {
            self.set(*v, r.clone());
        }
    }

    /// Waits for the oldest `n` pending wgmma dots (`wait_group` with the younger ones left in
    /// flight), their accumulators passed through the wait so that nothing reads them earlier,
    /// and the fragment registers of an A read from registers passed to it too, so that nothing
    /// overwrites them while the instructions read them (ptxas would serialise every wgmma).
    pub(super) fn wait_wgmma(&mut self, n: usize) -> R<()> {
        if n == 0 {
            return Ok(());
        }
        self.pass_turn()?;
        let done: Vec<Pending<'c>> = self.pending_wgmma.drain(..n).collect();
        let left = self.pending_wgmma.len();
        let tiles: Vec<Vec<BasicValueEnum<'c>>> = done.iter().map(|p| self.elems(p.result)).collect();
        let mut flat: Vec<BasicValueEnum<'c>> = tiles.concat();
        let n = flat.len();
        let mut cons: Vec<String> = vec!["=f".into(); n];
        cons.extend((0..n).map(|i| i.to_string()));
        for p in &done {
            cons.extend(p.frags.iter().map(|_| "r".to_string()));
            flat.extend(p.frags.iter().copied());
        }
        let out = self.asm_values(
            &format!("wgmma.wait_group.sync.aligned {left};"),
            &cons.join(","),
            &flat,
            n,
        )?;
        let mut at = 0;
        for (p, t) in done.iter().zip(&tiles) {
            self.set(p.result, Repr::Tile(out[at..at + t.len()].to_vec()));
            at += t.len();
        }
        Ok(())
    }

    /// The 64-bit descriptor of an operand at shared byte `base`, moved `group` warpgroups along.
    fn wgmma_desc(&self, d: &WgmmaOperand, base: IntValue<'c>, group: IntValue<'c>) -> R<IntValue<'c>> {
        let off = llvm(self.b.build_int_mul(group, self.i32c(d.group_step as u64), ""))?;
        let off = llvm(self.b.build_int_add(base, off, ""))?;
        let p = self.smem_abs_ptr(off)?;
        let i64t = self.ctx.i64_type();
        let addr = llvm(self.b.build_ptr_to_int(p, i64t, ""))?;
        let addr = llvm(self.b.build_right_shift(addr, i64t.const_int(4, false), false, ""))?;
        let addr = llvm(self.b.build_and(addr, i64t.const_int(0x3FFF, false), ""))?;
        llvm(self.b.build_or(addr, i64t.const_int(d.bits(), false), ""))
    }

    /// A descriptor whose start address is `bytes` further on (start addresses stay below
    /// 256 KiB, so the 14-bit field never carries).
    fn desc_plus(&self, desc: IntValue<'c>, bytes: u32) -> R<IntValue<'c>> {
        let add = self.ctx.i64_type().const_int((bytes >> 4) as u64, false);
        llvm(self.b.build_int_add(desc, add, ""))
    }

    /// One `wgmma.mma_async.m64nNk16` (`k32` for fp8) accumulating into `acc` (tied: the same
    /// registers), A read through a descriptor or from four registers.
    fn wgmma(
        &self,
        plan: &MmaPlan,
        b_mn_major: bool,
        a: WgmmaA<'c>,
        b: IntValue<'c>,
        acc: &[BasicValueEnum<'c>],
    ) -> R<Vec<BasicValueEnum<'c>>> {
        let per = acc.len();
        let regs: Vec<String> = (0..per).map(|i| format!("${i}")).collect();
        let ty = match plan.input {
            DType::BF16 => "bf16",
            DType::F8E4M3 => "e4m3",
            DType::F8E5M2 => "e5m2",
            _ => "f16",
        };
        let mut cons: Vec<String> = vec!["=f".into(); per];
        let mut args: Vec<BasicValueEnum<'c>> = Vec::new();
        // Operand numbers after the outputs: A (one descriptor or four registers), B, scale-d.
        let (a_text, imm) = match a {
            WgmmaA::Desc(d) => {
                cons.push("l".into());
                args.push(d.into());
                (format!("${per}"), ", 0")
            }
            WgmmaA::Regs(r) => {
                cons.extend(std::iter::repeat_n("r".to_string(), 4));
                args.extend(r);
                let names: Vec<String> = (per..per + 4).map(|i| format!("${i}")).collect();
                (format!("{{{}}}", names.join(", ")), "")
            }
        };
        let nb = per + args.len();
        cons.extend(["l".into(), "r".into()]);
        args.extend::<[BasicValueEnum<'c>; 2]>([b.into(), self.i32c(1).into()]);
        // The transpose immediates exist for 16-bit inputs only (8-bit ones are K-major).
        let trans = if plan.input.bytes() == 2 {
            format!("{imm}, {}", b_mn_major as u32)
        } else {
            String::new()
        };
        let text = format!(
            "{{\n.reg .pred p;\nsetp.ne.b32 p, ${s}, 0;\nwgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ty}.{ty} {{{regs}}}, {a_text}, ${nb}, p, 1, 1{trans};\n}}",
            n = plan.instr_n(),
            k = plan.instr_k(),
            regs = regs.join(", "),
            s = nb + 1,
        );
        cons.extend((0..per).map(|i| i.to_string()));
        args.extend_from_slice(acc);
        self.asm_values(&text, &cons.join(","), &args, per)
    }

    /// `wgmma.wait_group 0`, with the accumulators passed through it so that nothing reads them
    /// before the instructions writing them are done.
    pub(super) fn wgmma_wait(&self, acc: &[BasicValueEnum<'c>]) -> R<Vec<BasicValueEnum<'c>>> {
        self.pass_turn()?;
        let n = acc.len();
        let mut cons: Vec<String> = vec!["=f".into(); n];
        cons.extend((0..n).map(|i| i.to_string()));
        self.asm_values("wgmma.wait_group.sync.aligned 0;", &cons.join(","), acc, n)
    }

    /// Inline asm (with side effects) returning `n` f32 values.
    fn asm_values(&self, text: &str, cons: &str, args: &[BasicValueEnum<'c>], n: usize) -> R<Vec<BasicValueEnum<'c>>> {
        let f32t = self.ctx.f32_type().into();
        let st = self.ctx.struct_type(&vec![f32t; n], false);
        let s = self
            .asm(Some(st.into()), text, cons, args)?
            .unwrap()
            .into_struct_value();
        (0..n as u32)
            .map(|i| llvm(self.b.build_extract_value(s, i, "")))
            .collect()
    }

    /// Writes operand `v` (in whatever layout it has) into shared memory at byte `base`, swizzled
    /// by `swz`; runs of consecutive elements go as one vector store.
    pub(super) fn operand_to_smem(&mut self, v: ValueId, swz: &Swizzle, base: u32) -> R<()> {
        let base = self.i32c(base as u64);
        self.operand_to_smem_at(v, swz, base)
    }

    /// [`operand_to_smem`](Self::operand_to_smem) at a byte address computed at run time.
    pub(super) fn operand_to_smem_at(&mut self, v: ValueId, swz: &Swizzle, base: IntValue<'c>) -> R<()> {
        let lay = self.lin(v);
        let t = self.k.ty(v).clone();
        let vals = self.elems(v);
        let run = lay.contiguous_run().min(swz.vec);
        let phys = lay.then(&swz.map());
        let part = self.thread_part(&phys)?;
        let own = self.owns(&lay)?;
        let et = self.ty(t.elem);
        let esz = Self::smem_size(t.elem);
        self.when(own, |l| {
            for g in 0..vals.len() / run {
                let p = l.smem_elem_at(l.at(part, phys.reg_part(g * run))?, esz, base)?;
                let x: BasicValueEnum = if run == 1 {
                    vals[g]
                } else {
                    let vt = vector_of(et, run as u32);
                    let mut x = vt.get_undef();
                    for j in 0..run {
                        x = llvm(l.b.build_insert_element(x, vals[g * run + j], l.i32c(j as u64), ""))?;
                    }
                    x.into()
                };
                let st = llvm(l.b.build_store(p, x))?;
                st.set_alignment(run as u32 * esz)
                    .map_err(|e| crate::CodegenError::Llvm(e.to_string()))?;
            }
            Ok(())
        })
    }

    /// Four 32-bit fragment registers from 16-bit elements: register `j` packs elements
    /// `first + 2j` and `first + 2j + 1` of the fragment, found in `vals` through `map`.
    fn pack_fragment(&self, vals: &[BasicValueEnum<'c>], map: &[usize], first: usize) -> R<Vec<BasicValueEnum<'c>>> {
        let et = vals[0].get_type();
        let vt = vector_of(et, 2);
        (0..4)
            .map(|j| {
                let mut x = vt.get_undef();
                for h in 0..2 {
                    let v = vals[map[first + 2 * j + h]];
                    x = llvm(self.b.build_insert_element(x, v, self.i32c(h as u64), ""))?;
                }
                llvm(self.b.build_bit_cast(x, self.ctx.i32_type(), ""))
            })
            .collect()
    }

    /// `ldmatrix.x4` (`.trans` for B) of the rows at element `e` of the 16-bit array at shared
    /// byte `base`.
    fn ldmatrix(&self, e: IntValue<'c>, base: IntValue<'c>, trans: bool) -> R<Vec<BasicValueEnum<'c>>> {
        let p = self.smem_elem_at(e, 2, base)?;
        let name = if trans {
            "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16"
        } else {
            "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16"
        };
        let pty = self.ctx.ptr_type(AddressSpace::from(SHARED));
        let s = self.intr1(name, &[pty.into()], &[p.into()])?.into_struct_value();
        (0..4).map(|i| llvm(self.b.build_extract_value(s, i, ""))).collect()
    }

    /// One `mma.sync.m16n8k16.row.col` with f32 accumulators.
    fn mma(
        &self,
        input: DType,
        a: &[BasicValueEnum<'c>],
        b: &[BasicValueEnum<'c>],
        c: &[BasicValueEnum<'c>],
    ) -> R<Vec<BasicValueEnum<'c>>> {
        let (name, cast): (&str, Option<BasicTypeEnum<'c>>) = match input {
            DType::BF16 => ("llvm.nvvm.mma.m16n8k16.row.col.bf16", None),
            _ => (
                "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
                Some(self.ctx.f16_type().vec_type(2).into()),
            ),
        };
        let mut args = Vec::with_capacity(10);
        for x in a.iter().chain(b) {
            args.push(match cast {
                Some(t) => llvm(self.b.build_bit_cast(*x, t, ""))?,
                None => *x,
            });
        }
        args.extend_from_slice(c);
        let s = self.intr1(name, &[], &args)?.into_struct_value();
        (0..4).map(|i| llvm(self.b.build_extract_value(s, i, ""))).collect()
    }
}

/// Where a wgmma reads A from.
enum WgmmaA<'c> {
    /// A shared-memory descriptor.
    Desc(IntValue<'c>),
    /// Four 32-bit fragment registers.
    Regs(Vec<BasicValueEnum<'c>>),
}

fn vector_of(t: BasicTypeEnum<'_>, n: u32) -> inkwell::types::VectorType<'_> {
    match t {
        BasicTypeEnum::FloatType(f) => f.vec_type(n),
        BasicTypeEnum::IntType(i) => i.vec_type(n),
        _ => unreachable!("tensor-core operands are 16-bit floats"),
    }
}
