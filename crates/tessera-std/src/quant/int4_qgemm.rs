//! `gptq_qgemm` and `awq_qgemm`: the quantized GEMM of prefill on int4 checkpoints with
//! zero points, `y[M, N] = x[M, K]·w` with `w` `[K, N]` as GPTQ's or AWQ's words hold it
//! (see [`super::gptq`], [`super::awq`]), each weight `scale·(q − zero)` in f32 rounded
//! once to x's dtype, on `quant_gemm_kernel`'s tiles.
//!
//! A GPTQ word is eight inputs of one output column, a chunk of the `[N, K]`-major B tile
//! as it stands: one word, its scale and zero point. An AWQ word is one input of eight
//! columns, a chunk of the `[K, N]`-major tile: the word, the zeros' word, and the eight
//! scales read (one 16-byte load) when it is dequantized.

use super::awq::{awq_nibble, check_words as awq_words};
use super::gptq::{check_product, check_words as gptq_words};
use super::qgemm_formats::{gemm_rows, launch_quant_gemm, QgemmScheme, QgemmWeights};
use crate::error::OpError;
use tessera_macros::func;
use tessera_runtime::{Context, Tensor};

/// GPTQ's word of inputs `k … k + 8` of column `n` (`dims` = N words a row) into word
/// `3i`, its scale and zero point (the stored nibble plus one) of group `k >> group_shift`
/// into factors `2i`, `2i + 1`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn gptq_chunk_load<Q, S>(
    mut words: Mem<u32>,
    mut factors: Mem<f32>,
    i: u32,
    qweight: Mem<Q>,
    qzeros: Mem<Q>,
    scales: Mem<S>,
    n: u32,
    k: u32,
    dims: u32,
    group_shift: u32,
) {
    let g = k >> group_shift;
    store(
        words[3 * i],
        load(qweight[(k / 8) * dims + n]).cast::<u32>(),
    );
    let zword = load(qzeros[g * (dims / 8) + n / 8]).cast::<u32>();
    let zero = ((zword >> ((n % 8) * 4)) & 15u32) + 1u32;
    store(factors[2 * i], load(scales[g * dims + n]).cast::<f32>());
    store(factors[2 * i + 1], zero.cast::<f32>());
}

/// The eight weights of GPTQ chunk `i`, `scale·(q − zero)`, into `sb[at …]`.
#[func]
pub fn gptq_chunk_dequantize<T>(
    mut sb: Mem<T>,
    at: u32,
    words: Mem<u32>,
    factors: Mem<f32>,
    i: u32,
    inside: bool,
) {
    let word = load(words[3 * i]);
    let scale = load(factors[2 * i]);
    let zero = load(factors[2 * i + 1]);
    for j in 0..8 {
        let q = ((word >> (j * 4)) & 15u32).cast::<f32>();
        store(
            sb[at + j],
            select(inside, scale * (q - zero), 0.0f32).cast::<T>(),
        );
    }
}

/// AWQ's word of columns `n … n + 8` of input `k` (`dims` = N/8 words a row) and the
/// zeros' word of group `k >> group_shift` into words `3i`, `3i + 1`; where the eight scales are into word `3i + 2`
/// (they are read when the chunk is dequantized: eight f32 registers a chunk would not
/// fit beside the accumulators).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn awq_chunk_load<Q>(
    mut words: Mem<u32>,
    i: u32,
    qweight: Mem<Q>,
    qzeros: Mem<Q>,
    n: u32,
    k: u32,
    dims: u32,
    group_shift: u32,
) {
    let at = (k >> group_shift) * dims + n / 8;
    store(words[3 * i], load(qweight[k * dims + n / 8]).cast::<u32>());
    store(words[3 * i + 1], load(qzeros[at]).cast::<u32>());
    store(words[3 * i + 2], at);
}

/// The eight weights of AWQ chunk `i`, `(q − z)·scale` column by column, into `sb[at …]`.
#[func]
pub fn awq_chunk_dequantize<T, S>(
    mut sb: Mem<T>,
    at: u32,
    words: Mem<u32>,
    scales: Mem<S>,
    i: u32,
    inside: bool,
) {
    let word = load(words[3 * i]);
    let zword = load(words[3 * i + 1]);
    // The index a multiple of 8, so that the eight loads become one.
    let first = load(words[3 * i + 2]) * 8;
    for j in 0..8 {
        let q = awq_nibble(word, j).cast::<f32>() - awq_nibble(zword, j).cast::<f32>();
        let v = q * load(scales[first + j]).cast::<f32>();
        store(sb[at + j], select(inside, v, 0.0f32).cast::<T>());
    }
}

/// `y[M, N] = x[M, K]·w` with `w` `[K, N]` GPTQ int4 words (`qweight` `[K/8, N]`,
/// `qzeros`, `scales` in x's dtype, f16 or bf16); any M ≥ 1, accumulated in f32.
/// `gptq_qgemv` is the faster path for M ≤ 16.
#[allow(clippy::too_many_arguments)]
pub fn gptq_qgemm(
    ctx: &Context,
    x: &Tensor,
    qweight: &Tensor,
    qzeros: &Tensor,
    scales: &Tensor,
    y: &Tensor,
    group_size: u32,
) -> Result<(), OpError> {
    int4_qgemm(
        ctx,
        QgemmScheme::Gptq,
        (x, qweight, qzeros, scales, y),
        group_size,
    )
}

/// `y[M, N] = x[M, K]·w` with `w` `[K, N]` AWQ int4 words (`qweight` `[K, N/8]`,
/// `qzeros`, `scales` in x's dtype, f16 or bf16); any M ≥ 1, accumulated in f32.
/// `awq_qgemv` is the faster path for M ≤ 16.
#[allow(clippy::too_many_arguments)]
pub fn awq_qgemm(
    ctx: &Context,
    x: &Tensor,
    qweight: &Tensor,
    qzeros: &Tensor,
    scales: &Tensor,
    y: &Tensor,
    group_size: u32,
) -> Result<(), OpError> {
    int4_qgemm(
        ctx,
        QgemmScheme::Awq,
        (x, qweight, qzeros, scales, y),
        group_size,
    )
}

/// [`gptq_qgemm`] (`scheme` Gptq) or [`awq_qgemm`] (Awq).
pub(crate) fn int4_qgemm(
    ctx: &Context,
    scheme: QgemmScheme,
    tensors: (&Tensor, &Tensor, &Tensor, &Tensor, &Tensor),
    group_size: u32,
) -> Result<(), OpError> {
    let (x, qweight, qzeros, scales, y) = tensors;
    let (op, (k, n, g), dims) = if scheme == QgemmScheme::Awq {
        let kng = awq_words("awq_qgemm", qweight, qzeros, scales, group_size)?;
        ("awq_qgemm", kng, kng.1 / 8)
    } else {
        let kng = gptq_words("gptq_qgemm", qweight, qzeros, scales, group_size)?;
        ("gptq_qgemm", kng, kng.1)
    };
    let (m, kx) = gemm_rows(op, x)?;
    check_product(op, tensors, (m, kx), (k, n))?;
    let weights = QgemmWeights {
        w: qweight,
        zeros: qzeros,
        scales,
        dims: dims as u32,
        // G is 32, 64, 128 or all of K: a shift of 31 (K is below 2^31).
        blocks: (0, if g == k { 31 } else { g.trailing_zeros() }, 0),
        scheme,
    };
    launch_quant_gemm(ctx, op, (x, y), weights, (m, n, k))
}
