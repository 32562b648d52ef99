//! `moe_gemm` and `moe_gemm_silu_mul`: the contiguous grouped GEMM of MoE prefill. The rows
//! of `x` `[R, K]` are grouped by expert (expert `e` owns rows `offsets[e − 1] ..
//! offsets[e]`, as [`super::MoeGemmSchedule`] describes them), and for every expert
//! `y[rows_e] = x[rows_e]·W_eᵀ` with `w` `[E, N, K]` (each expert's `[out, in]`, the
//! checkpoints' layout). `moe_gemm_silu_mul` takes the stacked gate/up weight `[E, 2·I, K]`
//! (gate rows first) and writes `silu(x·gateᵀ)·(x·upᵀ)` `[R, I]`.
//!
//! On warpgroup tile products, as `matmul_pipelined_kernel` runs them: a threadgroup owns
//! one slot of the schedule (one expert's row tile of `64·wg` rows, grid y) and one column
//! tile (grid x); K advances 64 at a time through `stages` swizzled buffers filled by
//! 16-byte asynchronous copies `stages − 1` tiles ahead, one `matrix_mma_tiles_async` a
//! step. The copies of `x` stop at the expert's end row (zero-filled past it) and the
//! weight rows at the expert's last row, so no tile reads another expert's rows; a tile
//! that reaches past the expert's rows or past N stores through a masked path. Gated: the
//! weight tile is `8·nb` gate rows over `8·nb` up rows of the same columns, so the
//! accumulators `0 .. nb/2` hold the gate and `nb/2 .. nb` the up products of one set of
//! output columns; before the store each simdgroup passes the gate block through f32
//! threadgroup memory, and silu(gate)·up is formed in f32. f16/bf16, f32 accumulation, K
//! a multiple of 8 (16-byte copies).

use super::gemm_schedule::{MoeGemmSchedule, SLOT_WORDS};
use super::MAX_EXPERTS;
use crate::elementwise::activation::silu_f32;
use crate::error::{runtime, OpError};
use crate::matmul::pipelined::{fetch_tile, store_acc_tiles};
use crate::matmul::tiled::MATMUL_DTYPES;
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, Tensor};

/// Starts the copies of the weight tile of expert rows `base ..` for output columns `col0
/// ..` at K offset `kt`: `bn` rows of the `[·, k]` weights below `base + n`, or, gated,
/// `bn / 2` gate rows (below `base + n`) over `bn / 2` up rows `base + n + col0 ..` (below
/// `base + 2n`).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn fetch_expert_tile<T>(
    mut dst: Mem<T>,
    at: u32,
    w: Mem<T>,
    base: u32,
    col0: u32,
    bn: u32,
    n: u32,
    k: u32,
    kt: u32,
    tid: u32,
    threads: u32,
    gated: u32,
) {
    if gated == 1 {
        let half = bn / 2;
        fetch_tile(dst, at, w, base + col0, half, base + n, k, kt, tid, threads);
        fetch_tile(
            dst,
            at + half * 64,
            w,
            base + n + col0,
            half,
            base + 2 * n,
            k,
            kt,
            tid,
            threads,
        );
    } else {
        fetch_tile(dst, at, w, base + col0, bn, base + n, k, kt, tid, threads);
    }
}

/// `y[r, c]` for the rows `r` of the schedule's slot `group_id_y()` and the output columns
/// of column tile `group_id_x()`: `n` output columns (gated: `I`, the weights `[E, 2n,
/// K]`), `rows` rows of `x`. Grid `[ceil(n / cols), slots, 1]` with `cols = 16·nb` (gated
/// `8·nb`), `128·wg` threads.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn moe_gemm_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    tiles: Tensor<u32>,
    mut y: Tensor<T>,
    experts: u32,
    rows: u32,
    n: u32,
    k: u32,
    #[constexpr] wg: u32,
    #[constexpr] nb: u32,
    #[constexpr] stages: u32,
    #[constexpr] gated: u32,
) {
    let bm = 64 * wg;
    let bn = 16 * nb;
    let cols = bn / (1 + gated);
    let threads = 128 * wg;
    let sa = threadgroup_array::<T>(stages * 64 * wg * 64);
    let sb = threadgroup_array::<T>(stages * 16 * nb * 64);
    let gate = threadgroup_array::<f32>(select(gated == 1, 4 * wg * 256, 4));
    let tid = thread_id();
    // The slot's words, the same for the whole threadgroup; clamped, so whatever the
    // schedule holds no row outside 0..rows is touched.
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
                fetch_expert_tile(
                    sb,
                    s * bn * 64,
                    w,
                    base,
                    col0,
                    bn,
                    n,
                    k,
                    s * 64,
                    tid,
                    threads,
                    gated,
                );
            }
            commit_copies();
        }
        for t in 0..steps {
            wait_copies(stages - 2);
            barrier();
            // Tile t's product runs while tile t + stages − 1's copies are issued into the
            // buffers tile t − 1 used (its product ended before the barrier).
            let cur = t % stages;
            matrix_mma_tiles_async(acc, sa[cur * bm * 64], sb[cur * bn * 64]);
            let next = t + stages - 1;
            if next < steps {
                let st = next % stages;
                fetch_tile(
                    sa,
                    st * bm * 64,
                    x,
                    row0,
                    bm,
                    end,
                    k,
                    next * 64,
                    tid,
                    threads,
                );
                fetch_expert_tile(
                    sb,
                    st * bn * 64,
                    w,
                    base,
                    col0,
                    bn,
                    n,
                    k,
                    next * 64,
                    tid,
                    threads,
                    gated,
                );
            }
            commit_copies();
            matrix_mma_wait(acc, 0);
        }
        if gated == 1 {
            store_gated_tiles(acc, y, gate, row0, col0, end, n);
        } else {
            // Edge tiles go through the first A buffer, free once every product has
            // finished, and keep to the expert's rows.
            store_acc_tiles(acc, y, sa, row0, bm, col0, end, n);
        }
    }
}

/// The fused SwiGLU epilogue: of `acc`'s tiles (a simdgroup's 16 rows from `row0 + 16·s`),
/// the first half are gate columns `col0 …` and the second half the up columns beside
/// them; `y[r, col] = silu(gate)·up` for rows below `end` and columns below `n`. Each
/// simdgroup's gate block goes through its own 16×16 f32 slice of `gate`, a lane keeps its
/// eight values, then the up block takes the slice.
#[func]
pub fn store_gated_tiles<T>(
    acc: [MatrixAcc],
    mut y: Mem<T>,
    mut gate: Mem<f32>,
    row0: u32,
    col0: u32,
    end: u32,
    n: u32,
) {
    let s = simd_id();
    let lane = simd_lane();
    let r0 = row0 + 16 * s;
    let half = acc.len() / 2;
    let g = stack_array::<f32>(8);
    for j in 0..half {
        matrix_store(acc[j], gate[s * 256], 16);
        simd_barrier();
        for i in 0..8 {
            store(g[i], load(gate[s * 256 + lane + 32 * i]));
        }
        simd_barrier();
        matrix_store(acc[j + half], gate[s * 256], 16);
        simd_barrier();
        for i in 0..8 {
            let at = lane + 32 * i;
            let r = r0 + at / 16;
            let col = col0 + 16 * j + at % 16;
            if r < end && col < n {
                let u = load(gate[s * 256 + at]);
                store(y[r * n + col], (silu_f32(load(g[i])) * u).cast::<T>());
            }
        }
        simd_barrier();
    }
}

/// The kernel's (warpgroups, accumulators a simdgroup, stages) for a schedule's row tile.
/// 128 rows (CUDA): 128 × 256 weight tiles three deep (144 KiB; gated 128 output columns
/// and 8 KiB more for the gate blocks); 64 rows where threadgroup memory is large: 64 × 128
/// four deep (96 KiB); elsewhere 64 × 32 two deep (24 KiB: the 64 × 64 tiles of the dense
/// GEMM fill the 32 KiB of the CPU and Metal, and the slot's three threadgroup-wide reads
/// take 384 bytes more).
pub fn gemm_shape(ctx: &Context, block_rows: usize) -> (u32, u32, u32) {
    if block_rows == 128 {
        (2, 16, 3)
    } else if ctx.info().max_shared_bytes >= 128 * 1024 {
        (1, 8, 4)
    } else {
        (1, 2, 2)
    }
}

/// Every (wg, nb, stages) [`gemm_shape`] gives.
pub const GEMM_SHAPES: [(u32, u32, u32); 3] = [(2, 16, 3), (1, 8, 4), (1, 2, 2)];

/// The shapes of one grouped GEMM call: (experts, rows, n, k).
fn check(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
    gated: bool,
) -> Result<(usize, usize, usize, usize), OpError> {
    dtype_in(op, "x", x, &MATMUL_DTYPES)?;
    dtype_is(op, "w", w, x.dtype())?;
    dtype_is(op, "y", y, x.dtype())?;
    let (rows, k) = match *x.shape() {
        [r, k] if r > 0 && k > 0 && k % 8 == 0 => (r, k),
        ref s => {
            return Err(OpError::invalid(
                op,
                format!("`x` must be a non-empty [rows, K] with K a multiple of 8 (the tiles are filled by 16-byte copies along K), got shape {s:?}"),
            ))
        }
    };
    let (experts, n) = match (w.shape(), gated) {
        (&[e, n2, wk], true) if e > 0 && n2 > 0 && n2 % 2 == 0 && wk == k => (e, n2 / 2),
        (&[e, n, wk], false) if e > 0 && n > 0 && wk == k => (e, n),
        (s, _) => {
            let what = if gated {
                "[experts, 2·I, K"
            } else {
                "[experts, N, K"
            };
            return Err(OpError::invalid(
                op,
                format!("`w` must be {what} = {k}] (x's K), non-empty, got shape {s:?}"),
            ));
        }
    };
    if experts > MAX_EXPERTS {
        return Err(OpError::invalid(
            op,
            format!("`w` has {experts} experts, more than the {MAX_EXPERTS} a schedule holds"),
        ));
    }
    shape_is(op, "y", y, &[rows, n])?;
    schedule.check_for(op, experts, rows)?;
    distinct_named(
        op,
        "y",
        y,
        &[("x", x), ("w", w), ("schedule tiles", &schedule.tiles)],
    )?;
    for (what, len) in [("x", x.len()), ("w", w.len()), ("y", y.len())] {
        fits_u32(op, &format!("the element count of `{what}`"), len)?;
    }
    schedule.check_grid(op)?;
    Ok((experts, rows, n, k))
}

/// Checks a call without launching it (the declared ops check before they schedule).
pub(super) fn validate(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
    gated: bool,
) -> Result<(), OpError> {
    check(op, x, w, schedule, y, gated).map(|_| ())
}

/// Launches the kernel on `shape` (wg, nb, stages), or the one [`gemm_shape`] picks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_on(
    op: &'static str,
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
    gated: bool,
    shape: Option<(u32, u32, u32)>,
) -> Result<(), OpError> {
    let (experts, rows, n, k) = check(op, x, w, schedule, y, gated)?;
    let (wg, nb, stages) = shape.unwrap_or_else(|| gemm_shape(ctx, schedule.block_rows));
    if 64 * wg as usize != schedule.block_rows {
        return Err(OpError::invalid(
            op,
            format!(
                "tiles of {} rows on a schedule of {}",
                64 * wg,
                schedule.block_rows
            ),
        ));
    }
    let cols = 16 * nb / (1 + gated as u32);
    debug_assert_eq!(schedule.tiles.len(), schedule.slots() * SLOT_WORDS);
    moe_gemm_kernel::launch(
        ctx,
        moe_gemm_kernel::Args {
            x,
            w,
            tiles: &schedule.tiles,
            y,
            experts: experts as u32,
            rows: rows as u32,
            n: n as u32,
            k: k as u32,
        },
        moe_gemm_kernel::Consts {
            wg,
            nb,
            stages,
            gated: gated as u32,
        },
    )
    .grid([(n as u32).div_ceil(cols), schedule.slots() as u32, 1])
    .group_size(128 * wg)
    .run()
    .map_err(runtime(op))
}

/// `y[rows_e] = x[rows_e]·w[e]ᵀ` for every expert `e` of `schedule` (built by
/// [`super::moe_gemm_schedule`] from the experts' offsets): `x` `[R, K]` grouped by expert,
/// `w` `[E, N, K]`, `y` `[R, N]`, f16 or bf16, f32 accumulation, K a multiple of 8.
pub fn moe_gemm(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
) -> Result<(), OpError> {
    launch_on("moe_gemm", ctx, x, w, schedule, y, false, None)
}

/// `y[rows_e] = silu(x[rows_e]·gateᵀ)·(x[rows_e]·upᵀ)` with `w_gate_up` `[E, 2·I, K]`
/// (expert `e`'s gate rows `0..I`, up rows `I..2·I`) and `y` `[R, I]`.
pub fn moe_gemm_silu_mul(
    ctx: &Context,
    x: &Tensor,
    w_gate_up: &Tensor,
    schedule: &MoeGemmSchedule,
    y: &Tensor,
) -> Result<(), OpError> {
    launch_on(
        "moe_gemm_silu_mul",
        ctx,
        x,
        w_gate_up,
        schedule,
        y,
        true,
        None,
    )
}
