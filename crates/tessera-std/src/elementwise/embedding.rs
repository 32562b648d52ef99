//! `embedding`: the rows of a table gathered by token id, `out[t, :] = table[ids[t], :]`,
//! ids i32 or u32.
//!
//! An id outside `0..vocab` is refused, never clamped or read out of bounds. The ids live
//! on the device, so the check runs there: a first kernel records the first token whose id
//! is out of range in the caller's [`EmbeddingCheck`] (an atomic minimum), the wrapper
//! reads that one word back and refuses the call, naming the token and its id, before
//! the gather runs, so a refused call writes nothing to `out`. The read-back waits for
//! the check (one small kernel over the ids), which is the price of an exact error for
//! device data; nothing is uploaded per call (the gather puts the word back). The gather
//! takes one 16-byte run of a row per thread.

use super::gated::{element_count, row_vectors, GROUP};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "embedding";

/// The id dtypes.
pub const ID_DTYPES: [DType; 2] = [DType::U32, DType::I32];

/// Records in `first_bad[0]` the smallest token whose id is not below `vocab` (a negative
/// i32 id is above every vocab once read as u32).
#[kernel]
pub fn embedding_check_kernel<I>(
    ids: Tensor<I>,
    mut first_bad: Tensor<u32>,
    tokens: u32,
    vocab: u32,
) {
    let t = global_id();
    if t < tokens {
        if load(ids[t]).cast::<u32>() >= vocab {
            let _earlier = atomic_min(first_bad[0], t);
        }
    }
}

/// `out[t, :] = table[ids[t], :]`: thread `v` copies the `v`-th run of `vec` output
/// elements, `row_vecs = d / vec` runs per row, `total` in all. Ids were checked before;
/// an id out of range here would copy nothing rather than read out of bounds. Thread 0
/// leaves the check's word at u32::MAX for the next call.
#[kernel]
pub fn embedding_kernel<T, I>(
    ids: Tensor<I>,
    table: Tensor<T>,
    mut out: Tensor<T>,
    mut first_bad: Tensor<u32>,
    vocab: u32,
    row_vecs: u32,
    total: u32,
    #[constexpr] vec: u32,
) {
    let v = global_id();
    if v == 0 {
        store(first_bad[0], 4294967295u32);
    }
    if v < total {
        let t = v / row_vecs;
        let id = load(ids[t]).cast::<u32>();
        if id < vocab {
            let src = (id * row_vecs + (v - t * row_vecs)) * vec;
            let dst = v * vec;
            for e in 0..vec {
                store(out[dst + e], load(table[src + e]));
            }
        }
    }
}

/// The caller's scratch for the id check: one u32 on the device, u32::MAX between calls
/// (the gather, or a refused call, puts it back), so a call uploads nothing.
pub struct EmbeddingCheck {
    first_bad: Tensor,
}

impl EmbeddingCheck {
    /// Allocates the word the check writes.
    pub fn new(ctx: &Context) -> Result<EmbeddingCheck, OpError> {
        Ok(EmbeddingCheck {
            first_bad: ctx.tensor(&[u32::MAX], &[1]).map_err(runtime(OP))?,
        })
    }
}

/// `out[t, :] = table[ids[t], :]`: ids i32/u32 `[tokens]`, table float `[vocab, d]`, out
/// `[tokens, d]` in the table's dtype. An id outside `0..vocab` is refused before
/// anything is written.
pub fn embedding(
    ctx: &Context,
    ids: &Tensor,
    table: &Tensor,
    out: &Tensor,
    check: &EmbeddingCheck,
) -> Result<(), OpError> {
    dtype_in(OP, "ids", ids, &ID_DTYPES)?;
    dtype_in(OP, "table", table, &FLOAT_DTYPES)?;
    dtype_is(OP, "out", out, table.dtype())?;
    distinct(OP, out, &[("ids", ids), ("table", table)])?;
    let &[vocab, d] = table.shape() else {
        return Err(OpError::invalid(
            OP,
            format!("`table` must be [vocab, d], got shape {:?}", table.shape()),
        ));
    };
    let &[tokens] = ids.shape() else {
        return Err(OpError::invalid(
            OP,
            format!("`ids` must be [tokens], got shape {:?}", ids.shape()),
        ));
    };
    if vocab == 0 || d == 0 || tokens == 0 {
        return Err(OpError::invalid(
            OP,
            format!("the tensors must not be empty: tokens = {tokens}, vocab = {vocab}, d = {d}"),
        ));
    }
    shape_is(OP, "out", out, &[tokens, d])?;
    if !ctx.owns(&check.first_bad) {
        return Err(OpError::invalid(
            OP,
            "the EmbeddingCheck was made by another context; make it with this one",
        ));
    }
    element_count(OP, table.len())?;
    element_count(OP, out.len())?;
    let vocab32 = fits_u32(OP, "vocab", vocab)?;
    if vocab32 > i32::MAX as u32 {
        return Err(OpError::invalid(OP, "vocab must be below 2^31"));
    }
    let tokens32 = fits_u32(OP, "tokens", tokens)?;
    embedding_check_kernel::launch(
        ctx,
        embedding_check_kernel::Args {
            ids,
            first_bad: &check.first_bad,
            tokens: tokens32,
            vocab: vocab32,
        },
    )
    .grid([tokens32.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))?;
    let first_bad = check
        .first_bad
        .to_vec::<u32>()
        .map_err(runtime(OP))?
        .first()
        .copied()
        .unwrap_or(u32::MAX);
    if first_bad != u32::MAX {
        check.first_bad.write(&[u32::MAX]).map_err(runtime(OP))?;
        let t = first_bad as usize;
        let id = match ids.dtype() {
            DType::I32 => ids
                .to_vec::<i32>()
                .map_err(runtime(OP))?
                .get(t)
                .map(|v| v.to_string()),
            _ => ids
                .to_vec::<u32>()
                .map_err(runtime(OP))?
                .get(t)
                .map(|v| v.to_string()),
        }
        .unwrap_or_default();
        return Err(OpError::invalid(
            OP,
            format!("`ids` out of range: token {t} has id {id}, the table has vocab = {vocab} rows (0..{vocab})"),
        ));
    }
    let (vec, row_vecs, total) = row_vectors(OP, table.dtype(), d, out.len())?;
    embedding_kernel::launch(
        ctx,
        embedding_kernel::Args {
            ids,
            table,
            out,
            first_bad: &check.first_bad,
            vocab: vocab32,
            row_vecs,
            total,
        },
        embedding_kernel::Consts { vec },
    )
    .grid([total.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}
