//! Dense GEMV and skinny GEMM for decode: `y[M, N] = x[M, K]·wᵀ` with `w` stored `[N, K]`
//! row-major (the layout of checkpoints and `torch.nn.Linear`), M = 1–16, f32/f16/bf16
//! with f32 accumulation. Bandwidth-bound, so it is not the tiled GEMM: a simdgroup owns
//! one output column `n` and walks its weight row in 16-byte runs, lane `l` taking runs
//! `l, l + 32, …`, four at a time (loaded before any is used, to keep loads in flight);
//! every run of `w` is read once and multiplied into all M rows of `x`
//! (kept in L1 by the four simdgroups of a threadgroup reading the same runs), and a
//! `simd_sum` per row ends the column. M is rounded up to a power-of-two row tile, a
//! constexpr, so the per-row sums live in registers.

use super::gemv_mma::{gemv_mma_kernel, GEMV_MMA_COLUMNS};
use super::tiled::MATMUL_DTYPES;
use crate::elementwise::activation::silu_f32;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// The most rows of `x` one call takes (decode batches); larger M belongs to the GEMM.
pub const GEMV_MAX_ROWS: usize = 16;
/// Output columns per threadgroup: one per simdgroup.
pub const GEMV_COLUMNS_PER_GROUP: u32 = 4;
/// The row tiles a kernel is compiled for; M runs on the smallest that holds it.
pub const GEMV_TILES: [u32; 5] = [1, 2, 4, 8, 16];

/// `y[r, col] = Σ_k x[r, k]·w[col, k]` for `r < m`: `kvecs = K / vec` runs per row,
/// `tile ≥ m` rows summed per lane. `gated` 1: `w` is `[2n, K]`, gate rows then up rows
/// (a merged gate_up projection), and `y[r, col] = silu(x·gate[col]) · (x·up[col])`, both
/// sums in f32. Grid `[ceil(N / 4), 1, 1]`, 128 threads.
#[kernel]
pub fn gemv_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut y: Tensor<T>,
    m: u32,
    n: u32,
    kvecs: u32,
    #[constexpr] tile: u32,
    #[constexpr] vec: u32,
    #[constexpr] gated: u32,
) {
    let lane = simd_lane();
    let col = group_id_x() * 4 + simd_id();
    // A simdgroup past the last column reads the last row and stores nothing.
    let wrow = min(col, n - 1);
    let urow = wrow + n;
    let acc = stack_array::<f32>(tile);
    let acc_up = stack_array::<f32>(tile);
    let wv = stack_array::<f32>(4 * vec);
    let uv = stack_array::<f32>(4 * vec);
    for r in 0..tile {
        store(acc[r], 0.0f32);
        store(acc_up[r], 0.0f32);
    }
    // Four runs per lane per step, all loaded before any is used, so four loads per lane
    // (eight with the up rows) are in flight; a run past the row's end loads the last run
    // again and is skipped.
    for v0 in range(lane, kvecs, 128) {
        for u in 0..4 {
            let wb = (wrow * kvecs + min(v0 + u * 32, kvecs - 1)) * vec;
            for e in 0..vec {
                store(wv[u * vec + e], load(w[wb + e]).cast::<f32>());
            }
            if gated == 1u32 {
                let ub = (urow * kvecs + min(v0 + u * 32, kvecs - 1)) * vec;
                for e in 0..vec {
                    store(uv[u * vec + e], load(w[ub + e]).cast::<f32>());
                }
            }
        }
        for u in 0..4 {
            let v = v0 + u * 32;
            if v < kvecs {
                for r in 0..tile {
                    // Rows of the tile past m repeat the last row; their sums are dropped.
                    let xb = (min(r, m - 1) * kvecs + v) * vec;
                    let mut s = load(acc[r]);
                    let mut su = load(acc_up[r]);
                    for e in 0..vec {
                        let xe = load(x[xb + e]).cast::<f32>();
                        s = fma(xe, load(wv[u * vec + e]), s);
                        if gated == 1u32 {
                            su = fma(xe, load(uv[u * vec + e]), su);
                        }
                    }
                    store(acc[r], s);
                    store(acc_up[r], su);
                }
            }
        }
    }
    for r in 0..tile {
        let mut total = simd_sum(load(acc[r]));
        if gated == 1u32 {
            total = silu_f32(total) * simd_sum(load(acc_up[r]));
        }
        if lane == 0 && col < n && r < m {
            store(y[r * n + col], total.cast::<T>());
        }
    }
}

/// The smallest row tile that holds `m` rows.
pub fn row_tile(m: usize) -> u32 {
    GEMV_TILES
        .into_iter()
        .find(|&t| t as usize >= m)
        .unwrap_or(GEMV_TILES[GEMV_TILES.len() - 1])
}

/// The widest power-of-two run, up to 16 bytes of `dtype`, that divides `k`.
pub fn run_width(dtype: DType, k: usize) -> u32 {
    let mut w = (16 / dtype.size_bytes().max(1)) as u32;
    while w > 1 && !k.is_multiple_of(w as usize) {
        w /= 2;
    }
    w
}

/// `x` `[M, K]` with 1 ≤ M ≤ 16 and K > 0, of `allowed` dtypes: returns (M, K).
pub fn skinny_rows(
    op: &'static str,
    x: &Tensor,
    allowed: &[DType],
) -> Result<(usize, usize), OpError> {
    dtype_in(op, "x", x, allowed)?;
    match *x.shape() {
        [m, k] if (1..=GEMV_MAX_ROWS).contains(&m) && k > 0 => Ok((m, k)),
        [m, _] if m > GEMV_MAX_ROWS => Err(OpError::invalid(
            op,
            format!(
                "`x` has {m} rows; at most {GEMV_MAX_ROWS} rows are taken (a larger M is a GEMM: use matmul_bt)"
            ),
        )),
        ref s => Err(OpError::invalid(
            op,
            format!("`x` must be a non-empty matrix [M, K], got shape {s:?}"),
        )),
    }
}

/// `y[M, N] = x[M, K]·w[N, K]ᵀ`: one dtype (f32, f16 or bf16) for `x`, `w` and `y`,
/// 1 ≤ M ≤ 16, accumulated in f32. f16/bf16 with M ≥ 2 and K a multiple of 8 run on
/// matrix fragments (`gemv_mma_kernel`); the rest on `gemv_kernel`.
pub fn gemv(ctx: &Context, x: &Tensor, w: &Tensor, y: &Tensor) -> Result<(), OpError> {
    const OP: &str = "gemv";
    let (m, k, n) = check_gemv(OP, x, w, y, 1)?;
    if m >= 2 && k.is_multiple_of(8) && MATMUL_DTYPES.contains(&x.dtype()) {
        let (m, n, kvecs) = (m as u32, n as u32, (k / 8) as u32);
        return gemv_mma_kernel::launch(
            ctx,
            gemv_mma_kernel::Args {
                x,
                w,
                y,
                m,
                n,
                kvecs,
            },
        )
        .grid([n.div_ceil(GEMV_MMA_COLUMNS), 1, 1])
        .group_size(128)
        .run()
        .map_err(runtime(OP));
    }
    launch_columns(OP, ctx, x, w, y, (m, k, n), 0)
}

/// `y[M, I] = silu(x·gateᵀ) · (x·upᵀ)` from a merged `w_gate_up` `[2·I, K]` (gate rows
/// first, then up rows: vLLM's `gate_up_proj`, a dense MLP's first half), both products
/// accumulated in f32 and combined before the one rounding to the dtype; each weight row
/// read once. 1 ≤ M ≤ 16, one float dtype.
pub fn gemv_silu_mul(
    ctx: &Context,
    x: &Tensor,
    w_gate_up: &Tensor,
    y: &Tensor,
) -> Result<(), OpError> {
    const OP: &str = "gemv_silu_mul";
    let dims = check_gemv(OP, x, w_gate_up, y, 2)?;
    launch_columns(OP, ctx, x, w_gate_up, y, dims, 1)
}

/// The checks of both GEMVs: `x` `[M, K]`, `w` `[rows·N, K]`, `y` `[M, N]`, one float dtype;
/// returns `(M, K, N)`.
fn check_gemv(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    y: &Tensor,
    rows: usize,
) -> Result<(usize, usize, usize), OpError> {
    let w_name = if rows == 1 { "w" } else { "w_gate_up" };
    let (m, k) = skinny_rows(op, x, &FLOAT_DTYPES)?;
    dtype_is(op, w_name, w, x.dtype())?;
    dtype_is(op, "y", y, x.dtype())?;
    distinct_named(op, "y", y, &[("x", x), (w_name, w)])?;
    let n = match *w.shape() {
        [wn, wk] if wk == k && wn > 0 && wn.is_multiple_of(rows) => wn / rows,
        ref s if rows == 1 => {
            return Err(OpError::invalid(
                op,
                format!("`w` must be [N, K = {k}] with N > 0, got shape {s:?}"),
            ))
        }
        ref s => {
            return Err(OpError::invalid(
                op,
                format!("`w_gate_up` must be [2·I, K = {k}] with I > 0 (gate rows, then up rows), got shape {s:?}"),
            ))
        }
    };
    shape_is(op, "y", y, &[m, n])?;
    fits_u32(op, "the element count of the weights", w.len())?;
    fits_u32(op, "the element count of `y`", y.len())?;
    Ok((m, k, n))
}

/// Runs `gemv_kernel` (a simdgroup per output column) over checked `(M, K, N)`.
fn launch_columns(
    op: &'static str,
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    y: &Tensor,
    (m, k, n): (usize, usize, usize),
    gated: u32,
) -> Result<(), OpError> {
    let vec = run_width(x.dtype(), k);
    let kvecs = (k / vec as usize) as u32;
    let (m, n) = (m as u32, n as u32);
    gemv_kernel::launch(
        ctx,
        gemv_kernel::Args {
            x,
            w,
            y,
            m,
            n,
            kvecs,
        },
        gemv_kernel::Consts {
            tile: row_tile(m as usize),
            vec,
            gated,
        },
    )
    .grid([n.div_ceil(GEMV_COLUMNS_PER_GROUP), 1, 1])
    .group_size(32 * GEMV_COLUMNS_PER_GROUP)
    .run()
    .map_err(runtime(op))
}
