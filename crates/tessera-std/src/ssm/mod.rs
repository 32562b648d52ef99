//! State-space model kernels: the Mamba selective-scan decode step.

mod cases;
mod decl;
pub mod reference;
pub mod selective_scan;

pub use selective_scan::{selective_scan_step, ScanArgs};
