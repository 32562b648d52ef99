//! Causal depthwise conv1d (+SiLU) of Mamba and Gated DeltaNet blocks, in prefill and
//! decode form, with the rolling state `[B, C, W − 1]` they share.

#[cfg(feature = "cases")]
mod cases;
pub mod causal_conv1d;
mod decl;
#[cfg(feature = "cases")]
pub mod reference;

pub use causal_conv1d::{causal_conv1d, causal_conv1d_update, Conv1dArgs};
