//! RMSNorm software-pipelined over rows: a grid sized to the device's resident
//! threadgroups walks the rows with stride `num_groups_x()`, and each threadgroup issues the
//! 16-byte loads of its next row before the reduction barrier of the current one, so the
//! loads of an SM no longer come in bursts between barriers. The reduction is one shuffle
//! tree per simdgroup and one barrier per row (the per-simdgroup partials alternate between
//! two slots), and the weight row stays in registers across rows.

use super::rms_inv::{rms_inv_pipelined, tiny_square};
use super::rms_norm::check_row_norm;
use super::rms_norm_vec::{spread_offset, vec_layout, VecLayout};
use crate::error::{runtime, OpError};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// Rows of `n` elements, `n / epl` threads per threadgroup holding `epl` elements each in
/// runs of `vec` (`spread_offset`); threadgroup `g` takes rows `g, g + G, g + 2G, …` (`G`
/// groups, `G <= rows`).
#[kernel]
pub fn rms_norm_pipe_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut out: Tensor<T>,
    eps: f32,
    rows: u32,
    #[constexpr] n: u32,
    #[constexpr] epl: u32,
    #[constexpr] vec: u32,
) {
    let sgs = n / epl / 32;
    let lane_col = thread_id() * vec;
    let stride = num_groups_x();
    let ws = stack_array::<f32>(epl);
    let xs = stack_array::<f32>(epl);
    let nx = stack_array::<f32>(epl);
    let part = threadgroup_array::<f32>(4 * sgs);
    let first = group_id_x();
    for e in 0..epl {
        store(
            xs[e],
            load(x[first * n + lane_col + spread_offset(e, n, epl, vec)]).cast::<f32>(),
        );
    }
    for e in 0..epl {
        store(
            ws[e],
            load(w[lane_col + spread_offset(e, n, epl, vec)]).cast::<f32>(),
        );
    }
    let mut parity = 0u32;
    for r in range(first, rows, stride) {
        // The next row's loads go out before this row's barrier (the last row reloads
        // itself: an L1/L2 hit, and no branch around the loads).
        let next = r + stride;
        let nrow = select(next < rows, next, r);
        for e in 0..epl {
            store(
                nx[e],
                load(x[nrow * n + lane_col + spread_offset(e, n, epl, vec)]).cast::<f32>(),
            );
        }
        let mut ssq = 0.0f32;
        let mut tiny = 0.0f32;
        for e in 0..epl {
            let v = load(xs[e]);
            ssq += v * v;
            tiny += tiny_square(v);
        }
        let inv = rms_inv_pipelined(ssq, tiny, part, parity, sgs, n, eps);
        for e in 0..epl {
            let y = load(xs[e]) * inv * load(ws[e]);
            store(
                out[r * n + lane_col + spread_offset(e, n, epl, vec)],
                y.cast::<T>(),
            );
            store(xs[e], load(nx[e]));
        }
        parity = 1 - parity;
    }
}

/// Resident threadgroups of `threads` threads per compute unit the launch aims at.
fn groups_per_unit(threads: u32) -> u32 {
    (2048 / threads).clamp(1, 8)
}

/// The `(epl, vec, threads)` of the pipelined layout for rows of `n` in `x`'s dtype, where
/// the one-row-per-threadgroup 16-byte layout applies.
pub fn pipe_layout(x: &Tensor, n: u32) -> Option<(u32, u32, u32)> {
    match vec_layout(x.dtype(), n)? {
        VecLayout::Row { epl, vec, threads } => Some((epl, vec, threads)),
        VecLayout::Rows { .. } => None,
    }
}

/// Pipelined RMSNorm over rows of `n` that [`pipe_layout`] accepts, on `groups` (≥ 1)
/// threadgroups, or as many as the device keeps resident when `groups` is `None`.
pub fn rms_norm_pipe_on(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
    groups: Option<u32>,
) -> Result<(), OpError> {
    const OP: &str = "rms_norm_pipe";
    let (rows, n) = check_row_norm(OP, x, w, out, eps)?;
    let (epl, vec, threads) = pipe_layout(x, n).ok_or_else(|| {
        OpError::invalid(
            OP,
            format!(
                "the row length n = {n} is not a whole number of 16-byte accesses per thread \
                 for 32..=1024 threads; use rms_norm for any length"
            ),
        )
    })?;
    if rows == 0 {
        return Ok(());
    }
    let units = ctx.info().compute_units.max(1);
    let groups = groups
        .unwrap_or(units * groups_per_unit(threads))
        .clamp(1, rows);
    rms_norm_pipe_kernel::launch(
        ctx,
        rms_norm_pipe_kernel::Args {
            x,
            w,
            out,
            eps,
            rows,
        },
        rms_norm_pipe_kernel::Consts { n, epl, vec },
    )
    .grid([groups, 1, 1])
    .group_size(threads)
    .run()
    .map_err(runtime(OP))
}

/// Pipelined RMSNorm: `n` a whole number of 16-byte accesses per thread (see
/// [`pipe_layout`]), the grid sized to the device's resident threadgroups.
pub fn rms_norm_pipe(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    eps: f32,
) -> Result<(), OpError> {
    rms_norm_pipe_on(ctx, x, w, out, eps, None)
}
