//! `embedding`: the rows of a table gathered by token id, `out[t, :] = table[ids[t], :]`,
//! ids i32 or u32.
//!
//! An id outside `0..vocab` is never clamped or read out of bounds. The ids live on the
//! device, so the check runs there: eagerly, a first kernel records the first token whose
//! id is out of range in the caller's [`EmbeddingCheck`] (an atomic minimum), the wrapper
//! reads that one word back and refuses the call, naming the token and its id, before
//! the gather runs, so a refused call writes nothing to `out` (the read-back waits for
//! the check: the price of an exact error for device data). A call recorded into a graph
//! cannot read back: it gathers at once, writes a bad id's row as NaN and records the
//! token, which [`EmbeddingCheck::take_error`] reports after the replay. Nothing is
//! uploaded per call. The gather takes one 16-byte run of a row per thread.

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
/// elements, `row_vecs = d / vec` runs per row, `total` in all. Eagerly (`in_graph` 0)
/// the ids were checked before, and thread 0 leaves the check's word at u32::MAX for the
/// next call. In a recorded graph (`in_graph` 1) nothing could be checked before: a row
/// whose id is out of range is written as NaN and its token recorded in the word (an
/// atomic minimum), which [`EmbeddingCheck::take_error`] reads after the replay.
#[kernel]
pub fn embedding_kernel<T, I>(
    ids: Tensor<I>,
    table: Tensor<T>,
    mut out: Tensor<T>,
    mut first_bad: Tensor<u32>,
    vocab: u32,
    row_vecs: u32,
    total: u32,
    in_graph: u32,
    #[constexpr] vec: u32,
) {
    let v = global_id();
    if v == 0 && in_graph == 0 {
        store(first_bad[0], 4294967295u32);
    }
    if v < total {
        let t = v / row_vecs;
        let id = load(ids[t]).cast::<u32>();
        let dst = v * vec;
        if id < vocab {
            let src = (id * row_vecs + (v - t * row_vecs)) * vec;
            for e in 0..vec {
                store(out[dst + e], load(table[src + e]));
            }
        } else {
            if v == t * row_vecs {
                let _earlier = atomic_min(first_bad[0], t);
            }
            let poison = infinity() - infinity();
            for e in 0..vec {
                store(out[dst + e], poison.cast::<T>());
            }
        }
    }
}

/// The caller's scratch for the id check: one u32 on the device, u32::MAX between calls
/// (the gather, or a refused call, puts it back), so a call uploads nothing.
pub struct EmbeddingCheck {
    pub(crate) first_bad: Tensor,
}

impl EmbeddingCheck {
    /// Allocates the word the check writes.
    pub fn new(ctx: &Context) -> Result<EmbeddingCheck, OpError> {
        Ok(EmbeddingCheck {
            first_bad: ctx.tensor(&[u32::MAX], &[1]).map_err(runtime(OP))?,
        })
    }

    /// After calls recorded in a graph and replayed (which cannot refuse: a row whose id
    /// is out of range came out NaN), the first such token since the last look, as an
    /// error; the word is reset. Outside a graph a bad id is refused by the call itself.
    pub fn take_error(&self) -> Result<(), OpError> {
        match self.take_first_bad()? {
            None => Ok(()),
            Some(t) => Err(OpError::invalid(
                OP,
                format!("`ids` out of range in a graph replay: token {t}'s row was written as NaN"),
            )),
        }
    }

    /// The first token recorded with an out-of-range id, if any, putting the word back.
    fn take_first_bad(&self) -> Result<Option<usize>, OpError> {
        let word = self.first_bad.to_vec::<u32>().map_err(runtime(OP))?;
        match word.first().copied() {
            Some(t) if t != u32::MAX => {
                self.first_bad.write(&[u32::MAX]).map_err(runtime(OP))?;
                Ok(Some(t as usize))
            }
            _ => Ok(None),
        }
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
    let in_graph = ctx.recording_graph();
    if !in_graph {
        refuse_bad_ids(ctx, ids, check, tokens32, vocab32)?;
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
            in_graph: u32::from(in_graph),
        },
        embedding_kernel::Consts { vec },
    )
    .grid([total.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}

/// The eager check: the first token whose id is not below `vocab`, found on the device
/// and read back, refuses the call before anything is written.
fn refuse_bad_ids(
    ctx: &Context,
    ids: &Tensor,
    check: &EmbeddingCheck,
    tokens: u32,
    vocab: u32,
) -> Result<(), OpError> {
    embedding_check_kernel::launch(
        ctx,
        embedding_check_kernel::Args {
            ids,
            first_bad: &check.first_bad,
            tokens,
            vocab,
        },
    )
    .grid([tokens.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))?;
    if let Some(t) = check.take_first_bad()? {
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
    Ok(())
}
