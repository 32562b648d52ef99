//! Row normalisations: RMSNorm in three layouts and the gated mixer norm of GDN blocks,
//! all sharing one threadgroup-wide inverse-RMS reduction.

mod cases;
pub mod gated_mixer_norm;
pub mod reference;
pub mod rms_inv;
pub mod rms_norm;

pub use gated_mixer_norm::gated_mixer_norm;
pub use rms_norm::{rms_norm, rms_norm_small, rms_norm_tpg4, rms_norm_wide};
