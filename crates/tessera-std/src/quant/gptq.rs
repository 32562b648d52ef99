//! GPTQ int4 weights with act-order off, as AutoGPTQ writes them in its `gptq` checkpoint
//! format (version 1, the one vLLM and transformers load): for a linear layer of K inputs
//! and N outputs,
//!
//! - `qweight` `[K/8, N]` i32: word `(i, n)` holds the codes `q[8i + j, n]` at bits
//!   `4j .. 4j + 4` (packed along K, low nibble first);
//! - `qzeros` `[K/G, N/8]` i32: word `(g, c)` holds the stored zeros `z[g, 8c + j]` at bits
//!   `4j` (packed along N), each one less than the zero point it stands for;
//! - `scales` `[K/G, N]`: one scale per group of G inputs and output;
//!
//! and `w[k, n] = scales[g, n]·(q[k, n] − (z[g, n] + 1))` with `g = k / G` (a stored 15 is
//! the zero point 16, as AutoGPTQ's and vLLM's kernels read it). G is 32, 64 or 128, or
//! the whole of K (`group_size = 0`, GPTQ's `-1`); K is a multiple of G and of 8, N of 8.
//! (The `gptq_v2` format, which stores the zero points themselves, is not this one.)
//!
//! `gptq_dequantize` writes `w` `[K, N]` (the layout the words are in); `gptq_qgemv`
//! computes `y = x·w` for M = 1–16 from the words. Its threadgroup owns 32 output columns:
//! thread `t` takes the four columns of quad `t % 8` (one 16-byte load of `qweight` a row
//! of words, eight quads a 128-byte run) over the word rows `t / 8, t / 8 + 32, …`; per
//! word row it sums `Σ x·q` and `Σ x` of the eight inputs, so a weight costs no zero
//! subtraction (`scale·(Σ x·q − zero·Σ x)`). The 32 partial sums of a column meet by two
//! shuffles in a simdgroup and eight slots of threadgroup memory.

use crate::error::{runtime, OpError};
use crate::matmul::gemv::{row_tile, skinny_rows};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// The group sizes GPTQ checkpoints use (0: one group over all of K).
pub const GPTQ_GROUP_SIZES: [u32; 4] = [0, 32, 64, 128];
/// Output columns per threadgroup of the GEMV, and its threads.
pub const GPTQ_QGEMV_COLUMNS: u32 = 32;
const QGEMV_THREADS: u32 = 256;

/// One thread per word `(i, n)` of `qweight` `[kw, n]`: its eight weights `out[8i + j, n]`.
#[kernel]
pub fn gptq_dequantize_kernel<T>(
    qweight: Tensor<i32>,
    qzeros: Tensor<i32>,
    scales: Tensor<T>,
    mut out: Tensor<T>,
    words: u32,
    n: u32,
    words_per_group: u32,
) {
    let at = global_id();
    if at < words {
        let i = at / n;
        let col = at % n;
        let g = i / words_per_group;
        let word = load(qweight[at]).bitcast::<u32>();
        let zword = load(qzeros[g * (n / 8) + col / 8]).bitcast::<u32>();
        let zero = ((zword >> ((col % 8) * 4)) & 15u32) + 1u32;
        let scale = load(scales[g * n + col]).cast::<f32>();
        for j in 0..8 {
            let q = (word >> (j * 4)) & 15u32;
            let v = scale * (q.cast::<f32>() - zero.cast::<f32>());
            store(out[(i * 8 + j) * n + col], v.cast::<T>());
        }
    }
}

/// `y[r, col] = Σ_k x[r, k]·w[k, col]` for `r < m`, 32 columns a threadgroup, 256 threads:
/// `kw = K / 8` word rows, `words_per_group = G / 8`.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn gptq_qgemv_kernel<T>(
    x: Tensor<T>,
    qweight: Tensor<i32>,
    qzeros: Tensor<i32>,
    scales: Tensor<T>,
    mut y: Tensor<T>,
    m: u32,
    n: u32,
    kw: u32,
    words_per_group: u32,
    #[constexpr] tile: u32,
) {
    let t = thread_id();
    let quad = t % 8;
    let nq = n / 4;
    // A quad past the last column reads the last quad and stores nothing.
    let cq = min(group_id_x() * 8 + quad, nq - 1);
    let acc = stack_array::<f32>(4 * tile);
    let words = stack_array::<u32>(4);
    let sc = stack_array::<f32>(4);
    let xv = stack_array::<f32>(8);
    for v in 0..4 * tile {
        store(acc[v], 0.0f32);
    }
    for i in range(t / 8, kw, 32) {
        for j in 0..4 {
            store(
                words[j],
                load(qweight[(i * nq + cq) * 4 + j]).bitcast::<u32>(),
            );
        }
        let g = i / words_per_group;
        for j in 0..4 {
            store(sc[j], load(scales[(g * nq + cq) * 4 + j]).cast::<f32>());
        }
        let zword = load(qzeros[g * (n / 8) + cq / 2]).bitcast::<u32>();
        let zshift = (cq % 2) * 16;
        for r in 0..tile {
            // Rows of the tile past m repeat the last row; their sums are dropped.
            let xb = (min(r, m - 1) * kw + i) * 8;
            let mut sx = 0.0f32;
            for e in 0..8 {
                let v = load(x[xb + e]).cast::<f32>();
                store(xv[e], v);
                sx += v;
            }
            for j in 0..4 {
                let word = load(words[j]);
                let mut dot = 0.0f32;
                for e in 0..8 {
                    let q = ((word >> (e * 4)) & 15u32).cast::<f32>();
                    dot = fma(load(xv[e]), q, dot);
                }
                let zero = (((zword >> (zshift + j * 4)) & 15u32) + 1u32).cast::<f32>();
                let v = r * 4 + j;
                store(acc[v], fma(load(sc[j]), dot - zero * sx, load(acc[v])));
            }
        }
    }
    // The four word-row slices of a simdgroup (lanes 8 apart) first, then the eight
    // simdgroups through threadgroup memory.
    let part = threadgroup_array::<f32>(8 * 4 * tile * 8);
    for v in 0..4 * tile {
        let mut a = load(acc[v]);
        a += simd_shuffle_xor(a, 8);
        a += simd_shuffle_xor(a, 16);
        if simd_lane() < 8 {
            store(part[(simd_id() * 4 * tile + v) * 8 + quad], a);
        }
    }
    barrier();
    for o in range(t, 32 * tile, 256) {
        let r = o / 32;
        let c = o % 32;
        let v = r * 4 + c % 4;
        let mut total = 0.0f32;
        for s in 0..8 {
            total += load(part[(s * 4 * tile + v) * 8 + c / 4]);
        }
        let col = group_id_x() * 32 + c;
        if col < n && r < m {
            store(y[r * n + col], total.cast::<T>());
        }
    }
}

/// The group size `group_size` stands for over K = `k` (0: all of K), checked.
pub(super) fn group_of(op: &'static str, group_size: u32, k: usize) -> Result<usize, OpError> {
    if !GPTQ_GROUP_SIZES.contains(&group_size) {
        return Err(OpError::invalid(
            op,
            format!("group_size must be 32, 64, 128 or 0 (one group over K, GPTQ's -1), got {group_size}"),
        ));
    }
    let g = if group_size == 0 {
        k
    } else {
        group_size as usize
    };
    if k == 0 || !k.is_multiple_of(g) || !k.is_multiple_of(8) {
        return Err(OpError::invalid(
            op,
            format!("K = {k} must be a positive multiple of 8 and of the group size {g}"),
        ));
    }
    Ok(g)
}

/// `qweight` `[K/8, N]`, `qzeros` `[K/G, N/8]` i32 and `scales` `[K/G, N]`: returns (K, N,
/// G) for a `qweight` of `kw` word rows.
pub(super) fn check_words(
    op: &'static str,
    qweight: &Tensor,
    qzeros: &Tensor,
    scales: &Tensor,
    group_size: u32,
) -> Result<(usize, usize, usize), OpError> {
    dtype_is(op, "qweight", qweight, DType::I32)?;
    dtype_is(op, "qzeros", qzeros, DType::I32)?;
    let (kw, n) = match *qweight.shape() {
        [kw, n] if kw > 0 && n > 0 && n.is_multiple_of(8) => (kw, n),
        ref s => {
            return Err(OpError::invalid(
                op,
                format!(
                    "`qweight` must be [K/8, N] with N a positive multiple of 8, got shape {s:?}"
                ),
            ))
        }
    };
    let k = kw * 8;
    let g = group_of(op, group_size, k)?;
    shape_is(op, "qzeros", qzeros, &[k / g, n / 8])?;
    shape_is(op, "scales", scales, &[k / g, n])?;
    Ok((k, n, g))
}

/// The checks of a product `y[m, n] = x[m, kx]·w` on int4 words (GPTQ's or AWQ's) that
/// hold `(k, n)` weights: K that of x, the scales and `y` `[m, n]` in x's dtype, `y`
/// aliasing no input.
pub(super) fn check_product(
    op: &'static str,
    (x, qweight, qzeros, scales, y): (&Tensor, &Tensor, &Tensor, &Tensor, &Tensor),
    (m, kx): (usize, usize),
    (k, n): (usize, usize),
) -> Result<(), OpError> {
    dtype_is(op, "scales", scales, x.dtype())?;
    dtype_is(op, "y", y, x.dtype())?;
    distinct_named(
        op,
        "y",
        y,
        &[
            ("x", x),
            ("qweight", qweight),
            ("qzeros", qzeros),
            ("scales", scales),
        ],
    )?;
    if k != kx {
        return Err(OpError::invalid(
            op,
            format!(
                "`qweight` holds K = {k} inputs, but `x` has K = {kx} (shape {:?})",
                qweight.shape()
            ),
        ));
    }
    shape_is(op, "y", y, &[m, n])
}

/// `out[k, n] = scales[k/G, n]·(q[k, n] − zero[k/G, n])` from GPTQ's words, computed in
/// f32 and rounded once to the scales' dtype: the weight `[K, N]` as the checkpoint lays
/// it out (the transpose of the linear layer's `[N, K]`).
pub fn gptq_dequantize(
    ctx: &Context,
    qweight: &Tensor,
    qzeros: &Tensor,
    scales: &Tensor,
    out: &Tensor,
    group_size: u32,
) -> Result<(), OpError> {
    const OP: &str = "gptq_dequantize";
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
    gptq_dequantize_kernel::launch(
        ctx,
        gptq_dequantize_kernel::Args {
            qweight,
            qzeros,
            scales,
            out,
            words,
            n: n as u32,
            words_per_group: (g / 8) as u32,
        },
    )
    .grid([words.div_ceil(128), 1, 1])
    .group_size(128)
    .run()
    .map_err(runtime(OP))
}

/// `y[M, N] = x[M, K]·w` with `w` `[K, N]` GPTQ int4 words (`qweight`, `qzeros`, `scales`
/// in x's dtype); 1 ≤ M ≤ 16, accumulated in f32.
#[allow(clippy::too_many_arguments)]
pub fn gptq_qgemv(
    ctx: &Context,
    x: &Tensor,
    qweight: &Tensor,
    qzeros: &Tensor,
    scales: &Tensor,
    y: &Tensor,
    group_size: u32,
) -> Result<(), OpError> {
    const OP: &str = "gptq_qgemv";
    let (m, kx) = skinny_rows(OP, x, &FLOAT_DTYPES)?;
    let (k, n, g) = check_words(OP, qweight, qzeros, scales, group_size)?;
    check_product(OP, (x, qweight, qzeros, scales, y), (m, kx), (k, n))?;
    fits_u32(OP, "the element count of `x`", x.len())?;
    fits_u32(OP, "the word count of `qweight`", qweight.len())?;
    let n = fits_u32(OP, "N", n)?;
    gptq_qgemv_kernel::launch(
        ctx,
        gptq_qgemv_kernel::Args {
            x,
            qweight,
            qzeros,
            scales,
            y,
            m: m as u32,
            n,
            kw: (k / 8) as u32,
            words_per_group: (g / 8) as u32,
        },
        gptq_qgemv_kernel::Consts { tile: row_tile(m) },
    )
    .grid([n.div_ceil(GPTQ_QGEMV_COLUMNS), 1, 1])
    .group_size(QGEMV_THREADS)
    .run()
    .map_err(runtime(OP))
}
