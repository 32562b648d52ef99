//! LayerNorm over the last dimension with weight and bias: `out = (x - mean) / sqrt(var +
//! eps) · w + b`, the variance taken about the mean in a second pass (no cancellation).

use super::rms_norm::check_row_norm;
use super::rms_norm_residual::strided_group;
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_is, shape_is};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// LayerNorm, one threadgroup per row, each thread striding over the row three times
/// (mean, variance about the mean, output).
#[kernel]
pub fn layer_norm_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    b: Tensor<T>,
    mut out: Tensor<T>,
    eps: f32,
    n: u32,
) {
    let base = group_id_x() * n;
    let nf = n.cast::<f32>();
    let mut s = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        s += load(x[base + i]).cast::<f32>();
    }
    let mean = group_sum(s) / nf;
    let mut ss = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        let d = load(x[base + i]).cast::<f32>() - mean;
        ss += d * d;
    }
    let inv = rsqrt(group_sum(ss) / nf + eps);
    for i in range(thread_id(), n, group_size()) {
        let y = (load(x[base + i]).cast::<f32>() - mean) * inv * load(w[i]).cast::<f32>()
            + load(b[i]).cast::<f32>();
        store(out[base + i], y.cast::<T>());
    }
}

/// LayerNorm of `x [rows…, n]` with weight and bias `[n]`, out like x; one float dtype.
pub fn layer_norm(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    const OP: &str = "layer_norm";
    let (rows, n) = check_row_norm(OP, x, w, out, eps)?;
    dtype_is(OP, "b", b, x.dtype())?;
    shape_is(OP, "b", b, &[n as usize])?;
    distinct(OP, out, &[("b", b)])?;
    layer_norm_kernel::launch(
        ctx,
        layer_norm_kernel::Args {
            x,
            w,
            b,
            out,
            eps,
            n,
        },
    )
    .grid([rows, 1, 1])
    .group_size(strided_group(n))
    .run()
    .map_err(runtime(OP))
}
