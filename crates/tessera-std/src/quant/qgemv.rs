//! `affine_qgemv`: `y[M, N] = x[M, K]·Wᵀ` for M = 1–16 with `W` `[N, K]` in MLX's affine
//! format, never dequantized to memory. A simdgroup owns one output column `n`; its lanes
//! walk the row in units of 32 values, which are `bits` whole u32 words (lane `l` takes
//! units `l, l + 32, …`, two at a time, loaded before either is used; a simdgroup reads
//! `128·bits` contiguous bytes per unit, and a unit of 4-bit values is one 16-byte load).
//! Within a unit every value's word and shift are constants once the loops unroll, 3-, 5-
//! and 6-bit values straddling two words included. Eight values at a time are dequantized
//! in registers, `w = scale·q + bias` in f32 (one fma each, whatever M), then multiplied
//! into every row of `x` (the group's scale and bias are the unit's, a group being 1, 2 or
//! 4 units). A code becomes f32 without a shift or a conversion instruction: masked where
//! it lies (`code·2^p`), or-ed into the mantissa of 2^23 and 2^23 subtracted, both exact,
//! with 2^-p folded into the scale. M is rounded up to a power-of-two row tile, a
//! constexpr, as in the dense GEMV; bf16 at M ≥ 2 goes to `qgemv_mma`.

use super::format::AffineFormat;
use super::qgemv_mma::{affine_qgemv_mma_kernel, QGEMV_MMA_COLUMNS};
use crate::error::{runtime, OpError};
use crate::matmul::gemv::{row_tile, skinny_rows, GEMV_COLUMNS_PER_GROUP};
use crate::validate::{distinct_named, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// The weight `scale·q + bias` of the code at bit `at` of `word` (`next` the word after it,
/// for a code straddling the two), in f32. A straddling code is shifted down and joined; any
/// other is masked where it lies, `code·2^p` with p ≤ 20 (shifted down 12 above bit 23),
/// so without a shift; `code·2^p` becomes f32 without a conversion instruction, or-ed into
/// the mantissa of 2^23 and 2^23 subtracted (both exact), and 2^-p goes into the scale.
/// Both quantized GEMV kernels dequantize through it.
#[func]
pub fn affine_weight(word: u32, next: u32, at: u32, bits: u32, scale: f32, bias: f32) -> f32 {
    let mask = (1u32 << bits) - 1u32;
    let straddles = at + bits > 32;
    let joined = ((word >> at) | ((next << 1u32) << (31u32 - at))) & mask;
    let high = at + bits > 23;
    let p = select(straddles, 0u32, select(high, at - 12, at));
    let src = select(high, word >> 12u32, word);
    let field = select(straddles, joined, src & (mask << p));
    let value = (field | 0x4B00_0000u32).bitcast::<f32>() - 8388608.0f32;
    let step = 1.0f32 / (1u32 << p).cast::<f32>();
    fma(scale * step, value, bias)
}

/// `y[r, col] = Σ_k x[r, k]·(scale·q[col, k] + bias)` for `r < m`: `units = K / 32` units
/// per row, `units_per_group = group_size / 32`. Grid `[ceil(N / 4), 1, 1]`, 128 threads.
#[kernel]
pub fn affine_qgemv_kernel<T>(
    x: Tensor<T>,
    packed: Tensor<u32>,
    scales: Tensor<T>,
    biases: Tensor<T>,
    mut y: Tensor<T>,
    m: u32,
    n: u32,
    units: u32,
    units_per_group: u32,
    #[constexpr] tile: u32,
    #[constexpr] bits: u32,
) {
    let lane = simd_lane();
    let col = group_id_x() * 4 + simd_id();
    // A simdgroup past the last column reads the last row and stores nothing.
    let row = min(col, n - 1);
    let groups = units / units_per_group;
    let acc = stack_array::<f32>(tile);
    let words = stack_array::<u32>(2 * bits);
    let sb = stack_array::<f32>(4);
    let wv = stack_array::<f32>(8);
    for r in 0..tile {
        store(acc[r], 0.0f32);
    }
    // Two units per lane per step, their words, scales and biases all loaded before either
    // is used, so that loads stay in flight; a unit past the row's end loads the last unit
    // again and is skipped.
    for u0 in range(lane, units, 64) {
        for h in 0..2 {
            let u = min(u0 + h * 32, units - 1);
            let wb = (row * units + u) * bits;
            for i in 0..bits {
                store(words[h * bits + i], load(packed[wb + i]));
            }
            let gi = row * groups + u / units_per_group;
            store(sb[2 * h], load(scales[gi]).cast::<f32>());
            store(sb[2 * h + 1], load(biases[gi]).cast::<f32>());
        }
        for h in 0..2 {
            let u = u0 + h * 32;
            if u < units {
                let scale = load(sb[2 * h]);
                let bias = load(sb[2 * h + 1]);
                for part in 0..4 {
                    for j in 0..8 {
                        let bit = (part * 8 + j) * bits;
                        let at = bit % 32;
                        let word = load(words[h * bits + bit / 32]);
                        // The last word never starts a straddling value: a unit ends on a
                        // word boundary.
                        let next = load(words[h * bits + min(bit / 32 + 1, bits - 1)]);
                        store(wv[j], affine_weight(word, next, at, bits, scale, bias));
                    }
                    for r in 0..tile {
                        // Rows of the tile past m repeat the last row; their sums are dropped.
                        let xb = ((min(r, m - 1) * units + u) * 4 + part) * 8;
                        let mut s = load(acc[r]);
                        for j in 0..8 {
                            s = fma(load(wv[j]), load(x[xb + j]).cast::<f32>(), s);
                        }
                        store(acc[r], s);
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

/// `y[M, N] = x[M, K]·dequant(W)ᵀ` with `W` `[N, K]` as MLX's affine `packed` `[N,
/// K·bits/32]`, `scales` and `biases` `[N, K/group_size]`; `x`, `scales`, `biases` and `y`
/// of one float dtype, 1 ≤ M ≤ 16, accumulated in f32. bf16 with M ≥ 2 runs on matrix
/// fragments (`affine_qgemv_mma_kernel`, each weight split into a rounded high and low
/// part of the input dtype); the rest on `affine_qgemv_kernel`.
#[allow(clippy::too_many_arguments)]
pub fn affine_qgemv(
    ctx: &Context,
    x: &Tensor,
    packed: &Tensor,
    scales: &Tensor,
    biases: &Tensor,
    y: &Tensor,
    bits: u32,
    group_size: u32,
) -> Result<(), OpError> {
    const OP: &str = "affine_qgemv";
    let format = AffineFormat::new(OP, bits, group_size)?;
    let (m, k) = skinny_rows(OP, x, &FLOAT_DTYPES)?;
    format.check_row(OP, k)?;
    dtype_is(OP, "scales", scales, x.dtype())?;
    dtype_is(OP, "y", y, x.dtype())?;
    distinct_named(
        OP,
        "y",
        y,
        &[
            ("x", x),
            ("packed", packed),
            ("scales", scales),
            ("biases", biases),
        ],
    )?;
    dtype_is(OP, "packed", packed, DType::U32)?;
    dtype_is(OP, "biases", biases, x.dtype())?;
    let n = match *packed.shape() {
        [n, words] if n > 0 && words == format.words(k) => n,
        ref s => {
            return Err(OpError::invalid(
                OP,
                format!(
                    "`packed` must be [N, {}] ({k} {bits}-bit values per row, as `x` has K = {k}), got shape {s:?}",
                    format.words(k)
                ),
            ))
        }
    };
    shape_is(OP, "scales", scales, &[n, format.groups(k)])?;
    shape_is(OP, "biases", biases, &[n, format.groups(k)])?;
    shape_is(OP, "y", y, &[m, n])?;
    fits_u32(OP, "the element count of `x`", x.len())?;
    fits_u32(OP, "the word count of `packed`", packed.len())?;
    fits_u32(OP, "the element count of `y`", y.len())?;
    let (m, n) = (m as u32, n as u32);
    let (units, units_per_group) = ((k / 32) as u32, group_size / 32);
    // bf16 only: a dequantized f16 weight can pass f16's range (65504) although the f32
    // product the CUDA-core path forms stays finite.
    if m >= 2 && x.dtype() == DType::BF16 {
        return affine_qgemv_mma_kernel::launch(
            ctx,
            affine_qgemv_mma_kernel::Args {
                x,
                packed,
                scales,
                biases,
                y,
                m,
                n,
                units,
                units_per_group,
            },
            affine_qgemv_mma_kernel::Consts { bits },
        )
        .grid([n.div_ceil(QGEMV_MMA_COLUMNS), 1, 1])
        .group_size(128)
        .run()
        .map_err(runtime(OP));
    }
    affine_qgemv_kernel::launch(
        ctx,
        affine_qgemv_kernel::Args {
            x,
            packed,
            scales,
            biases,
            y,
            m,
            n,
            units,
            units_per_group,
        },
        affine_qgemv_kernel::Consts {
            tile: row_tile(m as usize),
            bits,
        },
    )
    .grid([n.div_ceil(GEMV_COLUMNS_PER_GROUP), 1, 1])
    .group_size(32 * GEMV_COLUMNS_PER_GROUP)
    .run()
    .map_err(runtime(OP))
}
