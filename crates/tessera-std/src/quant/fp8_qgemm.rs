//! `fp8_qgemm`: the quantized GEMM of prefill on fp8 weights, `y[M, N] = x[M, K]·Ŵᵀ` with
//! `W` `[N, K]` fp8 bytes (e4m3 or e5m2) and f32 scales per tensor, per 1×128 or per
//! 128×128 tile (DeepSeek-V3's `weight_scale_inv`), `Ŵ = fp8·scale` in f32 rounded once to
//! x's dtype, on `quant_gemm_kernel`'s tiles. A chunk is eight bytes of a row, held as two
//! words, and its one scale (a chunk lies in one 128-wide block: K is a multiple of 8).

use super::fp8::fp8_decode;
use super::fp8_format::{check_weights, Fp8Format, Fp8Scaling};
use super::qgemm_formats::{gemm_rows, launch_quant_gemm, QgemmScheme, QgemmWeights};
use crate::error::OpError;
use tessera_macros::func;
use tessera_runtime::{Context, Tensor};

/// Bytes `k … k + 8` of row `n` of `w` (`dims` bytes a row) into words `3i`, `3i + 1`,
/// their scale (of block `(n >> row_shift, k >> col_shift)`) into factor `2i`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn fp8_chunk_load<Q, S>(
    mut words: Mem<u32>,
    mut factors: Mem<f32>,
    i: u32,
    w: Mem<Q>,
    scales: Mem<S>,
    n: u32,
    k: u32,
    dims: u32,
    row_shift: u32,
    col_shift: u32,
    scale_cols: u32,
) {
    // Written as a multiple of 8 so that the eight byte loads become one 8-byte load.
    let base = (n * (dims / 8) + k / 8) * 8;
    let bytes = stack_array::<u32>(8);
    for j in 0..8 {
        store(bytes[j], load(w[base + j]).cast::<u32>());
    }
    for h in 0..2 {
        let mut word = 0u32;
        for j in 0..4 {
            word = word | (load(bytes[h * 4 + j]) << (8 * j));
        }
        store(words[3 * i + h], word);
    }
    let at = (n >> row_shift) * scale_cols + (k >> col_shift);
    store(factors[2 * i], load(scales[at]).cast::<f32>());
}

/// The eight weights of chunk `i`, `fp8(byte)·scale` (`format` 0: e4m3, 1: e5m2), rounded
/// to `T` into `sb[at …]`; zeros where `inside` is false.
#[func]
pub fn fp8_chunk_dequantize<T>(
    mut sb: Mem<T>,
    at: u32,
    words: Mem<u32>,
    factors: Mem<f32>,
    i: u32,
    inside: bool,
    format: u32,
) {
    let scale = load(factors[2 * i]);
    for j in 0..8 {
        let code = (load(words[3 * i + j / 4]) >> ((j % 4) * 8)) & 255u32;
        let v = fp8_decode(code, format) * scale;
        store(sb[at + j], select(inside, v, 0.0f32).cast::<T>());
    }
}

/// `y[M, N] = x[M, K]·(fp8(w)·scale)ᵀ` with `w` `[N, K]` u8 fp8 bytes of `format` and f32
/// `scale` laid out as `scaling` says; `x` and `y` f16 or bf16, any M ≥ 1, K a multiple of
/// 8; each weight rounded once to x's dtype, accumulated in f32. `fp8_qgemv` is the faster
/// path for M ≤ 16.
#[allow(clippy::too_many_arguments)]
pub fn fp8_qgemm(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    scale: &Tensor,
    y: &Tensor,
    format: Fp8Format,
    scaling: Fp8Scaling,
) -> Result<(), OpError> {
    const OP: &str = "fp8_qgemm";
    let (m, k) = gemm_rows(OP, x)?;
    let n = check_weights(OP, (x, w, scale, y), (m, k), scaling)?;
    // Blocks of 128 (2^7) rows or columns; one scale over the whole tensor or row: a
    // shift of 31 (N and K are below 2^31).
    let (row_shift, col_shift) = match scaling {
        Fp8Scaling::Tensor => (31, 31),
        Fp8Scaling::Row128 => (0, 7),
        Fp8Scaling::Tile128 => (7, 7),
    };
    let scheme = match format {
        Fp8Format::E4m3 => QgemmScheme::Fp8E4m3,
        Fp8Format::E5m2 => QgemmScheme::Fp8E5m2,
    };
    let weights = QgemmWeights {
        w,
        zeros: w,
        scales: scale,
        dims: k as u32,
        blocks: (row_shift, col_shift, scale.shape()[1] as u32),
        scheme,
    };
    launch_quant_gemm(ctx, OP, (x, y), weights, (m, n, k))
}
