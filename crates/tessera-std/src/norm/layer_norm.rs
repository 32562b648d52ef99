//! LayerNorm over the last dimension with weight and bias: `out = (x - mean) / sqrt(var +
//! eps) · w + b`, the variance taken about the mean in a second pass (no cancellation).
//! Rows of finite values whose sum or sum of squares overflows f32 are taken again scaled
//! by 2⁻⁸⁰ (exact), in registers beside the plain sums, reduced only when the plain sum
//! overflowed (see norm::rms_inv); f16 rows cannot, and their kernel has no such branch.

use super::rms_norm::check_row_norm;
use super::rms_norm_residual::run_strided_rows;
use crate::error::OpError;
use crate::float_range::f32_range;
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
    let mut s_tiny = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        let v = load(x[base + i]).cast::<f32>();
        s += v;
        s_tiny += v * 8.271_806e-25;
    }
    let total = group_sum(s);
    let mut mean = total / nf;
    // f16 sums and squares cannot overflow f32: its kernel has neither rare branch.
    let wide = f32_range(x);
    if wide && abs(total) > 3.402_823_5e38 {
        mean = group_sum(s_tiny) / nf * 1.208_925_8e24;
    }
    // Deviations and their squares, plain and scaled by 2⁻⁸⁰ (x − mean may itself pass
    // f32's range when the mean is huge).
    let mean_tiny = mean * 8.271_806e-25;
    let mut ss = 0.0f32;
    let mut ss_tiny = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        let v = load(x[base + i]).cast::<f32>();
        let d = v - mean;
        ss += d * d;
        let dt = v * 8.271_806e-25 - mean_tiny;
        ss_tiny += dt * dt;
    }
    let var_sum = group_sum(ss);
    // The deviation's scale `k` and `inv` with `(x·k − mean·k)·inv` the normalised value:
    // k = 1 unless the sum of squares overflowed.
    let mut k = 1.0f32;
    let mut inv = rsqrt(var_sum / nf + eps);
    if wide && var_sum > 3.402_823_5e38 {
        k = 8.271_806e-25;
        inv = rsqrt(group_sum(ss_tiny) / nf);
    }
    let mean_k = mean * k;
    for i in range(thread_id(), n, group_size()) {
        let y = (load(x[base + i]).cast::<f32>() * k - mean_k) * inv * load(w[i]).cast::<f32>()
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
    let launch = layer_norm_kernel::launch(
        ctx,
        layer_norm_kernel::Args {
            x,
            w,
            b,
            out,
            eps,
            n,
        },
    );
    run_strided_rows(OP, launch, rows, n)
}
