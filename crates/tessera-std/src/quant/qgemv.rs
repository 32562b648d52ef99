//! `affine_qgemv`: `y[M, N] = x[M, K]·Wᵀ` for M = 1–16 with `W` `[N, K]` in MLX's affine
//! format, never dequantized to memory. A simdgroup owns 4 adjacent output columns (2
//! at wider row tiles), so each x value loaded serves all of them, and long rows over few
//! columns split K over 2 or 4 simdgroups; its lanes walk the rows in units of 32 values,
//! `bits` whole u32 words (lane `l` takes units `l, l + 32, …`; a simdgroup reads
//! `128·bits` contiguous bytes per unit and column, and a unit of 4-bit values is one
//! 16-byte load). Within a unit every value's word and shift are constants once the loops unroll, 3-, 5- and 6-bit values straddling
//! two words included. Codes become exact floats (`affine_code`: one logic op and one add,
//! no conversion instruction), and a unit sums `Σ x·q` and `Σ x` per row: the group's
//! scale and bias are applied once per unit (`scale·Σ x·q + bias·Σ x`), not per weight, so
//! a weight costs three instructions whatever `cols`. M is rounded up to a power-of-two
//! row tile, a constexpr, as in the dense GEMV; bf16 at M ≥ 2 goes to `qgemv_mma`.

use super::format::AffineFormat;
use super::qgemv_mma::{affine_qgemv_mma_kernel, QGEMV_MMA_COLUMNS};
use crate::error::{runtime, OpError};
use crate::matmul::gemv::{row_tile, skinny_rows, GEMV_COLUMNS_PER_GROUP};
use crate::validate::FLOAT_DTYPES;
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// The code at bit `at` of `word` (`next` the word after it, for a code straddling the
/// two) as an exact f32, without a shift or a conversion instruction where it can: a code
/// that fits below bit 23 is masked where it lies, `q·2^p`, and or-ed into the mantissa of
/// 2^(23−p), which makes the float 2^(23−p) + q; subtracting 2^(23−p) leaves q (both
/// exact). A code above bit 23 is first shifted down 12, a straddling one joined from both
/// words. With `at` and `bits` constants every select folds: one logic op and one add.
#[func]
pub fn affine_code(word: u32, next: u32, at: u32, bits: u32) -> f32 {
    let mask = (1u32 << bits) - 1u32;
    let straddles = at + bits > 32;
    let joined = ((word >> at) | ((next << 1u32) << (31u32 - at))) & mask;
    let high = at + bits > 23;
    let p = select(straddles, 0u32, select(high, at - 12, at));
    let src = select(high, word >> 12u32, word);
    let field = select(straddles, joined, src & (mask << p));
    let exponent = (150u32 - p) << 23u32;
    let offset = (1u32 << (23u32 - p)).cast::<f32>();
    (field | exponent).bitcast::<f32>() - offset
}

/// The weight `scale·q + bias` of the code at bit `at` of `word` (see `affine_code`), in
/// f32.
#[func]
pub fn affine_weight(word: u32, next: u32, at: u32, bits: u32, scale: f32, bias: f32) -> f32 {
    fma(scale, affine_code(word, next, at, bits), bias)
}

/// `y[r, col] = Σ_k x[r, k]·(scale·q[col, k] + bias)` for `r < m`: `units = K / 32` units
/// per row, `units_per_group = group_size / 32`. A column group of `cols` adjacent output
/// columns is owned by `ksplit` (1, 2 or 4) simdgroups of a threadgroup, each taking every
/// `ksplit`-th unit; each x value a lane loads serves `cols` weights. Grid
/// `[ceil(N·ksplit / (4·cols)), 1, 1]`, 128 threads.
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
    ksplit: u32,
    #[constexpr] tile: u32,
    #[constexpr] bits: u32,
    #[constexpr] cols: u32,
) {
    let lane = simd_lane();
    let sg = simd_id();
    let part_of_k = sg % ksplit;
    let col0 = (group_id_x() * (4 / ksplit) + sg / ksplit) * cols;
    let groups = units / units_per_group;
    let sums = threadgroup_array::<f32>(4 * tile * cols);
    let acc = stack_array::<f32>(tile * cols);
    let dot = stack_array::<f32>(tile * cols);
    let xsum = stack_array::<f32>(tile);
    let words = stack_array::<u32>(bits * cols);
    let sb = stack_array::<f32>(2 * cols);
    let codes = stack_array::<f32>(8 * cols);
    for i in 0..tile * cols {
        store(acc[i], 0.0f32);
    }
    // One unit per lane per step and column, `32·ksplit` apart: every word, scale and bias
    // of the step is loaded before any is used, so that `cols` loads stay in flight. A
    // column past the last reads the last row and stores nothing.
    for u in range(lane + 32 * part_of_k, units, 32 * ksplit) {
        for c in 0..cols {
            let row = min(col0 + c, n - 1);
            let wb = (row * units + u) * bits;
            for i in 0..bits {
                store(words[c * bits + i], load(packed[wb + i]));
            }
            let gi = row * groups + u / units_per_group;
            store(sb[2 * c], load(scales[gi]).cast::<f32>());
            store(sb[2 * c + 1], load(biases[gi]).cast::<f32>());
        }
        for i in 0..tile * cols {
            store(dot[i], 0.0f32);
        }
        for r in 0..tile {
            store(xsum[r], 0.0f32);
        }
        // Σ x·q and Σ x over the unit, per row and column; scale and bias once at its end.
        for part in 0..4 {
            for c in 0..cols {
                for j in 0..8 {
                    let bit = (part * 8 + j) * bits;
                    let word = load(words[c * bits + bit / 32]);
                    // The last word never starts a straddling value: a unit ends on a word
                    // boundary.
                    let next = load(words[c * bits + min(bit / 32 + 1, bits - 1)]);
                    store(codes[c * 8 + j], affine_code(word, next, bit % 32, bits));
                }
            }
            for r in 0..tile {
                // Rows of the tile past m repeat the last row; their sums are dropped.
                let xb = ((min(r, m - 1) * units + u) * 4 + part) * 8;
                let mut sx = load(xsum[r]);
                for j in 0..8 {
                    let xv = load(x[xb + j]).cast::<f32>();
                    sx += xv;
                    for c in 0..cols {
                        let d = r * cols + c;
                        store(dot[d], fma(load(codes[c * 8 + j]), xv, load(dot[d])));
                    }
                }
                store(xsum[r], sx);
            }
        }
        for r in 0..tile {
            for c in 0..cols {
                let d = r * cols + c;
                let with_bias = fma(load(sb[2 * c + 1]), load(xsum[r]), load(acc[d]));
                store(acc[d], fma(load(sb[2 * c]), load(dot[d]), with_bias));
            }
        }
    }
    if ksplit == 1 {
        for r in 0..tile {
            for c in 0..cols {
                let total = simd_sum(load(acc[r * cols + c]));
                if lane == 0 && col0 + c < n && r < m {
                    store(y[r * n + col0 + c], total.cast::<T>());
                }
            }
        }
    } else {
        // The simdgroups of a column group meet in threadgroup memory; the first sums.
        for i in 0..tile * cols {
            store(sums[sg * tile * cols + i], simd_sum(load(acc[i])));
        }
        barrier();
        if lane == 0 && part_of_k == 0 {
            for r in 0..tile {
                for c in 0..cols {
                    let mut total = 0.0f32;
                    for s in 0..ksplit {
                        total += load(sums[(sg + s) * tile * cols + r * cols + c]);
                    }
                    if col0 + c < n && r < m {
                        store(y[r * n + col0 + c], total.cast::<T>());
                    }
                }
            }
        }
    }
}

/// Simdgroups sharing a column group's K in `affine_qgemv_kernel`: enough that the grid
/// holds about 4096 simdgroups (an H100 keeps ~31 per SM resident), while each still gets
/// at least four steps of 32 units.
pub fn qgemv_k_split(n: u32, cols: u32, units: u32) -> u32 {
    let column_groups = n.div_ceil(cols);
    let mut split = 1;
    while split < 4 && column_groups * split < 4096 && units >= 128 * split * 2 {
        split *= 2;
    }
    split
}

/// Output columns per simdgroup of `affine_qgemv_kernel` for a row tile: four while the
/// sums are few, two for the widest tiles (eight columns would not unroll into registers).
pub fn qgemv_columns(tile: u32) -> u32 {
    if tile <= 4 {
        4
    } else {
        2
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
    let n = format.check_weights(OP, (x, m, k), (packed, scales, biases), y)?;
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
    let tile = row_tile(m as usize);
    let cols = qgemv_columns(tile);
    let ksplit = qgemv_k_split(n, cols, units);
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
            ksplit,
        },
        affine_qgemv_kernel::Consts { tile, bits, cols },
    )
    .grid([(n * ksplit).div_ceil(GEMV_COLUMNS_PER_GROUP * cols), 1, 1])
    .group_size(32 * GEMV_COLUMNS_PER_GROUP)
    .run()
    .map_err(runtime(OP))
}
