//! Causal depthwise conv1d with optional SiLU, as in Mamba and Gated DeltaNet blocks: the
//! prefill form over `[B, T, C]` (one thread per output element, reading `W` inputs of
//! its channel, the first `W − 1` positions from the carried state) and the decode form
//! for one token that also rolls the state `[B, C, W − 1]` by one.

use crate::error::{runtime, OpError};
use crate::validate::{
    distinct, distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES,
};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// Threads per threadgroup of both forms.
const GROUP: u32 = 256;

/// Prefill: `out[b, t, c]`, grid `[ceil(T·C / 256), B, 1]`; `act` is 1 for SiLU.
#[kernel]
pub fn conv1d_prefill_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    bias: Tensor<T>,
    state_in: Tensor<T>,
    mut out: Tensor<T>,
    mut state_out: Tensor<T>,
    t_len: u32,
    channels: u32,
    #[constexpr] width: u32,
    #[constexpr] act: u32,
) {
    let k = width - 1;
    let bi = group_id_y();
    let i = group_id_x() * group_size() + thread_id();
    if i < t_len * channels {
        let t = i / channels;
        let c = i - t * channels;
        let mut acc = load(bias[c]).cast::<f32>();
        for j in 0..width {
            // Padded position t + j: state below k, input above.
            let p = t + j;
            let from_state = p < k;
            let xi = (bi * t_len + select(from_state, 0, p - k)) * channels + c;
            let si = (bi * channels + c) * k + select(from_state, p, 0);
            let xv = select(
                from_state,
                load(state_in[si]).cast::<f32>(),
                load(x[xi]).cast::<f32>(),
            );
            acc += load(w[c * width + j]).cast::<f32>() * xv;
        }
        if act == 1 {
            acc = silu(acc);
        }
        store(out[(bi * t_len + t) * channels + c], acc.cast::<T>());
    }
    // The final state: the last k padded positions.
    if i < channels * k {
        let c = i / k;
        let m = i - c * k;
        let p = t_len + m;
        let v = if p < k {
            load(state_in[(bi * channels + c) * k + p])
        } else {
            load(x[(bi * t_len + p - k) * channels + c])
        };
        store(state_out[(bi * channels + c) * k + m], v);
    }
}

/// Decode: one token per batch row; grid `[ceil(C / 256), B, 1]`.
#[kernel]
pub fn conv1d_decode_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    bias: Tensor<T>,
    state_in: Tensor<T>,
    mut out: Tensor<T>,
    mut state_out: Tensor<T>,
    channels: u32,
    #[constexpr] width: u32,
    #[constexpr] act: u32,
) {
    let k = width - 1;
    let bi = group_id_y();
    let c = group_id_x() * group_size() + thread_id();
    if c < channels {
        let sb = (bi * channels + c) * k;
        let xv = load(x[bi * channels + c]);
        let mut acc =
            load(bias[c]).cast::<f32>() + load(w[c * width + k]).cast::<f32>() * xv.cast::<f32>();
        for j in 0..k {
            let s = load(state_in[sb + j]);
            acc += load(w[c * width + j]).cast::<f32>() * s.cast::<f32>();
            if j > 0 {
                store(state_out[sb + j - 1], s);
            }
        }
        store(state_out[sb + k - 1], xv);
        if act == 1 {
            acc = silu(acc);
        }
        store(out[bi * channels + c], acc.cast::<T>());
    }
}

/// The tensors of a conv1d call; `x`/`out` are `[B, T, C]` (prefill) or `[B, C]` (decode).
pub struct Conv1dArgs<'a> {
    pub x: &'a Tensor,
    /// `[C, W]`, 2 ≤ W ≤ 8.
    pub w: &'a Tensor,
    /// `[C]`.
    pub bias: &'a Tensor,
    /// `[B, C, W − 1]`, oldest first.
    pub state_in: &'a Tensor,
    pub out: &'a Tensor,
    pub state_out: &'a Tensor,
}

/// Checks everything but `x`/`out` shapes; returns (C, W).
fn check_common(op: &'static str, a: &Conv1dArgs, b: usize) -> Result<(usize, usize), OpError> {
    dtype_in(op, "x", a.x, &FLOAT_DTYPES)?;
    let t = a.x.dtype();
    for (n, x) in [
        ("w", a.w),
        ("bias", a.bias),
        ("state_in", a.state_in),
        ("out", a.out),
        ("state_out", a.state_out),
    ] {
        dtype_is(op, n, x, t)?;
    }
    let (c, width) = match a.w.shape() {
        &[c, width] if c > 0 && (2..=8).contains(&width) => (c, width),
        s => {
            return Err(OpError::invalid(
                op,
                format!("`w` must be [C, W] with C > 0 and a width W of 2..=8, got shape {s:?}"),
            ))
        }
    };
    shape_is(op, "bias", a.bias, &[c])?;
    shape_is(op, "state_in", a.state_in, &[b, c, width - 1])?;
    shape_is(op, "state_out", a.state_out, &[b, c, width - 1])?;
    let inputs = [
        ("x", a.x),
        ("w", a.w),
        ("bias", a.bias),
        ("state_in", a.state_in),
    ];
    distinct(op, a.out, &inputs)?;
    distinct_named(op, "state_out", a.state_out, &inputs)?;
    distinct_named(op, "state_out", a.state_out, &[("out", a.out)])?;
    fits_u32(op, "the element count", a.x.len())?;
    Ok((c, width))
}

/// Causal depthwise conv1d over `x: [B, T, C]` from the carried state; writes `out` and
/// the state after the last token.
pub fn causal_conv1d(ctx: &Context, a: &Conv1dArgs, silu: bool) -> Result<(), OpError> {
    const OP: &str = "causal_conv1d";
    let (b, t) = match a.x.shape() {
        &[b, t, _] if b > 0 && t > 0 => (b, t),
        s => {
            return Err(OpError::invalid(
                OP,
                format!("`x` must be [B, T, C] with B, T > 0, got shape {s:?}"),
            ))
        }
    };
    let (c, width) = check_common(OP, a, b)?;
    shape_is(OP, "x", a.x, &[b, t, c])?;
    shape_is(OP, "out", a.out, &[b, t, c])?;
    let per_batch = fits_u32(OP, "T·C", (t * c).max(c * (width - 1)))?;
    conv1d_prefill_kernel::launch(
        ctx,
        conv1d_prefill_kernel::Args {
            x: a.x,
            w: a.w,
            bias: a.bias,
            state_in: a.state_in,
            out: a.out,
            state_out: a.state_out,
            t_len: t as u32,
            channels: c as u32,
        },
        conv1d_prefill_kernel::Consts {
            width: width as u32,
            act: silu as u32,
        },
    )
    .grid([per_batch.div_ceil(GROUP), fits_u32(OP, "B", b)?, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}

/// One decode token per batch row: `x: [B, C]`; rolls the state by one.
pub fn causal_conv1d_update(ctx: &Context, a: &Conv1dArgs, silu: bool) -> Result<(), OpError> {
    const OP: &str = "causal_conv1d_update";
    let b = match a.x.shape() {
        &[b, _] if b > 0 => b,
        s => {
            return Err(OpError::invalid(
                OP,
                format!("`x` must be [B, C] with B > 0, got shape {s:?}"),
            ))
        }
    };
    let (c, width) = check_common(OP, a, b)?;
    shape_is(OP, "x", a.x, &[b, c])?;
    shape_is(OP, "out", a.out, &[b, c])?;
    conv1d_decode_kernel::launch(
        ctx,
        conv1d_decode_kernel::Args {
            x: a.x,
            w: a.w,
            bias: a.bias,
            state_in: a.state_in,
            out: a.out,
            state_out: a.state_out,
            channels: c as u32,
        },
        conv1d_decode_kernel::Consts {
            width: width as u32,
            act: silu as u32,
        },
    )
    .grid([(c as u32).div_ceil(GROUP), fits_u32(OP, "B", b)?, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}
