//! AWQ int4 weights as AutoAWQ's GEMM checkpoints store them (and vLLM loads them): for a
//! linear layer of K inputs and N outputs,
//!
//! - `qweight` `[K, N/8]` i32: word `(k, c)` holds the codes of columns `8c .. 8c + 8` of
//!   input `k`, packed along N in AWQ's interleaved order: column `8c + j` at nibble
//!   `[0, 4, 1, 5, 2, 6, 3, 7][j]` (even columns in the low four nibbles, odd ones in the
//!   high four);
//! - `qzeros` `[K/G, N/8]` i32: the zero points, packed the same way (stored as they are,
//!   no offset);
//! - `scales` `[K/G, N]`;
//!
//! and `w[k, n] = (q[k, n] − z[k/G, n])·scales[k/G, n]`. G is 32, 64 or 128 (or 0: one
//! group over K); K is a multiple of G, N of 8.
//!
//! `awq_dequantize` writes `w` `[K, N]`; `awq_qgemv` computes `y = x·w` for M = 1–16.
//! Its threadgroup owns 256 columns (32 words a row): lane `l` of every simdgroup takes
//! word `l` of a row (a simdgroup reads 128 contiguous bytes a row, 4 bytes a lane: a
//! wider load would take 32 columns a thread and 32·M accumulators), the eight
//! simdgroups take rows `s, s + 8, …`, and their sums meet in threadgroup memory one row
//! of `x` at a time.

use super::gptq::{check_product, group_of};
use crate::error::{runtime, OpError};
use crate::matmul::gemv::{row_tile, skinny_rows};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// Output columns per threadgroup of the GEMV.
pub const AWQ_QGEMV_COLUMNS: u32 = 256;

/// The code of column `j` (0–7) of an AWQ word: nibble `[0, 4, 1, 5, 2, 6, 3, 7][j]`.
#[func]
pub fn awq_nibble(word: u32, j: u32) -> u32 {
    (word >> ((j % 2) * 16 + (j / 2) * 4)) & 15u32
}

/// One thread per word `(k, c)` of `qweight` `[k, nw]`: `out[k, 8c + j]`.
#[kernel]
pub fn awq_dequantize_kernel<T>(
    qweight: Tensor<i32>,
    qzeros: Tensor<i32>,
    scales: Tensor<T>,
    mut out: Tensor<T>,
    words: u32,
    nw: u32,
    group: u32,
) {
    let at = global_id();
    if at < words {
        let k = at / nw;
        let c = at % nw;
        let g = k / group;
        let word = load(qweight[at]).bitcast::<u32>();
        let zword = load(qzeros[g * nw + c]).bitcast::<u32>();
        for j in 0..8 {
            let q = awq_nibble(word, j).cast::<f32>() - awq_nibble(zword, j).cast::<f32>();
            let scale = load(scales[(g * nw + c) * 8 + j]).cast::<f32>();
            store(out[at * 8 + j], (q * scale).cast::<T>());
        }
    }
}

/// `y[r, col] = Σ_k x[r, k]·w[k, col]` for `r < m`: 256 columns a threadgroup of 256
/// threads, `k` rows, `nw = N / 8` words a row, groups of `group` rows.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn awq_qgemv_kernel<T>(
    x: Tensor<T>,
    qweight: Tensor<i32>,
    qzeros: Tensor<i32>,
    scales: Tensor<T>,
    mut y: Tensor<T>,
    m: u32,
    k: u32,
    nw: u32,
    group: u32,
    #[constexpr] tile: u32,
) {
    let lane = simd_lane();
    // A word past the row's end reads the last word and stores nothing.
    let c = min(group_id_x() * 32 + lane, nw - 1);
    let acc = stack_array::<f32>(8 * tile);
    let wv = stack_array::<f32>(8);
    for v in 0..8 * tile {
        store(acc[v], 0.0f32);
    }
    for kk in range(simd_id(), k, 8) {
        let g = kk / group;
        let word = load(qweight[kk * nw + c]).bitcast::<u32>();
        let zword = load(qzeros[g * nw + c]).bitcast::<u32>();
        for j in 0..8 {
            let q = awq_nibble(word, j).cast::<f32>() - awq_nibble(zword, j).cast::<f32>();
            store(wv[j], q * load(scales[(g * nw + c) * 8 + j]).cast::<f32>());
        }
        for r in 0..tile {
            // Rows of the tile past m repeat the last row; their sums are dropped.
            let xv = load(x[min(r, m - 1) * k + kk]).cast::<f32>();
            for j in 0..8 {
                let v = r * 8 + j;
                store(acc[v], fma(xv, load(wv[j]), load(acc[v])));
            }
        }
    }
    // The eight simdgroups' sums, one row of x at a time: slot (simdgroup, lane, j).
    let part = threadgroup_array::<f32>(8 * 32 * 8);
    let t = thread_id();
    for r in 0..tile {
        for j in 0..8 {
            store(part[(simd_id() * 32 + lane) * 8 + j], load(acc[r * 8 + j]));
        }
        barrier();
        // Thread t sums column t of the threadgroup's 256: word t / 8, column j = t % 8.
        let mut total = 0.0f32;
        for s in 0..8 {
            total += load(part[(s * 32 + t / 8) * 8 + t % 8]);
        }
        let col = group_id_x() * 256 + t;
        if col < nw * 8 && r < m {
            store(y[r * nw * 8 + col], total.cast::<T>());
        }
        barrier();
    }
}

/// `qweight` `[K, N/8]`, `qzeros` `[K/G, N/8]` i32 and `scales` `[K/G, N]`: (K, N, G).
pub(super) fn check_words(
    op: &'static str,
    qweight: &Tensor,
    qzeros: &Tensor,
    scales: &Tensor,
    group_size: u32,
) -> Result<(usize, usize, usize), OpError> {
    dtype_is(op, "qweight", qweight, DType::I32)?;
    dtype_is(op, "qzeros", qzeros, DType::I32)?;
    let (k, nw) = match *qweight.shape() {
        [k, nw] if k > 0 && nw > 0 => (k, nw),
        ref s => {
            return Err(OpError::invalid(
                op,
                format!("`qweight` must be a non-empty [K, N/8], got shape {s:?}"),
            ))
        }
    };
    let g = group_of(op, group_size, k)?;
    shape_is(op, "qzeros", qzeros, &[k / g, nw])?;
    shape_is(op, "scales", scales, &[k / g, nw * 8])?;
    Ok((k, nw * 8, g))
}

/// `out[k, n] = (q[k, n] − z[k/G, n])·scales[k/G, n]` from AWQ's words, computed in f32
/// and rounded once to the scales' dtype: the weight `[K, N]` as the checkpoint lays it
/// out.
pub fn awq_dequantize(
    ctx: &Context,
    qweight: &Tensor,
    qzeros: &Tensor,
    scales: &Tensor,
    out: &Tensor,
    group_size: u32,
) -> Result<(), OpError> {
    const OP: &str = "awq_dequantize";
    dtype_in(OP, "scales", scales, &FLOAT_DTYPES)?;
    dtype_is(OP, "out", out, scales.dtype())?;
    distinct_named(
        OP,
        "out",
        out,
        &[("qweight", qweight), ("qzeros", qzeros), ("scales", scales)],
    )?;
    let (k, n, g) = check_words(OP, qweight, qzeros, scales, group_size)?;
    shape_is(OP, "out", out, &[k, n])?;
    fits_u32(OP, "the element count of `out`", out.len())?;
    let words = fits_u32(OP, "the word count of `qweight`", qweight.len())?;
    awq_dequantize_kernel::launch(
        ctx,
        awq_dequantize_kernel::Args {
            qweight,
            qzeros,
            scales,
            out,
            words,
            nw: (n / 8) as u32,
            group: g as u32,
        },
    )
    .grid([words.div_ceil(128), 1, 1])
    .group_size(128)
    .run()
    .map_err(runtime(OP))
}

/// `y[M, N] = x[M, K]·w` with `w` `[K, N]` AWQ int4 words (`qweight`, `qzeros`, `scales`
/// in x's dtype); 1 ≤ M ≤ 16, accumulated in f32.
#[allow(clippy::too_many_arguments)]
pub fn awq_qgemv(
    ctx: &Context,
    x: &Tensor,
    qweight: &Tensor,
    qzeros: &Tensor,
    scales: &Tensor,
    y: &Tensor,
    group_size: u32,
) -> Result<(), OpError> {
    const OP: &str = "awq_qgemv";
    let (m, kx) = skinny_rows(OP, x, &FLOAT_DTYPES)?;
    let (k, n, g) = check_words(OP, qweight, qzeros, scales, group_size)?;
    check_product(OP, (x, qweight, qzeros, scales, y), (m, kx), (k, n))?;
    fits_u32(OP, "the element count of `x`", x.len())?;
    fits_u32(OP, "the word count of `qweight`", qweight.len())?;
    let n = fits_u32(OP, "N", n)?;
    awq_qgemv_kernel::launch(
        ctx,
        awq_qgemv_kernel::Args {
            x,
            qweight,
            qzeros,
            scales,
            y,
            m: m as u32,
            k: k as u32,
            nw: n / 8,
            group: g as u32,
        },
        awq_qgemv_kernel::Consts { tile: row_tile(m) },
    )
    .grid([n.div_ceil(AWQ_QGEMV_COLUMNS), 1, 1])
    .group_size(256)
    .run()
    .map_err(runtime(OP))
}
