//! `moe_qgemm` and `moe_qgemm_silu_mul`: the contiguous grouped GEMM of [`super::gemm`] over
//! experts quantized in MLX's affine format (an MLX `SwitchLinear`'s tensors: `packed`
//! `[E, N, K·bits/32]` u32, `scales` and `biases` `[E, N, K/group_size]` in x's dtype; the
//! gated form's `[E, 2·I, …]`, gate rows first), never dequantized to memory.
//!
//! The walk is the dense grouped GEMM's (a threadgroup per slot of the
//! [`super::MoeGemmSchedule`] and column tile, x by 16-byte asynchronous copies masked at
//! the expert's rows); the weight tile is the quantized GEMM's (`affine_qgemm_kernel`):
//! two units of 32 values per tile row, a thread taking whole units, dequantized from
//! registers through the quant family's `affine_weight` (`scale·q + bias` in f32, rounded
//! once to x's dtype) into a swizzled tile, two tile buffers so the threads fill one while
//! the product reads the other, the next tile's words loaded before each product. Tile row
//! `r` is the expert's weight row `col0 + r` (gated: gate row `col0 + r` for the first half
//! of the tile, up row `I + col0 + r − cols` for the second), clamped to the expert's
//! rows: a row past N reads the last one, and its column is never stored.

use super::gemm::store_gated_tiles;
use super::gemm_schedule::MoeGemmSchedule;
use super::qgemv::AffineExperts;
use super::MAX_EXPERTS;
use crate::error::{runtime, OpError};
use crate::matmul::pipelined::{fetch_tile, store_acc_tiles};
use crate::matmul::tiled::MATMUL_DTYPES;
use crate::quant::format::AffineFormat;
use crate::quant::qgemm::{dequantize_affine_unit, load_affine_unit};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// The expert's weight row behind row `r` of a `bn`-row weight tile at output column
/// `col0`: `col0 + r` below `n` (gated: the first `bn / 2` rows gate rows, the rest the up
/// rows of the same columns, `n` rows further), the last row of its half past it.
#[func]
pub fn tile_weight_row(base: u32, r: u32, col0: u32, n: u32, bn: u32, gated: u32) -> u32 {
    let half = bn / 2;
    let up = gated == 1 && r >= half;
    let c = select(up, r - half, r);
    base + select(up, n, 0) + min(col0 + c, n - 1)
}

/// `y[r, c]` for the rows of the schedule's slot `group_id_y()` and column tile
/// `group_id_x()`: `n` output columns (gated: `I`, the weights `2n` rows an expert),
/// `units = K / 32`, `units_per_group = group_size / 32`. A thread dequantizes `per =
/// ceil(nb / 4wg)` units of each weight tile. Grid `[ceil(n / cols), slots, 1]` with `cols
/// = 16·nb` (gated `8·nb`), `128·wg` threads. Declared, as `affine_qgemm_kernel` is, for
/// two threadgroups of 256 threads an SM, so one's dequantization runs beside the other's
/// product.
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 256, groups_per_core = 2)]
pub fn moe_qgemm_kernel<T>(
    x: Tensor<T>,
    packed: Tensor<u32>,
    scales: Tensor<T>,
    biases: Tensor<T>,
    tiles: Tensor<u32>,
    mut y: Tensor<T>,
    experts: u32,
    rows: u32,
    n: u32,
    units: u32,
    units_per_group: u32,
    #[constexpr] wg: u32,
    #[constexpr] nb: u32,
    #[constexpr] stages: u32,
    #[constexpr] bits: u32,
    #[constexpr] gated: u32,
) {
    let bm = 64 * wg;
    let bn = 16 * nb;
    let cols = bn / (1 + gated);
    let threads = 128 * wg;
    let per = (nb + 4 * wg - 1) / (4 * wg);
    let k = units * 32;
    let groups = units / units_per_group;
    let sa = threadgroup_array::<T>(stages * 64 * wg * 64);
    let sb = threadgroup_array::<T>(2 * 16 * nb * 64);
    let gate = threadgroup_array::<f32>(select(gated == 1, 4 * wg * 256, 4));
    let words = stack_array::<u32>(per * bits);
    let sc = stack_array::<f32>(2 * per);
    let tid = thread_id();
    let slot = group_id_y() * 3;
    let e = group_min(load(tiles[slot]));
    let end = min(group_min(load(tiles[slot + 2])), rows);
    let row0 = group_min(load(tiles[slot + 1]));
    let col0 = group_id_x() * cols;
    if e < experts && row0 < end {
        let acc = [matrix_acc(); nb];
        for j in 0..nb {
            matrix_fill(acc[j], 0.0);
        }
        let base = e * n * (1 + gated);
        let steps = (k + 63) / 64;
        for s in 0..stages - 1 {
            if s < steps {
                fetch_tile(sa, s * bm * 64, x, row0, bm, end, k, s * 64, tid, threads);
            }
            commit_copies();
        }
        // Unit i·threads + tid of a tile is half `% 2` of tile row `/ 2`; a unit past the
        // tile (small tiles: fewer units than threads) does nothing, and one past the
        // row's end (K = 64t + 32) reads the last unit and dequantizes to zeros.
        for i in 0..per {
            let u_id = tid + i * threads;
            let wrow = tile_weight_row(base, min(u_id / 2, bn - 1), col0, n, bn, gated);
            let u = min(u_id % 2, units - 1);
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
        for t in 0..steps {
            let wbuf = (t % 2) * bn * 64;
            for i in 0..per {
                let u_id = tid + i * threads;
                let r = u_id / 2;
                let half = u_id % 2;
                if r < bn {
                    let inside = t * 2 + half < units;
                    dequantize_affine_unit(sb, wbuf, r, half, words, sc, i, bits, inside);
                }
            }
            if t + 1 < steps {
                for i in 0..per {
                    let u_id = tid + i * threads;
                    let wrow = tile_weight_row(base, min(u_id / 2, bn - 1), col0, n, bn, gated);
                    let u = min((t + 1) * 2 + u_id % 2, units - 1);
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
            // The previous tile's product ran under this tile's dequantization; it ends
            // before the barrier hands its x buffer to the next copies.
            matrix_mma_wait(acc, 0);
            wait_copies(stages - 2);
            barrier();
            let next = t + stages - 1;
            if next < steps {
                fetch_tile(
                    sa,
                    (next % stages) * bm * 64,
                    x,
                    row0,
                    bm,
                    end,
                    k,
                    next * 64,
                    tid,
                    threads,
                );
            }
            commit_copies();
            matrix_mma_tiles_async(acc, sa[(t % stages) * bm * 64], sb[wbuf]);
        }
        matrix_mma_wait(acc, 0);
        if gated == 1 {
            store_gated_tiles(acc, y, gate, row0, col0, end, n);
        } else {
            // Edge tiles go through the first A buffer, free once every product has
            // finished, and keep to the expert's rows.
            store_acc_tiles(acc, y, sa, row0, bm, col0, end, n);
        }
    }
}

/// The kernel's (warpgroups, accumulators a simdgroup, stages) for a schedule's row tile:
/// 128 × 128 tiles, x four deep (96 KiB with the two weight buffers; gated 64 output
/// columns and 8 KiB for the gate blocks) at 128 rows; 64 × 128 four deep (64 KiB) at 64
/// rows where threadgroup memory is large; elsewhere 64 × 32 two deep (24 KiB).
pub fn qgemm_shape(ctx: &Context, block_rows: usize) -> (u32, u32, u32) {
    if block_rows == 128 {
        (2, 8, 4)
    } else if ctx.info().max_shared_bytes >= 128 * 1024 {
        (1, 8, 4)
    } else {
        (1, 2, 2)
    }
}

/// Every (wg, nb, stages) [`qgemm_shape`] gives.
pub const QGEMM_SHAPES: [(u32, u32, u32); 3] = [(2, 8, 4), (1, 8, 4), (1, 2, 2)];

/// (experts, rows, n, k) of a checked call.
fn check(
    op: &'static str,
    x: &Tensor,
    w: &AffineExperts,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
    gated: bool,
) -> Result<(usize, usize, usize, usize), OpError> {
    let format = AffineFormat::new(op, w.bits, w.group_size)?;
    dtype_in(op, "x", x, &MATMUL_DTYPES)?;
    dtype_is(op, "y", y, x.dtype())?;
    dtype_is(op, "packed", w.packed, DType::U32)?;
    dtype_is(op, "scales", w.scales, x.dtype())?;
    dtype_is(op, "biases", w.biases, x.dtype())?;
    let (rows, k) = match *x.shape() {
        [r, k] if r > 0 && k > 0 => (r, k),
        ref s => {
            return Err(OpError::invalid(
                op,
                format!("`x` must be a non-empty [rows, K], got shape {s:?}"),
            ))
        }
    };
    format.check_row(op, k)?;
    let (experts, wrows) = match *w.packed.shape() {
        [e, r, kw] if (1..=MAX_EXPERTS).contains(&e) && r > 0 && kw == format.words(k) => {
            (e, r)
        }
        ref s => {
            return Err(OpError::invalid(
                op,
                format!(
                    "`packed` must be [experts (1..={MAX_EXPERTS}), rows, {}] ({k} {}-bit values per row), got shape {s:?}",
                    format.words(k),
                    w.bits
                ),
            ))
        }
    };
    if gated && wrows % 2 != 0 {
        return Err(OpError::invalid(
            op,
            format!("`packed` must hold 2·I rows an expert (gate, then up), got {wrows}"),
        ));
    }
    let n = if gated { wrows / 2 } else { wrows };
    shape_is(op, "scales", w.scales, &[experts, wrows, format.groups(k)])?;
    shape_is(op, "biases", w.biases, &[experts, wrows, format.groups(k)])?;
    shape_is(op, "y", y, &[rows, n])?;
    schedule.check_for(op, experts, rows)?;
    let inputs = [
        ("x", x),
        ("packed", w.packed),
        ("scales", w.scales),
        ("biases", w.biases),
        ("schedule tiles", &schedule.tiles),
    ];
    distinct_named(op, "y", y, &inputs)?;
    fits_u32(op, "the word count of `packed`", w.packed.len())?;
    fits_u32(op, "the element count of `x`", x.len())?;
    fits_u32(op, "the element count of `y`", y.len())?;
    schedule.check_grid(op)?;
    Ok((experts, rows, n, k))
}

/// Checks a call without launching it (the declared ops check before they schedule).
pub(super) fn validate(
    op: &'static str,
    x: &Tensor,
    w: &AffineExperts,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
    gated: bool,
) -> Result<(), OpError> {
    check(op, x, w, schedule, y, gated).map(|_| ())
}

fn launch(
    op: &'static str,
    ctx: &Context,
    x: &Tensor,
    w: &AffineExperts,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
    gated: bool,
) -> Result<(), OpError> {
    let (experts, rows, n, k) = check(op, x, w, schedule, y, gated)?;
    let (wg, nb, stages) = qgemm_shape(ctx, schedule.block_rows);
    let cols = 16 * nb / (1 + gated as u32);
    moe_qgemm_kernel::launch(
        ctx,
        moe_qgemm_kernel::Args {
            x,
            packed: w.packed,
            scales: w.scales,
            biases: w.biases,
            tiles: &schedule.tiles,
            y,
            experts: experts as u32,
            rows: rows as u32,
            n: n as u32,
            units: (k / 32) as u32,
            units_per_group: w.group_size / 32,
        },
        moe_qgemm_kernel::Consts {
            wg,
            nb,
            stages,
            bits: w.bits,
            gated: gated as u32,
        },
    )
    .grid([(n as u32).div_ceil(cols), schedule.slots() as u32, 1])
    .group_size(128 * wg)
    .run()
    .map_err(runtime(op))
}

/// `y[rows_e] = x[rows_e]·Ŵ[e]ᵀ` for every expert of `schedule`, `Ŵ = scale·q + bias`
/// rounded once to x's dtype (f16 or bf16), `y` `[R, N]`, f32 accumulation; K a multiple
/// of the group size.
pub fn moe_qgemm(
    ctx: &Context,
    x: &Tensor,
    w: &AffineExperts,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
) -> Result<(), OpError> {
    launch("moe_qgemm", ctx, x, w, schedule, y, false)
}

/// `y[rows_e] = silu(x[rows_e]·Ĝᵀ)·(x[rows_e]·Ûᵀ)` over packed gate/up codes `[E, 2·I, …]`
/// (gate rows first), `y` `[R, I]`.
pub fn moe_qgemm_silu_mul(
    ctx: &Context,
    x: &Tensor,
    w: &AffineExperts,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
) -> Result<(), OpError> {
    launch("moe_qgemm_silu_mul", ctx, x, w, schedule, y, true)
}
