//! Matrix multiplication on simdgroup matrix fragments (tensor cores on CUDA,
//! `simdgroup_matrix` on Metal, plain loops on the CPU).

#[cfg(feature = "cases")]
mod cases;
mod decl;
#[cfg(feature = "cases")]
pub mod reference;
pub mod tiled;

pub use tiled::{matmul, matmul_bt};
