//! The small-batch form of the sampling ops: a row split over many threadgroups
//! ("slices", contiguous ranges of the row) so that a batch of one fills the GPU, each
//! slice writing what the row's answer needs into the caller's [`SamplingWorkspace`], and
//! a small combine kernel per row. The wrapper picks it by shape ([`slices_for`]).

use crate::error::{runtime, OpError};
use tessera_runtime::{Context, DType, Tensor};

/// Rows shorter than this are never split (one threadgroup reads them quickly).
const SPLIT_MIN_VOCAB: u32 = 1 << 13;
/// Logits each slice reads, at least.
const SLICE_MIN: u32 = 1 << 10;
/// The most slices a row takes.
pub const MAX_SLICES: u32 = 128;

/// How many slices each of `batch` rows of `vocab` logits takes on a GPU of
/// `compute_units` cores: 1 (the single-pass form) unless the rows are long and too few
/// to give every core two threadgroups, else enough slices for about that, each at least
/// [`SLICE_MIN`] logits, at most [`MAX_SLICES`].
pub fn slices_for(batch: u32, vocab: u32, compute_units: u32) -> u32 {
    let target = 2 * compute_units.max(1);
    if vocab < SPLIT_MIN_VOCAB || batch >= target / 2 {
        return 1;
    }
    (target / batch).clamp(1, vocab / SLICE_MIN).min(MAX_SLICES)
}

/// The scratch of the split form: per row and slice, the slice's partial answer. Made once
/// for a shape (outside any captured graph) and passed to every call on rows that fit it.
pub struct SamplingWorkspace {
    slices: u32,
    rows: u32,
    parts: Tensor,
}

/// f32 words a slice writes for `argmax`: its maximum and the index of its first.
pub(crate) const ARGMAX_WORDS: u32 = 2;

/// f32 words a slice writes for `sample`: a header and up to 128 candidates (index and
/// value); see `sample_split`.
pub(crate) const SAMPLE_WORDS: u32 = 264;

impl SamplingWorkspace {
    /// The workspace for `batch` rows of `vocab` logits, with the slices
    /// [`slices_for`] picks on this context's device (none when it picks 1).
    pub fn new(ctx: &Context, batch: usize, vocab: usize) -> Result<SamplingWorkspace, OpError> {
        let slices = slices_for(batch as u32, vocab as u32, ctx.info().compute_units);
        Self::with_slices(ctx, batch, slices)
    }

    /// A workspace that splits every row of up to `batch` rows into `slices` (1 to
    /// [`MAX_SLICES`]), whatever the shape: to test the split form at small shapes.
    pub fn with_slices(
        ctx: &Context,
        batch: usize,
        slices: u32,
    ) -> Result<SamplingWorkspace, OpError> {
        if !(1..=MAX_SLICES).contains(&slices) {
            return Err(OpError::invalid(
                "sampling workspace",
                format!("slices = {slices} must be in 1..={MAX_SLICES}"),
            ));
        }
        let words = ARGMAX_WORDS.max(SAMPLE_WORDS) as usize;
        let len = (words * batch.max(1) * slices as usize).max(1);
        let parts = ctx
            .zeros(DType::F32, &[len])
            .map_err(runtime("sampling workspace"))?;
        Ok(SamplingWorkspace {
            slices,
            rows: batch.max(1) as u32,
            parts,
        })
    }

    /// The slices a row takes.
    pub fn slices(&self) -> u32 {
        self.slices
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.parts.len() * 4
    }

    pub(crate) fn parts(&self) -> &Tensor {
        &self.parts
    }

    /// The slices for a call on `batch` rows, once the workspace is known to hold them.
    pub(crate) fn slices_checked(&self, op: &'static str, batch: u32) -> Result<u32, OpError> {
        if self.slices > 1 && batch > self.rows {
            return Err(OpError::invalid(
                op,
                format!(
                    "the workspace holds {} rows, this call has {batch}: make it with \
                     SamplingWorkspace::new for this shape",
                    self.rows
                ),
            ));
        }
        Ok(self.slices)
    }
}

#[cfg(test)]
mod tests {
    use super::slices_for;

    #[test]
    fn only_few_long_rows_split() {
        assert_eq!(slices_for(1, 151_936, 132), MAX);
        assert_eq!(slices_for(32, 151_936, 132), 8);
        assert_eq!(slices_for(256, 151_936, 132), 1);
        assert_eq!(slices_for(1, 1000, 132), 1);
        assert_eq!(slices_for(1, 16_384, 132), 16);
    }

    const MAX: u32 = super::MAX_SLICES;
}
