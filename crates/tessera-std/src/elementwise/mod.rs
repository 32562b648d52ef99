//! Elementwise ops.

pub mod add;
#[cfg(feature = "cases")]
mod cases;
mod decl;
#[cfg(feature = "cases")]
pub mod reference;

pub use add::add;
