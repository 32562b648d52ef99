//! Rotary position embeddings: interleaved and NeoX layouts, partial rotation, Llama-3
//! and YaRN frequency scaling through a device-side frequency table, and the fused
//! per-head q/k RMSNorm + RoPE of Qwen3.

#[cfg(feature = "cases")]
mod cases;
mod decl;
pub mod kernels;
pub mod ops;
#[cfg(feature = "cases")]
pub mod reference;
pub mod table;

pub use ops::{qk_norm_rope, rope};
pub use table::{RopeConfig, RopeLayout, RopeScaling, RopeTable};
