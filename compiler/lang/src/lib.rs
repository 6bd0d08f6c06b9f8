//! The `.tile` language: source to typed tile IR, and the reference interpreter.
//!
//! The pipeline reads top to bottom:
//!
//! ```text
//! let ast = syntax::parse(src)?;                         // pest grammar → AST with spans
//! let ir  = check::check_kernel(src, &ast, name, &b)?;   // names, dtypes, shapes → tile IR
//! interp::run(&ir, grid, &args, &mut buffers)?;          // CPU reference semantics
//! ```
//!
//! Every stage prints: the AST and the IR implement `Display`, and the IR's text form parses
//! back ([`ir::parse_kernel`]).

pub mod check;
pub mod diag;
pub mod interp;
pub mod ir;
pub mod spec;
pub mod syntax;

pub use diag::{Diagnostic, Span};

/// Re-exported so that front ends render diagnostics with the same version.
pub use codespan_reporting;
