//! `kernels!`: typed Rust launchers for the kernels of a `.tile` file, generated at build time.
//! Use it through `tile_jit::kernels!` (the generated code names `::tile_jit`).
//!
//! ```ignore
//! tile_jit::kernels!(pub mod vadd = "kernels/vector_add.tile");
//!
//! let k = vadd::Kernels::new(&gpu, JitOptions::default())?;
//! let add = k.vector_add(vadd::VectorAddConsts::default())?;
//! add.launch(&x, &y, &mut out, n)?; // grid from `#[grid(cdiv(n, BLOCK))]`
//! ```
//!
//! The path is relative to the crate's directory (where its `Cargo.toml` is). The file is
//! parsed and checked when the crate compiles: a `.tile` error is a Rust compile error showing
//! the `.tile` line. The expansion lives in [`expand`], a function of tokens, so that it is
//! unit-tested without a compiler.

mod expand;

use proc_macro::TokenStream;

/// `kernels!(VIS mod NAME = "PATH");`: a module `NAME` with, for the file at `PATH` (relative to
/// the crate's `Cargo.toml`), a `Kernels` type that owns the file's JIT and one typed launcher
/// per kernel. See the crate's documentation and docs/language.md §13.3.
#[proc_macro]
pub fn kernels(input: TokenStream) -> TokenStream {
    let base = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    expand::expand(input.into(), std::path::Path::new(&base)).into()
}
