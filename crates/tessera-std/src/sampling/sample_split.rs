//! `sample` split over slices for few long rows: the same token as the single-pass kernel
//! for the same seed, with the row read by many threadgroups at once.
//!
//! Why the token is the same: the top-k threshold is the row's k-th largest logit (exact,
//! whatever finds it), and the top-p search's masses and the draw's prefix sums depend
//! only on which survivors each of the single-pass kernel's `G = row_group(vocab)` threads
//! adds, in index order, and on `ordered_sum` / `ordered_exclusive_scan` over those `G`
//! partials. So:
//! - each slice (a contiguous range of the row, [`sample_slice_kernel`]) writes its max
//!   and the first index of it, its smallest finite logit, its finite count, whether it
//!   holds a NaN or +∞, and its *candidates*: every finite logit at or above a bound with
//!   at least k of the slice's logits at or above it — the k-th largest of its threads'
//!   maxima, or where that lists more than [`CANDIDATES`] the slice's own k-th largest —
//!   (index and value, in index order, at most [`CANDIDATES`]). Every logit at or above the
//!   row's k-th largest is among them (such a bound is at most the row's k-th largest);
//! - the combine ([`sample_combine_kernel`], `G` threads a row) finds the row's k-th largest
//!   among the candidates, keeps those at or above it (the survivors, at most
//!   [`LIST_MAX`]) in threadgroup memory in index order, and reruns the top-p search, the
//!   min-p cut and the draw over them: thread `t` adds the survivors whose index is ≡ `t`
//!   mod `G` (the masses) or lies in `t`'s contiguous chunk of the row (the draw), exactly
//!   as the single-pass kernel's thread `t` does;
//! - a row the candidates cannot cover — top-k off (k = 0 or k ≥ the finite count), k above
//!   [`CANDIDATES`], a slice whose ties overflow its list, more survivors than
//!   [`LIST_MAX`] — takes the single-pass body ([`sample_row`]) inside the combine;
//!   greedy rows (temperature 0) take the first index of the row's max from the slices.

use super::philox::philox_uniform;
use super::same_bits::{ordered_exclusive_scan, pivot};
use super::sample::{kth_of_threads, params_in_range, sample_row, threshold, OP};
use super::split::{SamplingWorkspace, SAMPLE_WORDS};
use super::survivors::draw_survivors;
#[cfg(doc)]
use super::survivors::LIST_MAX;
use super::{row_group, SamplingParams};
use crate::error::{runtime, OpError};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// The most candidates a slice lists (its logits at or above its bound): top-k
/// above it takes the single-pass body. The kernels spell it as the literal 128.
pub const CANDIDATES: u32 = 128;

/// Where a slice's words start in the workspace, and their layout: 8 header words (max,
/// first index of it, smallest finite logit, finite count, NaN/+∞ flag, candidate count —
/// 129 when they overflow — the slice's bound or −∞, unused), then the candidates'
/// indices, then their values.
pub(crate) const HEADER_WORDS: u32 = 8;

// The kernels' literal 264 is a slice's words in the workspace.
const _: () = assert!(SAMPLE_WORDS == HEADER_WORDS + 2 * CANDIDATES);

/// Slice `group_id_x() % slices` of row `group_id_x() / slices` (`seg` logits from
/// `part · seg`): its header and candidates into `parts` (see [`HEADER_WORDS`]). A slice of
/// a row that will not use candidates (temperature not > 0, top-k not in 1..=128, a NaN or
/// +∞ in the slice) writes its header only.
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 1024, groups_per_core = 1)]
pub fn sample_slice_kernel<T>(
    logits: Tensor<T>,
    temperature: Tensor<f32>,
    top_k: Tensor<i32>,
    mut parts: Tensor<f32>,
    vocab: u32,
    seg: u32,
    slices: u32,
) {
    let partial = threadgroup_array::<f32>(32);
    let g = group_id_x();
    let row = g / slices;
    let first = min((g % slices) * seg, vocab);
    let len = min(first + seg, vocab) - first;
    let base = row * vocab + first;
    let words = g * 264u32;
    let t = group_max(load(temperature[row]));
    let k = group_max(load(top_k[row]));

    let mut m = neg_infinity();
    let mut at = vocab;
    let mut smallest = infinity();
    let mut finite = 0u32;
    let mut bad = 0u32;
    for i in range(thread_id(), len, group_size()) {
        let x = load(logits[base + i]).cast::<f32>();
        let is_finite = x > neg_infinity() && x < infinity();
        bad = max(bad, select(is_nan(x) || x == infinity(), 1u32, 0u32));
        finite += select(is_finite, 1u32, 0u32);
        let better = is_finite && (x > m || at == vocab);
        at = select(better, first + i, at);
        m = select(better, x, m);
        smallest = select(is_finite, min(smallest, x), smallest);
    }
    let slice_max = group_max(m);
    let first_max = group_min(select(m == slice_max, at, vocab));
    let finite_count = group_sum(finite);
    let slice_min = group_min(smallest);
    let any_bad = group_max(bad);
    let holds_finite = m > neg_infinity();
    let threads_with_finite = group_sum(select(holds_finite, 1u32, 0u32));
    let lowest_thread_max = group_min(select(holds_finite, m, infinity()));

    let mut kth = neg_infinity();
    let mut listed = 0.0f32;
    if t > 0.0f32 && k > 0i32 && k <= 128i32 && any_bad == 0u32 {
        let kk = k.cast::<u32>();
        // Every finite logit when the slice holds at most k of them.
        let mut theta = slice_min;
        if kk < finite_count {
            // The k-th largest of the threads' maxima has at least k logits at or above
            // it: a bound good enough when it lists at most 128, else the slice's k-th
            // largest itself.
            let mut start = slice_min;
            if kk <= threads_with_finite {
                start = kth_of_threads(m, kk, lowest_thread_max, slice_max);
            }
            let mut at_or_above = 0u32;
            for i in range(thread_id(), len, group_size()) {
                let x = load(logits[base + i]).cast::<f32>();
                at_or_above += select(x >= start && x < infinity(), 1u32, 0u32);
            }
            theta = start;
            if group_sum(at_or_above) > 128u32 {
                theta = threshold(
                    logits, base, len, false, kk, 0.0f32, start, slice_max, 1.0f32, partial,
                );
            }
            kth = theta;
        }
        // Each thread's contiguous chunk, placed in index order by an ordered scan of the
        // counts (small integers, exact in f32).
        let chunk = (len + group_size() - 1u32) / group_size();
        let from = min(thread_id() * chunk, len);
        let to = min(from + chunk, len);
        let mut mine = 0.0f32;
        for i in range(from, to, 1u32) {
            let x = load(logits[base + i]).cast::<f32>();
            mine += select(x >= theta && x < infinity(), 1.0f32, 0.0f32);
        }
        let (prefix, _end, total) = ordered_exclusive_scan(mine, partial);
        listed = min(total, 129.0f32);
        if total <= 128.0f32 {
            let mut slot = prefix.cast::<u32>();
            for i in range(from, to, 1u32) {
                let x = load(logits[base + i]).cast::<f32>();
                if x >= theta && x < infinity() {
                    store(parts[words + 8u32 + slot], (first + i).cast::<f32>());
                    store(parts[words + 136u32 + slot], x);
                    slot += 1u32;
                }
            }
        }
    }
    if thread_id() == 0u32 {
        store(parts[words], slice_max);
        store(parts[words + 1u32], first_max.cast::<f32>());
        store(parts[words + 2u32], slice_min);
        store(parts[words + 3u32], finite_count.cast::<f32>());
        store(parts[words + 4u32], any_bad.cast::<f32>());
        store(parts[words + 5u32], listed);
        store(parts[words + 6u32], kth);
    }
}

/// The row's tokens from its slices' words in `parts`: greedy rows from the slices' maxima,
/// rows with top-k in 1..=128 from the survivors among the candidates, the rest by the
/// single-pass body over the row. `group_size()` is `row_group(vocab)`, as the single-pass
/// kernel's.
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 1024, groups_per_core = 1)]
pub fn sample_combine_kernel<T>(
    logits: Tensor<T>,
    temperature: Tensor<f32>,
    top_k: Tensor<i32>,
    top_p: Tensor<f32>,
    min_p: Tensor<f32>,
    seed: Tensor<u32>,
    offset: Tensor<u32>,
    parts: Tensor<f32>,
    mut token: Tensor<i32>,
    vocab: u32,
    slices: u32,
) {
    let partial = threadgroup_array::<f32>(32);
    let counts = threadgroup_array::<u32>(128);
    let idx = threadgroup_array::<u32>(1024);
    let val = threadgroup_array::<f32>(1024);
    let next = threadgroup_array::<u32>(1024);
    let heads = threadgroup_array::<u32>(1024);
    let row = group_id_x();
    let t = group_max(load(temperature[row]));
    let k = group_max(load(top_k[row]));
    let p = group_max(load(top_p[row]));
    let mp = group_max(load(min_p[row]));
    let u = philox_uniform(
        load(seed[2u32 * row]),
        load(seed[2u32 * row + 1u32]),
        load(offset[row]),
    );
    let params_ok = params_in_range(t, k, p, mp);

    // The row's statistics from its slices (which rise in index).
    let mut m = neg_infinity();
    let mut at = vocab;
    let mut smallest = infinity();
    let mut finite = 0u32;
    let mut bad = 0u32;
    let mut overflow = 0u32;
    let mut bound = neg_infinity();
    for j in range(thread_id(), slices, group_size()) {
        let w = (row * slices + j) * 264u32;
        let x = load(parts[w]);
        let first = load(parts[w + 1u32]).cast::<u32>();
        let better = first < vocab && (x > m || at == vocab);
        at = select(better, first, at);
        m = select(better, x, m);
        smallest = min(smallest, load(parts[w + 2u32]));
        finite += load(parts[w + 3u32]).cast::<u32>();
        bad = max(bad, load(parts[w + 4u32]).cast::<u32>());
        let listed = load(parts[w + 5u32]).cast::<u32>();
        overflow = max(overflow, select(listed > 128u32, 1u32, 0u32));
        store(counts[j], min(listed, 128u32));
        bound = max(bound, load(parts[w + 6u32]));
    }
    let row_max = group_max(m);
    let first_max = group_min(select(m == row_max, at, vocab));
    let finite_count = group_sum(finite);
    let row_min = group_min(smallest);
    let usable = params_ok && group_max(bad) == 0u32 && finite_count > 0u32;
    let kk = max(k, 0i32).cast::<u32>();
    let from_list = usable
        && t > 0.0f32
        && kk > 0u32
        && kk <= 128u32
        && kk < finite_count
        && group_max(overflow) == 0u32;
    barrier();

    let mut chosen = -1i32;
    if usable && t == 0.0f32 {
        chosen = first_max.cast::<i32>();
    }
    let mut n = 0u32;
    let mut kth = row_min;
    if from_list {
        // The row's k-th largest among the candidates: the largest slice bound (a logit
        // with at least k of its slice at or above it) or the row's smallest, up to the max.
        let slots = slices * 128u32;
        let mut lo = max(group_max(bound), row_min);
        let mut top = row_max;
        for _step in 0..96u32 {
            if lo != top {
                let mid = pivot(lo, top);
                let mut count = 0u32;
                let mut above = infinity();
                let mut below = neg_infinity();
                // A simdgroup a slice, its lanes over the slice's candidates: the loads
                // spread evenly over the threads (and stay in L1 between steps).
                for s in range(simd_id(), slices, simd_groups()) {
                    let w = (row * slices + s) * 264u32 + 136u32;
                    for j in range(simd_lane(), load(counts[s]), 32u32) {
                        let x = load(parts[w + j]);
                        let at_or_above = x >= mid;
                        count += select(at_or_above, 1u32, 0u32);
                        above = select(at_or_above, min(above, x), above);
                        below = select(x < mid, max(below, x), below);
                    }
                }
                let passes = group_sum(count) >= kk;
                let a = group_min(above);
                let b = group_max(below);
                lo = select(passes, a, lo);
                top = select(passes, top, b);
            }
        }
        kth = lo;

        // The survivors (candidates at or above it) in index order: each thread's
        // contiguous run of slots, placed by an ordered scan of the counts.
        let chunk = (slots + group_size() - 1u32) / group_size();
        let from = min(thread_id() * chunk, slots);
        let to = min(from + chunk, slots);
        let mut mine = 0.0f32;
        for q in range(from, to, 1u32) {
            let s = q / 128u32;
            let j = q - s * 128u32;
            if j < load(counts[s]) {
                let x = load(parts[(row * slices + s) * 264u32 + 136u32 + j]);
                mine += select(x >= kth, 1.0f32, 0.0f32);
            }
        }
        let (prefix, _end, total) = ordered_exclusive_scan(mine, partial);
        n = group_max(total.cast::<u32>());
        if n <= 1024u32 {
            let mut slot = prefix.cast::<u32>();
            for q in range(from, to, 1u32) {
                let s = q / 128u32;
                let j = q - s * 128u32;
                if j < load(counts[s]) {
                    let w = (row * slices + s) * 264u32;
                    let x = load(parts[w + 136u32 + j]);
                    if x >= kth {
                        store(idx[slot], load(parts[w + 8u32 + j]).cast::<u32>());
                        store(val[slot], x);
                        slot += 1u32;
                    }
                }
            }
        }
        barrier();
    }
    let listed = from_list && n <= 1024u32;
    if usable && t > 0.0f32 && !listed {
        chosen = sample_row(
            logits,
            row * vocab,
            vocab,
            t,
            k,
            p,
            mp,
            u,
            1024u32,
            partial,
            idx,
            val,
            next,
            heads,
        );
    }
    if listed {
        chosen = draw_survivors(
            idx, val, next, heads, n, vocab, kth, row_max, t, p, mp, u, partial,
        );
    }
    if thread_id() == 0u32 {
        store(token[row], chosen);
    }
}

/// [`sample`](super::sample) with the split form for few long rows: each row over `ws`'s
/// slices, then a combine per row — the same token for the same seed. `ws` is made for at
/// least these rows ([`SamplingWorkspace::new`]); a workspace of one slice runs the
/// single-pass kernel.
pub fn sample_split(
    ctx: &Context,
    logits: &Tensor,
    params: &SamplingParams,
    ws: &SamplingWorkspace,
    token: &Tensor,
) -> Result<(), OpError> {
    let (batch, vocab) = super::sample::check_call(ctx, logits, params, token)?;
    let slices = ws.slices_checked(OP, batch)?;
    if slices == 1 {
        return super::sample::single_pass(ctx, logits, params, token, batch, vocab);
    }
    let p = params;
    let seg = vocab.div_ceil(slices);
    sample_slice_kernel::launch(
        ctx,
        sample_slice_kernel::Args {
            logits,
            temperature: p.temperature,
            top_k: p.top_k,
            parts: ws.parts(),
            vocab,
            seg,
            slices,
        },
    )
    .grid([batch * slices, 1, 1])
    .group_size(row_group(seg))
    .run()
    .map_err(runtime(OP))?;
    sample_combine_kernel::launch(
        ctx,
        sample_combine_kernel::Args {
            logits,
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            min_p: p.min_p,
            seed: p.seed,
            offset: p.offset,
            parts: ws.parts(),
            token,
            vocab,
            slices,
        },
    )
    .grid([batch, 1, 1])
    .group_size(row_group(vocab))
    .run()
    .map_err(runtime(OP))
}
