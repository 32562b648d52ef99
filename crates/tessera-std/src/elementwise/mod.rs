//! Elementwise ops.

pub mod add;

pub use add::add;
