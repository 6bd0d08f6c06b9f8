//! The test suite: one binary (each test binary links the whole compiler), data-driven from
//! `dsl-examples/` and `tests/diagnostics/`.

mod cli;
mod diagnostics;
mod docs;
mod examples;
mod filetests;
mod r#gen;
mod interp;
mod optimizer;
mod ptx;
mod robustness;
