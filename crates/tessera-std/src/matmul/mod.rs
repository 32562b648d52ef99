//! Matrix multiplication: the tiled GEMM on simdgroup matrix fragments (tensor cores on
//! CUDA, `simdgroup_matrix` on Metal, plain loops on the CPU), and the bandwidth-bound
//! dense GEMV / skinny GEMM of decode.

#[cfg(feature = "cases")]
mod cases;
mod decl;
pub mod gemv;
#[cfg(feature = "cases")]
pub(crate) mod gemv_cases;
pub mod gemv_mma;
pub mod pipelined;
#[cfg(feature = "cases")]
pub mod reference;
pub mod tiled;

pub use gemv::{gemv, gemv_silu_mul};
pub use tiled::{matmul, matmul_bt};
