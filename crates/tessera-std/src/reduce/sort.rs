//! `sort` and `argsort`: each row of `x [rows…, n]` (n ≤ 262144) in ascending or
//! descending order, as `torch.sort(stable=True)` orders it — values in x's dtype and
//! their int32 indices (`sort`), or the indices alone (`argsort`).
//!
//! Order: rows are sorted on the [`order_key`] of each value (inverted for descending), so
//! NaN counts as the largest value (last ascending, first descending) and −0 equals +0;
//! ties keep their index order (a stable sort). The values are gathered from x through the
//! indices, so −0 stays −0 and a NaN keeps its bits.
//!
//! Short rows (n ≤ 4096) are sorted whole in threadgroup memory by one threadgroup: a
//! bitonic sort on (key, index), a total order, so its result is the stable one. Longer
//! rows take an LSD radix sort over the keys, eight bits a pass, through the caller's
//! [`SortWorkspace`]: per tile of 2048 elements a histogram of the pass's digit, a scan of
//! each row's histograms (digit-major, so a tile's offset for a digit is the count of that
//! digit in earlier tiles plus the row's count of smaller digits), and a stable scatter that
//! ranks each element among the equal digits before it (in its simdgroup by shuffles, in
//! earlier simdgroups and chunks of its tile through threadgroup counters). Passes start at
//! the lowest bit that can tell two keys of the dtype apart: four for f32, three for f16
//! (the low 13 bits of an f16's f32 key follow its sign), two for bf16 (16 bits).

use super::float_rows;
use super::order_key::order_key;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_is, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "sort";
pub(super) const ARGSORT: &str = "argsort";

/// The longest row.
pub const MAX_N: usize = 1 << 18;
/// The longest row sorted in threadgroup memory (its keys and indices fill 32 KiB).
pub const SHORT_MAX: usize = 4096;
/// Threads of a radix pass's threadgroups (eight simdgroups).
const RADIX_GROUP: u32 = 256;
/// Chunks of [`RADIX_GROUP`] elements in a radix tile.
const CHUNKS: u32 = 8;
/// Elements of a radix tile.
const TILE: u32 = RADIX_GROUP * CHUNKS;

/// The key `v` is sorted on: its [`order_key`], inverted when sorting descending.
#[func]
pub fn sort_key(v: f32, descending: u32) -> u32 {
    let key = order_key(v);
    select(descending == 1u32, !key, key)
}

/// Sorts row `group_id_x()` of `x` (n ≤ `pad`, `pad` a power of two) in threadgroup
/// memory: `indices[r, i]` is the index of the row's i-th element in key order, and with
/// `with_values` = 1, `values[r, i]` that element. The padding (key and index u32::MAX)
/// sorts after every element.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn sort_rows_kernel<T>(
    x: Tensor<T>,
    mut values: Tensor<T>,
    mut indices: Tensor<i32>,
    n: u32,
    descending: u32,
    #[constexpr] pad: u32,
    #[constexpr] lg_pad: u32,
    #[constexpr] with_values: u32,
) {
    let base = group_id_x() * n;
    let tid = thread_id();
    let keys = threadgroup_array::<u32>(pad);
    let slots = threadgroup_array::<u32>(pad);
    for i in range(tid, pad, group_size()) {
        let inside = i < n;
        let v = load(x[base + select(inside, i, 0u32)]).cast::<f32>();
        store(
            keys[i],
            select(inside, sort_key(v, descending), 0xffff_ffffu32),
        );
        store(slots[i], select(inside, i, 0xffff_ffffu32));
    }
    barrier();
    // Bitonic sort, smaller key first, then lower index.
    for stage in 0..lg_pad {
        let size = 2u32 << stage;
        for step in range(0u32, stage + 1u32, 1u32) {
            let stride = size >> (step + 1u32);
            for p in range(tid, pad / 2u32, group_size()) {
                let lo = (p / stride) * 2u32 * stride + p % stride;
                let hi = lo + stride;
                let ka = load(keys[lo]);
                let kb = load(keys[hi]);
                let ia = load(slots[lo]);
                let ib = load(slots[hi]);
                let in_order = ka < kb || (ka == kb && ia < ib);
                let forward = (lo & size) == 0u32;
                if select(forward, !in_order, in_order) {
                    store(keys[lo], kb);
                    store(keys[hi], ka);
                    store(slots[lo], ib);
                    store(slots[hi], ia);
                }
            }
            barrier();
        }
    }
    for i in range(tid, n, group_size()) {
        let at = load(slots[i]);
        store(indices[base + i], at.cast::<i32>());
        if with_values == 1u32 {
            store(values[base + i], load(x[base + at]));
        }
    }
}

/// `counts[r, d, t]`: how many elements of tile `t` (of `tiles`) of row `r` have digit `d`
/// (the key's bits `shift..shift + 8`). The keys are x's (`first` = 1) or `keys_in`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn sort_count_kernel<T>(
    x: Tensor<T>,
    keys_in: Tensor<u32>,
    mut counts: Tensor<u32>,
    n: u32,
    tiles: u32,
    shift: u32,
    first: u32,
    descending: u32,
) {
    let row = group_id_x() / tiles;
    let tile = group_id_x() % tiles;
    let tid = thread_id();
    let hist = threadgroup_array::<u32>(256);
    store(hist[tid], 0u32);
    barrier();
    let start = tile * 2048u32;
    let end = min(start + 2048u32, n);
    for i in range(start + tid, end, group_size()) {
        let mut key = 0u32;
        if first == 1u32 {
            key = sort_key(load(x[row * n + i]).cast::<f32>(), descending);
        } else {
            key = load(keys_in[row * n + i]);
        }
        atomic_add(hist[(key >> shift) & 255u32], 1u32);
    }
    barrier();
    store(counts[(row * 256u32 + tid) * tiles + tile], load(hist[tid]));
}

/// Scans row `group_id_x()`'s counts in place: `counts[r, d, t]` becomes the count of digit
/// `d` in tiles before `t`, and `bases[r, d]` the count of digits below `d` in the row.
/// 1024 threads: simdgroup `w` scans digits `w + 32·j`, 32 tiles at a time.
#[kernel]
pub fn sort_scan_kernel(mut counts: Tensor<u32>, mut bases: Tensor<u32>, tiles: u32) {
    let row = group_id_x();
    let tid = thread_id();
    let lane = simd_lane();
    let warp = simd_id();
    let carry = stack_array::<u32>(8);
    for j in 0..8 {
        store(carry[j], 0u32);
    }
    for t0 in range(0u32, tiles, 32u32) {
        let t = t0 + lane;
        let inside = t < tiles;
        for j in 0..8 {
            let at = (row * 256u32 + warp + 32u32 * j) * tiles + select(inside, t, 0u32);
            let c = select(inside, load(counts[at]), 0u32);
            let before = simd_prefix_exclusive_sum(c);
            if inside {
                store(counts[at], load(carry[j]) + before);
            }
            store(carry[j], load(carry[j]) + simd_sum(c));
        }
    }
    let totals = threadgroup_array::<u32>(256);
    let warp_sums = threadgroup_array::<u32>(8);
    if lane == 0u32 {
        for j in 0..8 {
            store(totals[warp + 32u32 * j], load(carry[j]));
        }
    }
    barrier();
    let digit = tid < 256u32;
    let own = select(digit, load(totals[select(digit, tid, 0u32)]), 0u32);
    let before = simd_prefix_exclusive_sum(own);
    if digit && lane == 31u32 {
        store(warp_sums[warp], before + own);
    }
    barrier();
    if digit {
        let mut base = before;
        for s in 0..8 {
            base += select(s < warp, load(warp_sums[s]), 0u32);
        }
        store(bases[row * 256u32 + tid], base);
    }
}

/// One radix pass's stable scatter of tile `group_id_x() % tiles` of row
/// `group_id_x() / tiles`: each element goes to its digit's offset (from the scanned
/// `counts` and `bases`) plus the number of equal digits before it in the tile. The keys
/// and indices come from x (`first` = 1) or `keys_in`/`idx_in`; they go to
/// `keys_out`/`idx_out`, or on the `last` pass the indices to `indices` and (with
/// `with_values` = 1) the values, gathered from x, to `values`. 256 threads.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn sort_scatter_kernel<T>(
    x: Tensor<T>,
    keys_in: Tensor<u32>,
    idx_in: Tensor<u32>,
    counts: Tensor<u32>,
    bases: Tensor<u32>,
    mut keys_out: Tensor<u32>,
    mut idx_out: Tensor<u32>,
    mut values: Tensor<T>,
    mut indices: Tensor<i32>,
    n: u32,
    tiles: u32,
    shift: u32,
    first: u32,
    last: u32,
    descending: u32,
    #[constexpr] with_values: u32,
) {
    let row = group_id_x() / tiles;
    let tile = group_id_x() % tiles;
    let tid = thread_id();
    let lane = simd_lane();
    let warp = simd_id();
    let base = row * n;
    // offs[d]: where the tile's digit d starts; run[d]: how many of them are placed;
    // marks[w·256 + d] = chunk << 16 | count of digit d in simdgroup w of that chunk.
    let offs = threadgroup_array::<u32>(256);
    let run = threadgroup_array::<u32>(256);
    let marks = threadgroup_array::<u32>(2048);
    store(
        offs[tid],
        load(counts[(row * 256u32 + tid) * tiles + tile]) + load(bases[row * 256u32 + tid]),
    );
    store(run[tid], 0u32);
    for w in 0..8 {
        store(marks[w * 256u32 + tid], 0xffff_ffffu32);
    }
    barrier();
    for c in range(0u32, 8u32, 1u32) {
        let i = tile * 2048u32 + c * 256u32 + tid;
        let inside = i < n;
        let at = base + select(inside, i, 0u32);
        let mut key = 0u32;
        let mut index = 0u32;
        if first == 1u32 {
            key = sort_key(load(x[at]).cast::<f32>(), descending);
            index = i;
        } else {
            key = load(keys_in[at]);
            index = load(idx_in[at]);
        }
        let digit = select(inside, (key >> shift) & 255u32, 256u32);
        // Rank among the simdgroup's lanes holding the same digit, and their number.
        let mut rank = 0u32;
        let mut same = 0u32;
        for j in 0..32 {
            let other = simd_shuffle(digit, j);
            same += select(other == digit, 1u32, 0u32);
            rank += select(other == digit && j < lane, 1u32, 0u32);
        }
        let closes = inside && rank + 1u32 == same;
        if closes {
            store(marks[warp * 256u32 + digit], (c << 16u32) | same);
        }
        barrier();
        let mut earlier = 0u32;
        let mut later = 0u32;
        if inside {
            for s in 0..8 {
                let m = load(marks[s * 256u32 + digit]);
                let count = select((m >> 16u32) == c, m & 0xffffu32, 0u32);
                earlier += select(s < warp, count, 0u32);
                later += select(s > warp, count, 0u32);
            }
            let dst = base + load(offs[digit]) + load(run[digit]) + earlier + rank;
            if last == 1u32 {
                store(indices[dst], index.cast::<i32>());
                if with_values == 1u32 {
                    store(values[dst], load(x[base + index]));
                }
            } else {
                store(keys_out[dst], key);
                store(idx_out[dst], index);
            }
        }
        barrier();
        if closes && later == 0u32 {
            store(run[digit], load(run[digit]) + earlier + same);
        }
        barrier();
    }
}

/// The keys and indices a radix sort of long rows passes between its passes (two of
/// each, ping-pong), and its per-tile digit counts. Made once for a shape (outside any
/// captured graph) and passed to every call on rows that fit it; rows of at most 4096
/// need none of it.
pub struct SortWorkspace {
    keys: [Tensor; 2],
    idx: [Tensor; 2],
    counts: Tensor,
    bases: Tensor,
    /// One element of each float dtype: the values argument of an argsort's kernels,
    /// which never write it.
    stand_ins: [Tensor; 3],
    elements: usize,
    tile_rows: usize,
}

impl SortWorkspace {
    /// The workspace for rows of `x_shape` (`[rows…, n]`).
    pub fn new(ctx: &Context, x_shape: &[usize]) -> Result<SortWorkspace, OpError> {
        let n = x_shape.last().copied().unwrap_or(1);
        let rows: usize = x_shape[..x_shape.len().saturating_sub(1)].iter().product();
        let (elements, tile_rows, long_rows) = if n > SHORT_MAX {
            (rows * n, rows * n.div_ceil(TILE as usize), rows)
        } else {
            (0, 0, 0)
        };
        let u32s = |len: usize| ctx.zeros(DType::U32, &[len.max(1)]).map_err(runtime(OP));
        Ok(SortWorkspace {
            keys: [u32s(elements)?, u32s(elements)?],
            idx: [u32s(elements)?, u32s(elements)?],
            counts: u32s(256 * tile_rows)?,
            bases: u32s(256 * long_rows)?,
            stand_ins: [
                ctx.zeros(DType::F32, &[1]).map_err(runtime(OP))?,
                ctx.zeros(DType::F16, &[1]).map_err(runtime(OP))?,
                ctx.zeros(DType::BF16, &[1]).map_err(runtime(OP))?,
            ],
            elements,
            tile_rows,
        })
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        4 * (4 * self.elements.max(1) + self.counts.len() + self.bases.len()) + 8
    }

    /// The stand-in for the values of an argsort of `dtype`.
    fn stand_in(&self, dtype: DType) -> &Tensor {
        match dtype {
            DType::F16 => &self.stand_ins[1],
            DType::BF16 => &self.stand_ins[2],
            _ => &self.stand_ins[0],
        }
    }

    /// Refuses rows this workspace was not made for.
    fn check(&self, op: &'static str, rows: u32, n: u32) -> Result<(), OpError> {
        let (rows, n) = (rows as usize, n as usize);
        let tile_rows = rows * n.div_ceil(TILE as usize);
        if rows * n > self.elements || tile_rows > self.tile_rows || rows > self.bases.len() / 256 {
            return Err(OpError::invalid(
                op,
                format!(
                    "the workspace holds {} elements, this call needs {}: make it with \
                     SortWorkspace::new for this shape",
                    self.elements,
                    rows * n
                ),
            ));
        }
        Ok(())
    }
}

/// The bit the radix passes start at: below it an element's key follows its sign.
fn low_bit(dtype: DType) -> u32 {
    match dtype {
        DType::BF16 => 16,
        DType::F16 => 13,
        _ => 0,
    }
}

/// Threads for a row of `pad` slots sorted in threadgroup memory: one per pair, 32 to 1024.
fn group_for(pad: u32) -> u32 {
    (pad / 2).clamp(32, 1024)
}

/// Each row of `x [rows…, n]` (f32, f16 or bf16, n ≤ 262144) sorted ascending (or
/// `descending`), stably, NaN as the largest, into `values` (like x) and `indices` (i32,
/// x's shape). `ws` is a [`SortWorkspace`] made for a shape with at least these rows and
/// this n.
pub fn sort(
    ctx: &Context,
    x: &Tensor,
    descending: bool,
    ws: &SortWorkspace,
    values: &Tensor,
    indices: &Tensor,
) -> Result<(), OpError> {
    let (rows, n) = checked_rows(OP, x)?;
    distinct_named(OP, "values", values, &[("x", x), ("indices", indices)])?;
    distinct_named(OP, "indices", indices, &[("x", x)])?;
    dtype_is(OP, "values", values, x.dtype())?;
    shape_is(OP, "values", values, x.shape())?;
    dtype_is(OP, "indices", indices, DType::I32)?;
    shape_is(OP, "indices", indices, x.shape())?;
    run(ctx, OP, x, descending, ws, Some(values), indices, rows, n)
}

/// The indices that sort each row of `x [rows…, n]` ascending (or `descending`), stably,
/// NaN as the largest, into `indices` (i32, x's shape): [`sort`] without its values.
pub fn argsort(
    ctx: &Context,
    x: &Tensor,
    descending: bool,
    ws: &SortWorkspace,
    indices: &Tensor,
) -> Result<(), OpError> {
    let (rows, n) = checked_rows(ARGSORT, x)?;
    distinct_named(ARGSORT, "indices", indices, &[("x", x)])?;
    dtype_is(ARGSORT, "indices", indices, DType::I32)?;
    shape_is(ARGSORT, "indices", indices, x.shape())?;
    run(ctx, ARGSORT, x, descending, ws, None, indices, rows, n)
}

/// x's (rows, n) once it is a float row batch of rows no longer than [`MAX_N`].
fn checked_rows(op: &'static str, x: &Tensor) -> Result<(u32, u32), OpError> {
    let (rows, n) = float_rows(op, x)?;
    if n as usize > MAX_N {
        return Err(OpError::invalid(
            op,
            format!("n = {n} is above the longest row supported, {MAX_N}"),
        ));
    }
    Ok((rows, n))
}

/// Launches the sort of checked tensors; `values` None writes the indices alone (the
/// workspace's one-element stand-in is the values argument, which the kernels then never
/// write).
#[allow(clippy::too_many_arguments)]
fn run(
    ctx: &Context,
    op: &'static str,
    x: &Tensor,
    descending: bool,
    ws: &SortWorkspace,
    values: Option<&Tensor>,
    indices: &Tensor,
    rows: u32,
    n: u32,
) -> Result<(), OpError> {
    let with_values = u32::from(values.is_some());
    let values = values.unwrap_or(ws.stand_in(x.dtype()));
    let descending = u32::from(descending);
    if n as usize <= SHORT_MAX {
        let pad = n.next_power_of_two().max(2);
        return sort_rows_kernel::launch(
            ctx,
            sort_rows_kernel::Args {
                x,
                values,
                indices,
                n,
                descending,
            },
            sort_rows_kernel::Consts {
                pad,
                lg_pad: pad.trailing_zeros(),
                with_values,
            },
        )
        .grid([rows, 1, 1])
        .group_size(group_for(pad))
        .run()
        .map_err(runtime(op));
    }
    ws.check(op, rows, n)?;
    let tiles = n.div_ceil(TILE);
    let shifts: Vec<u32> = (low_bit(x.dtype())..32).step_by(8).collect();
    for (pass, &shift) in shifts.iter().enumerate() {
        let first = u32::from(pass == 0);
        let last = u32::from(pass + 1 == shifts.len());
        let (keys_in, idx_in) = (&ws.keys[(pass + 1) % 2], &ws.idx[(pass + 1) % 2]);
        let (keys_out, idx_out) = (&ws.keys[pass % 2], &ws.idx[pass % 2]);
        sort_count_kernel::launch(
            ctx,
            sort_count_kernel::Args {
                x,
                keys_in,
                counts: &ws.counts,
                n,
                tiles,
                shift,
                first,
                descending,
            },
        )
        .grid([rows * tiles, 1, 1])
        .group_size(RADIX_GROUP)
        .run()
        .map_err(runtime(op))?;
        sort_scan_kernel::launch(
            ctx,
            sort_scan_kernel::Args {
                counts: &ws.counts,
                bases: &ws.bases,
                tiles,
            },
        )
        .grid([rows, 1, 1])
        .group_size(1024)
        .run()
        .map_err(runtime(op))?;
        sort_scatter_kernel::launch(
            ctx,
            sort_scatter_kernel::Args {
                x,
                keys_in,
                idx_in,
                counts: &ws.counts,
                bases: &ws.bases,
                keys_out,
                idx_out,
                values,
                indices,
                n,
                tiles,
                shift,
                first,
                last,
                descending,
            },
            sort_scatter_kernel::Consts { with_values },
        )
        .grid([rows * tiles, 1, 1])
        .group_size(RADIX_GROUP)
        .run()
        .map_err(runtime(op))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{low_bit, TILE};
    use tessera_runtime::DType;

    #[test]
    fn passes_cover_the_bits_that_order_each_dtype() {
        let passes = |d| (low_bit(d)..32).step_by(8).count();
        assert_eq!(passes(DType::F32), 4);
        assert_eq!(passes(DType::F16), 3);
        assert_eq!(passes(DType::BF16), 2);
        assert_eq!(TILE, 2048);
    }
}
