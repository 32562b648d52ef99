//! The RoPE op wrappers: validate the tensors against the table, then launch one
//! threadgroup per (token, head).

use super::kernels::{norm_rope_kernel, rope_kernel};
use super::table::{RopeLayout, RopeTable};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, eps_ok, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_runtime::{Context, DType, Tensor, TypedLaunch};

/// Checks x `[tokens, heads, D]`, positions u32 `[tokens]`, out like x, and the table's
/// rot_dim against D; returns (tokens, heads, D).
fn check(
    op: &'static str,
    x: &Tensor,
    positions: &Tensor,
    table: &RopeTable,
    out: &Tensor,
) -> Result<(u32, u32, u32), OpError> {
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    dtype_is(op, "out", out, x.dtype())?;
    let [tokens, heads, d] = match x.shape() {
        &[t, h, d] if t > 0 && h > 0 && d > 0 => [t, h, d],
        s => {
            return Err(OpError::invalid(
                op,
                format!("`x` must be a non-empty [tokens, heads, head_dim], got shape {s:?}"),
            ))
        }
    };
    shape_is(op, "out", out, x.shape())?;
    dtype_is(op, "positions", positions, DType::U32)?;
    shape_is(op, "positions", positions, &[tokens])?;
    distinct(op, out, &[("x", x), ("positions", positions)])?;
    if table.config.rot_dim > d {
        return Err(OpError::invalid(
            op,
            format!(
                "the table rotates rot_dim = {} dims but head_dim is {d}",
                table.config.rot_dim
            ),
        ));
    }
    fits_u32(op, "the element count of `x`", x.len())?;
    if heads > 65535 {
        return Err(OpError::invalid(
            op,
            format!("{heads} heads is above the grid's 65535 per axis"),
        ));
    }
    Ok((tokens as u32, heads as u32, d as u32))
}

/// Heads one threadgroup rotates: a prompt's many tokens fill the device with 8 heads a
/// group (each thread's cos/sin formed once for 8 heads); a decode step's few tokens keep
/// one head a group, for as many groups as there are heads.
pub(crate) fn heads_per_group(tokens: u32) -> u32 {
    if tokens >= 64 {
        8
    } else {
        1
    }
}

/// Runs `launch` on the grid of both RoPE kernels: x is the token, y the group of
/// [`heads_per_group`] heads; `group_size` threads each.
fn run_per_token(
    op: &'static str,
    launch: TypedLaunch<'_>,
    tokens: u32,
    heads: u32,
    group_size: u32,
) -> Result<(), OpError> {
    launch
        .grid([tokens, heads.div_ceil(heads_per_group(tokens)), 1])
        .group_size(group_size)
        .run()
        .map_err(runtime(op))
}

fn neox(table: &RopeTable) -> u32 {
    u32::from(table.config.layout == RopeLayout::NeoX)
}

/// Rotary position embedding of `x [tokens, heads, D]` at `positions` (u32 `[tokens]`)
/// with a table's frequencies, layout and rotated dims; out like x.
pub fn rope(
    ctx: &Context,
    x: &Tensor,
    positions: &Tensor,
    table: &RopeTable,
    out: &Tensor,
) -> Result<(), OpError> {
    const OP: &str = "rope";
    let (tokens, heads, d) = check(OP, x, positions, table, out)?;
    let launch = rope_kernel::launch(
        ctx,
        rope_kernel::Args {
            x,
            positions,
            inv_freq: &table.inv_freq,
            out,
            n_heads: heads,
            mscale: table.mscale,
        },
        rope_kernel::Consts {
            head_dim: d,
            rot_dim: table.config.rot_dim as u32,
            neox: neox(table),
            heads_per_group: heads_per_group(tokens),
        },
    );
    // Threads stride over the head: half as many as its elements, whole simdgroups.
    let threads = d.div_ceil(2).next_multiple_of(32).min(1024);
    run_per_token(OP, launch, tokens, heads, threads)
}

/// Per-head RMSNorm (weight `[D]`) then RoPE, for one of q or k: `x [tokens, heads, D]`,
/// D a multiple of 32 up to 1024.
#[allow(clippy::too_many_arguments)]
fn norm_rope_one(
    op: &'static str,
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    positions: &Tensor,
    table: &RopeTable,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    let (tokens, heads, d) = check(op, x, positions, table, out)?;
    dtype_is(op, "the norm weight", w, x.dtype())?;
    shape_is(op, "the norm weight", w, &[d as usize])?;
    distinct(op, out, &[("the norm weight", w)])?;
    eps_ok(op, eps)?;
    if !d.is_multiple_of(32) || d > 1024 {
        return Err(OpError::invalid(
            op,
            format!(
                "head_dim {d} must be a multiple of 32 and at most 1024 (one thread per element)"
            ),
        ));
    }
    let launch = norm_rope_kernel::launch(
        ctx,
        norm_rope_kernel::Args {
            x,
            w,
            positions,
            inv_freq: &table.inv_freq,
            out,
            n_heads: heads,
            eps,
            mscale: table.mscale,
        },
        norm_rope_kernel::Consts {
            head_dim: d,
            rot_dim: table.config.rot_dim as u32,
            neox: neox(table),
            heads_per_group: heads_per_group(tokens),
        },
    );
    run_per_token(op, launch, tokens, heads, d)
}

/// Qwen3-style fused q/k RMSNorm + RoPE: each head of q `[tokens, hq, D]` and k `[tokens,
/// hk, D]` is RMS-normalised with `q_w` / `k_w` `[D]` and rotated at `positions`.
/// Everything is validated before either launch.
#[allow(clippy::too_many_arguments)]
pub fn qk_norm_rope(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    q_w: &Tensor,
    k_w: &Tensor,
    positions: &Tensor,
    table: &RopeTable,
    q_out: &Tensor,
    k_out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    const OP: &str = "qk_norm_rope";
    dtype_is(OP, "k", k, q.dtype())?;
    if k.shape().first() != q.shape().first() || k.shape().get(2) != q.shape().get(2) {
        return Err(OpError::invalid(
            OP,
            format!(
                "`k` must share tokens and head_dim with `q` {:?}, got {:?}",
                q.shape(),
                k.shape()
            ),
        ));
    }
    if q_out.same_buffer(k) || q_out.same_buffer(k_out) || k_out.same_buffer(q) {
        return Err(OpError::invalid(
            OP,
            "`q_out` and `k_out` must be separate from each other and from q and k",
        ));
    }
    // Validate k's call fully before launching q's.
    check(OP, k, positions, table, k_out)?;
    dtype_is(OP, "the norm weight", k_w, k.dtype())?;
    shape_is(OP, "the norm weight", k_w, &k.shape()[2..])?;
    norm_rope_one(OP, ctx, q, q_w, positions, table, q_out, eps)?;
    norm_rope_one(OP, ctx, k, k_w, positions, table, k_out, eps)
}
