//! Mixture-of-Experts for decode: the router (`moe_route`: softmax or sigmoid scoring,
//! grouped top-k with a selection bias, renormalisation, scaling), the token permute that
//! groups each token's chosen experts by expert (`moe_permute`: counts, offsets, the
//! (token, slot) pairs in expert order and the list of experts chosen at all), the grouped
//! gather-GEMV over only the chosen experts' weights (`moe_gemv`, and `moe_gemv_silu_mul`
//! with the gate/up projection's SiLU·mul fused; `moe_qgemv` and `moe_qgemv_silu_mul` over
//! experts in MLX's affine format), and the weighted combine
//! (`moe_combine`, with an optional shared expert's output added). For prefill, the
//! contiguous grouped GEMM over rows already grouped by expert (`moe_gemm`,
//! `moe_gemm_silu_mul`) on a tile schedule built on the device from the experts' row
//! offsets (`moe_gemm_schedule`), and over MLX affine experts (`moe_qgemm`,
//! `moe_qgemm_silu_mul`).

#[cfg(feature = "cases")]
mod cases;
pub mod combine;
mod decl;
pub mod gemm;
pub mod gemm_schedule;
pub mod gemv;
pub mod permute;
pub mod qgemm;
pub mod qgemv;
#[cfg(feature = "cases")]
pub mod reference;
pub mod route;

pub use combine::moe_combine;
pub use gemm::{moe_gemm, moe_gemm_silu_mul};
pub use gemm_schedule::{moe_gemm_schedule, MoeGemmSchedule};
pub use gemv::{moe_gemv, moe_gemv_silu_mul};
pub use permute::{moe_permute, MoeCheck, MoePlan};
pub use qgemm::{moe_qgemm, moe_qgemm_silu_mul};
pub use qgemv::{moe_qgemv, moe_qgemv_silu_mul, AffineExperts};
pub use route::{moe_route, RouteConfig, Scoring};

/// The most experts a router row or a plan holds: one thread per expert in a threadgroup.
pub const MAX_EXPERTS: usize = 1024;
