//! Cluster reductions (`cluster_sum`, `cluster_max`, ..) must be reached by every program of a
//! cluster the same number of times, or the programs that reached one would wait for the others
//! forever. This pass checks that each one sits only under control flow that is the same across
//! a cluster: `if` conditions and loop bounds computed from the kernel's scalar arguments,
//! constants, `num_programs`, `program_id(1)`, `program_id(2)` and `program_id(0) / c` where `c`
//! is a multiple of the cluster size (clusters run along grid axis 0), never from loaded data or
//! from `program_id(0)` itself.

use std::collections::HashSet;

use super::Cx;
use crate::diag::Diagnostic;
use crate::ir::{BinaryOp, ConstValue, Op, OpKind, Region, ValueId};

/// Reports every cluster reduction under control flow that may differ between the programs of
/// a cluster.
pub(super) fn check_uniform(cx: &mut Cx<'_>, body: &Region) {
    if cx.cluster_sites.is_empty() {
        return;
    }
    let mut u = Uniform {
        cluster: cx.cluster as i64,
        // The kernel's arguments are the same in every program.
        uniform: cx.param_decls.keys().copied().collect(),
        program_x: HashSet::new(),
        consts: Default::default(),
        bad: Vec::new(),
    };
    u.region(body, None);
    for (v, why) in std::mem::take(&mut u.bad) {
        let Some(&(_, span)) = cx.cluster_sites.iter().find(|(s, _)| *s == v) else {
            continue;
        };
        let help = if why == COMBINE {
            "call it outside the helper, on the reduction's result".to_string()
        } else {
            format!(
                "the programs of a cluster ({} consecutive program ids along axis 0) wait for each other here; move \
                 the call out of control flow that depends on `program_id(0)` (other than `program_id(0) / {}`) or \
                 on loaded values",
                cx.cluster, cx.cluster
            )
        };
        cx.error(
            Diagnostic::error(
                span,
                "a cluster reduction must be reached by every program of the cluster",
            )
            .label(why)
            .help(help),
        );
    }
}

const COMBINE: &str = "inside a reduction's `combine` helper, which runs once per pair of values";

struct Uniform {
    cluster: i64,
    /// Values equal in every program of a cluster.
    uniform: HashSet<ValueId>,
    /// `program_id(0)` and the values known to equal it.
    program_x: HashSet<ValueId>,
    consts: std::collections::HashMap<ValueId, i64>,
    /// Cluster reductions under control flow that may differ, and why.
    bad: Vec<(ValueId, &'static str)>,
}

impl Uniform {
    /// Walks `r`; `divergent` says why the control flow around it may differ, if it may.
    fn region(&mut self, r: &Region, divergent: Option<&'static str>) {
        for op in &r.ops {
            self.op(op, divergent);
        }
    }

    fn all_uniform(&self, vs: &[ValueId]) -> bool {
        vs.iter().all(|v| self.uniform.contains(v))
    }

    fn op(&mut self, op: &Op, divergent: Option<&'static str>) {
        match &op.kind {
            OpKind::ClusterReduce(_) | OpKind::ClusterReduceWith => {
                if let Some(why) = divergent {
                    self.bad.push((op.results[0], why));
                }
                // Every program folds the same values in the same order: the results are the
                // same in each, unless the combine helper reads something that is not (its
                // program id, memory).
                let mut same = true;
                for r in &op.regions {
                    self.uniform.extend(r.args.iter().copied());
                    self.region(r, Some(COMBINE));
                    same &= r
                        .ops
                        .last()
                        .is_some_and(|y| matches!(y.kind, OpKind::Yield) && self.all_uniform(&y.operands));
                }
                if same {
                    self.uniform.extend(op.results.iter().copied());
                }
            }
            OpKind::For { .. } => {
                let bounds = &op.operands[..3];
                let inner = if self.all_uniform(bounds) {
                    divergent
                } else {
                    Some("inside a loop whose bounds may differ between the programs of a cluster")
                };
                if let Some(i) = op.regions[0].args.first()
                    && self.all_uniform(bounds)
                {
                    self.uniform.insert(*i);
                }
                // Carried values are taken as differing (their uniformity would need a fixpoint).
                self.region(&op.regions[0], inner);
            }
            OpKind::If => {
                let inner = if self.all_uniform(&op.operands[..1]) {
                    divergent
                } else {
                    Some("inside an `if` whose condition may differ between the programs of a cluster")
                };
                for r in &op.regions {
                    self.region(r, inner);
                }
                // An `if` on a uniform condition whose branches yield uniform values is uniform.
                let yields_uniform = op.regions.iter().all(|r| {
                    r.ops
                        .last()
                        .is_some_and(|y| matches!(y.kind, OpKind::Yield) && self.all_uniform(&y.operands))
                });
                if self.all_uniform(&op.operands[..1]) && yields_uniform {
                    self.uniform.extend(op.results.iter().copied());
                }
            }
            OpKind::Const(c) => {
                if let ConstValue::Int(n) = c {
                    self.consts.insert(op.results[0], *n);
                }
                self.uniform.extend(op.results.iter().copied());
            }
            OpKind::ProgramId(0) => {
                self.program_x.insert(op.results[0]);
            }
            OpKind::ProgramId(_) | OpKind::NumPrograms(_) | OpKind::Arange { .. } => {
                self.uniform.extend(op.results.iter().copied());
            }
            OpKind::Binary(BinaryOp::Div)
                if self.program_x.contains(&op.operands[0])
                    && self
                        .consts
                        .get(&op.operands[1])
                        .is_some_and(|c| *c > 0 && c % self.cluster == 0) =>
            {
                // Program ids are not negative, so `x / c` is the same for the `c / cluster`
                // aligned clusters a block of `c` programs holds.
                self.uniform.insert(op.results[0]);
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
                if op.regions.is_empty() && self.all_uniform(&op.operands) {
                    self.uniform.extend(op.results.iter().copied());
                }
            }
        }
    }
}
