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
//! Its threadgroup owns 32 columns (4 words a row) or 16 where fewer would not fill the
//! device twice, and splits K into one contiguous chunk per (simdgroup, lane / words)
//! slot: 64 or 128 chunks, so even N = 4096 runs 128 threadgroups of 256 threads, each
//! thread with four rows' words in flight (a word a lane: a wider load would take 32
//! columns a thread and 32·M accumulators). The slots' sums meet by shuffles, then the
//! simdgroups' in threadgroup memory.

use super::gptq::{check_product, group_of};
use crate::error::{runtime, OpError};
use crate::matmul::gemv::{row_tile, skinny_rows};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

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

/// `y[r, col] = Σ_k x[r, k]·w[k, col]` for `r < m`: `8·wpg` columns a threadgroup of 256
/// threads, `k` rows, `nw = N / 8` words a row, groups of `group` rows. Lane `l` of
/// simdgroup `s` takes word `l % wpg` of the threadgroup's columns over row slot `s·(32 /
/// wpg) + l / wpg`, a contiguous chunk of K (so a group's zeros and scales are read once a
/// chunk, not once a row); its sums meet the other slots' by shuffles, then the eight
/// simdgroups' in threadgroup memory.
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
    #[constexpr] wpg: u32,
) {
    let lane = simd_lane();
    let sg = simd_id();
    let slots = 32 / wpg;
    let w = lane % wpg;
    let slot = sg * slots + lane / wpg;
    // A word past the row's end reads the last word and stores nothing.
    let c = min(group_id_x() * wpg + w, nw - 1);
    // Rows a thread loads before it uses any: the chunks are multiples of `u`, so one step
    // never crosses a group (at least 32 rows).
    let u = 4u32;
    let chunk = ((k + 8 * slots - 1) / (8 * slots) + u - 1) / u * u;
    let k0 = min(slot * chunk, k);
    let k1 = min(k0 + chunk, k);
    let acc = stack_array::<f32>(8 * tile);
    let words = stack_array::<u32>(u);
    // The current group's `2²³ + zero` and scale of each of the word's columns.
    let zz = stack_array::<f32>(8);
    let sc = stack_array::<f32>(8);
    let wv = stack_array::<f32>(8);
    for v in 0..8 * tile {
        store(acc[v], 0.0f32);
    }
    let mut cur = 0xFFFF_FFFFu32;
    for k_step in range(k0, k1, u) {
        for i in 0..u {
            let kk = min(k_step + i, k1 - 1);
            store(words[i], load(qweight[kk * nw + c]).bitcast::<u32>());
        }
        let g = k_step / group;
        if g != cur {
            cur = g;
            let zword = load(qzeros[g * nw + c]).bitcast::<u32>();
            for j in 0..8 {
                store(zz[j], 8_388_608.0f32 + awq_nibble(zword, j).cast::<f32>());
                store(sc[j], load(scales[(g * nw + c) * 8 + j]).cast::<f32>());
            }
        }
        for i in 0..u {
            let kk = k_step + i;
            let word = load(words[i]);
            for j in 0..8 {
                // The code as the low bits of 2²³: `(2²³ + q) − (2²³ + zero)` is q − zero.
                let f = (awq_nibble(word, j) | 0x4B00_0000u32).bitcast::<f32>();
                store(wv[j], (f - load(zz[j])) * load(sc[j]));
            }
            for r in 0..tile {
                // Rows of the tile past m repeat the last row; their sums are dropped. A
                // row past the chunk adds nothing.
                let xv = load(x[min(r, m - 1) * k + min(kk, k - 1)]).cast::<f32>();
                for j in 0..8 {
                    let v = r * 8 + j;
                    let a = load(acc[v]);
                    store(acc[v], select(kk < k1, fma(xv, load(wv[j]), a), a));
                }
            }
        }
    }
    // The slots of a simdgroup, then the eight simdgroups: slot (simdgroup, word, r, j).
    let part = threadgroup_array::<f32>(8 * 4 * 8 * tile);
    for v in 0..8 * tile {
        let mut t = load(acc[v]);
        for b in 0..5 {
            let d = wpg << b;
            if d < 32 {
                t += simd_shuffle_xor(t, d);
            }
        }
        if lane < wpg {
            store(part[((sg * wpg + w) * tile) * 8 + v], t);
        }
    }
    barrier();
    // Output t (up to 512 of them, two a thread at 16 rows of 4 words): word t / (8·tile),
    // row (t / 8) % tile, column j = t % 8.
    for t in range(thread_id(), wpg * 8 * tile, 256) {
        let ww = t / (8 * tile);
        let v = t % (8 * tile);
        let mut total = 0.0f32;
        for s in 0..8 {
            total += load(part[((s * wpg + ww) * tile) * 8 + v]);
        }
        let r = v / 8;
        let col = (group_id_x() * wpg + ww) * 8 + v % 8;
        if col < nw * 8 && r < m {
            store(y[r * nw * 8 + col], total.cast::<T>());
        }
    }
}

/// Words a threadgroup of [`awq_qgemv_kernel`] takes: four (32 columns, a 16-byte run of a
/// row) where that still makes two threadgroups a compute unit, else two.
pub fn awq_words_per_group(nw: u32, compute_units: u32) -> u32 {
    if nw / 4 >= 2 * compute_units {
        4
    } else {
        2
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
    let wpg = awq_words_per_group(n / 8, ctx.info().compute_units);
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
        awq_qgemv_kernel::Consts {
            tile: row_tile(m),
            wpg,
        },
    )
    .grid([(n / 8).div_ceil(wpg), 1, 1])
    .group_size(256)
    .run()
    .map_err(runtime(OP))
}
