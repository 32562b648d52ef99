//! The decode-attention ops: one new query token per sequence against its KV cache, with
//! GQA, a strided cache, sliding window, attention sinks, a learned sink logit, split-KV
//! (flash-decoding) and batched sequences of different lengths. Each wrapper validates
//! every invariant, then the shared plan picks one pass or split-KV by shape. Every one
//! takes the caller's [`DecodeWorkspace`]: any shape may split, and the call allocates
//! nothing.

use super::checks::{decode_head_dim, dims, gqa, indexable, same_dim, same_float_dtype, scale_ok};
use super::plan::{DecodeCall, DecodeWorkspace, MAX_SPLITS};
use crate::error::OpError;
use crate::validate::{dtype_is, shape_is};
use tessera_runtime::{Context, DType, Tensor};

/// What a decode call may add to plain attention over the whole cache.
#[derive(Clone, Copy, Default)]
pub struct DecodeOptions<'a> {
    /// Softmax scale; `None` is `1/sqrt(head_dim)`.
    pub scale: Option<f32>,
    /// Sliding window: attend only the last `window` keys (0: the whole cache).
    pub window: u32,
    /// Attention sinks: the first `n_sink` keys are always visible (with a window).
    pub n_sink: u32,
    /// A learned per-head sink logit `[n_q_heads]` in the model dtype, added to the softmax
    /// denominator as `exp(sink_h)`.
    pub sink_logits: Option<&'a Tensor>,
    /// Force the number of KV chunks (1: single pass); `None` lets the shape decide, up to
    /// what the workspace holds.
    pub splits: Option<u32>,
}

/// Checks the options against the call (sink logits' dtype and shape, the split count,
/// the scale) and returns the softmax scale.
pub(crate) fn check_options(
    op: &'static str,
    opts: &DecodeOptions,
    q: &Tensor,
    n_q_heads: usize,
    head_dim: u32,
) -> Result<f32, OpError> {
    if let Some(s) = opts.sink_logits {
        dtype_is(op, "sink_logits", s, q.dtype())?;
        shape_is(op, "sink_logits", s, &[n_q_heads])?;
    }
    if let Some(s) = opts.splits {
        if s == 0 || s > MAX_SPLITS {
            return Err(OpError::invalid(
                op,
                format!("`splits` must be in 1..={MAX_SPLITS}, got {s}"),
            ));
        }
    }
    let scale = opts.scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
    scale_ok(op, scale)?;
    Ok(scale)
}

/// Shapes of a single-sequence decode: q `[n_q_heads, D]` or `[1, n_q_heads, D]`, k and v
/// `[n_kv_heads, kv_stride, D]` or `[1, n_kv_heads, kv_stride, D]`.
struct Single {
    n_q_heads: usize,
    n_kv_heads: usize,
    kv_stride: usize,
    head_dim: u32,
}

fn check_single(
    op: &'static str,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
) -> Result<Single, OpError> {
    same_float_dtype(op, q, k, v, out)?;
    let qs = match q.shape() {
        [1, h, d] => [*h, *d],
        _ => {
            let s = dims(op, "q", q, "n_q_heads, head_dim")?;
            [s[0], s[1]]
        }
    };
    let ks = match k.shape() {
        [1, h, s, d] => [*h, *s, *d],
        _ => {
            let s = dims(op, "k", k, "n_kv_heads, kv_stride, head_dim")?;
            [s[0], s[1], s[2]]
        }
    };
    if qs.contains(&0) || ks.contains(&0) {
        return Err(OpError::invalid(
            op,
            format!(
                "`q` and `k` must not be empty, got {:?} and {:?}",
                q.shape(),
                k.shape()
            ),
        ));
    }
    shape_is(op, "v", v, k.shape())?;
    shape_is(op, "out", out, q.shape())?;
    let head_dim = decode_head_dim(op, qs[1])?;
    same_dim(op, "k's head_dim", ks[2], qs[1], "q")?;
    gqa(op, qs[0], ks[0])?;
    indexable(op, &[("q", q), ("k", k)])?;
    Ok(Single {
        n_q_heads: qs[0],
        n_kv_heads: ks[0],
        kv_stride: ks[1],
        head_dim,
    })
}

fn check_len(op: &'static str, kv_len: usize, kv_stride: usize) -> Result<u32, OpError> {
    if kv_len == 0 || kv_len > kv_stride {
        return Err(OpError::invalid(
            op,
            format!("kv_len = {kv_len} must be in 1..={kv_stride} (the cache depth kv_stride)"),
        ));
    }
    Ok(kv_len as u32)
}

/// Decode attention for one sequence over a strided KV cache: `q [n_q_heads, D]`, k and v
/// `[n_kv_heads, kv_stride, D]` of which the first `kv_len` positions are filled, `out`
/// like q. GQA: query head h reads KV head `h / (n_q_heads / n_kv_heads)`. Options add a
/// sliding window, attention sinks and a learned sink logit. Picks single pass or split-KV;
/// `ws` is the scratch of a split ([`DecodeWorkspace::for_cache`] with one row).
#[allow(clippy::too_many_arguments)]
pub fn sdpa_decode_strided(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    kv_len: usize,
    opts: &DecodeOptions,
    ws: &DecodeWorkspace,
) -> Result<(), OpError> {
    const OP: &str = "sdpa_decode_strided";
    decode_one(OP, ctx, q, k, v, out, Some(kv_len), opts, ws)
}

/// Decode attention for one sequence over a full cache: `q [n_q_heads, D]`, k and v
/// `[n_kv_heads, n_kv, D]`, `out` like q; head_dim one of 64, 96, 128, 192, 256, 512. A
/// long cache splits the keys into chunks: `ws` holds their partial results (make it once
/// with [`DecodeWorkspace::for_cache`]`(ctx, 1, n_q_heads, head_dim, n_kv)`).
pub fn sdpa_decode(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    scale: Option<f32>,
    ws: &DecodeWorkspace,
) -> Result<(), OpError> {
    let opts = DecodeOptions {
        scale,
        ..DecodeOptions::default()
    };
    decode_one("sdpa_decode", ctx, q, k, v, out, None, &opts, ws)
}

/// Split-KV (flash-decoding) decode: like [`sdpa_decode_strided`] but always in `splits`
/// KV chunks whose partial results a second kernel combines in `ws` (made with
/// [`DecodeWorkspace::new`]`(ctx, 1, n_q_heads, head_dim, splits)` or larger).
#[allow(clippy::too_many_arguments)]
pub fn sdpa_decode_split(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    kv_len: usize,
    splits: u32,
    opts: &DecodeOptions,
    ws: &DecodeWorkspace,
) -> Result<(), OpError> {
    let opts = DecodeOptions {
        splits: Some(splits),
        ..*opts
    };
    decode_one(
        "sdpa_decode_split",
        ctx,
        q,
        k,
        v,
        out,
        Some(kv_len),
        &opts,
        ws,
    )
}

#[allow(clippy::too_many_arguments)]
fn decode_one(
    op: &'static str,
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    kv_len: Option<usize>,
    opts: &DecodeOptions,
    ws: &DecodeWorkspace,
) -> Result<(), OpError> {
    let s = check_single(op, q, k, v, out)?;
    let len = check_len(op, kv_len.unwrap_or(s.kv_stride), s.kv_stride)?;
    let scale = check_options(op, opts, q, s.n_q_heads, s.head_dim)?;
    let call = DecodeCall {
        op,
        q,
        k,
        v,
        out,
        sinks: opts.sink_logits,
        kv_lens: None,
        rows: 1,
        n_q_heads: s.n_q_heads as u32,
        n_kv_heads: s.n_kv_heads as u32,
        head_dim: s.head_dim,
        kv_stride: s.kv_stride as u32,
        row_cache_rows: 0,
        len0: len,
        len_step: 0,
        max_len: len,
        window: opts.window,
        n_sink: opts.n_sink,
        scale,
        paging: None,
        kv_quant: None,
    };
    call.run(ctx, opts.splits, ws)
}

/// Batched decode: B sequences, one query token each, each with its own cache and length.
/// `q [B, n_q_heads, D]`, k and v `[B, n_kv_heads, kv_stride, D]`, `kv_lens` u32 `[B]` on
/// the device (each clamped to kv_stride; a sequence of length 0 gets zeros), `out` like
/// q. One launch of the partial kernel over every sequence and chunk, then the combine, in
/// `ws` ([`DecodeWorkspace::for_cache`]`(ctx, B, n_q_heads, head_dim, kv_stride)`).
#[allow(clippy::too_many_arguments)]
pub fn sdpa_decode_batched(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    kv_lens: &Tensor,
    out: &Tensor,
    opts: &DecodeOptions,
    ws: &DecodeWorkspace,
) -> Result<(), OpError> {
    const OP: &str = "sdpa_decode_batched";
    same_float_dtype(OP, q, k, v, out)?;
    let qs = dims(OP, "q", q, "batch, n_q_heads, head_dim")?;
    let ks = dims(OP, "k", k, "batch, n_kv_heads, kv_stride, head_dim")?;
    shape_is(OP, "v", v, ks)?;
    shape_is(OP, "out", out, qs)?;
    let head_dim = decode_head_dim(OP, qs[2])?;
    same_dim(OP, "k's head_dim", ks[3], qs[2], "q")?;
    same_dim(OP, "k's batch", ks[0], qs[0], "q")?;
    gqa(OP, qs[1], ks[1])?;
    dtype_is(OP, "kv_lens", kv_lens, DType::U32)?;
    shape_is(OP, "kv_lens", kv_lens, &[qs[0]])?;
    indexable(OP, &[("q", q), ("k", k)])?;
    let scale = check_options(OP, opts, q, qs[1], head_dim)?;
    let (batch, n_kv_heads, kv_stride) = (qs[0] as u32, ks[1] as u32, ks[2] as u32);
    let call = DecodeCall {
        op: OP,
        q,
        k,
        v,
        out,
        sinks: opts.sink_logits,
        kv_lens: Some(kv_lens),
        rows: batch,
        n_q_heads: qs[1] as u32,
        n_kv_heads,
        head_dim,
        kv_stride,
        row_cache_rows: n_kv_heads * kv_stride,
        len0: 0,
        len_step: 0,
        max_len: kv_stride,
        window: opts.window,
        n_sink: opts.n_sink,
        scale,
        paging: None,
        kv_quant: None,
    };
    call.run(ctx, opts.splits, ws)
}
