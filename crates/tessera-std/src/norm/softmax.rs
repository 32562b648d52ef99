//! Softmax over the last dimension and its log-normaliser, logsumexp: a threadgroup max,
//! then a threadgroup sum of `exp(x - max)`, in f32.

use super::rms_norm_residual::run_strided_rows;
use crate::error::OpError;
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, rows_of, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// `out[r, i] = exp(x[r, i] - max_r) / Σ_j exp(x[r, j] - max_r)`, one threadgroup per row.
#[kernel]
pub fn softmax_kernel<T>(x: Tensor<T>, mut out: Tensor<T>, n: u32) {
    let base = group_id_x() * n;
    let mut m = neg_infinity();
    for i in range(thread_id(), n, group_size()) {
        m = max(m, load(x[base + i]).cast::<f32>());
    }
    let gm = group_max(m);
    let mut s = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        s += exp(load(x[base + i]).cast::<f32>() - gm);
    }
    let inv = 1.0f32 / group_sum(s);
    for i in range(thread_id(), n, group_size()) {
        let y = exp(load(x[base + i]).cast::<f32>() - gm) * inv;
        store(out[base + i], y.cast::<T>());
    }
}

/// `out[r] = max_r + ln Σ_j exp(x[r, j] - max_r)` in f32, one threadgroup per row; −∞ for
/// an all −∞ row, +∞ for a row holding +∞, NaN for a row holding NaN.
#[kernel]
pub fn logsumexp_kernel<T>(x: Tensor<T>, mut out: Tensor<f32>, n: u32) {
    let base = group_id_x() * n;
    let mut m = neg_infinity();
    for i in range(thread_id(), n, group_size()) {
        m = max(m, load(x[base + i]).cast::<f32>());
    }
    // An infinite max shifts by 0 instead: an all −∞ row gives ln 0 = −∞ and a row holding
    // +∞ gives +∞, where `x − max` would be ∞ − ∞ = NaN.
    let gm = group_max(m);
    let shift = select(abs(gm) == infinity(), 0.0f32, gm);
    let mut s = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        s += exp(load(x[base + i]).cast::<f32>() - shift);
    }
    let total = group_sum(s);
    if thread_id() == 0 {
        store(out[group_id_x()], shift + ln(total));
    }
}

fn rows(op: &'static str, x: &Tensor) -> Result<(u32, u32), OpError> {
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    let (rows, n) = rows_of(op, "x", x)?;
    fits_u32(op, "the element count", x.len())?;
    Ok((rows as u32, n as u32))
}

/// Softmax over the last dimension: `x [rows…, n]`, out like x, one float dtype.
pub fn softmax(ctx: &Context, x: &Tensor, out: &Tensor) -> Result<(), OpError> {
    const OP: &str = "softmax";
    let (rows, n) = rows(OP, x)?;
    dtype_is(OP, "out", out, x.dtype())?;
    shape_is(OP, "out", out, x.shape())?;
    distinct(OP, out, &[("x", x)])?;
    let launch = softmax_kernel::launch(ctx, softmax_kernel::Args { x, out, n });
    run_strided_rows(OP, launch, rows, n)
}

/// logsumexp over the last dimension: `x [rows…, n]` in a float dtype, out f32 `[rows…]`
/// (`[1]` for a 1-D x).
pub fn logsumexp(ctx: &Context, x: &Tensor, out: &Tensor) -> Result<(), OpError> {
    const OP: &str = "logsumexp";
    let (rows, n) = rows(OP, x)?;
    dtype_is(OP, "out", out, DType::F32)?;
    let lead = &x.shape()[..x.shape().len() - 1];
    let want: Vec<usize> = if lead.is_empty() {
        vec![1]
    } else {
        lead.to_vec()
    };
    shape_is(OP, "out", out, &want)?;
    distinct(OP, out, &[("x", x)])?;
    let launch = logsumexp_kernel::launch(ctx, logsumexp_kernel::Args { x, out, n });
    run_strided_rows(OP, launch, rows, n)
}
