//! State-space model kernels: the Mamba selective-scan decode step.

#[cfg(feature = "cases")]
mod cases;
mod decl;
#[cfg(feature = "cases")]
pub mod reference;
pub mod selective_scan;

pub use selective_scan::{selective_scan_step, ScanArgs};
