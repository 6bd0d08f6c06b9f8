//! Which values are the same in every program of a thread-block cluster (`#[cluster(N)]`), and
//! which ops sit under control flow that may differ between them.
//!
//! Uniform are the kernel's scalar arguments, constants, `num_programs`, `program_id(1)`,
//! `program_id(2)`, `program_id(0) / c` (or `>> s`) where `c` (`2^s`) is a multiple of the
//! cluster size (clusters run along grid axis 0), and pure ops of uniform values; never loaded
//! data or `program_id(0)` itself. A loop's index is uniform when its bounds are; carried values
//! are taken as differing (their uniformity would need a fixpoint). An `if` on a uniform
//! condition whose branches yield uniform values has uniform results.
//!
//! The checker uses this to require that every program of a cluster reaches each cluster
//! reduction (`check::cluster`); the GPU stage uses it to find block loads that every program
//! of a cluster issues at the same coordinates, which the TMA engine then multicasts
//! (`tile_gir::pipeline::multicast`).

use std::collections::{HashMap, HashSet};

use super::{BinaryOp, ConstValue, Kernel, Op, OpKind, Region, ValueId};

/// Why an op inside a reduction's `combine` helper is not reached once per program.
pub const COMBINE: &str = "inside a reduction's `combine` helper, which runs once per pair of values";

/// The result of the analysis over one kernel body.
#[derive(Clone, Debug, Default)]
pub struct ClusterUniform {
    /// Values equal in every program of a cluster.
    pub values: HashSet<ValueId>,
    /// Ops under control flow that may differ between the programs of a cluster, and why:
    /// cluster reductions by their first result, loops by their index argument.
    pub divergent: HashMap<ValueId, &'static str>,
}

impl ClusterUniform {
    /// The analysis of kernel `k`.
    pub fn of(k: &Kernel) -> ClusterUniform {
        ClusterUniform::analyse(k.cluster, k.params.iter().map(|p| p.value), &k.body)
    }

    /// The analysis of `body` for clusters of `cluster` programs, whose arguments are `params`.
    pub fn analyse(cluster: u32, params: impl IntoIterator<Item = ValueId>, body: &Region) -> ClusterUniform {
        let mut w = Walk {
            cluster: cluster.max(1) as i64,
            out: ClusterUniform {
                values: params.into_iter().collect(),
                divergent: HashMap::new(),
            },
            program_x: HashSet::new(),
            consts: HashMap::new(),
        };
        w.region(body, None);
        w.out
    }

    pub fn is_uniform(&self, v: ValueId) -> bool {
        self.values.contains(&v)
    }

    fn all(&self, vs: &[ValueId]) -> bool {
        vs.iter().all(|v| self.values.contains(v))
    }
}

struct Walk {
    cluster: i64,
    out: ClusterUniform,
    /// `program_id(0)` and the values known to equal it.
    program_x: HashSet<ValueId>,
    consts: HashMap<ValueId, i64>,
}

impl Walk {
    /// Walks `r`; `divergent` says why the control flow around it may differ, if it may.
    fn region(&mut self, r: &Region, divergent: Option<&'static str>) {
        for op in &r.ops {
            self.op(op, divergent);
        }
    }

    fn yields_uniform(&self, r: &Region) -> bool {
        r.yield_op().is_some_and(|y| self.out.all(&y.operands))
    }

    fn op(&mut self, op: &Op, divergent: Option<&'static str>) {
        match &op.kind {
            OpKind::ClusterReduce(_) | OpKind::ClusterReduceWith => {
                if let Some(why) = divergent {
                    self.out.divergent.insert(op.results[0], why);
                }
                // Every program folds the same values in the same order: the results are the
                // same in each, unless the combine helper reads something that is not (its
                // program id, memory).
                let mut same = true;
                for r in &op.regions {
                    self.out.values.extend(r.args.iter().copied());
                    self.region(r, Some(COMBINE));
                    same &= self.yields_uniform(r);
                }
                if same {
                    self.out.values.extend(op.results.iter().copied());
                }
            }
            OpKind::For { .. } => {
                let bounds = &op.operands[..3];
                let uniform = self.out.all(bounds);
                let inner = if uniform {
                    divergent
                } else {
                    Some("inside a loop whose bounds may differ between the programs of a cluster")
                };
                if let Some(i) = op.regions[0].args.first() {
                    if let Some(why) = divergent {
                        self.out.divergent.insert(*i, why);
                    }
                    if uniform {
                        self.out.values.insert(*i);
                    }
                }
                self.region(&op.regions[0], inner);
            }
            OpKind::If => {
                let uniform = self.out.all(&op.operands[..1]);
                let inner = if uniform {
                    divergent
                } else {
                    Some("inside an `if` whose condition may differ between the programs of a cluster")
                };
                for r in &op.regions {
                    self.region(r, inner);
                }
                if uniform && op.regions.iter().all(|r| self.yields_uniform(r)) {
                    self.out.values.extend(op.results.iter().copied());
                }
            }
            OpKind::Const(c) => {
                if let ConstValue::Int(n) = c {
                    self.consts.insert(op.results[0], *n);
                }
                self.out.values.extend(op.results.iter().copied());
            }
            OpKind::ProgramId(0) => {
                self.program_x.insert(op.results[0]);
            }
            OpKind::ProgramId(_) | OpKind::NumPrograms(_) | OpKind::Arange { .. } => {
                self.out.values.extend(op.results.iter().copied());
            }
            // Program ids are not negative, so `x / c` is the same for the `c / cluster` aligned
            // clusters a block of `c` programs holds (`x >> s` alike, with `c = 2^s`).
            OpKind::Binary(BinaryOp::Div) if self.program_x.contains(&op.operands[0]) && self.divides(op, |c| c) => {
                self.out.values.insert(op.results[0]);
            }
            OpKind::Binary(BinaryOp::Shr)
                if self.program_x.contains(&op.operands[0])
                    && self.divides(op, |s| if (0..62).contains(&s) { 1 << s } else { 0 }) =>
            {
                self.out.values.insert(op.results[0]);
            }
            OpKind::Load { .. }
            | OpKind::LoadBlock { .. }
            | OpKind::Atomic { .. }
            | OpKind::AtomicCas { .. }
            | OpKind::Yield
            | OpKind::Store { .. }
            | OpKind::StoreBlock { .. }
            | OpKind::Print(_)
            | OpKind::Assert(_) => {}
            _ => {
                // A combine helper runs once per pair of elements, not once per program.
                let inner = match op.kind {
                    OpKind::ReduceWith { .. } | OpKind::ScanWith { .. } => Some(COMBINE),
                    _ => divergent,
                };
                for r in &op.regions {
                    self.region(r, inner);
                }
                if op.regions.is_empty() && self.out.all(&op.operands) {
                    self.out.values.extend(op.results.iter().copied());
                }
            }
        }
    }

    /// Whether `op`'s second operand is a constant whose `block(c)` is a positive multiple of the
    /// cluster size.
    fn divides(&self, op: &Op, block: impl Fn(i64) -> i64) -> bool {
        self.consts
            .get(&op.operands[1])
            .map(|c| block(*c))
            .is_some_and(|c| c > 0 && c % self.cluster == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The analysis of `src` (IR text).
    fn analyse(src: &str) -> ClusterUniform {
        ClusterUniform::of(&crate::ir::parse_kernel(src).unwrap())
    }

    #[test]
    fn program_ids_divided_by_whole_clusters_are_uniform() {
        let u = analyse(
            "kernel @k(n %0: i32) cluster(4) {
  %1 = program_id<0> : i32
  %2 = const<8> : i32
  %3 = div %1, %2 : i32
  %4 = const<2> : i32
  %5 = div %1, %4 : i32
  %6 = shr %1, %4 : i32
  %7 = const<1> : i32
  %8 = shr %1, %7 : i32
  %9 = add %3, %0 : i32
  %10 = program_id<1> : i32
  %11 = rem %1, %2 : i32
}
",
        );
        let is = |n: u32| u.is_uniform(ValueId(n));
        // The argument, `x / 8` and `x >> 2` (clusters of 4 fit in blocks of 8 and 4), sums of
        // those, and program_id(1).
        assert!(is(0) && is(3) && is(6) && is(9) && is(10));
        // program_id(0) itself, `x / 2` and `x >> 1` (half a cluster), and `x % 8`.
        assert!(!is(1) && !is(5) && !is(8) && !is(11));
    }

    #[test]
    fn loops_on_differing_bounds_make_what_they_hold_divergent() {
        let u = analyse(
            "kernel @k(n %0: i32, x %1: *f32) cluster(2) {
  %2 = program_id<0> : i32
  %3 = const<0> : i32
  %4 = const<1> : i32
  %5 = for %3, %0, %4, %3 : i32 {
  ^(%6: i32, %7: i32):
    %8 = for %3, %2, %4, %7 : i32 {
    ^(%9: i32, %10: i32):
      yield %10
    }
    yield %8
  }
  %11 = for %3, %2, %4, %3 : i32 {
  ^(%12: i32, %13: i32):
    %14 = for %3, %0, %4, %13 : i32 {
    ^(%15: i32, %16: i32):
      yield %16
    }
    yield %14
  }
}
",
        );
        // A loop to `n`: its index is uniform, the loop is reached alike.
        assert!(u.is_uniform(ValueId(6)) && !u.divergent.contains_key(&ValueId(6)));
        // A loop to program_id(0): neither its index nor anything inside it.
        assert!(!u.is_uniform(ValueId(12)) && !u.divergent.contains_key(&ValueId(12)));
        assert!(!u.is_uniform(ValueId(9)));
        // A loop inside that one runs as often as its enclosing loop does: divergent, though
        // its own bounds are uniform.
        assert!(u.divergent.contains_key(&ValueId(15)));
        // Carried values are taken as differing.
        assert!(!u.is_uniform(ValueId(7)) && !u.is_uniform(ValueId(5)));
    }
}
