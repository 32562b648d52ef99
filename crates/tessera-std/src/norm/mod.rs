//! Row normalisations: RMSNorm in five layouts, RMSNorm fused with the residual add and
//! with the per-token quantization of its output,
//! LayerNorm, the gated mixer norm of GDN blocks, softmax and logsumexp over the last
//! dimension.

#[cfg(feature = "cases")]
mod cases;
mod decl;
pub mod gated_mixer_norm;
pub mod layer_norm;
#[cfg(feature = "cases")]
pub mod quant_reference;
#[cfg(feature = "cases")]
pub mod reference;
pub mod rms_inv;
pub mod rms_norm;
pub mod rms_norm_pipe;
pub mod rms_norm_quant;
pub mod rms_norm_residual;
pub mod rms_norm_residual_pipe;
pub mod rms_norm_vec;
#[cfg(feature = "cases")]
pub mod row_reference;
pub mod softmax;

pub use gated_mixer_norm::gated_mixer_norm;
pub use layer_norm::layer_norm;
pub use rms_norm::{rms_norm, rms_norm_small, rms_norm_tpg4, rms_norm_wide};
pub use rms_norm_pipe::rms_norm_pipe;
pub use rms_norm_quant::{rms_norm_quant, rms_norm_residual_quant, ActQuant};
pub use rms_norm_residual::rms_norm_residual;
pub use rms_norm_vec::rms_norm_vec;
pub use softmax::{logsumexp, softmax};
