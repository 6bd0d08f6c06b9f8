//! How far past its start a kernel can address each pointer parameter, when the offset dtypes
//! bound it: a kernel whose offsets into `x` are all computed in `i32` reaches at most 2^31
//! elements of `x`, whatever the launch passes. A launch with a longer tensor is a mistake the
//! kernel cannot see (the offset arithmetic wraps, or the tail is never touched), so the JIT
//! refuses it with the op that bounds the reach ([`pointer_reach`]).
//!
//! The analysis is conservative in the other direction: a parameter whose pointers are advanced
//! in a loop, mixed with another parameter's, or offset in 64 bits is unbounded (never refused).

use super::*;

/// The reach of one pointer parameter: offsets from its start are at most `last`, so a tensor
/// of more than `last + 1` elements has elements the kernel cannot address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    /// The largest element offset any access can have.
    pub last: u64,
    /// The narrowest offset dtype on the path to that offset, and where it is added.
    pub offset_dtype: DType,
    pub loc: Loc,
}

impl Reach {
    /// How many elements the kernel can address: `last + 1`.
    pub fn elements(&self) -> u64 {
        self.last.saturating_add(1)
    }
}

/// Per parameter of `k` (in order): `Some` for a pointer parameter whose every access goes
/// through offsets of bounded dtypes, `None` for scalars and unbounded pointers.
pub fn pointer_reach(k: &Kernel) -> Vec<Option<Reach>> {
    let mut a = Analysis {
        k,
        info: vec![Prov::NotPtr; k.values.len()],
        unbounded: vec![false; k.params.len()],
        reach: vec![None; k.params.len()],
        lost: false,
    };
    for (i, p) in k.params.iter().enumerate() {
        if p.elem.is_ptr() {
            a.info[p.value.0 as usize] = Prov::Param {
                param: i,
                last: Some(0),
                via: None,
            };
        }
    }
    a.region(&k.body);
    if a.lost {
        return vec![None; k.params.len()];
    }
    (0..k.params.len())
        .map(|i| if a.unbounded[i] { None } else { a.reach[i] })
        .collect()
}

/// Where a pointer value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Prov {
    NotPtr,
    /// Parameter `param` plus offsets of at most `last` (`None`: unbounded); `via`: the add that
    /// bounds it.
    Param {
        param: usize,
        last: Option<u64>,
        via: Option<(DType, Loc)>,
    },
}

struct Analysis<'a> {
    k: &'a Kernel,
    info: Vec<Prov>,
    unbounded: Vec<bool>,
    reach: Vec<Option<Reach>>,
    /// A pointer of unknown origin was met: nothing can be said about any parameter.
    lost: bool,
}

/// The largest offset an add of dtype `d` stands for, or `None` for 64-bit ones (unbounded in
/// practice). Narrower dtypes count as `i32`: a `u8` index into a 256-entry table is a choice,
/// not a limit; what goes wrong silently is 32-bit offset arithmetic on a tensor past 2^31
/// elements.
fn max_offset(d: DType) -> Option<u64> {
    match d.bits() {
        64 => None,
        32 if d.is_unsigned() => Some(u32::MAX as u64),
        _ => Some(i32::MAX as u64),
    }
}

impl Analysis<'_> {
    fn is_ptr(&self, v: ValueId) -> bool {
        self.k.ty(v).elem.is_ptr()
    }

    fn prov(&self, v: ValueId) -> Prov {
        self.info[v.0 as usize]
    }

    /// Records that `v` (a pointer) is one of its parameter's addresses.
    fn define(&mut self, v: ValueId, p: Prov) {
        self.info[v.0 as usize] = p;
        self.address(p);
    }

    /// Records an address of a parameter's (a value, or one a block access computes inside).
    fn address(&mut self, p: Prov) {
        if let Prov::Param { param, last, via } = p {
            match (last, via) {
                (None, _) => self.unbounded[param] = true,
                (Some(last), Some((offset_dtype, loc))) => {
                    let r = &mut self.reach[param];
                    if r.is_none_or(|r| r.last < last) {
                        *r = Some(Reach {
                            last,
                            offset_dtype,
                            loc,
                        });
                    }
                }
                (Some(_), None) => {}
            }
        }
    }

    /// The provenance of a value that may come from any of `sources`: one parameter's, at the
    /// widest offset, or unknown.
    fn join(&mut self, sources: impl IntoIterator<Item = Prov>) -> Prov {
        let mut out = Prov::NotPtr;
        for s in sources {
            out = match (out, s) {
                (Prov::NotPtr, s) | (s, Prov::NotPtr) => s,
                (
                    Prov::Param {
                        param: a,
                        last: la,
                        via: va,
                    },
                    Prov::Param { param: b, last: lb, .. },
                ) if a == b => {
                    let last = la.zip(lb).map(|(x, y)| x.max(y));
                    Prov::Param {
                        param: a,
                        last,
                        via: va,
                    }
                }
                _ => {
                    self.lost = true;
                    Prov::NotPtr
                }
            };
        }
        out
    }

    /// `p` advanced by offsets of dtype `d` (at most `max_offset(d)`), added at `loc`.
    fn advance(p: Prov, d: DType, loc: Loc) -> Prov {
        match p {
            Prov::Param { param, last, via } => {
                let last = last.zip(max_offset(d)).and_then(|(a, b)| a.checked_add(b));
                let narrower = via.is_none_or(|(v, _)| d.bits() < v.bits());
                Prov::Param {
                    param,
                    last,
                    via: if narrower { Some((d, loc)) } else { via },
                }
            }
            Prov::NotPtr => Prov::NotPtr,
        }
    }

    fn region(&mut self, r: &Region) {
        for op in &r.ops {
            self.op(op);
        }
    }

    fn op(&mut self, op: &Op) {
        let o = &op.operands;
        match &op.kind {
            OpKind::PtrAdd => {
                let d = self.k.ty(o[1]).dtype().unwrap_or(DType::I64);
                let p = Self::advance(self.prov(o[0]), d, op.loc);
                if matches!(p, Prov::NotPtr) {
                    self.lost = true;
                }
                self.define(op.results[0], p);
            }
            OpKind::LoadBlock { .. } | OpKind::StoreBlock { .. } => {
                // Offsets are computed in the dtype of the shape, strides and coordinates.
                let b = block::operands(op);
                let d = b
                    .shape
                    .first()
                    .and_then(|v| self.k.ty(*v).dtype())
                    .unwrap_or(DType::I64);
                let p = Self::advance(self.prov(b.ptr), d, op.loc);
                self.address(p);
            }
            OpKind::For { .. } => {
                let body = &op.regions[0];
                // Carried pointers move each iteration: their parameters are unbounded.
                for (k, init) in o[3..].iter().enumerate() {
                    if self.is_ptr(*init) {
                        let p = match self.prov(*init) {
                            Prov::Param { param, .. } => Prov::Param {
                                param,
                                last: None,
                                via: None,
                            },
                            Prov::NotPtr => {
                                self.lost = true;
                                Prov::NotPtr
                            }
                        };
                        self.define(body.args[1 + k], p);
                        self.define(op.results[k], p);
                    }
                }
                self.region(body);
                // What the body carries to the next iteration must come from the same parameter
                // (`p = y + o` in a loop that started with `p = x + o` mixes them).
                if let Some(y) = body.ops.last() {
                    for (k, init) in o[3..].iter().enumerate() {
                        if self.is_ptr(*init) {
                            let carried = [self.prov(*init), self.prov(y.operands[k])];
                            let p = self.join(carried);
                            if let Prov::Param { param, .. } = p {
                                self.unbounded[param] = true;
                            }
                        }
                    }
                }
            }
            OpKind::If => {
                self.region(&op.regions[0]);
                self.region(&op.regions[1]);
                for (k, res) in op.results.iter().enumerate() {
                    if self.is_ptr(*res) {
                        let yields: Vec<Prov> = op
                            .regions
                            .iter()
                            .filter_map(|r| r.ops.last())
                            .map(|y| self.prov(y.operands[k]))
                            .collect();
                        let p = self.join(yields);
                        self.define(*res, p);
                    }
                }
            }
            _ => {
                for sub in &op.regions {
                    self.region(sub);
                }
                // Loads, stores and atomics use pointers; every other op that makes a pointer
                // (broadcasts, reshapes, selects) takes it from its pointer operands.
                let made: Vec<ValueId> = op.results.iter().copied().filter(|r| self.is_ptr(*r)).collect();
                if !made.is_empty() {
                    let sources: Vec<Prov> = o.iter().filter(|v| self.is_ptr(**v)).map(|v| self.prov(*v)).collect();
                    let p = self.join(sources);
                    if matches!(p, Prov::NotPtr) {
                        self.lost = true;
                    }
                    for r in made {
                        self.define(r, p);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reach of each parameter of kernel `k` in `src`, as `(name, elements, line)`.
    fn reach(src: &str) -> Vec<(String, Option<(u64, u32)>)> {
        let ast = crate::syntax::parse(src).unwrap();
        let k = crate::check::check_kernel(src, &ast, "k", &vec![]).unwrap();
        k.params
            .iter()
            .zip(pointer_reach(&k))
            .map(|(p, r)| (p.name.clone(), r.map(|r| (r.elements(), r.loc.line))))
            .collect()
    }

    const I32: u64 = 1 << 31;

    #[test]
    fn offsets_of_32_bits_bound_the_reach() {
        let r = reach(
            "kernel k(x: *f32, y: *f32, out: *mut f32, n: i32, s: i64) {
                let o = program_id(0) * n + arange(0, 4);
                let a = load(x + o);
                let b = load(y + o.to(i64) * s);
                store(out + o.to(u32), a + b);
            }",
        );
        assert_eq!(r[0], ("x".into(), Some((I32, 3))));
        assert_eq!(r[1], ("y".into(), None), "64-bit offsets");
        assert_eq!(r[2], ("out".into(), Some((1 << 32, 5))), "u32 offsets");
        assert_eq!(r[3].1, None, "a scalar");
    }

    #[test]
    fn pointers_advanced_in_a_loop_or_mixed_are_unbounded() {
        let r = reach(
            "kernel k(x: *f32, y: *f32, z: *f32, out: *mut f32) {
                let o = arange(0, 4);
                let mut p = x + o;
                let mut acc = zeros([4], f32);
                for i in 0..8 { acc = acc + load(p); p += 4; }
                let q = where(o < 2, y + o, z + o);
                store(out + o, acc + load(q));
            }",
        );
        assert_eq!(r[0].1, None, "advanced in a loop");
        // A loop that carries a pointer started from one parameter and continued from another.
        let r = reach(
            "kernel k(x: *f32, y: *f32, out: *mut f32, n: i32) {
                let o = arange(0, 4);
                let mut p = x + o;
                let mut acc = zeros([4], f32);
                for i in 0..n { acc = acc + load(p + i * n); p = y + o; }
                store(out + o, acc);
            }",
        );
        assert_eq!((r[0].1, r[1].1), (None, None), "x and y mix through the loop: {r:?}");
        // y and z mix in one pointer tile: nothing is said about any parameter.
        assert!(r.iter().all(|(_, r)| r.is_none()), "{r:?}");
    }

    #[test]
    fn two_adds_of_32_bits_reach_further_and_narrow_ones_count_as_32_bits() {
        let r = reach(
            "kernel k(x: *f32, t: *f32, idx: *u8, out: *mut f32, n: i32) {
                let o = arange(0, 4);
                let row = x + program_id(0) * n;
                let i = load(idx + o);
                store(out + o, load(row + o) + load(t + i));
            }",
        );
        assert_eq!(r[0].1, Some((2 * I32 - 1, 3)));
        assert_eq!(r[1].1, Some((I32, 5)), "u8 offsets are not a limit below 2^31");
    }
}
