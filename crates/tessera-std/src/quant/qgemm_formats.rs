//! `quant_gemm_kernel`: the quantized GEMM of prefill, `y[M, N] = x[M, K]·Ŵᵀ`, for the
//! weight formats other than MLX affine (fp8, GPTQ, AWQ, GGUF), on warpgroup tile products as
//! `affine_qgemm_kernel` runs them: a threadgroup of `wg` warpgroups owns a `64·wg × 16·nb`
//! output tile and walks K 64 values at a time; the x tile arrives by 16-byte asynchronous
//! copies into `stages` swizzled A buffers, `stages − 1` tiles ahead; the weight tile is
//! dequantized by the threads from registers into one of two swizzled B buffers, and the
//! raw data of the next tile is loaded into registers right after the current product is
//! issued, so its latency hides behind it. Weights are never dequantized to memory.
//!
//! A format supplies two `#[func]`s, chosen by the constexpr `scheme`: one loads the raw
//! data of an 8-weight chunk (its codes and whatever else it needs in up to three u32
//! words, its scale and zero or offset as up to two f32 factors) into a thread's registers; the other dequantizes a chunk from
//! there into its 16 bytes of the B tile. Each weight is computed in f32 and rounded once
//! to the activation dtype. A chunk is eight inputs of one output column (the B tile `[N,
//! K]`-major, for formats packed along K) or one input of eight columns (`[K, N]`-major,
//! for AWQ's words packed along N).

use super::fp8_qgemm::{fp8_chunk_dequantize, fp8_chunk_load};
use super::int4_qgemm::{
    awq_chunk_dequantize, awq_chunk_load, gptq_chunk_dequantize, gptq_chunk_load,
};
use super::qgemm::{qgemm_shape, QGEMM_BAND};
use super::qgemm_tiles::{qgemm_chunk, qgemm_fetch_x, qgemm_tile_origin};
use crate::error::{runtime, OpError};
use crate::gguf::format::GgufFormat;
use crate::gguf::kernels::{gguf_chunk_dequantize, gguf_chunk_load};
use crate::matmul::pipelined::store_acc_tiles;
use crate::matmul::tiled::MATMUL_DTYPES;
use crate::validate::{dtype_in, fits_u32};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, Tensor};

/// The formats `quant_gemm_kernel` reads, its constexpr `scheme`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QgemmScheme {
    /// fp8 e4m3 bytes `[N, K]`, f32 scales in blocks.
    Fp8E4m3,
    /// fp8 e5m2 bytes `[N, K]`, f32 scales in blocks.
    Fp8E5m2,
    /// GPTQ int4 words `[K/8, N]`.
    Gptq,
    /// AWQ int4 words `[K, N/8]`.
    Awq,
    /// llama.cpp's blocks, rows of `[N, row_bytes]` bytes.
    Gguf(GgufFormat),
}

impl QgemmScheme {
    /// The kernel's constexpr: 0–3 in the order above, then 4 + the GGUF format's code.
    pub fn code(self) -> u32 {
        match self {
            QgemmScheme::Fp8E4m3 => 0,
            QgemmScheme::Fp8E5m2 => 1,
            QgemmScheme::Gptq => 2,
            QgemmScheme::Awq => 3,
            QgemmScheme::Gguf(f) => 4 + f as u32,
        }
    }
}

/// Loads the raw data of the chunk of weights at column `n`, input `k` (already inside
/// the matrix) into slot `i` of a thread's registers.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn qgemm_chunk_load<Q, S>(
    scheme: u32,
    mut words: Mem<u32>,
    mut factors: Mem<f32>,
    i: u32,
    w: Mem<Q>,
    zeros: Mem<Q>,
    scales: Mem<S>,
    n: u32,
    k: u32,
    dims: u32,
    row_shift: u32,
    col_shift: u32,
    scale_cols: u32,
) {
    if scheme < 2 {
        fp8_chunk_load(
            words, factors, i, w, scales, n, k, dims, row_shift, col_shift, scale_cols,
        );
    }
    if scheme == 2 {
        gptq_chunk_load(words, factors, i, w, zeros, scales, n, k, dims, col_shift);
    }
    if scheme == 3 {
        awq_chunk_load(words, i, w, zeros, n, k, dims, col_shift);
    }
    if scheme >= 4 {
        gguf_chunk_load(words, factors, i, w, n, k, dims, scheme - 4);
    }
}

/// Dequantizes the chunk in slot `i` of a thread's registers (and AWQ's scales, from
/// `scales`) into `sb[at … at + 8]`,
/// zeros where `inside` is false (inputs past K, whose x values are zeros: a NaN weight
/// there must not reach the sum).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn qgemm_chunk_dequantize<T, S>(
    scheme: u32,
    mut sb: Mem<T>,
    at: u32,
    words: Mem<u32>,
    factors: Mem<f32>,
    scales: Mem<S>,
    i: u32,
    inside: bool,
) {
    if scheme < 2 {
        fp8_chunk_dequantize(sb, at, words, factors, i, inside, scheme);
    }
    if scheme == 2 {
        gptq_chunk_dequantize(sb, at, words, factors, i, inside);
    }
    if scheme == 3 {
        awq_chunk_dequantize(sb, at, words, scales, i, inside);
    }
    if scheme >= 4 {
        gguf_chunk_dequantize(sb, at, words, factors, i, inside);
    }
}

/// `y = x·Ŵᵀ` on tiles for the format `scheme` ([`QgemmScheme::code`]): `w` the codes,
/// `zeros` the packed zero points (GPTQ, AWQ; fp8 and GGUF pass `w` again, unread),
/// `scales` the scales (GGUF, whose scales are in its blocks, passes `x`, unread); `dims`
/// the columns of `w`'s rows (K for fp8's `[N, K]` bytes, N for GPTQ's `[K/8, N]` words,
/// N/8 for AWQ's, the bytes of a row of GGUF blocks); fp8's scale of `(n, k)` is
/// `scales[(n >> row_shift)·scale_cols + (k >> col_shift)]`, an int4 format's group of
/// input `k` is `k >> col_shift` (block and group sizes are powers of two, or the whole
/// matrix: a shift of 31). A thread dequantizes `nb / wg` chunks of each weight tile. Grid `[ceil(N / 16nb), ceil(M / 64wg), 1]`, `128·wg`
/// threads; declared for two threadgroups of 256 threads an SM, as `affine_qgemm_kernel`.
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 256, groups_per_core = 2)]
pub fn quant_gemm_kernel<T, Q, S>(
    x: Tensor<T>,
    w: Tensor<Q>,
    zeros: Tensor<Q>,
    scales: Tensor<S>,
    mut y: Tensor<T>,
    m: u32,
    n: u32,
    k: u32,
    dims: u32,
    row_shift: u32,
    col_shift: u32,
    scale_cols: u32,
    band: u32,
    #[constexpr] wg: u32,
    #[constexpr] nb: u32,
    #[constexpr] stages: u32,
    #[constexpr] scheme: u32,
) {
    let bm = 64 * wg;
    let bn = 16 * nb;
    let threads = 128 * wg;
    let per = nb / wg;
    // AWQ (scheme 3) reads its words into the `[K, N]`-major tile.
    let kn = scheme == 3;
    // The last chunk inside the matrix along N and along K.
    let n_last = n - select(kn, 8u32, 1u32);
    let k_last = k - select(kn, 1u32, 8u32);
    let sa = threadgroup_array::<T>(stages * 64 * wg * 64);
    let sb = threadgroup_array::<T>(2 * 16 * nb * 64);
    let words = stack_array::<u32>(3 * per);
    let factors = stack_array::<f32>(2 * per);
    // Written before the loop, whose first step only loads them, so that they are
    // registers (an array that might be read unwritten stays in memory).
    for e in 0..3 * per {
        store(words[e], 0u32);
    }
    for e in 0..2 * per {
        store(factors[e], 0.0f32);
    }
    let acc = [matrix_acc(); nb];
    for j in 0..nb {
        matrix_fill(acc[j], 0.0);
    }
    let (row0, col0) = qgemm_tile_origin(m, n, bm, bn, band);
    let tid = thread_id();
    let tiles = (k + 63) / 64;
    for s in 0..stages - 1 {
        qgemm_fetch_x(sa, x, s, stages, row0, bm, m, k, threads);
    }
    // Step `t` dequantizes the weight tile `t − 1` loaded the step before, issues its
    // product, then loads the raw data of tile `t`, whose latency hides behind that
    // product.
    for step in 0..tiles + 1 {
        if step > 0 {
            let t = step - 1;
            let wbuf = (t % 2) * bn * 64;
            for i in 0..per {
                let (_, ck, at) = qgemm_chunk(tid + i * threads, t, col0, nb, kn);
                qgemm_chunk_dequantize(scheme, sb, wbuf + at, words, factors, scales, i, ck < k);
            }
            // The previous tile's product ran under this tile's dequantization; it must
            // end before the barrier hands its x buffer to the next copies.
            matrix_mma_wait(acc, 0);
            wait_copies(stages - 2);
            // The barrier publishes this tile's weights and x copies; the B buffer written
            // next step was last read by the product before it, which every thread has
            // finished.
            barrier();
            qgemm_fetch_x(sa, x, t + stages - 1, stages, row0, bm, m, k, threads);
            if kn {
                matrix_mma_tiles_kn_async(acc, sa[(t % stages) * bm * 64], sb[wbuf]);
            } else {
                matrix_mma_tiles_async(acc, sa[(t % stages) * bm * 64], sb[wbuf]);
            }
        }
        if step < tiles {
            // A chunk past the matrix loads the last one inside (a column past N is
            // never stored; an input past K dequantizes to zeros).
            for i in 0..per {
                let (cn, ck, _) = qgemm_chunk(tid + i * threads, step, col0, nb, kn);
                qgemm_chunk_load(
                    scheme,
                    words,
                    factors,
                    i,
                    w,
                    zeros,
                    scales,
                    min(cn, n_last),
                    min(ck, k_last),
                    dims,
                    row_shift,
                    col_shift,
                    scale_cols,
                );
            }
        }
    }
    matrix_mma_wait(acc, 0);
    // Edge tiles go through the first A buffer, free once every product has finished.
    store_acc_tiles(acc, y, sa, row0, bm, col0, m, n);
}

/// `x` `[M, K]` for a quantized GEMM: f16 or bf16, non-empty, K a multiple of 8 (its
/// tiles arrive by 16-byte copies). Returns (M, K).
pub(crate) fn gemm_rows(op: &'static str, x: &Tensor) -> Result<(usize, usize), OpError> {
    dtype_in(op, "x", x, &MATMUL_DTYPES)?;
    match *x.shape() {
        [m, k] if m > 0 && k > 0 && k.is_multiple_of(8) => Ok((m, k)),
        ref s => Err(OpError::invalid(
            op,
            format!(
                "`x` must be a non-empty matrix [M, K] with K a multiple of 8, got shape {s:?}"
            ),
        )),
    }
}

/// What a format hands [`launch_quant_gemm`]: its weight tensors (`zeros` is `w` again
/// where it has none), the kernel's `dims`, `(row_shift, col_shift, scale_cols)` and
/// scheme.
pub(crate) struct QgemmWeights<'a> {
    pub w: &'a Tensor,
    pub zeros: &'a Tensor,
    pub scales: &'a Tensor,
    pub dims: u32,
    pub blocks: (u32, u32, u32),
    pub scheme: QgemmScheme,
}

/// Runs `quant_gemm_kernel` for `y[m, n] = x·Ŵᵀ` on the tile shape [`qgemm_shape`] picks
/// for `m`; the caller has checked every tensor.
pub(crate) fn launch_quant_gemm(
    ctx: &Context,
    op: &'static str,
    (x, y): (&Tensor, &Tensor),
    weights: QgemmWeights,
    (m, n, k): (usize, usize, usize),
) -> Result<(), OpError> {
    fits_u32(op, "the element count of `x`", x.len())?;
    fits_u32(op, "the element count of `w`", weights.w.len())?;
    fits_u32(op, "the element count of `y`", y.len())?;
    let (m, n) = (m as u32, n as u32);
    let (wg, nb, stages) = qgemm_shape(ctx, m);
    let (row_shift, col_shift, scale_cols) = weights.blocks;
    quant_gemm_kernel::launch(
        ctx,
        quant_gemm_kernel::Args {
            x,
            w: weights.w,
            zeros: weights.zeros,
            scales: weights.scales,
            y,
            m,
            n,
            k: k as u32,
            dims: weights.dims,
            row_shift,
            col_shift,
            scale_cols,
            band: QGEMM_BAND,
        },
        quant_gemm_kernel::Consts {
            wg,
            nb,
            stages,
            scheme: weights.scheme.code(),
        },
    )
    .grid([n.div_ceil(16 * nb), m.div_ceil(64 * wg), 1])
    .group_size(128 * wg)
    .run()
    .map_err(runtime(op))
}
