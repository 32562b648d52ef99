//! RMSNorm over the last dimension in three layouts: four elements per thread
//! (`n = group_size·4`, n a multiple of 128 up to 4096), two per thread (head_dim-sized
//! rows, n a multiple of 64 up to 2048), and strided for any n. One threadgroup per row.
//! The dispatching [`rms_norm`] prefers the 16-byte layouts of `rms_norm_vec`.

use super::rms_inv::{rms_inv, tiny_square};
use super::rms_norm_vec::{rms_norm_vec, vec_layout};
use crate::error::{runtime, OpError};
use crate::float_range::f32_range;
use crate::validate::{
    distinct, dtype_in, dtype_is, eps_ok, fits_u32, rows_of, shape_is, FLOAT_DTYPES,
};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor, TypedLaunch};

/// RMSNorm, four consecutive elements per thread (`n = group_size·4`).
#[kernel]
pub fn rms_norm_tpg4_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut out: Tensor<T>,
    eps: f32,
    #[constexpr] n: u32,
) {
    let col = thread_id() * 4;
    let inside = col + 3 < n;
    let base = group_id_x() * n + select(inside, col, 0);
    let x0 = load(x[base]).cast::<f32>();
    let x1 = load(x[base + 1]).cast::<f32>();
    let x2 = load(x[base + 2]).cast::<f32>();
    let x3 = load(x[base + 3]).cast::<f32>();
    let ssq = select(inside, x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3, 0.0);
    let tiny = tiny_square(x0) + tiny_square(x1) + tiny_square(x2) + tiny_square(x3);
    let inv = rms_inv(ssq, select(inside, tiny, 0.0), f32_range(x), eps, n);
    if inside {
        let w0 = load(w[col]).cast::<f32>();
        let w1 = load(w[col + 1]).cast::<f32>();
        let w2 = load(w[col + 2]).cast::<f32>();
        let w3 = load(w[col + 3]).cast::<f32>();
        store(out[base], (x0 * inv * w0).cast::<T>());
        store(out[base + 1], (x1 * inv * w1).cast::<T>());
        store(out[base + 2], (x2 * inv * w2).cast::<T>());
        store(out[base + 3], (x3 * inv * w3).cast::<T>());
    }
}

/// RMSNorm, two consecutive elements per thread (`n = group_size·2`), for head_dim rows.
#[kernel]
pub fn rms_norm_small_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut out: Tensor<T>,
    eps: f32,
    #[constexpr] n: u32,
) {
    let col = thread_id() * 2;
    let inside = col + 1 < n;
    let base = group_id_x() * n + select(inside, col, 0);
    let x0 = load(x[base]).cast::<f32>();
    let x1 = load(x[base + 1]).cast::<f32>();
    let inv = rms_inv(
        select(inside, x0 * x0 + x1 * x1, 0.0),
        select(inside, tiny_square(x0) + tiny_square(x1), 0.0),
        f32_range(x),
        eps,
        n,
    );
    if inside {
        store(
            out[base],
            (x0 * inv * load(w[col]).cast::<f32>()).cast::<T>(),
        );
        store(
            out[base + 1],
            (x1 * inv * load(w[col + 1]).cast::<f32>()).cast::<T>(),
        );
    }
}

/// RMSNorm for any row length: each thread strides over the row, then re-reads it.
#[kernel]
pub fn rms_norm_wide_kernel<T>(x: Tensor<T>, w: Tensor<T>, mut out: Tensor<T>, eps: f32, n: u32) {
    let base = group_id_x() * n;
    let mut ssq = 0.0f32;
    let mut tiny = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        let v = load(x[base + i]).cast::<f32>();
        ssq += v * v;
        tiny += tiny_square(v);
    }
    let inv = rms_inv(ssq, tiny, f32_range(x), eps, n);
    for i in range(thread_id(), n, group_size()) {
        let v = load(x[base + i]).cast::<f32>() * inv * load(w[i]).cast::<f32>();
        store(out[base + i], v.cast::<T>());
    }
}

/// Validates `x: [rows…, n]`, `w: [n]`, `out` like `x`, one float dtype; returns (rows, n).
pub(crate) fn check_row_norm(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(u32, u32), OpError> {
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    dtype_is(op, "w", w, x.dtype())?;
    dtype_is(op, "out", out, x.dtype())?;
    let (rows, n) = rows_of(op, "x", x)?;
    shape_is(op, "w", w, &[n])?;
    shape_is(op, "out", out, x.shape())?;
    distinct(op, out, &[("x", x), ("w", w)])?;
    eps_ok(op, eps)?;
    let rows = fits_u32(op, "the row count", rows)?;
    let n = fits_u32(op, "the row length", n)?;
    fits_u32(op, "the element count", x.len())?;
    Ok((rows, n))
}

/// The four-per-thread layout's invariant: `n` a multiple of 128, at most 4096.
pub(crate) fn check_tpg4(op: &'static str, n: u32) -> Result<u32, OpError> {
    if !n.is_multiple_of(128) || n > 4096 {
        return Err(OpError::invalid(
            op,
            format!(
                "the row length n = {n} must be a multiple of 128 and at most 4096 \
                 (4 elements per thread, 32..=1024 threads); use rms_norm_wide for other lengths"
            ),
        ));
    }
    Ok(n / 4)
}

/// RMSNorm with four elements per thread: `n` a multiple of 128, at most 4096.
pub fn rms_norm_tpg4(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    const OP: &str = "rms_norm_tpg4";
    let (rows, n) = check_row_norm(OP, x, w, out, eps)?;
    let group = check_tpg4(OP, n)?;
    let args = rms_norm_tpg4_kernel::Args { x, w, out, eps };
    let consts = rms_norm_tpg4_kernel::Consts { n };
    run_per_row(
        rms_norm_tpg4_kernel::launch(ctx, args, consts),
        OP,
        rows,
        group,
    )
}

/// Runs a norm launch one threadgroup of `group` threads per row.
fn run_per_row(
    launch: TypedLaunch<'_>,
    op: &'static str,
    rows: u32,
    group: u32,
) -> Result<(), OpError> {
    launch
        .grid([rows, 1, 1])
        .group_size(group)
        .run()
        .map_err(runtime(op))
}

/// RMSNorm with two elements per thread: `n` a multiple of 64, at most 2048.
pub fn rms_norm_small(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    const OP: &str = "rms_norm_small";
    let (rows, n) = check_row_norm(OP, x, w, out, eps)?;
    if !n.is_multiple_of(64) || n > 2048 {
        return Err(OpError::invalid(
            OP,
            format!(
                "the row length n = {n} must be a multiple of 64 and at most 2048 \
                 (2 elements per thread, 32..=1024 threads); use rms_norm_wide for other lengths"
            ),
        ));
    }
    let args = rms_norm_small_kernel::Args { x, w, out, eps };
    let consts = rms_norm_small_kernel::Consts { n };
    run_per_row(
        rms_norm_small_kernel::launch(ctx, args, consts),
        OP,
        rows,
        n / 2,
    )
}

/// RMSNorm for any row length.
pub fn rms_norm_wide(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    const OP: &str = "rms_norm_wide";
    let (rows, n) = check_row_norm(OP, x, w, out, eps)?;
    // A quarter of the row per pass, in whole simdgroups, at most 1024 threads.
    let group = n.div_ceil(4).next_multiple_of(32).clamp(32, 1024);
    rms_norm_wide_kernel::launch(ctx, rms_norm_wide_kernel::Args { x, w, out, eps, n })
        .grid([rows, 1, 1])
        .group_size(group)
        .run()
        .map_err(runtime(OP))
}

/// RMSNorm over the last dimension of `x` with weight `w`: picks the 16-byte-access
/// layouts of [`rms_norm_vec`] where `n` allows (one row per threadgroup measured faster
/// than the pipelined `rms_norm_pipe` at 8192×4096 on an H200), else the four-per-thread layout when `n`
/// is a multiple of 128 up to 4096, two-per-thread for multiples of 64 up to 2048, and the
/// strided kernel otherwise.
pub fn rms_norm(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    let (_, n) = check_row_norm("rms_norm", x, w, out, eps)?;
    if vec_layout(x.dtype(), n).is_some() {
        rms_norm_vec(ctx, x, w, out, eps)
    } else if n.is_multiple_of(128) && n <= 4096 {
        rms_norm_tpg4(ctx, x, w, out, eps)
    } else if n.is_multiple_of(64) && n <= 2048 {
        rms_norm_small(ctx, x, w, out, eps)
    } else {
        rms_norm_wide(ctx, x, w, out, eps)
    }
}
