//! Plain-Rust references for the kernels in `dsl-examples/`, computed in f64 from the inputs a
//! run spec generated. They share nothing with the interpreter: they are the independent answer
//! the interpreter (and the GPU) are checked against.

use std::collections::BTreeMap;

use tile_lang::spec::{RefCase, Reference};

/// Every reference, by the name a run spec's `reference(..)` uses.
pub const REFERENCES: &[(&str, Reference)] = &[("vector_add", vector_add)];

pub fn reference(name: &str) -> Option<Reference> {
    REFERENCES.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

fn out(name: &str, v: Vec<f64>) -> BTreeMap<String, Vec<f64>> {
    BTreeMap::from([(name.to_string(), v)])
}

/// `out[i] = x[i] + y[i]`
pub fn vector_add(c: &RefCase) -> BTreeMap<String, Vec<f64>> {
    let (x, y) = (c.buffer("x"), c.buffer("y"));
    out("out", x.iter().zip(y).map(|(a, b)| a + b).collect())
}
