//! Cluster reductions (`cluster_sum`, `cluster_max`, ..) must be reached by every program of a
//! cluster the same number of times, or the programs that reached one would wait for the others
//! forever. This pass checks that each one sits only under control flow that is the same across
//! a cluster, as `ir::uniform::ClusterUniform` finds it: `if` conditions and loop bounds
//! computed from the kernel's scalar arguments, constants, `num_programs`, `program_id(1)`,
//! `program_id(2)` and `program_id(0) / c` where `c` is a multiple of the cluster size
//! (clusters run along grid axis 0), never from loaded data or from `program_id(0)` itself.

use super::Cx;
use crate::diag::Diagnostic;
use crate::ir::Region;
use crate::ir::uniform::{COMBINE, ClusterUniform};

/// Reports every cluster reduction under control flow that may differ between the programs of
/// a cluster.
pub(super) fn check_uniform(cx: &mut Cx<'_>, body: &Region) {
    if cx.cluster_sites.is_empty() {
        return;
    }
    let u = ClusterUniform::analyse(cx.cluster, cx.param_decls.keys().copied(), body);
    let mut bad: Vec<_> = u.divergent.into_iter().collect();
    bad.sort_by_key(|(v, _)| *v);
    for (v, why) in bad {
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
