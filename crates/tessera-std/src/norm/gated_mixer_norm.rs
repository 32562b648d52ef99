//! The gated mixer norm of Gated DeltaNet blocks: `out = rms_norm(y, w) · silu(z)` per row,
//! `y` in f32 (the recurrence output), `z` and `w` in the model dtype.

use super::rms_inv::{rms_inv, tiny_square};
use super::rms_norm::check_tpg4;
use crate::error::{runtime, OpError};
use crate::float_range::f32_range;
use crate::validate::{
    distinct, dtype_in, dtype_is, eps_ok, fits_u32, rows_of, shape_is, FLOAT_DTYPES,
};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// `out = rms_norm(y, w) · silu(z)`, four elements per thread (`n = group_size·4`).
#[kernel]
pub fn gated_mixer_norm_kernel<T>(
    y: Tensor<f32>,
    z: Tensor<T>,
    w: Tensor<T>,
    mut out: Tensor<T>,
    eps: f32,
    #[constexpr] n: u32,
) {
    let col = thread_id() * 4;
    let inside = col + 3 < n;
    let base = group_id_x() * n + select(inside, col, 0);
    let y0 = load(y[base]);
    let y1 = load(y[base + 1]);
    let y2 = load(y[base + 2]);
    let y3 = load(y[base + 3]);
    let inv = rms_inv(
        select(inside, y0 * y0 + y1 * y1 + y2 * y2 + y3 * y3, 0.0),
        select(
            inside,
            tiny_square(y0) + tiny_square(y1) + tiny_square(y2) + tiny_square(y3),
            0.0,
        ),
        f32_range(y),
        eps,
        n,
    );
    if inside {
        let g0 = silu(load(z[base]).cast::<f32>());
        let g1 = silu(load(z[base + 1]).cast::<f32>());
        let g2 = silu(load(z[base + 2]).cast::<f32>());
        let g3 = silu(load(z[base + 3]).cast::<f32>());
        store(
            out[base],
            (y0 * inv * load(w[col]).cast::<f32>() * g0).cast::<T>(),
        );
        store(
            out[base + 1],
            (y1 * inv * load(w[col + 1]).cast::<f32>() * g1).cast::<T>(),
        );
        store(
            out[base + 2],
            (y2 * inv * load(w[col + 2]).cast::<f32>() * g2).cast::<T>(),
        );
        store(
            out[base + 3],
            (y3 * inv * load(w[col + 3]).cast::<f32>() * g3).cast::<T>(),
        );
    }
}

/// `out = rms_norm(y, w) · silu(z)`: `y: [rows…, n]` f32, `z` and `out` like `y` in a float
/// dtype, `w: [n]` in that dtype; `n` a multiple of 128, at most 4096.
pub fn gated_mixer_norm(
    ctx: &Context,
    y: &Tensor,
    z: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    const OP: &str = "gated_mixer_norm";
    dtype_is(OP, "y", y, DType::F32)?;
    dtype_in(OP, "z", z, &FLOAT_DTYPES)?;
    dtype_is(OP, "w", w, z.dtype())?;
    dtype_is(OP, "out", out, z.dtype())?;
    let (rows, n) = rows_of(OP, "y", y)?;
    shape_is(OP, "z", z, y.shape())?;
    shape_is(OP, "w", w, &[n])?;
    shape_is(OP, "out", out, y.shape())?;
    distinct(OP, out, &[("y", y), ("z", z), ("w", w)])?;
    eps_ok(OP, eps)?;
    let rows = fits_u32(OP, "the row count", rows)?;
    let n = fits_u32(OP, "the row length", n)?;
    let group = check_tpg4(OP, n)?;
    gated_mixer_norm_kernel::launch(
        ctx,
        gated_mixer_norm_kernel::Args { y, z, w, out, eps },
        gated_mixer_norm_kernel::Consts { n },
    )
    .grid([rows, 1, 1])
    .group_size(group)
    .run()
    .map_err(runtime(OP))
}
