//! RMSNorm fused with the residual add, pipelined over rows like `rms_norm_pipe`: a
//! resident grid walks the rows, each thread holds `epl` elements in 16-byte runs one
//! threadgroup-width apart (`spread_offset`), the next row's x and residual loads go out
//! before the current row's single reduction barrier, and `sum` is written before the
//! barrier, `out` after it.

use super::rms_inv::{rms_inv_pipelined, tiny_square};
use super::rms_norm_pipe::pipe_layout;
use super::rms_norm_vec::spread_offset;
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// `sum = x + residual`, `out = sum / rms(sum) · w` over rows of `n`, `n / epl` threads
/// per threadgroup; threadgroup `g` takes rows `g, g + G, …` (`G` groups, `G <= rows`).
#[kernel]
pub fn rms_norm_residual_pipe_kernel<T>(
    x: Tensor<T>,
    residual: Tensor<T>,
    w: Tensor<T>,
    mut sum: Tensor<T>,
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
    let ss = stack_array::<f32>(epl);
    let nx = stack_array::<f32>(epl);
    let nr = stack_array::<f32>(epl);
    let part = threadgroup_array::<f32>(4 * sgs);
    let first = group_id_x();
    for e in 0..epl {
        let i = first * n + lane_col + spread_offset(e, n, epl, vec);
        store(
            ss[e],
            load(x[i]).cast::<f32>() + load(residual[i]).cast::<f32>(),
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
        let next = r + stride;
        let nrow = select(next < rows, next, r);
        for e in 0..epl {
            let i = nrow * n + lane_col + spread_offset(e, n, epl, vec);
            store(nx[e], load(x[i]).cast::<f32>());
            store(nr[e], load(residual[i]).cast::<f32>());
        }
        let mut ssq = 0.0f32;
        let mut tiny = 0.0f32;
        for e in 0..epl {
            let s = load(ss[e]);
            store(
                sum[r * n + lane_col + spread_offset(e, n, epl, vec)],
                s.cast::<T>(),
            );
            ssq += s * s;
            tiny += tiny_square(s);
        }
        let inv = rms_inv_pipelined(ssq, tiny, part, parity, sgs, n, eps);
        for e in 0..epl {
            let y = load(ss[e]) * inv * load(ws[e]);
            store(
                out[r * n + lane_col + spread_offset(e, n, epl, vec)],
                y.cast::<T>(),
            );
            store(ss[e], load(nx[e]) + load(nr[e]));
        }
        parity = 1 - parity;
    }
}

/// The `(epl, vec, threads, groups)` of the pipelined residual launch over `rows` rows of
/// `n`, or `None` where `n` does not split into 16-byte accesses per thread.
pub fn residual_pipe_launch(
    ctx: &Context,
    x: &Tensor,
    rows: u32,
    n: u32,
) -> Option<(u32, u32, u32, u32)> {
    let (epl, vec, threads) = pipe_layout(x, n)?;
    let units = ctx.info().compute_units.max(1);
    let groups = (units * (2048 / threads).clamp(1, 8)).clamp(1, rows.max(1));
    Some((epl, vec, threads, groups))
}
