//! `topk`: the k largest values of each row of `x [rows…, n]` and their int32 indices,
//! sorted descending, ties to the lowest index first; k ≤ 1024, n ≤ 262144. One
//! threadgroup per row and no sort of the row: a radix select finds the k-th largest
//! [`order_key`] eight bits at a time (four histogram passes over the row, each counting
//! only the elements that match the digits chosen so far), a gather pass collects the
//! elements above that key and, in index order, as many equal to it as are still wanted,
//! and a bitonic sort orders just those k in threadgroup memory.
//!
//! NaN counts as the largest value (as in `torch.topk`): a row's NaNs come first, in
//! index order, with their indices, so a NaN is never hidden; −0 and +0 tie.

use super::float_rows;
use super::order_key::order_key;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_is, shape_is};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "topk";

/// The largest k.
pub const MAX_K: usize = 1024;
/// The longest row.
pub const MAX_N: usize = 1 << 18;

/// `values[r, ..k]`, `indices[r, ..k]`: row `r`'s k largest, descending, ties to the
/// lowest index. `pad` is k rounded up to a power of two (the sort's width); the
/// threadgroup has at least 256 threads (one per histogram bin).
#[kernel]
pub fn topk_kernel<T>(
    x: Tensor<T>,
    mut values: Tensor<T>,
    mut indices: Tensor<i32>,
    n: u32,
    k: u32,
    #[constexpr] pad: u32,
    #[constexpr] lg_pad: u32,
) {
    let base = group_id_x() * n;
    let tid = thread_id();
    let hist = threadgroup_array::<u32>(256);
    let totals = threadgroup_array::<u32>(32);
    let pick = threadgroup_array::<u32>(2);
    let keys = threadgroup_array::<u32>(pad);
    let slots = threadgroup_array::<u32>(pad);
    for i in range(tid, pad, group_size()) {
        store(keys[i], 0u32);
        store(slots[i], 0xffff_ffffu32);
    }
    // Radix select: after pass p the top 8·(p+1) bits of the k-th largest key are in
    // `prefix`, and `want` of the elements matching them are still to be taken.
    let mut prefix = 0u32;
    let mut want = k;
    for pass in 0..4 {
        let shift = 24u32 - 8u32 * pass;
        let mask = !(0xffff_ffffu32 >> (8u32 * pass));
        if tid < 256u32 {
            store(hist[tid], 0u32);
        }
        barrier();
        for i in range(tid, n, group_size()) {
            let key = order_key(load(x[base + i]).cast::<f32>());
            if (key & mask) == prefix {
                atomic_add(hist[(key >> shift) & 255u32], 1u32);
            }
        }
        barrier();
        // Thread t counts the elements whose digit is at least 255 − t; the one thread
        // whose digit holds the `want`-th largest records it.
        let bin = tid < 256u32;
        let count = select(bin, load(hist[select(bin, 255u32 - tid, 0u32)]), 0u32);
        let mut upto = simd_prefix_sum(count);
        if bin && simd_lane() == 31u32 {
            store(totals[simd_id()], upto);
        }
        barrier();
        if bin {
            for s in 0..8 {
                upto += select(s < simd_id(), load(totals[s]), 0u32);
            }
            let above = upto - count;
            if above < want && want <= upto {
                store(pick[0], 255u32 - tid);
                store(pick[1], want - above);
            }
        }
        barrier();
        prefix = prefix | (load(pick[0]) << shift);
        want = load(pick[1]);
        barrier();
    }
    // Gather: every key above the threshold (in any slot below k − want), then the first
    // `want` keys equal to it in index order (slots k − want onwards).
    let above = k - want;
    if tid == 0u32 {
        store(pick[0], 0u32);
    }
    barrier();
    let warps = group_size() / 32u32;
    let mut equal_seen = 0u32;
    for start in range(0u32, n, group_size()) {
        let i = start + tid;
        let inside = i < n;
        let key = order_key(load(x[base + select(inside, i, 0u32)]).cast::<f32>());
        if inside && key > prefix {
            let slot = atomic_add(pick[0], 1u32);
            store(keys[slot], key);
            store(slots[slot], i);
        }
        let equal = select(inside && key == prefix, 1u32, 0u32);
        let rank_in_warp = simd_prefix_exclusive_sum(equal);
        if simd_lane() == 31u32 {
            store(totals[simd_id()], rank_in_warp + equal);
        }
        barrier();
        let mut before = 0u32;
        let mut chunk = 0u32;
        for s in range(0u32, warps, 1u32) {
            let t = load(totals[s]);
            before += select(s < simd_id(), t, 0u32);
            chunk += t;
        }
        let rank = equal_seen + before + rank_in_warp;
        if equal == 1u32 && rank < want {
            store(keys[above + rank], key);
            store(slots[above + rank], i);
        }
        equal_seen += chunk;
        barrier();
    }
    // Bitonic sort of the `pad` slots: larger key first, then lower index; the padding
    // (key 0, index u32::MAX: below every float's key) sinks to the end.
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
                let in_order = ka > kb || (ka == kb && ia < ib);
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
    let out = group_id_x() * k;
    for i in range(tid, k, group_size()) {
        let at = load(slots[i]);
        store(indices[out + i], at.cast::<i32>());
        store(values[out + i], load(x[base + at]));
    }
}

/// Threads for a row of `n`: about four elements each, 256 to 1024.
fn group_for(n: u32) -> u32 {
    (n / 4).next_power_of_two().clamp(256, 1024)
}

/// The `k` largest values of each row of `x [rows…, n]` (f32, f16 or bf16) into `values
/// [rows…, k]` (like x) and `indices [rows…, k]` (i32), descending, ties to the lowest
/// index; NaN counts as the largest. 1 ≤ k ≤ min(n, 1024), n ≤ 262144.
pub fn topk(
    ctx: &Context,
    x: &Tensor,
    k: usize,
    values: &Tensor,
    indices: &Tensor,
) -> Result<(), OpError> {
    let (rows, n) = float_rows(OP, x)?;
    if n as usize > MAX_N {
        return Err(OpError::invalid(
            OP,
            format!("n = {n} is above the longest row supported, {MAX_N}"),
        ));
    }
    if k == 0 || k > MAX_K || k > n as usize {
        return Err(OpError::invalid(
            OP,
            format!(
                "k = {k} must be in 1..={} (at most n = {n} and at most {MAX_K})",
                MAX_K.min(n as usize)
            ),
        ));
    }
    let mut shape = x.shape().to_vec();
    if let Some(last) = shape.last_mut() {
        *last = k;
    }
    distinct_named(OP, "values", values, &[("x", x), ("indices", indices)])?;
    distinct_named(OP, "indices", indices, &[("x", x)])?;
    dtype_is(OP, "values", values, x.dtype())?;
    shape_is(OP, "values", values, &shape)?;
    dtype_is(OP, "indices", indices, DType::I32)?;
    shape_is(OP, "indices", indices, &shape)?;
    let pad = (k as u32).next_power_of_two().max(2);
    topk_kernel::launch(
        ctx,
        topk_kernel::Args {
            x,
            values,
            indices,
            n,
            k: k as u32,
        },
        topk_kernel::Consts {
            pad,
            lg_pad: pad.trailing_zeros(),
        },
    )
    .grid([rows, 1, 1])
    .group_size(group_for(n))
    .run()
    .map_err(runtime(OP))
}
