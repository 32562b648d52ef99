//! The end of `sample` over a short list in threadgroup memory: every finite logit of the
//! row at or above its k-th largest (perhaps with some below it), by index, as both forms
//! of `sample` build it once top-k leaves few. The k-th largest, the top-p search, the
//! min-p cut and the draw over the list add exactly what the single-pass kernel's threads
//! add over the whole row — thread `t` the listed logits whose index is ≡ `t` mod the
//! group size (the masses, linked per thread) or lies in `t`'s contiguous chunk of the row
//! (the draw), in index order — so the sums, and the token, have the same bits; a listed
//! logit below the threshold adds nothing (an added +0.0 changes no sum).

use super::same_bits::{ordered_exclusive_scan, ordered_sum, pivot};
use super::sample::weight;
use tessera_macros::func;

/// The most logits a list holds (the kernels' threadgroup arrays are this long).
pub const LIST_MAX: u32 = 1024;

/// The k-th largest of the `n` listed values `val` (the largest listed value with at least
/// `k` listed values at or above it), by the search of `threshold` over the list: `lo`
/// a listed value known to pass, `top` the largest.
#[func]
pub fn kth_of_list(val: Mem<f32>, n: u32, k: u32, lo_start: f32, top_start: f32) -> f32 {
    let mut lo = lo_start;
    let mut top = top_start;
    for _step in 0..96u32 {
        if lo != top {
            let mid = pivot(lo, top);
            let mut count = 0u32;
            let mut above = infinity();
            let mut below = neg_infinity();
            for q in range(thread_id(), n, group_size()) {
                let x = load(val[q]);
                let at_or_above = x >= mid;
                count += select(at_or_above, 1u32, 0u32);
                above = select(at_or_above, min(above, x), above);
                below = select(x < mid, max(below, x), below);
            }
            let passes = group_sum(count) >= k;
            let a = group_min(above);
            let b = group_max(below);
            lo = select(passes, a, lo);
            top = select(passes, top, b);
        }
    }
    lo
}

/// The number of survivors (of `n`, sorted by index in `idx`) whose index is below `v`:
/// a binary search of 11 steps (1 ≤ `n` ≤ 1024).
#[func]
pub fn survivors_below(idx: Mem<u32>, n: u32, v: u32) -> u32 {
    let mut lo = 0u32;
    let mut hi = n;
    let last = max(n, 1u32) - 1u32;
    for _step in 0..11u32 {
        let mid = (lo + hi) / 2u32;
        // Once the bounds meet the probe is not used; it still reads a written entry.
        let go_up = lo < hi && load(idx[min(mid, last)]) < v;
        let go_down = lo < hi && !go_up;
        lo = select(go_up, mid + 1u32, lo);
        hi = select(go_down, mid, hi);
    }
    lo
}

/// The mass this thread adds for the survivors at or above `v` (its own, linked from
/// `head` by `next`, at most `steps` of them, in index order, as the single-pass kernel's
/// thread adds them), the smallest of its survivors at or above `v` and the largest below.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn owned_mass(
    val: Mem<f32>,
    next: Mem<u32>,
    head: u32,
    n: u32,
    steps: u32,
    v: f32,
    m: f32,
    t: f32,
) -> (f32, f32, f32) {
    let mut cur = head;
    let mut mass = 0.0f32;
    let mut above = infinity();
    let mut below = neg_infinity();
    for _j in range(0u32, steps, 1u32) {
        if cur < n {
            let x = load(val[cur]);
            let at_or_above = x >= v;
            mass += select(at_or_above, weight(x, m, t), 0.0f32);
            above = select(at_or_above, min(above, x), above);
            below = select(x < v, max(below, x), below);
            cur = load(next[cur]);
        }
    }
    (mass, above, below)
}

/// Top-p, min-p and the draw over the `n` survivors of top-k (`idx`, `val`, in index
/// order; all at or above `kth`), as the single-pass kernel's threads add them; `next`
/// and `heads` are scratch (`n` and `group_size()` words). Every thread returns the token.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn draw_survivors(
    idx: Mem<u32>,
    val: Mem<f32>,
    mut next: Mem<u32>,
    mut heads: Mem<u32>,
    n: u32,
    vocab: u32,
    kth: f32,
    row_max: f32,
    t: f32,
    p: f32,
    mp: f32,
    u: f32,
    mut partial: Mem<f32>,
) -> i32 {
    let g = group_size();
    // Link each thread's survivors (index ≡ thread mod G) in index order.
    store(heads[thread_id()], n);
    barrier();
    let mut longest = 0u32;
    for j in range(thread_id(), n, g) {
        let owner = load(idx[j]) % g;
        let mut after = n;
        let mut before = 0u32;
        for j2 in range(0u32, n, 1u32) {
            let same = load(idx[j2]) % g == owner;
            before += select(same && j2 < j, 1u32, 0u32);
            after = select(same && j2 > j && after == n, j2, after);
        }
        store(next[j], after);
        if before == 0u32 {
            store(heads[owner], j);
        }
        longest = max(longest, before + 1u32);
    }
    let steps = group_max(longest);
    barrier();
    let head = load(heads[thread_id()]);

    let mut theta = kth;
    if p < 1.0f32 {
        let (kept, _a0, _b0) = owned_mass(val, next, head, n, steps, kth, row_max, t);
        let target = p * ordered_sum(kept, partial);
        let mut lo = kth;
        let mut top = row_max;
        for _step in 0..96u32 {
            if lo != top {
                let mid = pivot(lo, top);
                let (mass, above, below) = owned_mass(val, next, head, n, steps, mid, row_max, t);
                let total_mass = ordered_sum(mass, partial);
                let a = group_min(above);
                let b = group_max(below);
                let passes = total_mass >= target;
                lo = select(passes, a, lo);
                top = select(passes, top, b);
            }
        }
        theta = lo;
    }

    // Each thread's contiguous chunk of the row holds a run of the survivors.
    let chunk = (vocab + g - 1u32) / g;
    let start = min(thread_id() * chunk, vocab);
    let stop = min(start + chunk, vocab);
    let from = survivors_below(idx, n, start);
    let to = survivors_below(idx, n, stop);
    let mut slice = 0.0f32;
    for j in range(from, to, 1u32) {
        let x = load(val[j]);
        let e = weight(x, row_max, t);
        slice += select(x >= theta && e >= mp, e, 0.0f32);
    }
    let (prefix, end, total) = ordered_exclusive_scan(slice, partial);
    let target = u * total;
    let owner = prefix < end && prefix <= target && (target < end || end == total);
    let mut pick = -1i32;
    if owner {
        let mut run = prefix;
        let mut found = false;
        for j in range(from, to, 1u32) {
            let x = load(val[j]);
            let e = weight(x, row_max, t);
            let keep = x >= theta && e >= mp;
            run += select(keep, e, 0.0f32);
            let hit = keep && !found && run > target;
            pick = select(hit || (keep && !found), load(idx[j]).cast::<i32>(), pick);
            found = found || hit;
        }
    }
    group_max(pick)
}
