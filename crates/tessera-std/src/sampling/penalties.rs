//! `apply_penalties`: the repetition, presence and frequency penalties of a decoding step,
//! from per-row output-token counts and a prompt mask (the form vLLM keeps per request),
//! out-of-place. For token `i` of row `r`, in this order:
//! - repetition (HF / vLLM): where the token was seen (in the prompt or the output), a
//!   positive logit is divided by `repetition[r]` and any other multiplied by it;
//! - frequency: minus `frequency[r] · output_counts[r, i]`;
//! - presence: minus `presence[r]` where the token is in the output.
//!
//! Neutral values: repetition 1, frequency 0, presence 0. An eager call reads the three
//! per-row penalties back and refuses a row whose repetition is not positive and finite
//! or whose frequency or presence is not finite; a call recorded in a graph cannot, and
//! applies them as given. One thread per logit.

use super::check_logits;
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_is, shape_is};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "apply_penalties";

/// Threads per threadgroup; a row spans `vocab / GROUP` groups along x, rows along y.
const GROUP: u32 = 256;

/// `out[r, i]` = the penalised `logits[r, i]` (see the module docs).
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn penalties_kernel<T>(
    logits: Tensor<T>,
    output_counts: Tensor<i32>,
    prompt_mask: Tensor<i32>,
    repetition: Tensor<f32>,
    frequency: Tensor<f32>,
    presence: Tensor<f32>,
    mut out: Tensor<T>,
    vocab: u32,
) {
    let i = global_id();
    let row = group_id_y();
    if i < vocab {
        let at = row * vocab + i;
        let x = load(logits[at]).cast::<f32>();
        let count = load(output_counts[at]);
        let in_output = count > 0i32;
        let seen = in_output || load(prompt_mask[at]) != 0i32;
        let rep = load(repetition[row]);
        let repeated = select(x > 0.0f32, x / rep, x * rep);
        let y = select(seen, repeated, x)
            - load(frequency[row]) * count.cast::<f32>()
            - load(presence[row]) * select(in_output, 1.0f32, 0.0f32);
        store(out[at], y.cast::<T>());
    }
}

/// The penalty tensors of [`apply_penalties`].
pub struct Penalties<'a> {
    /// i32 `[batch, vocab]`: how often each token was generated so far (≥ 0).
    pub output_counts: &'a Tensor,
    /// i32 `[batch, vocab]`: nonzero where the token is in the prompt.
    pub prompt_mask: &'a Tensor,
    /// f32 `[batch]`: > 0 and finite; 1 disables.
    pub repetition: &'a Tensor,
    /// f32 `[batch]`: finite; 0 disables.
    pub frequency: &'a Tensor,
    /// f32 `[batch]`: finite; 0 disables.
    pub presence: &'a Tensor,
}

/// The penalised logits of `logits [batch, vocab]` into `out` (same dtype and shape, not
/// aliasing any input).
pub fn apply_penalties(
    ctx: &Context,
    logits: &Tensor,
    pen: &Penalties,
    out: &Tensor,
) -> Result<(), OpError> {
    let (batch, vocab) = check_logits(OP, logits)?;
    let (b, v) = (batch as usize, vocab as usize);
    for (name, t, dtype, shape) in [
        ("output_counts", pen.output_counts, DType::I32, vec![b, v]),
        ("prompt_mask", pen.prompt_mask, DType::I32, vec![b, v]),
        ("repetition", pen.repetition, DType::F32, vec![b]),
        ("frequency", pen.frequency, DType::F32, vec![b]),
        ("presence", pen.presence, DType::F32, vec![b]),
    ] {
        dtype_is(OP, name, t, dtype)?;
        shape_is(OP, name, t, &shape)?;
    }
    dtype_is(OP, "out", out, logits.dtype())?;
    shape_is(OP, "out", out, logits.shape())?;
    distinct(
        OP,
        out,
        &[
            ("logits", logits),
            ("output_counts", pen.output_counts),
            ("prompt_mask", pen.prompt_mask),
            ("repetition", pen.repetition),
            ("frequency", pen.frequency),
            ("presence", pen.presence),
        ],
    )?;
    if !ctx.recording_graph() {
        refuse_bad_rows(pen)?;
    }
    penalties_kernel::launch(
        ctx,
        penalties_kernel::Args {
            logits,
            output_counts: pen.output_counts,
            prompt_mask: pen.prompt_mask,
            repetition: pen.repetition,
            frequency: pen.frequency,
            presence: pen.presence,
            out,
            vocab,
        },
    )
    .grid([vocab.div_ceil(GROUP), batch, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}

/// The first row whose penalties are out of range, refused with its values.
fn refuse_bad_rows(pen: &Penalties) -> Result<(), OpError> {
    let read = |t: &Tensor| t.to_vec::<f32>().map_err(runtime(OP));
    let (rep, freq, pres) = (
        read(pen.repetition)?,
        read(pen.frequency)?,
        read(pen.presence)?,
    );
    for (r, ((&rp, &f), &p)) in rep.iter().zip(&freq).zip(&pres).enumerate() {
        let why = if !(rp.is_finite() && rp > 0.0) {
            format!("repetition = {rp} (must be finite and > 0; 1 disables)")
        } else if !f.is_finite() {
            format!("frequency = {f} (must be finite; 0 disables)")
        } else if !p.is_finite() {
            format!("presence = {p} (must be finite; 0 disables)")
        } else {
            continue;
        };
        return Err(OpError::invalid(OP, format!("row {r}: {why}")));
    }
    Ok(())
}
