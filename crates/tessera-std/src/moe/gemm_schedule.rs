//! `moe_gemm_schedule`: the tile schedule of the grouped GEMM of MoE prefill, computed on
//! the device from the experts' row offsets. The rows of `x` are grouped by expert (what a
//! permute gives): expert `e` owns rows `offsets[e − 1] .. offsets[e]` (`offsets[−1]` = 0),
//! `offsets` `[E]` holding each expert's end, the cumulative counts (the `offs` of
//! `torch._grouped_mm`). The GEMM's threadgroups each take one (expert, row tile): slot `s`
//! of the schedule holds `(expert, first row, end row)` of its tile, the slots of expert `e`
//! one after another (its rows in tiles of `block_rows`), the slots past the last tile
//! `(E, 0, 0)` (nothing to do). So no threadgroup is launched for an expert's rows that do
//! not exist, however unbalanced the routing: the grid holds `min(R, ceil(R / block_rows)
//! + E)` slots, at most `E` more than a dense GEMM of R rows takes.
//!
//! The offsets live on the device, so they are checked there: offsets non-decreasing, the
//! last equal to the rows of `x`. The kernel finds the first offset that breaks that and,
//! having found one, writes nothing but its index into the caller's [`MoeCheck`]; the
//! wrapper reads the word back and refuses the call, naming the offset. That read-back
//! waits for the device, so a schedule cannot be built inside a graph; the GEMMs that read
//! it can. An engine builds it once per layer, for the gate/up and the down projection.

use super::permute::MoeCheck;
use super::MAX_EXPERTS;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_is, fits_u32};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

const OP: &str = "moe_gemm_schedule";
/// Threads of the schedule's one threadgroup: one per expert.
const SCHEDULE_GROUP: u32 = 1024;
/// Words per slot: expert, first row, end row.
pub const SLOT_WORDS: usize = 3;

/// Checks `offsets` (`[experts]`, each expert's end row) against `rows` and writes the
/// schedule's `slots` slots of `block_rows`-row tiles, or, when an offset is out of order
/// or the last is not `rows`, only that offset's index to `first_bad[0]`. Grid `[1, 1, 1]`.
#[kernel]
pub fn moe_gemm_schedule_kernel(
    offsets: Tensor<u32>,
    mut tiles: Tensor<u32>,
    mut first_bad: Tensor<u32>,
    experts: u32,
    rows: u32,
    block_rows: u32,
    slots: u32,
) {
    let counts = threadgroup_array::<u32>(1024);
    let tid = thread_id();
    let step = group_size();
    let mut bad = experts;
    for e in range(tid, experts, step) {
        let end = load(offsets[e]);
        let begin = select(e == 0u32, 0u32, load(offsets[max(e, 1u32) - 1u32]));
        let wrong = end < begin || (e + 1u32 == experts && end != rows);
        bad = min(bad, select(wrong, e, experts));
    }
    let first = group_min(bad);
    if first < experts {
        if tid == 0u32 {
            store(first_bad[0], first);
        }
    } else {
        for e in range(tid, experts, step) {
            let end = load(offsets[e]);
            let begin = select(e == 0u32, 0u32, load(offsets[max(e, 1u32) - 1u32]));
            store(counts[e], (end - begin + block_rows - 1u32) / block_rows);
        }
        barrier();
        let mut total = 0u32;
        for f in range(0u32, experts, 1u32) {
            total += load(counts[f]);
        }
        for e in range(tid, experts, step) {
            let mut slot = 0u32;
            for f in range(0u32, e, 1u32) {
                slot += load(counts[f]);
            }
            let end = load(offsets[e]);
            let begin = select(e == 0u32, 0u32, load(offsets[max(e, 1u32) - 1u32]));
            for t in range(0u32, load(counts[e]), 1u32) {
                let s = (slot + t) * 3u32;
                store(tiles[s], e);
                store(tiles[s + 1u32], begin + t * block_rows);
                store(tiles[s + 2u32], end);
            }
        }
        for s in range(total + tid, slots, step) {
            store(tiles[s * 3u32], experts);
            store(tiles[s * 3u32 + 1u32], 0u32);
            store(tiles[s * 3u32 + 2u32], 0u32);
        }
    }
}

/// The tile schedule of a grouped GEMM over `experts` experts and `rows` rows of `x`, in
/// tiles of `block_rows` rows: [`moe_gemm_schedule`] fills it, [`super::moe_gemm`] and
/// [`super::moe_gemm_silu_mul`] read it. Make it once per shape. The GEMMs trust it to
/// describe the offsets it was built from (whatever it holds, they touch no row outside
/// `0..rows`).
#[derive(Clone)]
pub struct MoeGemmSchedule {
    /// `[slots · 3]` u32: per slot the expert, the tile's first row and the expert's end row.
    pub tiles: Tensor,
    /// The experts it was made for.
    pub experts: usize,
    /// The rows of `x` it was made for.
    pub rows: usize,
    /// Rows per tile: 128 where threadgroup memory holds the large tiles (CUDA) and the
    /// experts average at least 64 rows, else 64.
    pub block_rows: usize,
}

impl MoeGemmSchedule {
    /// Allocates the schedule of `rows` rows over `experts` experts for `ctx`'s device.
    pub fn new(ctx: &Context, experts: usize, rows: usize) -> Result<MoeGemmSchedule, OpError> {
        check_sizes(experts, rows)?;
        let big = ctx.info().max_shared_bytes >= 160 * 1024;
        let block_rows = if big && rows >= 64 * experts { 128 } else { 64 };
        let slots = schedule_slots(experts, rows, block_rows);
        Ok(MoeGemmSchedule {
            tiles: ctx
                .zeros(DType::U32, &[slots * SLOT_WORDS])
                .map_err(runtime(OP))?,
            experts,
            rows,
            block_rows,
        })
    }

    /// The slots the GEMM's grid covers.
    pub fn slots(&self) -> usize {
        self.tiles.len() / SLOT_WORDS
    }

    /// Checks that it was made for `experts` experts and `rows` rows, and its tensor.
    pub(super) fn check_for(
        &self,
        op: &'static str,
        experts: usize,
        rows: usize,
    ) -> Result<(), OpError> {
        if self.experts != experts || self.rows != rows {
            return Err(OpError::invalid(
                op,
                format!(
                    "the schedule was made for {} experts and {} rows, the call has {experts} experts and {rows} rows",
                    self.experts, self.rows
                ),
            ));
        }
        let slots = schedule_slots(experts, rows, self.block_rows);
        dtype_is(op, "schedule tiles", &self.tiles, DType::U32)?;
        if self.tiles.shape() != [slots * SLOT_WORDS] || !matches!(self.block_rows, 64 | 128) {
            return Err(OpError::invalid(
                op,
                format!(
                    "the schedule's tiles must be [{}] for {block} rows a tile (64 or 128), got shape {:?}; make it with MoeGemmSchedule::new",
                    slots * SLOT_WORDS,
                    self.tiles.shape(),
                    block = self.block_rows
                ),
            ));
        }
        Ok(())
    }

    /// Checks that a GEMM's grid holds its slots.
    pub(super) fn check_grid(&self, op: &'static str) -> Result<(), OpError> {
        if self.slots() > 65535 {
            return Err(OpError::invalid(
                op,
                format!(
                    "{} row tiles are more than a grid holds (65535); split the rows",
                    self.slots()
                ),
            ));
        }
        Ok(())
    }
}

/// The slots of `rows` rows over `experts` experts in tiles of `block_rows`: every tile
/// holds a row, and an expert's last tile is the only one not full.
pub fn schedule_slots(experts: usize, rows: usize, block_rows: usize) -> usize {
    rows.min(rows.div_ceil(block_rows) + experts).max(1)
}

fn check_sizes(experts: usize, rows: usize) -> Result<(), OpError> {
    if !(1..=MAX_EXPERTS).contains(&experts) {
        return Err(OpError::invalid(
            OP,
            format!("1 ≤ experts ≤ {MAX_EXPERTS}, got {experts}"),
        ));
    }
    if rows == 0 {
        return Err(OpError::invalid(OP, "`x` must have at least one row"));
    }
    fits_u32(OP, "rows", rows)?;
    Ok(())
}

/// Checks `offsets` (u32 `[experts]`, expert `e`'s rows ending at `offsets[e]`) on the device
/// and writes `schedule` (made for the same experts and rows). Offsets out of order, or a
/// last one other than the schedule's rows, are refused before anything is written.
pub fn moe_gemm_schedule(
    ctx: &Context,
    offsets: &Tensor,
    schedule: &MoeGemmSchedule,
    check: &MoeCheck,
) -> Result<(), OpError> {
    dtype_is(OP, "offsets", offsets, DType::U32)?;
    let experts = match *offsets.shape() {
        [e] => e,
        ref s => {
            return Err(OpError::invalid(
                OP,
                format!("`offsets` must be [experts] (each expert's end row), got shape {s:?}"),
            ))
        }
    };
    check_sizes(experts, schedule.rows)?;
    schedule.check_for(OP, experts, schedule.rows)?;
    distinct_named(
        OP,
        "schedule tiles",
        &schedule.tiles,
        &[("offsets", offsets)],
    )?;
    if !ctx.owns(&check.first_bad) {
        return Err(OpError::invalid(
            OP,
            "the MoeCheck was made by another context; make it with this one",
        ));
    }
    if ctx.recording_graph() {
        return Err(OpError::invalid(
            OP,
            "moe_gemm_schedule reads its offset check back before it writes, so it cannot be recorded into a graph; build the schedule outside the graph",
        ));
    }
    moe_gemm_schedule_kernel::launch(
        ctx,
        moe_gemm_schedule_kernel::Args {
            offsets,
            tiles: &schedule.tiles,
            first_bad: &check.first_bad,
            experts: experts as u32,
            rows: schedule.rows as u32,
            block_rows: schedule.block_rows as u32,
            slots: schedule.slots() as u32,
        },
    )
    .grid([1, 1, 1])
    .group_size(SCHEDULE_GROUP)
    .run()
    .map_err(runtime(OP))?;
    let word = check.first_bad.to_vec::<u32>().map_err(runtime(OP))?;
    match word.first().copied() {
        Some(e) if e != u32::MAX => {
            check.first_bad.write(&[u32::MAX]).map_err(runtime(OP))?;
            let offs = offsets.to_vec::<u32>().map_err(runtime(OP))?;
            let e = e as usize;
            let end = offs.get(e).copied().unwrap_or_default();
            let rows = schedule.rows;
            let why = match e.checked_sub(1).and_then(|p| offs.get(p)) {
                Some(&before) if end < before => {
                    format!("offsets[{e}] = {end} is below offsets[{}] = {before} (they must not decrease)", e - 1)
                }
                _ => format!(
                    "the last offset, offsets[{e}] = {end}, must equal the rows of `x`, {rows}"
                ),
            };
            Err(OpError::invalid(OP, format!("invalid `offsets`: {why}")))
        }
        _ => Ok(()),
    }
}
