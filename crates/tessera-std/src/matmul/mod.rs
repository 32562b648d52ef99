//! Matrix multiplication on simdgroup matrix fragments (tensor cores on CUDA,
//! `simdgroup_matrix` on Metal, plain loops on the CPU).

mod cases;
mod decl;
pub mod reference;
pub mod tiled;

pub use tiled::{matmul, matmul_bt};
