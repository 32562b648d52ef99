//! `argmax`: greedy decoding, the index of each row's largest logit, one threadgroup per
//! row. Ties go to the lowest index; +∞ is a maximum like any other; a row of only −∞
//! gives 0 (the lowest index of its maximum). A row holding a NaN gives −1, an id no
//! vocabulary has, so a NaN never passes as a token (an embedding refuses it).

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

/// The index of each row's maximum: `logits [batch, vocab]` float, `token` i32 `[batch]`.
pub fn argmax(ctx: &Context, logits: &Tensor, token: &Tensor) -> Result<(), OpError> {
    let (batch, vocab) = check_logits(OP, logits)?;
    dtype_is(OP, "token", token, DType::I32)?;
    shape_is(OP, "token", token, &[batch as usize])?;
    distinct(OP, token, &[("logits", logits)])?;
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
