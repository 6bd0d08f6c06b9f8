//! Thread-block clusters (`#[cluster(N)]`): where the programs of a cluster exchange the values
//! of their cluster reductions (`cluster_sum`, ..) in distributed shared memory.
//!
//! One static shared array per kernel (`cluster_slots`, outside the dynamic window, so that
//! nothing else ever reuses it) holds, for each cluster reduction of the kernel in program
//! order, two rounds: an mbarrier per round (8 bytes), then each round's `N` slots of 8 bytes
//! per value the reduction combines (`cluster_reduce` of a tuple combines several).
//! Successive executions of one reduction alternate between the rounds. Each program writes its
//! value into its own slot in every program of the cluster and arrives on that program's
//! mbarrier of the round (so each barrier expects `N` arrivals); then it waits on its own
//! barrier and reads the `N` slots in rank order. A round's slots are written again two
//! executions later, and no program can get there before every program has read them: it would
//! need every program's value of the execution in between, which each writes only after a
//! barrier of its block that follows its reads. A reduction outside every loop runs once, so
//! its rounds are never reused and it needs no such barrier ([`ClusterSlots::in_loop`]).
//!
//! Before the first write into a peer, the cluster meets (`barrier.cluster`), so that the peer
//! has started and initialised its barriers: at entry, once each program's barriers are
//! initialised. (Waiting for that meeting at the first reduction instead, so that the first
//! loads overlap it, makes ptxas spill 8 bytes a thread where the kernel has a second meeting:
//! layernorm_cluster's f32 row on 16 warps.) The cluster meets again before the programs exit, so that none ends while a
//! peer may still write into its shared memory (every such write is followed by an arrive on
//! one of its barriers, which it waits for before passing its last reduction, but that order is
//! not one compute-sanitizer's racecheck follows): each program arrives right after its last
//! reduction when that one is at the top of the body ([`ClusterSlots::last_at_top`]), else at
//! the end, and waits at the end, so that a program rarely waits there.

use tile_lang::ir::{Kernel, OpKind, Region, ValueId};

/// Bytes of one slot (any 32- or 64-bit scalar).
pub const SLOT_BYTES: u32 = 8;
/// Bytes of one mbarrier.
pub const BARRIER_BYTES: u32 = 8;

/// The layout of a cluster kernel's exchange array.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSlots {
    /// Programs per cluster.
    pub size: u32,
    /// The (first) result of each cluster reduction, in program order (its index is its site).
    pub sites: Vec<ValueId>,
    /// How many values each site combines.
    pub widths: Vec<u32>,
    /// Whether each site is inside a loop (runs more than once).
    pub in_loop: Vec<bool>,
    /// Whether the last site sits at the top of the kernel's body (in no loop or branch), so
    /// that every program passes it once: the exit meeting can begin right after it.
    pub last_at_top: bool,
}

impl ClusterSlots {
    /// The exchange array of `k`, when it runs in clusters and has cluster reductions.
    pub fn of(k: &Kernel) -> Option<ClusterSlots> {
        // (result, values, inside a loop, inside any region)
        fn walk(r: &Region, in_loop: bool, nested: bool, out: &mut Vec<(ValueId, u32, bool, bool)>) {
            for op in &r.ops {
                if let OpKind::ClusterReduce(_) | OpKind::ClusterReduceWith = op.kind {
                    out.push((op.results[0], op.results.len() as u32, in_loop, nested));
                }
                let inner = in_loop || matches!(op.kind, OpKind::For { .. });
                for sub in &op.regions {
                    walk(sub, inner, true, out);
                }
            }
        }
        let mut found = Vec::new();
        walk(&k.body, false, false, &mut found);
        (k.cluster > 1 && !found.is_empty()).then(|| ClusterSlots {
            size: k.cluster,
            sites: found.iter().map(|s| s.0).collect(),
            widths: found.iter().map(|s| s.1).collect(),
            in_loop: found.iter().map(|s| s.2).collect(),
            last_at_top: !found[found.len() - 1].3,
        })
    }

    fn site_bytes(&self, site: usize) -> u32 {
        2 * BARRIER_BYTES + 2 * self.round_bytes(site)
    }

    /// Bytes of one round of site `site`: every program's values.
    pub fn round_bytes(&self, site: usize) -> u32 {
        self.size * self.widths[site] * SLOT_BYTES
    }

    /// Bytes of the whole array (static shared memory, beside the dynamic window).
    pub fn bytes(&self) -> u32 {
        (0..self.sites.len()).map(|s| self.site_bytes(s)).sum()
    }

    /// The site of the reduction whose result is `v`.
    pub fn site(&self, v: ValueId) -> Option<usize> {
        self.sites.iter().position(|s| *s == v)
    }

    /// Byte offset of site `site`'s round-0 mbarrier; round 1's follows it.
    pub fn barrier(&self, site: usize) -> u32 {
        (0..site).map(|s| self.site_bytes(s)).sum()
    }

    /// Byte offset of site `site`'s round-0 slot of rank 0, value 0; value `i` of rank `r` in
    /// round `q` is at `slot(site) + q * round_bytes(site) + (r * width + i) * SLOT_BYTES`.
    pub fn slot(&self, site: usize) -> u32 {
        self.barrier(site) + 2 * BARRIER_BYTES
    }
}
