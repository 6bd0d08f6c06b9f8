//! Split-K over a thread-block cluster. A kernel whose grid has too few programs to keep every
//! SM streaming (a decode-shaped GEMM: one row block, a few dozen column blocks, a long K loop)
//! runs each program as `S` programs of a cluster, each walking one `S`-th of the loop's
//! iterations; their `dot` accumulators are summed into the cluster's first program (rank 0)
//! through distributed shared memory, in rank order, and rank 0 alone runs the rest of the
//! kernel. The configuration chooses `S` (`split`, 1: none); [`split`] rewrites the tile IR:
//!
//! - `program_id(0)` becomes `program_id(0) / S` and `num_programs(0)` `num_programs(0) / S`
//!   (the launch multiplies the grid's first extent by `S`), the rank is `program_id(0) % S`;
//! - the loop's `T = cdiv(end - start, step)` iterations are cut into chunks of `cdiv(T, S)`:
//!   rank `r` runs iterations `r * chunk .. min(T, (r + 1) * chunk)`, and a value the loop
//!   advances by a fixed step (a pointer moved by `BK` each iteration) starts `r * chunk`
//!   steps ahead (offsets in 64 bits);
//! - after the loop each accumulator is summed (`split_sum`), and the ops after the loop run
//!   under `if rank == 0`.
//!
//! [`splittable`] says whether a kernel has that shape: not already in clusters, one loop, at
//! the top of its body, stepping by a positive constant, carrying only f32 `dot` accumulators
//! that start at zero and are read by nothing but their `dot`, and values advanced by a step
//! the loop does not change (not read after the loop); nothing before the loop or in it writes
//! memory, prints or asserts. The sums add each rank's partial sums in rank order: the order
//! depends on `S`, not on the run.

use std::collections::{HashMap, HashSet};

use tile_lang::ir::*;

/// The most programs a split puts in one cluster (the portable cluster size).
pub const MAX_SPLIT: u32 = 8;

/// The loop a split cuts: its index in the kernel's body, the carried values that are `dot`
/// accumulators, and those advanced by a fixed step (with the step).
struct Site {
    at: usize,
    accs: Vec<usize>,
    steps: Vec<(usize, ValueId)>,
}

/// Whether the ops write memory, print or assert (what a program other than rank 0 must not
/// do, or do again).
fn writes(op: &Op) -> bool {
    let mut w = false;
    let mut f = |o: &Op| {
        w |= matches!(
            o.kind,
            OpKind::Store { .. }
                | OpKind::StoreBlock { .. }
                | OpKind::Atomic { .. }
                | OpKind::AtomicCas { .. }
                | OpKind::Print(_)
                | OpKind::Assert(_)
        )
    };
    f(op);
    for r in &op.regions {
        for o in &r.ops {
            w |= writes(o);
        }
    }
    w
}

/// Ops that compute a value from their operands alone, cheaply: what may be copied out of the
/// loop to advance a carried value before it.
fn hoistable(kind: &OpKind) -> bool {
    use OpKind::*;
    matches!(
        kind,
        Const(_)
            | ProgramId(_)
            | NumPrograms(_)
            | Arange { .. }
            | Broadcast
            | ExpandDims(_)
            | Reshape
            | Unary(_)
            | Binary(_)
            | Cmp(_)
            | Select
            | Cast(_)
            | PtrAdd
            | MultipleOf(_)
            | MaxContiguous(_)
    )
}

/// Whether `v` has the same value in every iteration of the loop whose body defines `defs`.
fn invariant(v: ValueId, defs: &HashMap<ValueId, &Op>, args: &HashSet<ValueId>) -> bool {
    if args.contains(&v) {
        return false;
    }
    match defs.get(&v) {
        None => true,
        Some(op) => {
            op.regions.is_empty() && hoistable(&op.kind) && op.operands.iter().all(|o| invariant(*o, defs, args))
        }
    }
}

fn is_zero(k: &Kernel, v: ValueId, top: &HashMap<ValueId, &Op>) -> bool {
    match top.get(&v).map(|op| (&op.kind, op)) {
        Some((OpKind::Const(ConstValue::Float(x)), _)) => *x == 0.0,
        Some((OpKind::Const(ConstValue::Int(x)), _)) => *x == 0,
        Some((OpKind::Broadcast, op)) => is_zero(k, op.operands[0], top),
        _ => false,
    }
}

/// The loop at the top of `k`'s body (the first, if several): the one a split cuts.
pub fn top_loop(k: &Kernel) -> Option<&Op> {
    k.body.ops.iter().find(|o| matches!(o.kind, OpKind::For { .. }))
}

fn site(k: &Kernel) -> Result<Site, String> {
    if k.cluster > 1 {
        return Err(format!("the kernel already runs in clusters of {}", k.cluster));
    }
    let mut loops = 0;
    let mut exchanges = false;
    k.walk(&mut |op| match op.kind {
        OpKind::For { .. } => loops += 1,
        OpKind::ClusterReduce(_) | OpKind::ClusterReduceWith | OpKind::SplitSum => exchanges = true,
        _ => {}
    });
    if exchanges {
        return Err("the kernel has cluster reductions".into());
    }
    let l = top_loop(k).ok_or("no loop at the top of the kernel's body")?;
    let at = k
        .body
        .ops
        .iter()
        .position(|o| std::ptr::eq(o, l))
        .expect("the loop is in the body");
    if loops != 1 {
        return Err(format!(
            "the kernel has {loops} loops; only a kernel with one loop is split"
        ));
    }
    if let Some(op) = k.body.ops[..at].iter().find(|o| writes(o)) {
        return Err(format!(
            "the kernel writes memory, prints or asserts before its loop ({}:{})",
            op.loc.line, op.loc.col
        ));
    }
    let l = &k.body.ops[at];
    let body = &l.regions[0];
    if let Some(op) = body.ops.iter().find(|o| writes(o)) {
        return Err(format!(
            "the loop writes memory, prints or asserts ({}:{})",
            op.loc.line, op.loc.col
        ));
    }
    let top: HashMap<ValueId, &Op> = k.body.ops[..at]
        .iter()
        .flat_map(|o| o.results.iter().map(move |r| (*r, o)))
        .collect();
    match top.get(&l.operands[2]).map(|o| &o.kind) {
        Some(OpKind::Const(ConstValue::Int(s))) if *s > 0 => {}
        _ => return Err("the loop's step is not a positive constant".into()),
    }
    let defs: HashMap<ValueId, &Op> = body
        .ops
        .iter()
        .flat_map(|o| o.results.iter().map(move |r| (*r, o)))
        .collect();
    let args: HashSet<ValueId> = body.args.iter().copied().collect();
    let mut reads: HashMap<ValueId, usize> = HashMap::new();
    for op in &body.ops {
        op.each_read(&mut |_, v| *reads.entry(v).or_default() += 1);
    }
    let mut after: HashSet<ValueId> = HashSet::new();
    for op in &k.body.ops[at + 1..] {
        op.each_read(&mut |_, v| {
            after.insert(v);
        });
    }
    let y = body.yield_op().ok_or("the loop's body has no yield")?;
    let mut site = Site {
        at,
        accs: Vec::new(),
        steps: Vec::new(),
    };
    for (j, next) in y.operands.iter().enumerate() {
        let arg = body.args[1 + j];
        let (init, res) = (l.operands[3 + j], l.results[j]);
        let ty = k.ty(arg);
        match defs.get(next).map(|o| (&o.kind, *o)) {
            Some((OpKind::Dot(_), d))
                if d.operands[2] == arg
                    && reads.get(&arg) == Some(&1)
                    && ty.dtype() == Some(DType::F32)
                    && !ty.is_scalar()
                    && is_zero(k, init, &top) =>
            {
                site.accs.push(j)
            }
            Some((OpKind::PtrAdd | OpKind::Binary(BinaryOp::Add), d))
                if d.operands[0] == arg && invariant(d.operands[1], &defs, &args) && !after.contains(&res) =>
            {
                site.steps.push((j, d.operands[1]))
            }
            _ => {
                return Err(format!(
                    "the loop carries a value (the {} of {}) that is neither a `dot` accumulator \
                     (f32, starting at zero) nor advanced by a fixed step and unused after the loop",
                    ordinal(j + 1),
                    body.args.len() - 1
                ));
            }
        }
    }
    if site.accs.is_empty() {
        return Err("the loop accumulates no `dot`".into());
    }
    Ok(site)
}

fn ordinal(n: usize) -> String {
    match n {
        1 => "1st".into(),
        2 => "2nd".into(),
        3 => "3rd".into(),
        _ => format!("{n}th"),
    }
}

/// Whether `k` has the shape [`split`] cuts, and why not.
pub fn splittable(k: &Kernel) -> Result<(), String> {
    site(k).map(|_| ())
}

/// What the rewrite builds beyond [`OpBuilder`]'s single ops.
trait Emit {
    fn int(&mut self, d: DType, x: i64) -> ValueId;
    fn bin(&mut self, b: BinaryOp, x: ValueId, y: ValueId) -> ValueId;
    fn to(&mut self, x: ValueId, d: DType) -> ValueId;
    fn hoist(&mut self, v: ValueId, defs: &HashMap<ValueId, &Op>, copied: &mut HashMap<ValueId, ValueId>) -> ValueId;
}

impl Emit for OpBuilder<'_> {
    fn int(&mut self, d: DType, x: i64) -> ValueId {
        self.op(OpKind::Const(ConstValue::Int(x)), vec![], Type::scalar(d))
    }

    fn bin(&mut self, b: BinaryOp, x: ValueId, y: ValueId) -> ValueId {
        let ty = self.ty(x).clone();
        self.op(OpKind::Binary(b), vec![x, y], ty)
    }

    /// `x` as a `d` scalar (a cast where its dtype differs).
    fn to(&mut self, x: ValueId, d: DType) -> ValueId {
        if self.values[x.0 as usize].dtype() == Some(d) {
            x
        } else {
            self.op(OpKind::Cast(Rounding::Rne), vec![x], Type::scalar(d))
        }
    }

    /// A copy before the loop of the loop-invariant computation of `v` (`defs`: the loop
    /// body's definitions; `copied`: what was copied already).
    fn hoist(&mut self, v: ValueId, defs: &HashMap<ValueId, &Op>, copied: &mut HashMap<ValueId, ValueId>) -> ValueId {
        if let Some(c) = copied.get(&v) {
            return *c;
        }
        let Some(op) = defs.get(&v) else {
            return v;
        };
        let operands = op.operands.iter().map(|o| self.hoist(*o, defs, copied)).collect();
        let c = self.op(op.kind.clone(), operands, self.values[v.0 as usize].clone());
        copied.insert(v, c);
        c
    }
}

/// Replaces every read of a key of `map` in `ops` (nested regions included) by its value.
fn replace_reads(ops: &mut [Op], map: &HashMap<ValueId, ValueId>) {
    for op in ops {
        for o in &mut op.operands {
            if let Some(n) = map.get(o) {
                *o = *n;
            }
        }
        for r in &mut op.regions {
            replace_reads(&mut r.ops, map);
        }
    }
}

/// Turns every `program_id(0)` into `pid / s` and `num_programs(0)` into `np / s`.
fn divide_axis0(ops: &mut [Op], pid: ValueId, np: ValueId, s: ValueId) {
    for op in ops {
        match op.kind {
            OpKind::ProgramId(0) => {
                op.kind = OpKind::Binary(BinaryOp::Div);
                op.operands = vec![pid, s];
            }
            OpKind::NumPrograms(0) => {
                op.kind = OpKind::Binary(BinaryOp::Div);
                op.operands = vec![np, s];
            }
            _ => {}
        }
        for r in &mut op.regions {
            divide_axis0(&mut r.ops, pid, np, s);
        }
    }
}

/// Whether `s` is a split the compiler makes: 1 (none), or 2, 4 or 8 programs. The JIT's disk
/// cache, the tuner's entries and `tilec --split` accept exactly these.
pub fn is_valid(s: u32) -> bool {
    s == 1 || ((2..=MAX_SPLIT).contains(&s) && s.is_power_of_two())
}

/// `k` with its loop's iterations split over clusters of `s` programs (see the module's doc).
/// The launch runs `s` times as many programs along grid axis 0.
pub fn split(k: &Kernel, s: u32) -> Result<Kernel, String> {
    if s == 1 || !is_valid(s) {
        return Err(format!("a split is 2, 4 or 8 programs, not {s}"));
    }
    let site = site(k)?;
    let mut out = k.clone();
    let mut ops = std::mem::take(&mut out.body.ops);
    let after = ops.split_off(site.at + 1);
    let mut l = ops.pop().expect("the loop is at `site.at`");
    let loc = l.loc;
    // Every thread of every program meets at the sum: no producer warpgroup runs a loop of
    // its own.
    if let OpKind::For { warp_specialize, .. } = &mut l.kind {
        if *warp_specialize == Some(true) {
            return Err(
                "the loop asks for a producer warpgroup (`#[warp_specialize]`), which a split loop cannot have".into(),
            );
        }
        *warp_specialize = Some(false);
    }
    let i32t = DType::I32;
    let mut emitted = Vec::new();
    let mut e = OpBuilder {
        values: &mut out.values,
        ops: &mut emitted,
        loc,
    };
    // The programs' own ids along axis 0, the split and the rank.
    let pid = e.op(OpKind::ProgramId(0), vec![], Type::scalar(i32t));
    let np = e.op(OpKind::NumPrograms(0), vec![], Type::scalar(i32t));
    let sv = e.int(i32t, s as i64);
    let rank = e.bin(BinaryOp::Rem, pid, sv);
    let prologue = std::mem::take(e.ops);
    divide_axis0(&mut ops, pid, np, sv);
    for r in &mut l.regions {
        divide_axis0(&mut r.ops, pid, np, sv);
    }
    let mut after = after;
    divide_axis0(&mut after, pid, np, sv);
    // This rank's iterations: `lo .. hi` of `trips`, as loop bounds.
    let (start, end, step) = (l.operands[0], l.operands[1], l.operands[2]);
    let d = e.values[start.0 as usize].dtype().unwrap_or(i32t);
    let diff = e.bin(BinaryOp::Sub, end, start);
    let step_less = {
        let one = e.int(d, 1);
        e.bin(BinaryOp::Sub, step, one)
    };
    let t = e.bin(BinaryOp::Add, diff, step_less);
    let t = e.bin(BinaryOp::Div, t, step);
    let zero = e.int(d, 0);
    let trips = e.bin(BinaryOp::Max, t, zero);
    let sd = e.int(d, s as i64 - 1);
    let chunk = e.bin(BinaryOp::Add, trips, sd);
    let sv_d = e.int(d, s as i64);
    let chunk = e.bin(BinaryOp::Div, chunk, sv_d);
    let rank_d = e.to(rank, d);
    let lo = e.bin(BinaryOp::Mul, rank_d, chunk);
    let next = e.bin(BinaryOp::Add, lo, chunk);
    let hi = e.bin(BinaryOp::Min, trips, next);
    let hi = e.bin(BinaryOp::Max, lo, hi);
    let lo_at = e.bin(BinaryOp::Mul, lo, step);
    let hi_at = e.bin(BinaryOp::Mul, hi, step);
    l.operands[0] = e.bin(BinaryOp::Add, start, lo_at);
    l.operands[1] = e.bin(BinaryOp::Add, start, hi_at);
    // Values advanced by a fixed step start `lo` steps ahead.
    let body = &l.regions[0];
    let defs: HashMap<ValueId, &Op> = body
        .ops
        .iter()
        .flat_map(|o| o.results.iter().map(move |r| (*r, o)))
        .collect();
    let mut copied = HashMap::new();
    let mut inits = Vec::new();
    for (j, inc) in &site.steps {
        let init = l.operands[3 + j];
        let init_ty = e.values[init.0 as usize].clone();
        // A step that is a scalar broadcast to the tile is advanced as that scalar.
        let (inc, tile) = match defs.get(inc) {
            Some(op) if matches!(op.kind, OpKind::Broadcast) && e.values[op.operands[0].0 as usize].is_scalar() => {
                (op.operands[0], true)
            }
            _ => (*inc, false),
        };
        let inc = e.hoist(inc, &defs, &mut copied);
        let inc_ty = e.values[inc.0 as usize].clone();
        let shift = if init_ty.elem.is_ptr() {
            // Pointer offsets in 64 bits: `lo` steps may pass 2^31 elements where one does not.
            let lo64 = e.to(lo, DType::I64);
            let inc64 = if inc_ty.dtype() == Some(DType::I64) {
                inc
            } else {
                e.op(OpKind::Cast(Rounding::Rne), vec![inc], inc_ty.with_dtype(DType::I64))
            };
            let lo64 = if inc_ty.is_scalar() {
                lo64
            } else {
                e.op(OpKind::Broadcast, vec![lo64], inc_ty.with_dtype(DType::I64))
            };
            e.bin(BinaryOp::Mul, lo64, inc64)
        } else {
            let di = inc_ty.dtype().unwrap_or(i32t);
            let lo_i = e.to(lo, di);
            let lo_i = if inc_ty.is_scalar() {
                lo_i
            } else {
                e.op(OpKind::Broadcast, vec![lo_i], inc_ty.clone())
            };
            e.bin(BinaryOp::Mul, lo_i, inc)
        };
        let shift_ty = e.values[shift.0 as usize].clone();
        let shift = if tile && shift_ty.shape != init_ty.shape {
            e.op(
                OpKind::Broadcast,
                vec![shift],
                shift_ty.with_shape(init_ty.shape.clone()),
            )
        } else {
            shift
        };
        let moved = match init_ty.elem.is_ptr() {
            true => e.op(OpKind::PtrAdd, vec![init, shift], init_ty),
            false => e.bin(BinaryOp::Add, init, shift),
        };
        inits.push((3 + j, moved));
    }
    for (i, v) in inits {
        l.operands[i] = v;
    }
    let bounds = std::mem::take(e.ops);
    // The accumulators summed into rank 0, which alone runs the rest.
    let mut sums = HashMap::new();
    for j in &site.accs {
        let r = l.results[*j];
        let ty = e.values[r.0 as usize].clone();
        sums.insert(r, e.op(OpKind::SplitSum, vec![r], ty));
    }
    let mut after = after;
    replace_reads(&mut after, &sums);
    let zero = e.int(i32t, 0);
    let first = e.op(OpKind::Cmp(CmpOp::Eq), vec![rank, zero], Type::scalar(DType::Bool));
    let yield_none = Op {
        kind: OpKind::Yield,
        operands: vec![],
        results: vec![],
        regions: vec![],
        loc,
    };
    after.push(yield_none.clone());
    let guarded = Op {
        kind: OpKind::If,
        operands: vec![first],
        results: vec![],
        regions: vec![
            Region {
                args: vec![],
                ops: after,
            },
            Region {
                args: vec![],
                ops: vec![yield_none],
            },
        ],
        loc,
    };
    let tail = std::mem::take(e.ops);
    let mut body = prologue;
    body.extend(ops);
    body.extend(bounds);
    body.push(l);
    body.extend(tail);
    body.push(guarded);
    out.body.ops = body;
    out.cluster = s;
    Ok(out)
}

/// Whether `k` is a split kernel (it has a `split_sum`).
pub fn is_split(k: &Kernel) -> bool {
    let mut found = false;
    k.walk(&mut |op| found |= matches!(op.kind, OpKind::SplitSum));
    found
}

/// Shared memory the split sums of `k` take in rank 0: a slot per element of each summed tile
/// for each other program of the cluster (0 for a kernel without them).
pub fn slot_bytes(k: &Kernel) -> u32 {
    let mut elems = 0usize;
    k.walk(&mut |op| {
        if let OpKind::SplitSum = op.kind {
            elems += k.ty(op.operands[0]).numel();
        }
    });
    (elems * 4 * k.cluster.saturating_sub(1) as usize) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(src: &str, consts: &[(&str, i64)]) -> Kernel {
        let file = tile_lang::syntax::parse(src).expect("parses");
        let cfg: Vec<(String, ConstValue)> = consts
            .iter()
            .map(|(n, v)| (n.to_string(), ConstValue::Int(*v)))
            .collect();
        tile_lang::check::check_kernel(src, &file, "k", &cfg).expect("checks")
    }

    const GEMV: &str = r#"
kernel k<const BN: i32, const BK: i32>(x: *f32, w: *f32, y: *mut f32, N: i32, K: i32) {
    let rn = program_id(0) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut px = x + rk[None, :] + zeros([16, BK], i32);
    let mut pw = w + rk[:, None] * N + rn[None, :];
    let mut acc = zeros([16, BN], f32);
    for k in 0..cdiv(K, BK) {
        let left = K - k * BK;
        let tx = load(px, rk[None, :] < left, other: 0.0);
        let tw = load(pw, rk[:, None] < left && rn[None, :] < N, other: 0.0);
        acc = dot(tx, tw, acc);
        px += BK;
        pw += BK * N;
    }
    store(y + arange(0, 16)[:, None] * N + rn[None, :], acc, rn[None, :] < N && arange(0, 16)[:, None] < 1);
}
"#;

    #[test]
    fn a_split_kernel_verifies_and_runs_in_clusters() {
        let k = checked(GEMV, &[("BN", 16), ("BK", 16)]);
        splittable(&k).expect("splittable");
        for s in [2, 4, 8] {
            let sk = split(&k, s).expect("splits");
            tile_lang::ir::verify(&sk).unwrap_or_else(|e| panic!("{e}\n{sk}"));
            assert_eq!(sk.cluster, s);
            assert_eq!(slot_bytes(&sk), 16 * 16 * 4 * (s - 1));
        }
    }

    /// The split kernel, interpreted with its clusters, computes what the kernel computes (to
    /// f32 rounding: the partial sums add in another order), for K that splits evenly, unevenly
    /// and into fewer iterations than programs.
    #[test]
    fn a_split_kernel_computes_what_the_kernel_computes() {
        use tile_lang::interp::{self, Arg, Buffer, Scalar};
        let k = checked(GEMV, &[("BN", 16), ("BK", 16)]);
        for (n, kk) in [(40, 128), (32, 72), (16, 16)] {
            let x: Vec<f64> = (0..kk).map(|i| ((i * 7 % 11) as f64 - 5.0) / 8.0).collect();
            let w: Vec<f64> = (0..kk * n).map(|i| ((i * 13 % 17) as f64 - 8.0) / 16.0).collect();
            let run = |k: &Kernel, programs: u32| {
                let mut bufs = vec![
                    Buffer::from_f64("x", DType::F32, &x),
                    Buffer::from_f64("w", DType::F32, &w),
                    Buffer::from_f64("y", DType::F32, &vec![0.0; n as usize]),
                ];
                let args = [
                    Arg::Buffer(0),
                    Arg::Buffer(1),
                    Arg::Buffer(2),
                    Arg::Scalar(Scalar::I(n)),
                    Arg::Scalar(Scalar::I(kk)),
                ];
                interp::run(k, [programs, 1, 1], &args, &mut bufs).unwrap_or_else(|e| panic!("{e}\n{k}"));
                bufs[2].to_f64()
            };
            let programs = (n as u32).div_ceil(16);
            let want = run(&k, programs);
            for s in [2, 4, 8] {
                let got = run(&split(&k, s).unwrap(), programs * s);
                for (i, (a, b)) in want.iter().zip(&got).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5 * a.abs().max(1.0),
                        "N={n} K={kk} split {s}: y[{i}] = {b}, want {a}"
                    );
                }
            }
        }
    }

    #[test]
    fn what_is_not_split_says_why() {
        // Why the kernel with `from` replaced by `to` is not split.
        let refused = |from: &str, to: &str| {
            splittable(&checked(&GEMV.replace(from, to), &[("BN", 16), ("BK", 16)])).unwrap_err()
        };
        assert_eq!(
            refused("    store(", "    for i in 0..2 { acc = acc + 1.0; }\n    store("),
            "the kernel has 2 loops; only a kernel with one loop is split"
        );
        let stores = refused("        px += BK;", "        px += BK;\n        store(y, 1.0);");
        assert!(stores.starts_with("the loop writes memory"), "{stores}");
        let scaled = refused("acc = dot(tx, tw, acc);", "acc = dot(tx, tw, acc) * 0.5;");
        assert!(scaled.contains("neither a `dot` accumulator"), "{scaled}");
    }
}
