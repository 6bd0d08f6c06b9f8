//! Source text to AST. The only module that uses pest.

pub mod ast;
mod parse;
mod print;
mod read;

pub use parse::{MAX_NESTING, MAX_OPERATORS, MAX_SOURCE_BYTES, parse};
pub use read::{ReadError, read_source};
