//! Counter-based random numbers: `randint(seed, offset, word)` and `rand(seed, offset)`, from
//! Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
//!
//! The generator is expanded here into ordinary integer ops (32-bit words, products of two of
//! them in 64 bits), so the interpreter and the GPU run the same IR and agree bit for bit. The
//! key is the seed (low 32 bits, high 32 bits); the counter is the offset (low 32 bits, high 32
//! bits, 0, 0). `randn` is absent: a normal sample needs `log` and `cos`, which the GPU computes
//! approximately, so it could not be bit-identical.

use super::*;
use crate::ir::BinaryOp;

/// Philox4x32's multipliers and Weyl key increments.
const M0: u64 = 0xD251_1F53;
const M1: u64 = 0xCD9E_8D57;
const W0: u64 = 0x9E37_79B9;
const W1: u64 = 0xBB67_AE85;
const ROUNDS: usize = 10;

/// `randint(seed, offset, word = 0)`: word `word` (0 to 3) of Philox4x32-10 at counter `offset`
/// under key `seed`, a u32 with the offset's shape.
pub(super) fn randint(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let word = match a.get(2) {
        Some(w) => {
            let s = w.1;
            let i = cx.const_int_arg(w, "the word")?;
            if !(0..=3).contains(&i) {
                return cx
                    .fail(Diagnostic::error(s, format!("Philox4x32 has words 0 to 3, not {i}")).label("out of range"));
            }
            i as usize
        }
        None => 0,
    };
    let words = philox(cx, &a, span)?;
    Ok(Val::V(words[word]))
}

/// `rand(seed, offset)`: a uniform f32 in [0, 1), the top 24 bits of `randint(seed, offset)`
/// times 2^-24 (exact: every value is a multiple of 2^-24).
pub(super) fn rand(cx: &mut Cx<'_>, _name: &str, a: Args, span: Span) -> R<Val> {
    let words = philox(cx, &a, span)?;
    let shape = cx.ty(words[0]).shape.clone();
    let eight = splat(cx, 8, DType::U32, &shape, span)?;
    let top = cx.binary_kind(OpKind::Binary(BinaryOp::Shr), words[0], eight, span)?;
    let f = cx.cast(top, DType::F32, span)?;
    let scale = cx.constant(ConstValue::Float(1.0 / (1u64 << 24) as f64), DType::F32);
    let scale = cx.broadcast_to(scale, &shape, span)?;
    Ok(Val::V(cx.binary_kind(OpKind::Binary(BinaryOp::Mul), f, scale, span)?))
}

fn splat(cx: &mut Cx<'_>, v: u64, d: DType, shape: &[usize], span: Span) -> R<ValueId> {
    let c = cx.constant(ConstValue::Int(v as i64), d);
    cx.broadcast_to(c, shape, span)
}

/// The four output words of Philox4x32-10 for the call's seed and offset.
fn philox(cx: &mut Cx<'_>, a: &Args, span: Span) -> R<[ValueId; 4]> {
    let (seed, offset) = (a.req(0), a.req(1));
    let mut ints = Vec::new();
    for (arg, what) in [(seed.clone(), "the seed"), (offset.clone(), "the offset")] {
        let s = arg.1;
        let v = cx.tile_arg(arg, what)?;
        match cx.ty(v).dtype() {
            Some(d) if d.is_int() && d != DType::Bool => ints.push(v),
            _ => {
                let t = cx.ty(v).clone();
                return cx.fail(
                    Diagnostic::error(s, format!("{what} of a random number must be an integer"))
                        .label(format!("this is {t}")),
                );
            }
        }
    }
    if !cx.ty(ints[0]).is_scalar() {
        return cx.fail(Diagnostic::error(seed.1, "the seed must be a scalar").label("one key for the whole call"));
    }
    let shape = cx.ty(ints[1]).shape.clone();
    // 64-bit seed and offset, split into 32-bit words.
    let seed64 = cx.cast(ints[0], DType::U64, span)?;
    let seed64 = cx.broadcast_to(seed64, &shape, span)?;
    let off64 = cx.cast(ints[1], DType::U64, span)?;
    let hi = |cx: &mut Cx<'_>, v: ValueId| -> R<ValueId> {
        let k32 = splat(cx, 32, DType::U64, &shape, span)?;
        let h = cx.binary_kind(OpKind::Binary(BinaryOp::Shr), v, k32, span)?;
        cx.cast(h, DType::U32, span)
    };
    let (k0, k1) = (cx.cast(seed64, DType::U32, span)?, hi(cx, seed64)?);
    let (c0, c1) = (cx.cast(off64, DType::U32, span)?, hi(cx, off64)?);
    let zero = splat(cx, 0, DType::U32, &shape, span)?;
    let (mut c, mut k) = ([c0, c1, zero, zero], [k0, k1]);
    let xor = |cx: &mut Cx<'_>, x: ValueId, y: ValueId| cx.binary_kind(OpKind::Binary(BinaryOp::Xor), x, y, span);
    for round in 0..ROUNDS {
        if round > 0 {
            for (key, w) in k.iter_mut().zip([W0, W1]) {
                let inc = splat(cx, w, DType::U32, &shape, span)?;
                *key = cx.binary_kind(OpKind::Binary(BinaryOp::Add), *key, inc, span)?;
            }
        }
        let (hi0, lo0) = mul_hi_lo(cx, M0, c[0], &shape, span)?;
        let (hi1, lo1) = mul_hi_lo(cx, M1, c[2], &shape, span)?;
        let n0 = xor(cx, hi1, c[1])?;
        let n0 = xor(cx, n0, k[0])?;
        let n2 = xor(cx, hi0, c[3])?;
        let n2 = xor(cx, n2, k[1])?;
        c = [n0, lo1, n2, lo0];
    }
    Ok(c)
}

/// The high and low 32 bits of `m * x` for a u32 `x`, computed in 64 bits.
fn mul_hi_lo(cx: &mut Cx<'_>, m: u64, x: ValueId, shape: &[usize], span: Span) -> R<(ValueId, ValueId)> {
    let wide = cx.cast(x, DType::U64, span)?;
    let m = splat(cx, m, DType::U64, shape, span)?;
    let p = cx.binary_kind(OpKind::Binary(BinaryOp::Mul), wide, m, span)?;
    let k32 = splat(cx, 32, DType::U64, shape, span)?;
    let h = cx.binary_kind(OpKind::Binary(BinaryOp::Shr), p, k32, span)?;
    Ok((cx.cast(h, DType::U32, span)?, cx.cast(p, DType::U32, span)?))
}
