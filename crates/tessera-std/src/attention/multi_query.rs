//! Multi-query SDPA: `n_query` query rows (a block of new tokens) against one shared KV
//! cache in a single launch, causal within the block or full. It is decode with one row
//! per query token: row `r` sees `base_kv + r + 1` keys (causal) or `base_kv + n_query`.

use super::checks::{decode_head_dim, dims, gqa, indexable, same_dim, same_float_dtype};
use super::decode::{check_options, DecodeOptions};
use super::plan::{DecodeCall, DecodeWorkspace};
use crate::error::OpError;
use crate::validate::shape_is;
use tessera_runtime::{Context, Tensor};

/// `q [n_query, n_q_heads, D]` against k and v `[n_kv_heads, kv_stride, D]` whose first
/// `base_kv + n_query` positions hold the cached prefix followed by the block's own keys;
/// `out` like q. `causal`: query r attends `[0, base_kv + r]`; else `[0, base_kv + n_query)`.
/// The options are decode's: scale, a sliding window and attention sinks (per query row),
/// sink logits and a forced split count. `ws` is the split scratch for `n_query` rows
/// ([`DecodeWorkspace::for_cache`]`(ctx, n_query, n_q_heads, head_dim, kv_stride)`).
#[allow(clippy::too_many_arguments)]
pub fn sdpa_multi_query(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    base_kv: usize,
    causal: bool,
    opts: &DecodeOptions,
    ws: &DecodeWorkspace,
) -> Result<(), OpError> {
    const OP: &str = "sdpa_multi_query";
    same_float_dtype(OP, q, k, v, out)?;
    let qs = dims(OP, "q", q, "n_query, n_q_heads, head_dim")?;
    let ks = dims(OP, "k", k, "n_kv_heads, kv_stride, head_dim")?;
    shape_is(OP, "v", v, ks)?;
    shape_is(OP, "out", out, qs)?;
    let head_dim = decode_head_dim(OP, qs[2])?;
    same_dim(OP, "k's head_dim", ks[2], qs[2], "q")?;
    gqa(OP, qs[1], ks[0])?;
    indexable(OP, &[("q", q), ("k", k)])?;
    let (n_query, kv_stride) = (qs[0], ks[1]);
    if base_kv + n_query > kv_stride {
        return Err(OpError::invalid(
            OP,
            format!(
                "base_kv + n_query = {} exceeds the cache depth kv_stride = {kv_stride}",
                base_kv + n_query
            ),
        ));
    }
    let scale = check_options(OP, opts, q, qs[1], head_dim)?;
    let (len0, len_step) = if causal {
        (base_kv as u32 + 1, 1)
    } else {
        ((base_kv + n_query) as u32, 0)
    };
    let call = DecodeCall {
        op: OP,
        q,
        k,
        v,
        out,
        sinks: opts.sink_logits,
        kv_lens: None,
        rows: n_query as u32,
        n_q_heads: qs[1] as u32,
        n_kv_heads: ks[0] as u32,
        head_dim,
        kv_stride: kv_stride as u32,
        row_cache_rows: 0,
        len0,
        len_step,
        max_len: (base_kv + n_query) as u32,
        window: opts.window,
        n_sink: opts.n_sink,
        scale,
        paging: None,
        kv_quant: None,
    };
    call.run(ctx, opts.splits, ws)
}
