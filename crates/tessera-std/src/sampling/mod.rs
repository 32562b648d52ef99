//! Sampling and logits processing: repetition, presence and frequency penalties
//! (`apply_penalties`), greedy `argmax`, and `sample` — temperature, top-k,
//! top-p and min-p per row with a Philox4x32-10 draw seeded per row, fused in one kernel
//! without a sort, the same token for the same seed on every backend.
//! `argmax_split` and `sample_split` split few long rows over slices and a combine, so a
//! batch of one fills the GPU, with the same tokens.

pub mod argmax;
#[cfg(feature = "cases")]
mod cases;
mod decl;
pub mod penalties;
pub mod philox;
#[cfg(feature = "cases")]
pub mod reference;
pub mod same_bits;
pub mod sample;
pub mod sample_split;
pub mod split;
pub mod survivors;

pub use argmax::{argmax, argmax_split};
pub use penalties::{apply_penalties, Penalties};
pub use philox::philox4x32_10;
pub use sample::{sample, SamplingParams};
pub use sample_split::sample_split;
pub use split::SamplingWorkspace;

use crate::error::OpError;
use crate::validate::{dtype_in, fits_u32, FLOAT_DTYPES};
use tessera_runtime::Tensor;

/// The most threads per row: a row is one threadgroup.
pub const SAMPLE_GROUP: u32 = 1024;

/// Threads for a row of `vocab` logits: about eight logits a thread, from one simdgroup
/// up to [`SAMPLE_GROUP`] (a power of two).
pub fn row_group(vocab: u32) -> u32 {
    (vocab / 8).next_power_of_two().clamp(32, SAMPLE_GROUP)
}

/// The largest vocabulary: 256k.
pub const MAX_VOCAB: usize = 1 << 18;

/// Validates `logits [batch, vocab]` (float, vocab ≤ 256k, not empty): (batch, vocab).
pub(crate) fn check_logits(op: &'static str, logits: &Tensor) -> Result<(u32, u32), OpError> {
    dtype_in(op, "logits", logits, &FLOAT_DTYPES)?;
    let &[batch, vocab] = logits.shape() else {
        return Err(OpError::invalid(
            op,
            format!(
                "`logits` must be [batch, vocab], got shape {:?}",
                logits.shape()
            ),
        ));
    };
    if batch == 0 || vocab == 0 {
        return Err(OpError::invalid(
            op,
            format!("`logits` must not be empty, got shape [{batch}, {vocab}]"),
        ));
    }
    if vocab > MAX_VOCAB {
        return Err(OpError::invalid(
            op,
            format!("vocab = {vocab} is above the largest supported, {MAX_VOCAB}"),
        ));
    }
    fits_u32(op, "the element count", logits.len())?;
    Ok((batch as u32, vocab as u32))
}
