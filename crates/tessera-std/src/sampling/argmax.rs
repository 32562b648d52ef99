//! `argmax`: greedy decoding, the index of each row's largest logit, one threadgroup per
//! row. Ties go to the lowest index; +∞ is a maximum like any other; a row of only −∞
//! gives 0 (the lowest index of its maximum). A row holding a NaN gives −1, an id no
//! vocabulary has, so a NaN never passes as a token (an embedding refuses it).
//!
//! [`argmax_split`] takes a [`SamplingWorkspace`] and, for few long rows, splits each row
//! over its slices: each slice writes its maximum and the index of its first (or −1 for a
//! NaN), and a combine kernel per row picks the largest, the lowest index among equals —
//! the same token as the single-pass kernel, by construction.

use super::split::SamplingWorkspace;
use super::{check_logits, row_group};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_is, shape_is};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "argmax";

/// `token[r]` = the lowest index of row `r`'s maximum, or −1 when the row holds a NaN.
#[kernel]
pub fn argmax_kernel<T>(logits: Tensor<T>, mut token: Tensor<i32>, vocab: u32) {
    let row = group_id_x();
    let base = row * vocab;
    let mut m = neg_infinity();
    let mut at = vocab;
    let mut nan = 0u32;
    for i in range(thread_id(), vocab, group_size()) {
        let x = load(logits[base + i]).cast::<f32>();
        let nan_here = is_nan(x);
        nan = max(nan, select(nan_here, 1u32, 0u32));
        // The first index of the thread's maximum (its indices rise).
        let better = !nan_here && (x > m || at == vocab);
        at = select(better, i, at);
        m = select(better, x, m);
    }
    let gm = group_max(m);
    let first = group_min(select(m == gm, at, vocab));
    let any_nan = group_max(nan);
    if thread_id() == 0u32 {
        store(
            token[row],
            select(any_nan > 0u32, -1i32, first.cast::<i32>()),
        );
    }
}

/// Slice `group_id_x() % slices` of row `group_id_x() / slices` (`seg` logits from
/// `part · seg`): its maximum and the index of its first into `parts` (two f32 a slice),
/// the index `vocab` for a slice without a non-NaN logit, −1 for one holding a NaN.
#[kernel]
pub fn argmax_slice_kernel<T>(
    logits: Tensor<T>,
    mut parts: Tensor<f32>,
    vocab: u32,
    seg: u32,
    slices: u32,
) {
    let g = group_id_x();
    let row = g / slices;
    let start = min((g % slices) * seg, vocab);
    let stop = min(start + seg, vocab);
    let base = row * vocab;
    let mut m = neg_infinity();
    let mut at = vocab;
    let mut nan = 0u32;
    for i in range(start + thread_id(), stop, group_size()) {
        let x = load(logits[base + i]).cast::<f32>();
        let nan_here = is_nan(x);
        nan = max(nan, select(nan_here, 1u32, 0u32));
        let better = !nan_here && (x > m || at == vocab);
        at = select(better, i, at);
        m = select(better, x, m);
    }
    let gm = group_max(m);
    let first = group_min(select(m == gm, at, vocab));
    let any_nan = group_max(nan);
    if thread_id() == 0u32 {
        store(parts[2u32 * g], gm);
        store(
            parts[2u32 * g + 1u32],
            select(any_nan > 0u32, -1.0f32, first.cast::<f32>()),
        );
    }
}

/// `token[r]` from row `r`'s slices in `parts`: −1 when one holds a NaN, else the lowest
/// index among the slices holding the row's maximum (an all −∞ row gives 0, as its first
/// slice's first index).
#[kernel]
pub fn argmax_combine_kernel(parts: Tensor<f32>, mut token: Tensor<i32>, vocab: u32, slices: u32) {
    let row = group_id_x();
    let mut m = neg_infinity();
    let mut at = vocab;
    let mut nan = 0u32;
    for j in range(thread_id(), slices, group_size()) {
        let s = row * slices + j;
        let x = load(parts[2u32 * s]);
        let idx = load(parts[2u32 * s + 1u32]);
        nan = max(nan, select(idx < 0.0f32, 1u32, 0u32));
        let i = select(idx < 0.0f32, vocab, idx.cast::<u32>());
        // Slices rise in index: the first slice holding a larger value, or the first
        // holding any non-NaN logit.
        let better = i < vocab && (x > m || at == vocab);
        at = select(better, i, at);
        m = select(better, x, m);
    }
    let gm = group_max(m);
    let first = group_min(select(m == gm, at, vocab));
    let any_nan = group_max(nan);
    if thread_id() == 0u32 {
        store(
            token[row],
            select(any_nan > 0u32, -1i32, first.cast::<i32>()),
        );
    }
}

/// Checks `token` against `logits`: (batch, vocab).
fn check(logits: &Tensor, token: &Tensor) -> Result<(u32, u32), OpError> {
    let (batch, vocab) = check_logits(OP, logits)?;
    dtype_is(OP, "token", token, DType::I32)?;
    shape_is(OP, "token", token, &[batch as usize])?;
    distinct(OP, token, &[("logits", logits)])?;
    Ok((batch, vocab))
}

/// [`argmax`] with the split form for few long rows: each row over `ws`'s slices, then a
/// combine per row (the same tokens). `ws` is made for at least these rows
/// ([`SamplingWorkspace::new`]); a workspace of one slice runs the single-pass kernel.
pub fn argmax_split(
    ctx: &Context,
    logits: &Tensor,
    ws: &SamplingWorkspace,
    token: &Tensor,
) -> Result<(), OpError> {
    let (batch, vocab) = check(logits, token)?;
    let slices = ws.slices_checked(OP, batch)?;
    if slices == 1 {
        return single_pass(ctx, logits, token, batch, vocab);
    }
    let seg = vocab.div_ceil(slices);
    argmax_slice_kernel::launch(
        ctx,
        argmax_slice_kernel::Args {
            logits,
            parts: ws.parts(),
            vocab,
            seg,
            slices,
        },
    )
    .grid([batch * slices, 1, 1])
    .group_size(row_group(seg))
    .run()
    .map_err(runtime(OP))?;
    argmax_combine_kernel::launch(
        ctx,
        argmax_combine_kernel::Args {
            parts: ws.parts(),
            token,
            vocab,
            slices,
        },
    )
    .grid([batch, 1, 1])
    .group_size(slices.next_power_of_two().clamp(32, 1024))
    .run()
    .map_err(runtime(OP))
}

/// The index of each row's maximum: `logits [batch, vocab]` float, `token` i32 `[batch]`.
pub fn argmax(ctx: &Context, logits: &Tensor, token: &Tensor) -> Result<(), OpError> {
    let (batch, vocab) = check(logits, token)?;
    single_pass(ctx, logits, token, batch, vocab)
}

/// One threadgroup per row.
fn single_pass(
    ctx: &Context,
    logits: &Tensor,
    token: &Tensor,
    batch: u32,
    vocab: u32,
) -> Result<(), OpError> {
    argmax_kernel::launch(
        ctx,
        argmax_kernel::Args {
            logits,
            token,
            vocab,
        },
    )
    .grid([batch, 1, 1])
    .group_size(row_group(vocab))
    .run()
    .map_err(runtime(OP))
}
