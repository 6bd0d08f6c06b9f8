//! The optimizer: the stage between the tile IR and code generation.
//!
//! - [`egraph`]: rewrites a kernel into a cheaper equivalent with egg.
//! - [`config`]: chooses the tunable compile-time values, `num_warps` and `num_stages` under the
//!   target's register and shared-memory limits, without running anything.

pub mod config;
pub mod egraph;
