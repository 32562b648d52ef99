//! `fp8_qgemv`: `y[M, N] = x[M, K]·Wᵀ` for M = 1–16 with `W` `[N, K]` stored as fp8 bytes
//! (e4m3 or e5m2) and f32 scales per tensor, per 128 values of a row or per 128×128 tile
//! (DeepSeek-V3's `weight_scale_inv`), never dequantized to memory.
//!
//! The shape is `affine_qgemv`'s: a simdgroup owns one output column, its lanes walk the
//! row in units of 16 bytes (16 weights; lane `l` takes units `l, l + 32, …`, two at a
//! time, both loaded before either is used, so a simdgroup reads 512 contiguous bytes per
//! step). The IR's vectors hold at most eight lanes, so a unit's bytes come in as two
//! 8-byte loads. A unit lies in one scale block (K is a multiple of 16, blocks are 128
//! wide), so each eight weights are decoded ([`super::fp8::fp8_decode`]), multiplied into
//! every row of `x` and the eight-term sum scaled once. M is rounded up to a power-of-two
//! row tile, a constexpr, as in the dense GEMV.

use super::fp8::fp8_decode;
use super::fp8_format::{check_weights, Fp8Format, Fp8Scaling};
use crate::error::{runtime, OpError};
use crate::matmul::gemv::{row_tile, skinny_rows, GEMV_COLUMNS_PER_GROUP};
use crate::validate::{fits_u32, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// Weights per unit (one 16-byte run of a row).
pub const FP8_UNIT: usize = 16;

/// `y[r, col] = Σ_k x[r, k]·fp8(w[col, k])·scale` for `r < m`: `units = K / 16` units per
/// row; the row's scales start at `(col / block_rows)·scale_cols`, and a unit's is
/// `u / units_per_block` further (`units_per_block` 0: one scale a row). Grid `[ceil(N /
/// 4), 1, 1]`, 128 threads.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn fp8_qgemv_kernel<T>(
    x: Tensor<T>,
    w: Tensor<u8>,
    scale: Tensor<f32>,
    mut y: Tensor<T>,
    m: u32,
    n: u32,
    units: u32,
    block_rows: u32,
    scale_cols: u32,
    #[constexpr] tile: u32,
    #[constexpr] format: u32,
    #[constexpr] units_per_block: u32,
) {
    let lane = simd_lane();
    let col = group_id_x() * 4 + simd_id();
    // A simdgroup past the last column reads the last row and stores nothing.
    let row = min(col, n - 1);
    let scales = (row / block_rows) * scale_cols;
    let acc = stack_array::<f32>(tile);
    let codes = stack_array::<u32>(32);
    let sb = stack_array::<f32>(2);
    let wv = stack_array::<f32>(8);
    for r in 0..tile {
        store(acc[r], 0.0f32);
    }
    for u0 in range(lane, units, 64) {
        // Both units' bytes and scales loaded before either is used; a unit past the
        // row's end loads the last unit again and is skipped.
        for h in 0..2 {
            let u = min(u0 + h * 32, units - 1);
            let wb = (row * units + u) * 16;
            for i in 0..16 {
                store(codes[h * 16 + i], load(w[wb + i]).cast::<u32>());
            }
            let block = select(units_per_block == 0, 0u32, u / max(units_per_block, 1));
            store(sb[h], load(scale[scales + block]));
        }
        for h in 0..2 {
            let u = u0 + h * 32;
            if u < units {
                let s = load(sb[h]);
                for part in 0..2 {
                    for j in 0..8 {
                        store(
                            wv[j],
                            fp8_decode(load(codes[h * 16 + part * 8 + j]), format),
                        );
                    }
                    for r in 0..tile {
                        // Rows of the tile past m repeat the last row; their sums are dropped.
                        let xb = (min(r, m - 1) * units + u) * 16 + part * 8;
                        let mut p = 0.0f32;
                        for j in 0..8 {
                            p = fma(load(wv[j]), load(x[xb + j]).cast::<f32>(), p);
                        }
                        store(acc[r], fma(p, s, load(acc[r])));
                    }
                }
            }
        }
    }
    for r in 0..tile {
        let total = simd_sum(load(acc[r]));
        if lane == 0 && col < n && r < m {
            store(y[r * n + col], total.cast::<T>());
        }
    }
}

/// `y[M, N] = x[M, K]·(fp8(w)·scale)ᵀ` with `w` `[N, K]` u8 fp8 bytes of `format` and f32
/// `scale` laid out as `scaling` says; `x` and `y` of one float dtype, 1 ≤ M ≤ 16, K a
/// multiple of 16, accumulated in f32.
#[allow(clippy::too_many_arguments)]
pub fn fp8_qgemv(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    scale: &Tensor,
    y: &Tensor,
    format: Fp8Format,
    scaling: Fp8Scaling,
) -> Result<(), OpError> {
    const OP: &str = "fp8_qgemv";
    let (m, k) = skinny_rows(OP, x, &FLOAT_DTYPES)?;
    if !k.is_multiple_of(FP8_UNIT) {
        return Err(OpError::invalid(
            OP,
            format!(
                "K = {k} must be a multiple of {FP8_UNIT} (each lane reads 16-byte runs of a row)"
            ),
        ));
    }
    let n = check_weights(OP, (x, w, scale, y), (m, k), scaling)?;
    fits_u32(OP, "the element count of `x`", x.len())?;
    fits_u32(OP, "the byte count of `w`", w.len())?;
    fits_u32(OP, "the element count of `y`", y.len())?;
    let (block_rows, block_cols) = scaling.block((n, k));
    let units_per_block = match scaling {
        Fp8Scaling::Tensor => 0,
        _ => (block_cols / FP8_UNIT) as u32,
    };
    let n = n as u32;
    fp8_qgemv_kernel::launch(
        ctx,
        fp8_qgemv_kernel::Args {
            x,
            w,
            scale,
            y,
            m: m as u32,
            n,
            units: (k / FP8_UNIT) as u32,
            block_rows: block_rows as u32,
            scale_cols: scale.shape()[1] as u32,
        },
        fp8_qgemv_kernel::Consts {
            tile: row_tile(m),
            format: format.code(),
            units_per_block,
        },
    )
    .grid([n.div_ceil(GEMV_COLUMNS_PER_GROUP), 1, 1])
    .group_size(32 * GEMV_COLUMNS_PER_GROUP)
    .run()
    .map_err(runtime(OP))
}
