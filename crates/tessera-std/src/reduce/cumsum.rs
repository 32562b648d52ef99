//! `cumsum`: the inclusive prefix sum of each row of `x [rows…, n]` over its last
//! dimension, accumulated in f32 and stored in x's dtype (as `torch.cumsum` keeps it).
//! One threadgroup per row walks it in tiles of one 16-byte run a thread (`vec`
//! elements, where n is a multiple of `vec`; one element otherwise): each thread scans its
//! run in registers, a simdgroup prefix sum and the simdgroups' totals in threadgroup
//! memory place it in the tile, and a running carry places the tile in the row.
//!
//! Non-finite values follow the running sum: a NaN makes its own and every later output
//! of the row NaN, +∞ every later one +∞ until a −∞ makes them NaN.

use super::float_rows;
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_is, shape_is};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

pub(super) const OP: &str = "cumsum";

/// `out[r, i] = Σ_{j ≤ i} x[r, j]` for row `r = group_id_x()` of `nv` runs of `vec`.
#[kernel]
pub fn cumsum_kernel<T>(x: Tensor<T>, mut out: Tensor<T>, nv: u32, #[constexpr] vec: u32) {
    let base = group_id_x() * nv;
    let tid = thread_id();
    let totals = threadgroup_array::<f32>(32);
    let warps = group_size() / 32u32;
    let run = stack_array::<f32>(vec);
    let mut carry = 0.0f32;
    for start in range(0u32, nv, group_size()) {
        let j = start + tid;
        let inside = j < nv;
        let at = (base + select(inside, j, 0u32)) * vec;
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

/// The inclusive prefix sum over the last dimension of `x [rows…, n]` (f32, f16 or bf16)
/// into `out` like x, f32 inside.
pub fn cumsum(ctx: &Context, x: &Tensor, out: &Tensor) -> Result<(), OpError> {
    let (rows, n) = float_rows(OP, x)?;
    distinct(OP, out, &[("x", x)])?;
    dtype_is(OP, "out", out, x.dtype())?;
    shape_is(OP, "out", out, x.shape())?;
    let wide = (16 / x.dtype().size_bytes().max(1)) as u32;
    let vec = if n.is_multiple_of(wide) { wide } else { 1 };
    let nv = n / vec;
    cumsum_kernel::launch(
        ctx,
        cumsum_kernel::Args { x, out, nv },
        cumsum_kernel::Consts { vec },
    )
    .grid([rows, 1, 1])
    .group_size(nv.next_power_of_two().clamp(32, 1024))
    .run()
    .map_err(runtime(OP))
}
