//! Elementwise ops.

pub mod add;
mod decl;

pub use add::add;
