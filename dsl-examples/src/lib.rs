//! Plain-Rust references for the kernels in `dsl-examples/`, computed in f64 from the inputs a
//! run spec generated. They share nothing with the interpreter: they are the independent answer
//! the interpreter (and the GPU) are checked against.

use std::collections::BTreeMap;

use tile_lang::spec::{RefCase, RefError, Reference};

/// Every reference, by the name a run spec's `reference(..)` uses.
pub const REFERENCES: &[(&str, Reference)] = &[
    ("vector_add", vector_add),
    ("softmax", softmax),
    ("layernorm", layernorm),
    ("rmsnorm", rmsnorm),
    ("matmul", matmul),
    ("attention", attention),
    ("row_reduce", row_reduce),
    ("cumsum", cumsum),
    ("transpose", transpose),
    ("swiglu", swiglu),
    ("gelu", gelu),
];

pub fn reference(name: &str) -> Option<Reference> {
    REFERENCES.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

fn out(name: &str, v: Vec<f64>) -> BTreeMap<String, Vec<f64>> {
    BTreeMap::from([(name.to_string(), v)])
}

/// `out[i] = x[i] + y[i]`
pub fn vector_add(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (x, y) = (c.buffer("x")?, c.buffer("y")?);
    Ok(out("out", x.iter().zip(y).map(|(a, b)| a + b).collect()))
}

/// Row softmax of `inp` [rows, cols] (max-subtracted, so exp never overflows).
pub fn softmax(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (rows, cols) = (c.size("rows")?, c.size("cols")?);
    let x = c.buffer_of("inp", rows * cols)?;
    let mut y = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        for (j, v) in e.iter().enumerate() {
            y[r * cols + j] = v / s;
        }
    }
    Ok(out("out", y))
}

/// LayerNorm over the last axis of `x` [rows, n]: `y`, and the per-row `mean` and `rstd`.
pub fn layernorm(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (rows, n) = (c.size("rows")?, c.size("n")?);
    let (x, w, b, eps) = (
        c.buffer_of("x", rows * n)?,
        c.buffer_of("w", n)?,
        c.buffer_of("b", n)?,
        c.scalar("eps")?,
    );
    let (mut y, mut mean, mut rstd) = (vec![0.0; rows * n], vec![0.0; rows], vec![0.0; rows]);
    for r in 0..rows {
        let row = &x[r * n..(r + 1) * n];
        let mu = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n as f64;
        let rs = 1.0 / (var + eps).sqrt();
        for j in 0..n {
            y[r * n + j] = (row[j] - mu) * rs * w[j] + b[j];
        }
        (mean[r], rstd[r]) = (mu, rs);
    }
    Ok(BTreeMap::from([
        ("y".to_string(), y),
        ("mean".to_string(), mean),
        ("rstd".to_string(), rstd),
    ]))
}

/// RMSNorm over the last axis of `x` [rows, n], scaled by `w`.
pub fn rmsnorm(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (rows, n) = (c.size("rows")?, c.size("n")?);
    let (x, w, eps) = (c.buffer_of("x", rows * n)?, c.buffer_of("w", n)?, c.scalar("eps")?);
    let mut y = vec![0.0; rows * n];
    for r in 0..rows {
        let row = &x[r * n..(r + 1) * n];
        let rs = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n as f64 + eps).sqrt();
        for j in 0..n {
            y[r * n + j] = row[j] * rs * w[j];
        }
    }
    Ok(out("y", y))
}

/// `c = a @ b` for row-major `a` [M, K] and `b` [K, N].
pub fn matmul(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (m, n, k) = (c.size("M")?, c.size("N")?, c.size("K")?);
    let (a, b) = (c.buffer_of("a", m * k)?, c.buffer_of("b", k * n)?);
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let aip = a[i * k + p];
            for j in 0..n {
                y[i * n + j] += aip * b[p * n + j];
            }
        }
    }
    Ok(out("c", y))
}

/// Attention per (batch, head): `o = softmax(scale * q k^T) v` over `[bh, seq, D]` buffers,
/// keys after the query masked out when `CAUSAL`.
pub fn attention(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (bh, seq) = (c.size("bh")?, c.size("seq")?);
    let d = c.const_int("D")? as usize;
    let causal = c.const_bool("CAUSAL")?;
    let scale = c.scalar("scale")?;
    let len = bh * seq * d;
    let (q, k, v) = (c.buffer_of("q", len)?, c.buffer_of("k", len)?, c.buffer_of("v", len)?);
    let mut o = vec![0.0; bh * seq * d];
    for h in 0..bh {
        let at = |buf: &[f64], row: usize, col: usize| buf[(h * seq + row) * d + col];
        for i in 0..seq {
            let keys = if causal { i + 1 } else { seq };
            let s: Vec<f64> = (0..keys)
                .map(|j| scale * (0..d).map(|x| at(q, i, x) * at(k, j, x)).sum::<f64>())
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let l: f64 = p.iter().sum();
            for x in 0..d {
                o[(h * seq + i) * d + x] = (0..keys).map(|j| p[j] * at(v, j, x)).sum::<f64>() / l;
            }
        }
    }
    Ok(out("o", o))
}

/// Per row of `x` [rows, cols]: the sum, the max and the index of the first maximum.
pub fn row_reduce(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (rows, cols) = (c.size("rows")?, c.size("cols")?);
    let x = c.buffer_of("x", rows * cols)?;
    let (mut sum, mut max, mut argmax) = (vec![0.0; rows], vec![0.0; rows], vec![0.0; rows]);
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        sum[r] = row.iter().sum();
        let mut at = 0;
        for (j, v) in row.iter().enumerate() {
            if *v > row[at] {
                at = j;
            }
        }
        (max[r], argmax[r]) = (row[at], at as f64);
    }
    Ok(BTreeMap::from([
        ("row_sum".to_string(), sum),
        ("row_max".to_string(), max),
        ("row_argmax".to_string(), argmax),
    ]))
}

/// Inclusive prefix sums along each row of `x` [rows, n].
pub fn cumsum(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let n = c.size("n")?;
    let mut y = c.buffer("x")?.to_vec();
    for row in y.chunks_mut(n.max(1)) {
        for j in 1..row.len() {
            row[j] += row[j - 1];
        }
    }
    Ok(out("y", y))
}

/// `y[j, i] = x[i, j]` for `x` [M, N].
pub fn transpose(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (m, n) = (c.size("M")?, c.size("N")?);
    let x = c.buffer_of("x", m * n)?;
    Ok(out("y", (0..n * m).map(|k| x[(k % m) * n + k / m]).collect()))
}

/// `out[r, j] = silu(x[r, j]) * x[r, H + j]` for `x` [rows, 2H] (gate half, then up half).
pub fn swiglu(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let (rows, h) = (c.size("rows")?, c.size("H")?);
    let x = c.buffer_of("x", rows * 2 * h)?;
    let mut y = vec![0.0; rows * h];
    for r in 0..rows {
        for j in 0..h {
            let (g, u) = (x[r * 2 * h + j], x[r * 2 * h + h + j]);
            y[r * h + j] = g / (1.0 + (-g).exp()) * u;
        }
    }
    Ok(out("out", y))
}

/// GELU, tanh approximation: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu(c: &RefCase) -> Result<BTreeMap<String, Vec<f64>>, RefError> {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    Ok(out(
        "out",
        c.buffer("x")?
            .iter()
            .map(|&x| 0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh()))
            .collect(),
    ))
}
