//! Which loops the lowering unrolls: a plain row loop (no `dot`, no reduction, no nested loop,
//! not pipelined) whose body loads from global memory runs [`UNROLL`] copies of its body per
//! iteration, then a remainder loop for the iterations left. Within one iteration a copy's load
//! waits on nothing from the copies before it, so ptxas issues the loads of all copies before
//! the first is used, and each thread has several loads in flight where the loop as written
//! has one: what a row walked in chunks needs to keep DRAM busy (layernorm in chunks at 16384
//! columns: docs/gpu.md, "Loops with a trip count; plain loops unrolled").

use std::collections::HashMap;

use tile_lang::ir::{Kernel, Op, OpKind, Region, ValueId};

use crate::pipeline::LoopPipeline;

/// Copies of the body per iteration of an unrolled loop.
pub const UNROLL: u32 = 4;

/// The most ops (nested ones counted) a body may have to be unrolled.
pub const MAX_BODY_OPS: usize = 96;

/// The loops to unroll, by their body's index argument, with their copies per iteration.
pub fn plan(k: &Kernel, pipelines: &HashMap<ValueId, LoopPipeline>) -> HashMap<ValueId, u32> {
    let mut out = HashMap::new();
    k.walk(&mut |op| {
        if let OpKind::For { .. } = op.kind
            && !pipelines.contains_key(&op.regions[0].args[0])
            && unrollable(&op.regions[0])
        {
            out.insert(op.regions[0].args[0], UNROLL);
        }
    });
    out
}

/// A body with a global load at its top level, and nothing that makes copies of it costly or
/// keeps their loads apart: no tensor-core or FMA `dot`, reduction, scan or nested loop, and at
/// most [`MAX_BODY_OPS`] ops.
fn unrollable(body: &Region) -> bool {
    let loads = body.ops.iter().any(|o| matches!(o.kind, OpKind::Load { .. }));
    let mut ops = 0;
    let mut plain = true;
    fn go(r: &Region, ops: &mut usize, plain: &mut bool) {
        for o in &r.ops {
            *ops += 1;
            if !simple(o) {
                *plain = false;
            }
            for sub in &o.regions {
                go(sub, ops, plain);
            }
        }
    }
    go(body, &mut ops, &mut plain);
    loads && plain && ops <= MAX_BODY_OPS
}

fn simple(o: &Op) -> bool {
    !matches!(
        o.kind,
        OpKind::Dot(_)
            | OpKind::Reduce { .. }
            | OpKind::ArgReduce { .. }
            | OpKind::ReduceWith { .. }
            | OpKind::Scan { .. }
            | OpKind::ScanWith { .. }
            | OpKind::For { .. }
            | OpKind::LoadBlock { .. }
            | OpKind::StoreBlock { .. }
            | OpKind::Atomic { .. }
            | OpKind::AtomicCas { .. }
            | OpKind::Print(_)
            | OpKind::Assert(_)
    )
}
