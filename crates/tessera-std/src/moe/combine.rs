//! `moe_combine`: a token's expert outputs weighted by its router weights and summed,
//! `out[t, :] = Σ_j w[t, j]·y[t, j, :]` (+ `shared[t, :]`, a shared expert's output, when
//! given), in f32, slot 0 first. A NaN weight (the router's answer for a NaN row) makes the
//! token's row NaN. One thread per output element.

use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "moe_combine";
const GROUP: u32 = 256;

/// `out[i] = (shared[i] if has_shared) + Σ_j weights[t, j]·y[t, j, c]` with `i = t·d + c`.
/// Grid `[ceil(total / 256), 1, 1]`.
#[kernel]
pub fn moe_combine_kernel<T>(
    y: Tensor<T>,
    weights: Tensor<f32>,
    shared: Tensor<T>,
    mut out: Tensor<T>,
    top_k: u32,
    d: u32,
    total: u32,
    has_shared: u32,
) {
    let i = global_id();
    if i < total {
        let t = i / d;
        let c = i - t * d;
        let mut s = select(has_shared == 1u32, load(shared[i]).cast::<f32>(), 0.0f32);
        for j in range(0u32, top_k, 1u32) {
            let at = t * top_k + j;
            s = fma(load(weights[at]), load(y[at * d + c]).cast::<f32>(), s);
        }
        store(out[i], s.cast::<T>());
    }
}

/// `out[t, :] = Σ_j topk_weights[t, j]·y[t, j, :] (+ shared[t, :])`: `y` float `[tokens,
/// top_k, D]`, `topk_weights` f32 `[tokens, top_k]`, `shared` and `out` `[tokens, D]` in
/// y's dtype.
pub fn moe_combine(
    ctx: &Context,
    y: &Tensor,
    topk_weights: &Tensor,
    shared: Option<&Tensor>,
    out: &Tensor,
) -> Result<(), OpError> {
    dtype_in(OP, "y", y, &FLOAT_DTYPES)?;
    let (tokens, top_k, d) = match *y.shape() {
        [t, k, d] if t > 0 && k > 0 && d > 0 => (t, k, d),
        ref s => {
            return Err(OpError::invalid(
                OP,
                format!("`y` must be a non-empty [tokens, top_k, D], got shape {s:?}"),
            ))
        }
    };
    dtype_is(OP, "topk_weights", topk_weights, DType::F32)?;
    shape_is(OP, "topk_weights", topk_weights, &[tokens, top_k])?;
    if let Some(s) = shared {
        dtype_is(OP, "shared", s, y.dtype())?;
        shape_is(OP, "shared", s, &[tokens, d])?;
    }
    dtype_is(OP, "out", out, y.dtype())?;
    shape_is(OP, "out", out, &[tokens, d])?;
    let mut inputs = vec![("y", y), ("topk_weights", topk_weights)];
    if let Some(s) = shared {
        inputs.push(("shared", s));
    }
    distinct_named(OP, "out", out, &inputs)?;
    fits_u32(OP, "the element count of `y`", y.len())?;
    let total = fits_u32(OP, "the element count of `out`", out.len())?;
    moe_combine_kernel::launch(
        ctx,
        moe_combine_kernel::Args {
            y,
            weights: topk_weights,
            shared: shared.unwrap_or(y),
            out,
            top_k: top_k as u32,
            d: d as u32,
            total,
            has_shared: u32::from(shared.is_some()),
        },
    )
    .grid([total.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}
