//! `cumsum`: the inclusive prefix sum of each row of `x [rows…, n]` over its last
//! dimension, accumulated in f32 and stored in x's dtype (as `torch.cumsum` keeps it).
//! A threadgroup walks a row in tiles of `vec` consecutive elements a thread (four 16-byte
//! runs, or one, where n is a multiple of them; one element otherwise): each thread scans
//! its elements in registers, a simdgroup prefix sum and the simdgroups' totals in
//! threadgroup memory place them in the tile, and a running carry places the tile in the
//! row. Few long rows
//! are split over threadgroups as `row_reduce` splits them: a first kernel sums each part
//! into the caller's [`RowSplitWorkspace`], and each part's scan starts from the sum of
//! the parts before it.
//!
//! Non-finite values follow the running sum: a NaN makes its own and every later output
//! of the row NaN, +∞ every later one +∞ until a −∞ makes them NaN.

use super::float_rows;
use super::row_reduce::RowSplitWorkspace;
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_is, shape_is};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

pub(super) const OP: &str = "cumsum";

/// `partial[2·g]` = the sum of part `g % splits` (`seg` runs of `vec`) of row
/// `g / splits`, for `g = group_id_x()`: the carries of a row split over threadgroups.
#[kernel]
pub fn cumsum_part_sums_kernel<T>(
    x: Tensor<T>,
    mut partial: Tensor<f32>,
    nv: u32,
    seg: u32,
    splits: u32,
    #[constexpr] vec: u32,
) {
    let row = group_id_x() / splits;
    let start = (group_id_x() % splits) * seg;
    let end = min(start + seg, nv);
    let mut own = 0.0f32;
    for j in range(start + thread_id(), end, group_size()) {
        for e in 0..vec {
            own += load(x[(row * nv + j) * vec + e]).cast::<f32>();
        }
    }
    let total = group_sum(own);
    if thread_id() == 0u32 {
        store(partial[2u32 * group_id_x()], total);
    }
}

/// `out[r, i] = Σ_{j ≤ i} x[r, j]` over part `g % splits` (`seg` runs of `vec`) of row
/// `r = g / splits`, `g = group_id_x()`, starting from the sum of the row's earlier parts
/// (their `partial`s; none when a row is one part).
#[kernel]
pub fn cumsum_kernel<T>(
    x: Tensor<T>,
    partial: Tensor<f32>,
    mut out: Tensor<T>,
    nv: u32,
    seg: u32,
    splits: u32,
    #[constexpr] vec: u32,
) {
    let row = group_id_x() / splits;
    let part = group_id_x() % splits;
    let first = part * seg;
    let end = min(first + seg, nv);
    let base = row * nv;
    let tid = thread_id();
    let totals = threadgroup_array::<f32>(32);
    let warps = group_size() / 32u32;
    let run = stack_array::<f32>(vec);
    let mut earlier = 0.0f32;
    for s in range(tid, part, group_size()) {
        earlier += load(partial[2u32 * (row * splits + s)]);
    }
    let mut carry = group_sum(earlier);
    for start in range(first, end, group_size()) {
        let j = start + tid;
        let inside = j < end;
        let at = (base + select(inside, j, first)) * vec;
        let mut own = 0.0f32;
        for e in 0..vec {
            own += select(inside, load(x[at + e]).cast::<f32>(), 0.0f32);
            store(run[e], own);
        }
        let lanes_before = simd_prefix_exclusive_sum(own);
        if simd_lane() == 31u32 {
            store(totals[simd_id()], lanes_before + own);
        }
        barrier();
        let mut warps_before = 0.0f32;
        let mut tile = 0.0f32;
        for s in range(0u32, warps, 1u32) {
            let t = load(totals[s]);
            warps_before += select(s < simd_id(), t, 0.0f32);
            tile += t;
        }
        let offset = carry + warps_before + lanes_before;
        if inside {
            for e in 0..vec {
                store(out[at + e], (offset + load(run[e])).cast::<T>());
            }
        }
        carry += tile;
        barrier();
    }
}

/// 16-byte runs a thread scans at once where the row is made of whole groups of them.
pub const RUNS_A_THREAD: u32 = 4;

/// The consecutive elements a thread holds (`vec`) for rows of `n` of `size`-byte values:
/// [`RUNS_A_THREAD`] 16-byte runs (64 bytes in flight a thread, a quarter of the threads
/// and of the barriers a tile) where `n` is a multiple of them, else one run, else one
/// element.
pub fn elements_a_thread(n: u32, size: usize) -> u32 {
    let wide = (16 / size.max(1)) as u32;
    [RUNS_A_THREAD * wide, wide]
        .into_iter()
        .find(|&v| n.is_multiple_of(v))
        .unwrap_or(1)
}

/// The inclusive prefix sum over the last dimension of `x [rows…, n]` (f32, f16 or bf16)
/// into `out` like x, f32 inside. `ws` is a [`RowSplitWorkspace`] made for a shape with at
/// least these rows and this n (few long rows are split over threadgroups).
pub fn cumsum(
    ctx: &Context,
    x: &Tensor,
    ws: &RowSplitWorkspace,
    out: &Tensor,
) -> Result<(), OpError> {
    let (rows, n) = float_rows(OP, x)?;
    distinct(OP, out, &[("x", x)])?;
    dtype_is(OP, "out", out, x.dtype())?;
    shape_is(OP, "out", out, x.shape())?;
    let splits = ws.splits_checked(OP, rows, n)?;
    let vec = elements_a_thread(n, x.dtype().size_bytes());
    let nv = n / vec;
    let seg = nv.div_ceil(splits);
    let group = seg.next_power_of_two().clamp(32, 1024);
    let partial = ws.partials();
    if splits > 1 {
        cumsum_part_sums_kernel::launch(
            ctx,
            cumsum_part_sums_kernel::Args {
                x,
                partial,
                nv,
                seg,
                splits,
            },
            cumsum_part_sums_kernel::Consts { vec },
        )
        .grid([rows * splits, 1, 1])
        .group_size(group)
        .run()
        .map_err(runtime(OP))?;
    }
    cumsum_kernel::launch(
        ctx,
        cumsum_kernel::Args {
            x,
            partial,
            out,
            nv,
            seg,
            splits,
        },
        cumsum_kernel::Consts { vec },
    )
    .grid([rows * splits, 1, 1])
    .group_size(group)
    .run()
    .map_err(runtime(OP))
}
