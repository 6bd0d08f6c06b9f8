//! Shape ops: program ids, `arange`, broadcasts, `expand_dims`/`reshape`, permutes, join and
//! split (every data movement through shared memory).

use inkwell::values::IntValue;
use tile_lang::ir::*;

use super::{Lowering, R, Repr, llvm};
use tile_gir::assign::RECOMPUTE_OPS;

impl<'c> Lowering<'c, '_> {
    /// `program_id` or `num_programs` along axis `a`: a special register.
    pub(super) fn program_id(&mut self, op: &Op, a: u8) -> R<()> {
        let reg = if matches!(op.kind, OpKind::ProgramId(_)) {
            "ctaid"
        } else {
            "nctaid"
        };
        let axis = ["x", "y", "z"][a as usize];
        let v = self.intr1(&format!("llvm.nvvm.read.ptx.sreg.{reg}.{axis}"), &[], &[])?;
        self.set(op.results[0], Repr::Scalar(v));
        Ok(())
    }

    pub(super) fn arange(&mut self, op: &Op, start: i64) -> R<()> {
        // An index tile the plan computes in another layout (the layout of the elementwise op
        // that uses it, see `GpuPlan::propagate`): its element at each of that layout's slots.
        if self.plan.layouts.contains_key(&op.results[0]) {
            let lin = self.lin(op.results[0]);
            let r = self.recompute_in(op.results[0], &lin)?;
            self.set(op.results[0], r);
            return Ok(());
        }
        let lay = self.layout(self.k.ty(op.results[0]));
        let mut out = Vec::new();
        for i in 0..lay.per_thread() {
            let e = self.flat(&lay, i)?;
            out.push(llvm(self.b.build_int_add(e, self.i32c(start as u64), ""))?.into());
        }
        self.set(op.results[0], Repr::Tile(out));
        Ok(())
    }

    pub(super) fn broadcast(&mut self, op: &Op) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let src = op.operands[0];
        let st = self.k.ty(src).clone();
        let lay = self.lin(op.results[0]);
        let from_regs = self.plan.broadcast_in_registers(self.k, op);
        let r = if st.is_scalar() {
            self.splat_in(self.scalar(src), &lay)
        } else if let Some(map) = from_regs {
            // Every thread already holds the elements it needs (a broadcast back from a
            // reduction in the same layout).
            let vals = self.elems(src);
            Repr::Tile(map.iter().map(|s| vals[*s]).collect())
        } else if self.plan.recompute_ops(self.k, src, RECOMPUTE_OPS).is_some() {
            // Made of indices and scalars: computed again at each result index, in registers.
            self.recompute_in(op.results[0], &lay)?
        } else {
            let off = rt.shape.len() - st.shape.len();
            let sshape = st.shape.clone();
            self.via_smem_in(&[src], &rt, &lay, &|l, idx| {
                let picked: Vec<IntValue> = (0..sshape.len())
                    .map(|d| if sshape[d] == 1 { l.i32c(0) } else { idx[d + off] })
                    .collect();
                l.linear(&sshape, &picked)
            })?
        };
        self.set(op.results[0], r);
        Ok(())
    }

    /// `expand_dims` and `reshape`: the same registers when the layouts agree, else through shared
    /// memory.
    /// Whether `expand_dims`/`reshape` `op` keeps its operand's registers (else its data goes
    /// through shared memory).
    pub(super) fn reshape_in_registers(&self, op: &Op) -> bool {
        let rt = self.k.ty(op.results[0]);
        let src = op.operands[0];
        if !rt.is_scalar() && self.plan.layouts.contains_key(&op.results[0]) {
            // The plan gave the result a layout: the operand is converted to the same layout on
            // its shape first (`GpuPlan::wanted`), so the flat index stays in the same registers.
            return true;
        }
        if !rt.is_scalar() && self.lin(op.results[0]) == self.lin(src).with_shape(&rt.shape) {
            // The GPU plan kept the flat index in the same registers.
            return true;
        }
        let (a, b) = (self.layout(self.k.ty(src)), self.layout(rt));
        (a.numel, a.vec, a.chunks) == (b.numel, b.vec, b.chunks) || rt.is_scalar() && self.k.ty(src).numel() == 1
    }

    pub(super) fn reshape(&mut self, op: &Op) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let src = op.operands[0];
        if !rt.is_scalar()
            && (self.plan.layouts.contains_key(&op.results[0])
                || self.lin(op.results[0]) == self.lin(src).with_shape(&rt.shape))
        {
            let r = self.get(src);
            self.set(op.results[0], r);
            return Ok(());
        }
        let b = self.layout(&rt);
        let r = if self.reshape_in_registers(op) {
            match self.get(src) {
                Repr::Tile(t) if rt.is_scalar() => Repr::Scalar(t[0]),
                Repr::Scalar(s) if !rt.is_scalar() => Repr::Tile(vec![s; b.per_thread()]),
                r => r,
            }
        } else {
            let rshape = rt.shape.clone();
            self.via_smem(&[src], &rt, &|l, idx| l.linear(&rshape, idx))?
        };
        self.set(op.results[0], r);
        Ok(())
    }

    pub(super) fn permute(&mut self, op: &Op, p: &[usize]) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let src = op.operands[0];
        let sshape = self.k.ty(src).shape.clone();
        let r = self.via_smem(&[src], &rt, &|l, idx| {
            let mut sidx = vec![l.i32c(0); sshape.len()];
            for (r_axis, &s_axis) in p.iter().enumerate() {
                sidx[s_axis] = idx[r_axis];
            }
            l.linear(&sshape, &sidx)
        })?;
        self.set(op.results[0], r);
        Ok(())
    }

    pub(super) fn join(&mut self, op: &Op) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let (a, b) = (op.operands[0], op.operands[1]);
        let n = self.k.ty(a).numel() as u64;
        let ashape = self.k.ty(a).shape.clone();
        // b sits right after a: element k of b is shared element n + k.
        let r = self.via_smem(&[a, b], &rt, &|l, idx| {
            let (last, rest) = idx.split_last().unwrap();
            let base = l.linear(&ashape, rest)?;
            let off = llvm(l.b.build_int_mul(*last, l.i32c(n), ""))?;
            llvm(l.b.build_int_add(base, off, ""))
        })?;
        self.set(op.results[0], r);
        Ok(())
    }

    pub(super) fn split(&mut self, op: &Op) -> R<()> {
        let rt = self.k.ty(op.results[0]).clone();
        let src = op.operands[0];
        let sshape = self.k.ty(src).shape.clone();
        for (which, res) in op.results.iter().enumerate() {
            let sshape = sshape.clone();
            let r = self.via_smem(&[src], &rt, &|l, idx| {
                let mut full = idx.to_vec();
                full.push(l.i32c(which as u64));
                l.linear(&sshape, &full)
            })?;
            self.set(*res, r);
        }
        Ok(())
    }
}

impl<'c> Lowering<'c, '_> {
    /// Tile `v` (made of indices and scalars, see `GpuPlan::recompute_ops`) computed at each
    /// index layout `lay` gives this thread.
    pub(super) fn recompute_in(&mut self, v: ValueId, lay: &tile_gir::linear::LinearLayout) -> R<Repr<'c>> {
        let shape = self.k.ty(v).shape.clone();
        let part = self.thread_part_here(lay)?;
        let strides = crate::layout::strides(&shape);
        // The index along axis d of an element is ((part ^ reg) >> s) & (n - 1), which is
        // ((part >> s) & (n - 1)) ^ ((reg >> s) & (n - 1)): the thread's index along each axis is
        // computed once, and each register's is that index combined with a constant, an `or`
        // where the constant has no bit the thread's index may have (most layouts), and the
        // index itself or the constant where one of them is zero. Equal indices and equal
        // subexpressions are built once (`Remat`): a row's mask is not rebuilt for each of
        // the row's elements. LLVM would find all of this too, at a cost in compile time.
        let thread_bits = lay.lane.iter().chain(&lay.warp).fold(0, |m, b| m | b);
        let field = |x: usize, d: usize| (x >> strides[d].trailing_zeros()) & (shape[d] - 1);
        let thread_idx: Vec<Option<IntValue<'c>>> = (0..shape.len())
            .map(|d| {
                if field(thread_bits, d) == 0 {
                    return Ok(None);
                }
                let sh =
                    llvm(
                        self.b
                            .build_right_shift(part, self.i32c(strides[d].trailing_zeros() as u64), false, ""),
                    )?;
                Ok(Some(llvm(self.b.build_and(sh, self.i32c(shape[d] as u64 - 1), ""))?))
            })
            .collect::<R<_>>()?;
        let mut memo = Remat::default();
        let mut out = Vec::with_capacity(lay.regs());
        for r in 0..lay.regs() {
            let reg = lay.reg_part(r);
            let idx: Vec<IntValue> = (0..shape.len())
                .map(|d| {
                    let c = field(reg, d);
                    let t = thread_idx[d];
                    if let Some(x) = memo.index.get(&(d, c)) {
                        return Ok(*x);
                    }
                    let x = match t {
                        None => self.i32c(c as u64),
                        Some(t) if c == 0 => t,
                        Some(t) if field(thread_bits, d) & c == 0 => llvm(self.b.build_or(t, self.i32c(c as u64), ""))?,
                        Some(t) => llvm(self.b.build_xor(t, self.i32c(c as u64), ""))?,
                    };
                    memo.index.insert((d, c), x);
                    Ok(x)
                })
                .collect::<R<_>>()?;
            out.push(self.remat(v, &idx, &mut memo)?);
        }
        Ok(Repr::Tile(out))
    }

    /// Tile `v` (see `GpuPlan::recompute_ops`) at multi-index `idx`, each (value, index) built
    /// once per `memo`.
    fn remat(
        &mut self,
        v: ValueId,
        idx: &[IntValue<'c>],
        memo: &mut Remat<'c>,
    ) -> R<inkwell::values::BasicValueEnum<'c>> {
        if self.k.ty(v).is_scalar() || self.plan.is_splat(self.k, v) {
            return Ok(self.elems(v)[0]);
        }
        let key = (v, idx.to_vec());
        if let Some(x) = memo.values.get(&key) {
            return Ok(*x);
        }
        let op = self.plan.def(v).expect("recomputable values have defining ops").clone();
        let x = match &op.kind {
            OpKind::Arange { start, .. } => llvm(self.b.build_int_add(idx[0], self.i32c(*start as u64), ""))?.into(),
            OpKind::ExpandDims(axis) => {
                let mut i = idx.to_vec();
                i.remove(*axis);
                self.remat(op.operands[0], &i, memo)?
            }
            OpKind::Broadcast => {
                let sshape = self.k.ty(op.operands[0]).shape.clone();
                let off = idx.len() - sshape.len();
                let picked: Vec<IntValue> = (0..sshape.len())
                    .map(|d| if sshape[d] == 1 { self.i32c(0) } else { idx[d + off] })
                    .collect();
                self.remat(op.operands[0], &picked, memo)?
            }
            _ => {
                let args = op
                    .operands
                    .iter()
                    .map(|o| self.remat(*o, idx, memo))
                    .collect::<R<Vec<_>>>()?;
                self.element(&op, &args)?
            }
        };
        memo.values.insert(key, x);
        Ok(x)
    }
}

/// What one [`Lowering::recompute_in`] has built: each register's index along an axis (keyed by
/// the axis and the register's constant part), and each recomputed value at each multi-index.
#[derive(Default)]
struct Remat<'c> {
    index: std::collections::HashMap<(usize, usize), IntValue<'c>>,
    values: std::collections::HashMap<(ValueId, Vec<IntValue<'c>>), inkwell::values::BasicValueEnum<'c>>,
}
