//! `affine_qgemm`: the quantized GEMM of prefill, `y[M, N] = x[M, K]·Ŵᵀ` with `W` `[N,
//! K]` in MLX's affine format and `Ŵ = scale·q + bias` computed in f32 and rounded once to
//! the activation dtype (f16 or bf16), on warpgroup tile products as
//! `matmul_pipelined_kernel` runs them. A threadgroup of `wg` warpgroups owns a `64·wg
//! × 16·nb` output tile and walks K 64 values at a time: the x tile arrives by 16-byte
//! asynchronous copies into `stages` swizzled A buffers, `stages − 1` tiles ahead; the
//! weight tile (`16·nb` rows × two units of 32 values, each unit `bits` whole u32 words
//! with one scale and bias) is dequantized by the threads from registers into one of two
//! swizzled B buffers with plain stores, and the packed words, scales and biases of the
//! next tile are loaded into registers before the current `matrix_mma_tiles_async`, so their
//! latency hides behind the product. Weights are never dequantized to memory.

use super::format::AffineFormat;
use super::qgemm_tiles::{qgemm_fetch_x, qgemm_tile_origin};
use super::qgemv::affine_weight;
use crate::error::{runtime, OpError};
use crate::matmul::pipelined::store_acc_tiles;
use crate::matmul::tiled::MATMUL_DTYPES;
use crate::validate::dtype_in;
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, Tensor};

/// Loads unit `u` (32 values: `bits` words, one scale and bias) of weight row `wrow` into
/// slot `i` of a thread's registers: `words[i·bits …]`, `sc[2i]` the scale and `sc[2i + 1]`
/// the bias, as f32.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn load_affine_unit<T>(
    mut words: Mem<u32>,
    mut sc: Mem<f32>,
    i: u32,
    packed: Mem<u32>,
    scales: Mem<T>,
    biases: Mem<T>,
    wrow: u32,
    u: u32,
    units: u32,
    groups: u32,
    units_per_group: u32,
    bits: u32,
) {
    let wb = (wrow * units + u) * bits;
    for b in 0..bits {
        store(words[i * bits + b], load(packed[wb + b]));
    }
    let gi = wrow * groups + u / units_per_group;
    store(sc[2 * i], load(scales[gi]).cast::<f32>());
    store(sc[2 * i + 1], load(biases[gi]).cast::<f32>());
}

/// Dequantizes the unit in register slot `i` (see [`load_affine_unit`]; zeros where not
/// `inside` the row) into half `half` (columns `32·half …`) of row `r` of the swizzled B
/// tile at `wbuf` of `sb`: eight values at a time, each run of eight one 16-byte chunk
/// of the tile (`swizzled(r, c)` written out for a chunk), so its eight stores become one.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn dequantize_affine_unit<T>(
    mut sb: Mem<T>,
    wbuf: u32,
    r: u32,
    half: u32,
    words: Mem<u32>,
    sc: Mem<f32>,
    i: u32,
    bits: u32,
    inside: bool,
) {
    let scale = select(inside, load(sc[2 * i]), 0.0f32);
    let bias = select(inside, load(sc[2 * i + 1]), 0.0f32);
    for q in 0..4 {
        let at = wbuf + r * 64 + (((4 * half + q) ^ (r & 7)) << 3);
        for jj in 0..8 {
            let bit = (q * 8 + jj) * bits;
            let word = load(words[i * bits + bit / 32]);
            // The last word never starts a straddling value: a unit ends on a word
            // boundary.
            let next = load(words[i * bits + min(bit / 32 + 1, bits - 1)]);
            let w = affine_weight(word, next, bit % 32, bits, scale, bias);
            store(sb[at + jj], w.cast::<T>());
        }
    }
}

/// `y[r, c] = Σ_k x[r, k]·round(scale·q[c, k] + bias)` on tiles: `units = K / 32`,
/// `units_per_group = group_size / 32`, threadgroups in bands of `band` column tiles. A
/// thread dequantizes `nb / (4·wg)` units of each weight tile (`nb` a multiple of `4·wg`).
/// Grid `[ceil(N / 16nb), ceil(M / 64wg), 1]`, `128·wg` threads. Declared for two
/// threadgroups of 256 threads an SM (at most 128 registers a thread on CUDA), so that
/// one threadgroup's dequantization runs while the other's product does: the
/// accumulators of a 128 × 128 tile are 64 registers a thread.
#[kernel(group_size = 256, groups_per_core = 2)]
pub fn affine_qgemm_kernel<T>(
    x: Tensor<T>,
    packed: Tensor<u32>,
    scales: Tensor<T>,
    biases: Tensor<T>,
    mut y: Tensor<T>,
    m: u32,
    n: u32,
    units: u32,
    units_per_group: u32,
    band: u32,
    #[constexpr] wg: u32,
    #[constexpr] nb: u32,
    #[constexpr] stages: u32,
    #[constexpr] bits: u32,
) {
    let bm = 64 * wg;
    let bn = 16 * nb;
    let threads = 128 * wg;
    let per = nb / (4 * wg);
    let k = units * 32;
    let groups = units / units_per_group;
    let sa = threadgroup_array::<T>(stages * 64 * wg * 64);
    let sb = threadgroup_array::<T>(2 * 16 * nb * 64);
    let words = stack_array::<u32>(per * bits);
    let sc = stack_array::<f32>(2 * per);
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
    // Unit e = tid + i·threads of a tile is row e / 2 of the tile (a row past n reads the
    // last one; its column is never stored), values 32·(e % 2) …; a unit past the row's
    // end (K = 64t + 32) reads the last unit and dequantizes to zeros.
    for i in 0..per {
        let e = tid + i * threads;
        let wrow = min(col0 + e / 2, n - 1);
        let u = min(e % 2, units - 1);
        load_affine_unit(
            words,
            sc,
            i,
            packed,
            scales,
            biases,
            wrow,
            u,
            units,
            groups,
            units_per_group,
            bits,
        );
    }
    for t in 0..tiles {
        let wbuf = (t % 2) * bn * 64;
        for i in 0..per {
            let e = tid + i * threads;
            let r = e / 2;
            let half = e % 2;
            let inside = t * 2 + half < units;
            dequantize_affine_unit(sb, wbuf, r, half, words, sc, i, bits, inside);
        }
        if t + 1 < tiles {
            for i in 0..per {
                let e = tid + i * threads;
                let wrow = min(col0 + e / 2, n - 1);
                let u = min((t + 1) * 2 + e % 2, units - 1);
                load_affine_unit(
                    words,
                    sc,
                    i,
                    packed,
                    scales,
                    biases,
                    wrow,
                    u,
                    units,
                    groups,
                    units_per_group,
                    bits,
                );
            }
        }
        // The previous tile's product ran under this tile's dequantization; it must end
        // before the barrier hands its x buffer to the next copies.
        matrix_mma_wait(acc, 0);
        wait_copies(stages - 2);
        // The barrier publishes this tile's weights and x copies; the B buffer written next
        // step was last read by the product before it, which every thread has finished.
        barrier();
        qgemm_fetch_x(sa, x, t + stages - 1, stages, row0, bm, m, k, threads);
        matrix_mma_tiles_async(acc, sa[(t % stages) * bm * 64], sb[wbuf]);
    }
    matrix_mma_wait(acc, 0);
    // Edge tiles go through the first A buffer, free once every product has finished.
    store_acc_tiles(acc, y, sa, row0, bm, col0, m, n);
}

/// Column tiles a band of `affine_qgemm_kernel`'s threadgroups shares: at 128 × 128 tiles
/// and M = 4096 a band is 512 groups, two waves of an H100's 264, whose weights (16 column
/// tiles, 8 MiB at 8 bits and K = 4096) stay in L2 while the band's row tiles pass.
pub const QGEMM_BAND: u32 = 16;

/// Every tile shape `(wg, nb, stages)` the kernel is built for: 64 × 64 with x two deep
/// (32 KiB of threadgroup memory with the two weight buffers), 64 × 128 four deep (64 KiB),
/// 128 × 128 four deep (96 KiB). (128 × 256 tiles, as the dense GEMM takes, need 128
/// accumulator registers a thread: one threadgroup an SM, nothing beside its products.)
pub const QGEMM_SHAPES: [(u32, u32, u32); 3] = [(1, 4, 2), (1, 8, 4), (2, 8, 4)];

/// The kernel's (warpgroups, accumulators a simdgroup, stages) for `m` rows. Where
/// threadgroup memory allows (CUDA): 128 × 128 tiles, x four buffers deep (96 KiB with
/// the two weight buffers, so two threadgroups share an SM and one's dequantization runs
/// beside the other's product); at m ≤ 256, 64 × 128 tiles, more threadgroups. Elsewhere
/// 64 × 64, two x buffers (32 KiB, what the CPU and Metal give).
pub fn qgemm_shape(ctx: &Context, m: u32) -> (u32, u32, u32) {
    if ctx.info().max_shared_bytes < 96 * 1024 {
        (1, 4, 2)
    } else if m <= 256 {
        (1, 8, 4)
    } else {
        (2, 8, 4)
    }
}

/// `y[M, N] = x[M, K]·Ŵᵀ` with `W` `[N, K]` as MLX's affine `packed` `[N, K·bits/32]`,
/// `scales` and `biases` `[N, K/group_size]`, `Ŵ = scale·q + bias` in f32 rounded once to
/// x's dtype (f16 or bf16, which `scales`, `biases` and `y` share), accumulated in f32.
/// Any M ≥ 1; `affine_qgemv` is the faster path for M ≤ 16.
#[allow(clippy::too_many_arguments)]
pub fn affine_qgemm(
    ctx: &Context,
    x: &Tensor,
    packed: &Tensor,
    scales: &Tensor,
    biases: &Tensor,
    y: &Tensor,
    bits: u32,
    group_size: u32,
) -> Result<(), OpError> {
    affine_qgemm_tiles(ctx, x, packed, scales, biases, y, bits, group_size, None)
}

/// [`affine_qgemm`] on the tile shape `(wg, nb, stages)` of [`QGEMM_SHAPES`] given, not
/// chosen by [`qgemm_shape`]: the benches time the others beside the choice.
#[allow(clippy::too_many_arguments)]
pub(crate) fn affine_qgemm_tiles(
    ctx: &Context,
    x: &Tensor,
    packed: &Tensor,
    scales: &Tensor,
    biases: &Tensor,
    y: &Tensor,
    bits: u32,
    group_size: u32,
    tiles: Option<(u32, u32, u32)>,
) -> Result<(), OpError> {
    const OP: &str = "affine_qgemm";
    let format = AffineFormat::new(OP, bits, group_size)?;
    dtype_in(OP, "x", x, &MATMUL_DTYPES)?;
    let (m, k) = match *x.shape() {
        [m, k] if m > 0 && k > 0 => (m, k),
        ref s => {
            return Err(OpError::invalid(
                OP,
                format!("`x` must be a non-empty matrix [M, K], got shape {s:?}"),
            ))
        }
    };
    format.check_row(OP, k)?;
    let n = format.check_weights(OP, (x, m, k), (packed, scales, biases), y)?;
    let (m, n) = (m as u32, n as u32);
    let (wg, nb, stages) = tiles.unwrap_or_else(|| qgemm_shape(ctx, m));
    affine_qgemm_kernel::launch(
        ctx,
        affine_qgemm_kernel::Args {
            x,
            packed,
            scales,
            biases,
            y,
            m,
            n,
            units: (k / 32) as u32,
            units_per_group: group_size / 32,
            band: QGEMM_BAND,
        },
        affine_qgemm_kernel::Consts {
            wg,
            nb,
            stages,
            bits,
        },
    )
    .grid([n.div_ceil(16 * nb), m.div_ceil(64 * wg), 1])
    .group_size(128 * wg)
    .run()
    .map_err(runtime(OP))
}
