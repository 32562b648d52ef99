//! The `fft` op wrapper: validates the call, then launches the power-of-two kernel or
//! Bluestein's over the plan's transform length.

use super::kernels::{fft_bluestein_kernel, fft_pow2_kernel, layout, Layout};
use super::plan::{FftNorm, FftPlan};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_is, fits_u32, shape_is};
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "fft";

/// `out = scale · DFT(x)` over dimension −2 of `x [rows…, n, 2]`: complex f32 as (re, im)
/// pairs (torch's `view_as_real` of complex64). Forward, X_k = Σ_j x_j·exp(−2πi·jk/n), or
/// with `inverse` the exponent's sign flipped; `norm` scales as `torch.fft.fft`/`ifft`
/// do. `plan` is the plan for this n ([`FftPlan::new`]); out is like x and separate.
pub fn fft(
    ctx: &Context,
    x: &Tensor,
    plan: &FftPlan,
    inverse: bool,
    norm: FftNorm,
    out: &Tensor,
) -> Result<(), OpError> {
    dtype_is(OP, "x", x, DType::F32)?;
    let shape = x.shape();
    let (rows, n) = match shape {
        [lead @ .., n, 2] => (lead.iter().product::<usize>(), *n),
        _ => {
            return Err(OpError::invalid(
                OP,
                format!(
                    "`x` must be [rows…, n, 2]: complex numbers as (re, im) pairs in a last \
                     dimension of 2, got shape {shape:?}"
                ),
            ))
        }
    };
    if rows == 0 || n == 0 {
        return Err(OpError::invalid(
            OP,
            format!("`x` must not be empty, got shape {shape:?}"),
        ));
    }
    if plan.n != n {
        return Err(OpError::invalid(
            OP,
            format!(
                "the plan is for rows of n = {}, but `x` has n = {n}; make one with \
                 FftPlan::new(ctx, {n})",
                plan.n
            ),
        ));
    }
    fits_u32(OP, "the element count of `x`", x.len())?;
    distinct(OP, out, &[("x", x)])?;
    dtype_is(OP, "out", out, DType::F32)?;
    shape_is(OP, "out", out, shape)?;
    let scale = norm.scale(n, inverse) as f32;
    let l = layout(plan.m.trailing_zeros());
    let rows = rows as u32;
    let grid = [rows.div_ceil(l.rows_per_group), 1, 1];
    match &plan.chirp {
        None => fft_pow2_kernel::launch(
            ctx,
            fft_pow2_kernel::Args {
                x,
                out,
                rows,
                scale,
                sign: if inverse { 1.0 } else { -1.0 },
            },
            consts_pow2(&l),
        )
        .grid(grid)
        .group_size(l.group)
        .run(),
        Some(t) => fft_bluestein_kernel::launch(
            ctx,
            fft_bluestein_kernel::Args {
                x,
                chirp: &t.chirp,
                spectrum: &t.spectrum,
                out,
                rows,
                n: n as u32,
                scale,
                conj: if inverse { -1.0 } else { 1.0 },
            },
            consts_bluestein(&l),
        )
        .grid(grid)
        .group_size(l.group)
        .run(),
    }
    .map_err(runtime(OP))
}

fn consts_pow2(l: &Layout) -> fft_pow2_kernel::Consts {
    fft_pow2_kernel::Consts {
        log_m: l.log_m,
        epl: l.epl,
        log_radix: l.log_radix,
        passes: l.passes,
        final_log: l.final_log,
        planes: l.planes,
        rows_per_group: l.rows_per_group,
    }
}

fn consts_bluestein(l: &Layout) -> fft_bluestein_kernel::Consts {
    fft_bluestein_kernel::Consts {
        log_m: l.log_m,
        epl: l.epl,
        log_radix: l.log_radix,
        passes: l.passes,
        final_log: l.final_log,
        planes: l.planes,
        rows_per_group: l.rows_per_group,
    }
}
