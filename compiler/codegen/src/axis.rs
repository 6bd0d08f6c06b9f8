//! Axis analysis: what is known about the values of an integer or pointer tile along its last
//! axis, so that loads and stores of consecutive addresses become vector accesses.
//!
//! For each value: runs of `contiguity` consecutive values (v, v+1, ..) start at indices that are
//! multiples of the run length; each run starts at a value (for pointers, an address in bytes)
//! divisible by `divisibility`; aligned groups of `constancy` elements hold one value. All three
//! are powers of two. Facts come from `arange`, constants, argument specialisation and hints, and
//! flow through broadcasts, additions, products, shifts by constants, comparisons and loop-carried
//! values; anything else knows nothing.

use std::collections::HashMap;

use tile_lang::ir::*;

use crate::ArgSpec;

/// What is known about a value along its last axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisInfo {
    pub contiguity: u64,
    pub divisibility: u64,
    pub constancy: u64,
}

/// The divisibility of 0 (and the cap of every fact).
const HUGE: u64 = 1 << 30;

impl AxisInfo {
    pub const UNKNOWN: AxisInfo = AxisInfo {
        contiguity: 1,
        divisibility: 1,
        constancy: 1,
    };

    fn scalar(divisibility: u64) -> AxisInfo {
        AxisInfo {
            contiguity: 1,
            divisibility,
            constancy: HUGE,
        }
    }
}

/// The largest power of two dividing `v` (`HUGE` for 0).
fn pow2_factor(v: i64) -> u64 {
    if v == 0 {
        HUGE
    } else {
        (1u64 << v.unsigned_abs().trailing_zeros()).min(HUGE)
    }
}

/// Facts for every integer and pointer value of `k` that has any.
pub fn analyze(k: &Kernel, spec: &[ArgSpec]) -> HashMap<ValueId, AxisInfo> {
    let mut ints = HashMap::new();
    for (i, p) in k.params.iter().enumerate() {
        if spec.get(i).is_some_and(|s| s.equals_one) {
            ints.insert(p.value, 1);
        }
    }
    k.walk(&mut |op| match &op.kind {
        OpKind::Const(ConstValue::Int(v)) => {
            ints.insert(op.results[0], *v);
        }
        OpKind::Broadcast => {
            if let Some(v) = ints.get(&op.operands[0]).copied() {
                ints.insert(op.results[0], v);
            }
        }
        _ => {}
    });
    let mut a = Analysis {
        k,
        info: HashMap::new(),
        ints,
        depth: 0,
    };
    for (i, p) in k.params.iter().enumerate() {
        let s = spec.get(i).copied().unwrap_or_default();
        let div = match p.elem {
            // A pointer is at least aligned to its element.
            Elem::Ptr { pointee, .. } => s.divisibility().max(pointee.bytes() as u64),
            _ if s.equals_one => 1,
            _ => s.divisibility(),
        };
        a.info.insert(p.value, AxisInfo::scalar(div));
    }
    a.region(&k.body);
    a.info
}

struct Analysis<'a> {
    k: &'a Kernel,
    info: HashMap<ValueId, AxisInfo>,
    /// Integer constants, and tiles that broadcast one (shift amounts).
    ints: HashMap<ValueId, i64>,
    /// Loops around the op being analysed (the fixed point runs only in the outer few, so
    /// deep nests cost linear time).
    depth: usize,
}

impl Analysis<'_> {
    /// Whether `op`, a cast, maps every integer value of its operand to the same value.
    fn keeps_values(&self, op: &Op) -> bool {
        let (Some(from), Some(to)) = (self.k.ty(op.operands[0]).dtype(), self.k.ty(op.results[0]).dtype()) else {
            return false;
        };
        from.int_widens_to(to)
    }

    fn get(&self, v: ValueId) -> AxisInfo {
        match self.info.get(&v) {
            Some(i) => *i,
            None if self.k.ty(v).is_scalar() => AxisInfo::scalar(1),
            None => AxisInfo::UNKNOWN,
        }
    }

    fn region(&mut self, r: &Region) {
        for op in &r.ops {
            if let Some(i) = self.op(op) {
                let t = self.k.ty(op.results[0]);
                let last = t.shape.last().copied().unwrap_or(HUGE as usize) as u64;
                let cap = |x: u64| x.clamp(1, last.max(1));
                let i = AxisInfo {
                    contiguity: cap(i.contiguity),
                    divisibility: i.divisibility.clamp(1, HUGE),
                    constancy: cap(i.constancy),
                };
                self.info.insert(op.results[0], i);
            }
            // A loop's induction variable takes `start + k * step`: divisible by whatever divides
            // both.
            if let OpKind::For { .. } = op.kind
                && let Some(body) = op.regions.first()
            {
                let d = self
                    .get(op.operands[0])
                    .divisibility
                    .min(self.get(op.operands[2]).divisibility);
                self.info.insert(body.args[0], AxisInfo::scalar(d));
                self.carried(op, body);
                continue;
            }
            for sub in &op.regions {
                self.region(sub);
            }
        }
    }

    /// A loop's carried values: what holds for the initial values and for every next value the
    /// body yields from them (a pointer advanced by a multiple of 16 bytes keeps its runs),
    /// found by running the body until the facts stop shrinking (a few rounds; then nothing).
    fn carried(&mut self, op: &Op, body: &Region) {
        let mut facts: Vec<AxisInfo> = op.operands[3..].iter().map(|v| self.get(*v)).collect();
        if self.depth >= 3 {
            facts = vec![AxisInfo::UNKNOWN; facts.len()];
        }
        self.depth += 1;
        self.carried_rounds(op, body, facts);
        self.depth -= 1;
    }

    fn carried_rounds(&mut self, op: &Op, body: &Region, mut facts: Vec<AxisInfo>) {
        for round in 0..=4 {
            for (a, f) in body.args[1..].iter().zip(&facts) {
                self.info.insert(*a, *f);
            }
            self.region(body);
            let Some(y) = body.yield_op() else {
                return;
            };
            let next: Vec<AxisInfo> = facts
                .iter()
                .zip(&y.operands)
                .map(|(f, v)| {
                    let g = self.get(*v);
                    AxisInfo {
                        contiguity: f.contiguity.min(g.contiguity),
                        divisibility: f.divisibility.min(g.divisibility),
                        constancy: f.constancy.min(g.constancy),
                    }
                })
                .collect();
            if next == facts || self.depth > 3 {
                for (r, f) in op.results.iter().zip(&facts) {
                    self.info.insert(*r, *f);
                }
                return;
            }
            facts = if round == 3 {
                vec![AxisInfo::UNKNOWN; facts.len()]
            } else {
                next
            };
        }
    }

    fn op(&self, op: &Op) -> Option<AxisInfo> {
        let arg = |i: usize| self.get(op.operands[i]);
        let last_dim = |v: ValueId| self.k.ty(v).shape.last().copied().unwrap_or(1) as u64;
        Some(match &op.kind {
            OpKind::Const(ConstValue::Int(v)) => AxisInfo::scalar(pow2_factor(*v)),
            OpKind::Const(_) | OpKind::ProgramId(_) | OpKind::NumPrograms(_) => AxisInfo::scalar(1),
            OpKind::Arange { start, end } => AxisInfo {
                contiguity: (end - start) as u64,
                divisibility: pow2_factor(*start),
                constancy: 1,
            },
            OpKind::Broadcast => {
                let src = op.operands[0];
                let s = arg(0);
                if self.k.ty(src).is_scalar() || last_dim(src) == 1 {
                    AxisInfo {
                        contiguity: 1,
                        divisibility: s.divisibility,
                        constancy: HUGE,
                    }
                } else {
                    s
                }
            }
            // A reshape keeps the runs along the last axis up to the shorter of the two last
            // dimensions (a paged cache's [pages, PAGE, D] offsets as [BN, D] rows keep their
            // D-long runs); a row split inside a run starts at a multiple of the new width.
            OpKind::Reshape => {
                let s = arg(0);
                let (old, new) = (last_dim(op.operands[0]), last_dim(op.results[0]));
                if old == new {
                    s
                } else {
                    AxisInfo {
                        contiguity: s.contiguity.min(old).min(new),
                        divisibility: match new < old && s.contiguity > 1 {
                            true => s.divisibility.min(pow2_factor(new as i64)),
                            false => s.divisibility,
                        },
                        constancy: s.constancy.min(old).min(new),
                    }
                }
            }
            OpKind::ExpandDims(axis) => {
                let src = op.operands[0];
                if *axis == self.k.ty(src).shape.len() {
                    // A new last axis of size 1: each element stands alone.
                    AxisInfo {
                        contiguity: 1,
                        divisibility: arg(0).divisibility.min(pow2_any(arg(0))),
                        constancy: 1,
                    }
                } else {
                    arg(0)
                }
            }
            OpKind::Binary(b) => {
                let (x, y) = (arg(0), arg(1));
                let constancy = x.constancy.min(y.constancy);
                match b {
                    BinaryOp::Add => sum(x, y, constancy),
                    // Subtracting a run gives a decreasing sequence: only `x`'s runs survive.
                    BinaryOp::Sub => sum(
                        x,
                        AxisInfo {
                            contiguity: 1,
                            divisibility: pow2_any(y),
                            ..y
                        },
                        constancy,
                    ),
                    // A product by an argument specialised to 1 is the other side.
                    BinaryOp::Mul if self.ints.get(&op.operands[1]) == Some(&1) => x,
                    BinaryOp::Mul if self.ints.get(&op.operands[0]) == Some(&1) => y,
                    BinaryOp::Mul => AxisInfo {
                        contiguity: 1,
                        divisibility: pow2_any(x).saturating_mul(pow2_any(y)).min(HUGE),
                        constancy,
                    },
                    // A shift by a known amount is a product by a power of two (what the
                    // e-graph's strength reduction turns `x * 2^k` into).
                    BinaryOp::Shl => match self.ints.get(&op.operands[1]) {
                        Some(0) => x,
                        Some(&c) if (1..31).contains(&c) => AxisInfo {
                            contiguity: 1,
                            divisibility: pow2_any(x).saturating_mul(1 << c).min(HUGE),
                            constancy,
                        },
                        _ => AxisInfo {
                            contiguity: 1,
                            divisibility: 1,
                            constancy,
                        },
                    },
                    _ => AxisInfo {
                        contiguity: 1,
                        divisibility: 1,
                        constancy,
                    },
                }
            }
            OpKind::Cmp(c) => {
                let (x, y) = (arg(0), arg(1));
                // A run [a, a + g) of multiples-of-g starts against a multiple of g constant over
                // the group: `run < v` and `run >= v` (and `v > run`, `v <= run`) agree on the group.
                let group =
                    |r: AxisInfo, k: AxisInfo| r.contiguity.min(r.divisibility).min(k.constancy).min(k.divisibility);
                let g = match c {
                    CmpOp::Lt | CmpOp::Ge => group(x, y),
                    CmpOp::Gt | CmpOp::Le => group(y, x),
                    _ => 1,
                };
                AxisInfo {
                    contiguity: 1,
                    divisibility: 1,
                    constancy: x.constancy.min(y.constancy).max(g),
                }
            }
            OpKind::PtrAdd => {
                let (p, o) = (arg(0), arg(1));
                let Elem::Ptr { pointee, .. } = self.k.ty(op.operands[0]).elem else {
                    return None;
                };
                // In bytes: the offset's run starts scale by the element size.
                let o = AxisInfo {
                    divisibility: o.divisibility.saturating_mul(pointee.bytes() as u64).min(HUGE),
                    ..o
                };
                sum(p, o, p.constancy.min(o.constancy))
            }
            // An integer cast that keeps every value (`pid.to(i64)`: a narrower signed integer
            // to a wider one, or an unsigned one to any wider integer) keeps its operand's runs
            // and divisibility: the 64-bit offsets the language recommends vectorise as the
            // 32-bit ones do.
            OpKind::Cast(_) if self.keeps_values(op) => arg(0),
            OpKind::Select | OpKind::Unary(_) | OpKind::Cast(_) | OpKind::Bitcast => {
                let constancy = op.operands.iter().map(|v| self.get(*v).constancy).min().unwrap_or(1);
                AxisInfo {
                    contiguity: 1,
                    divisibility: 1,
                    constancy,
                }
            }
            OpKind::MultipleOf(n) => {
                let x = arg(0);
                AxisInfo {
                    divisibility: x.divisibility.max(*n),
                    ..x
                }
            }
            OpKind::MaxContiguous(n) => {
                let x = arg(0);
                AxisInfo {
                    contiguity: x.contiguity.max(*n),
                    ..x
                }
            }
            _ => return None,
        })
    }
}

/// `x + y` elementwise: runs continue where one side runs and the other is constant; a run that
/// is cut shorter than its side's runs starts at values only as divisible as its length.
fn sum(x: AxisInfo, y: AxisInfo, constancy: u64) -> AxisInfo {
    let from_x = x.contiguity.min(y.constancy);
    let from_y = y.contiguity.min(x.constancy);
    let contiguity = from_x.max(from_y);
    let mut divisibility = x.divisibility.min(y.divisibility);
    for side in [x, y] {
        if contiguity < side.contiguity {
            divisibility = divisibility.min(contiguity);
        }
    }
    AxisInfo {
        contiguity,
        divisibility,
        constancy,
    }
}

/// The divisibility of each element when every element stands alone (runs of length 1).
fn pow2_any(x: AxisInfo) -> u64 {
    if x.contiguity > 1 { 1 } else { x.divisibility }
}
