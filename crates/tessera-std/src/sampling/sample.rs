//! `sample`: temperature, top-k, top-p and min-p filtering and a seeded categorical draw,
//! fused in one kernel, one threadgroup per row, with no sort.
//!
//! Semantics (per row `r`, logits `x`, finite logits only; −∞ is a banned token):
//! - `temperature[r] = 0` is greedy: the lowest index of the maximum (as `argmax`).
//!   Otherwise the weights are `e_i = exp((x_i − max)/temperature)`.
//! - top-k (`top_k[r]`, 0 or ≥ the number of finite logits disables): keeps every token
//!   whose logit is at least the k-th largest (ties at the boundary are all kept, as
//!   vLLM's mask `logits < kth` does).
//! - top-p (`top_p[r]` in (0, 1], 1 disables), over the top-k survivors: keeps a token
//!   when the mass of the survivors strictly more likely than it is below `top_p` of
//!   their total — the smallest set reaching `top_p`, boundary token included, ties kept
//!   together (vLLM's `cumsum <= 1 − p` removal, without a tie order).
//! - min-p (`min_p[r]` in [0, 1], 0 disables), applied last: keeps a token whose
//!   probability is at least `min_p` times the largest (`e_i ≥ min_p`; the order does not
//!   matter for min-p, which keeps the maximum).
//! - The draw: `u` = the top 24 bits of the first word of Philox4x32-10 at counter
//!   `(offset[r], 0, 0, 0)` under key `(seed[r, 0], seed[r, 1])`, times 2⁻²⁴; the token is
//!   the first survivor, in index order, whose inclusive prefix of weights exceeds
//!   `u · Σ survivors`.
//! - A row holding a NaN or +∞ (no distribution), or no finite logit, gives −1, as does a
//!   row whose parameters are out of range when the call is recorded in a graph (an eager
//!   call refuses those before anything runs).
//!
//! How, without a sort: the top-k and top-p thresholds are logit values found by a search
//! whose every step is one pass over the row: a pivot between the bounds, the count (or
//! mass) of logits at or above it, and the nearest logits on either side, which become
//! the new bounds; it ends when no logit lies strictly between them. Top-k's search starts
//! from the k-th largest of the threads' own maxima, found by the same search over one
//! value a thread. Then one pass sums
//! each thread's contiguous slice of survivors, a scan places the slices, and the thread
//! whose slice holds `u · total` walks it to the token. Every sum is in a fixed order and
//! every exponential is [`exp_neg`], so the same seed gives the same token on every
//! backend.

use super::philox::philox_uniform;
use super::same_bits::{exp_neg, ordered_exclusive_scan, ordered_sum, pivot};
use super::survivors::{draw_survivors, kth_of_list, LIST_MAX};
use super::{check_logits, row_group};
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_is, shape_is};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

pub(super) const OP: &str = "sample";

/// The weight of logit `x` under the row's max `m` and temperature `t`: `exp((x − m)/t)`.
#[func]
pub fn weight(x: f32, m: f32, t: f32) -> f32 {
    exp_neg((x - m) / t)
}

/// The largest finite logit `v` of the row (from `base`, `vocab` long) that passes: with
/// `by_mass` false, at least `k` logits are ≥ `v` (the k-th largest logit); with `by_mass`
/// true, the logits ≥ `v` weigh at least `target` (weights under `m` and `t`). `lo_start`
/// is a logit known to pass, `m` the row's max. At most 96 steps: each halves the value
/// range (geometrically across exponents) or moves a bound past a logit, so a search over
/// f32 values ends well within them; were they ever spent, the logit returned still passes
/// (the set it keeps is a superset).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn threshold<T>(
    logits: Mem<T>,
    base: u32,
    vocab: u32,
    by_mass: bool,
    k: u32,
    target: f32,
    lo_start: f32,
    m: f32,
    t: f32,
    mut partial: Mem<f32>,
) -> f32 {
    let mut lo = lo_start;
    let mut top = m;
    for _step in 0..96u32 {
        if lo != top {
            let mid = pivot(lo, top);
            let mut count = 0u32;
            let mut mass = 0.0f32;
            let mut above = infinity();
            let mut below = neg_infinity();
            for i in range(thread_id(), vocab, group_size()) {
                let x = load(logits[base + i]).cast::<f32>();
                let at_or_above = x >= mid && x < infinity();
                count += select(at_or_above, 1u32, 0u32);
                if by_mass {
                    mass += select(at_or_above, weight(x, m, t), 0.0f32);
                }
                above = select(at_or_above, min(above, x), above);
                below = select(x < mid, max(below, x), below);
            }
            let total_count = group_sum(count);
            let mut total_mass = 0.0f32;
            if by_mass {
                total_mass = ordered_sum(mass, partial);
            }
            let a = group_min(above);
            let b = group_max(below);
            let passes = select(by_mass, total_mass >= target, total_count >= k);
            lo = select(passes, a, lo);
            top = select(passes, top, b);
        }
    }
    lo
}

/// The k-th largest of one value per thread (`v`, −∞ for a thread without one), by the
/// same search as [`threshold`] with no pass over memory: `lo` holds a value with at least
/// `k` values at or above it, `m` the largest. Each thread's value is the largest logit of
/// its share of the row, so at least `k` logits are at or above the answer: a bound the
/// search over the row can start from, most of the way to the k-th largest logit.
#[func]
pub fn kth_of_threads(v: f32, k: u32, lo_start: f32, m: f32) -> f32 {
    let mut lo = lo_start;
    let mut top = m;
    for _step in 0..96u32 {
        if lo != top {
            let mid = pivot(lo, top);
            let at_or_above = v >= mid;
            let count = group_sum(select(at_or_above, 1u32, 0u32));
            let a = group_min(select(at_or_above, v, infinity()));
            let b = group_max(select(v < mid, v, neg_infinity()));
            let passes = count >= k;
            lo = select(passes, a, lo);
            top = select(passes, top, b);
        }
    }
    lo
}

/// Whether a row's parameters are in range: `t` finite and ≥ 0, `k` ≥ 0, `p` in (0, 1],
/// `mp` in [0, 1] (a NaN fails, as the −∞ a maximum turns it into does).
#[func]
pub fn params_in_range(t: f32, k: i32, p: f32, mp: f32) -> bool {
    t >= 0.0f32
        && t < infinity()
        && k >= 0i32
        && p > 0.0f32
        && p <= 1.0f32
        && mp >= 0.0f32
        && mp <= 1.0f32
}

/// One token per row; see the module docs for the semantics. `seed` is `[batch, 2]` (the
/// Philox key), the rest `[batch]`.
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 1024, groups_per_core = 1)]
pub fn sample_kernel<T>(
    logits: Tensor<T>,
    temperature: Tensor<f32>,
    top_k: Tensor<i32>,
    top_p: Tensor<f32>,
    min_p: Tensor<f32>,
    seed: Tensor<u32>,
    offset: Tensor<u32>,
    mut token: Tensor<i32>,
    vocab: u32,
    list_max: u32,
) {
    let partial = threadgroup_array::<f32>(32);
    let idx = threadgroup_array::<u32>(1024);
    let val = threadgroup_array::<f32>(1024);
    let next = threadgroup_array::<u32>(1024);
    let heads = threadgroup_array::<u32>(1024);
    let row = group_id_x();
    // The row's parameters, the same on every thread; the maxima make that known to the
    // uniformity analysis, so the row may branch on them around barriers (a NaN becomes
    // −∞, which fails the range checks as the NaN would).
    let t = group_max(load(temperature[row]));
    let k = group_max(load(top_k[row]));
    let p = group_max(load(top_p[row]));
    let mp = group_max(load(min_p[row]));
    let u = philox_uniform(
        load(seed[2u32 * row]),
        load(seed[2u32 * row + 1u32]),
        load(offset[row]),
    );
    let chosen = sample_row(
        logits,
        row * vocab,
        vocab,
        t,
        k,
        p,
        mp,
        u,
        list_max,
        partial,
        idx,
        val,
        next,
        heads,
    );
    if thread_id() == 0u32 {
        store(token[row], chosen);
    }
}

/// The token of one row of `vocab` logits from `base` (every thread returns it): the row's
/// statistics, then — where top-k is on and at least k threads hold a finite logit — the
/// list of the logits at or above the k-th largest of the threads' maxima (a bound below
/// the row's k-th largest) in threadgroup memory when it holds at most `list_max` (≤ 1024)
/// of them, and the rest over the list ([`draw_survivors`]); otherwise the top-k and top-p
/// searches over the row, min-p and the draw of uniform `u` over the row. Both give the
/// same token. `t`, `k`, `p`, `mp` are uniform over the group; `idx`, `val`, `next` and
/// `heads` are 1024-word threadgroup scratch.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn sample_row<T>(
    logits: Mem<T>,
    base: u32,
    vocab: u32,
    t: f32,
    k: i32,
    p: f32,
    mp: f32,
    u: f32,
    list_max: u32,
    mut partial: Mem<f32>,
    mut idx: Mem<u32>,
    mut val: Mem<f32>,
    mut next: Mem<u32>,
    mut heads: Mem<u32>,
) -> i32 {
    let params_ok = params_in_range(t, k, p, mp);

    // The max and its first index, the smallest finite logit, the finite count, and
    // whether the row holds a NaN or +∞.
    let mut m = neg_infinity();
    let mut at = vocab;
    let mut smallest = infinity();
    let mut finite = 0u32;
    let mut bad = 0u32;
    for i in range(thread_id(), vocab, group_size()) {
        let x = load(logits[base + i]).cast::<f32>();
        let is_finite = x > neg_infinity() && x < infinity();
        bad = max(bad, select(is_nan(x) || x == infinity(), 1u32, 0u32));
        finite += select(is_finite, 1u32, 0u32);
        let better = is_finite && (x > m || at == vocab);
        at = select(better, i, at);
        m = select(better, x, m);
        smallest = select(is_finite, min(smallest, x), smallest);
    }
    let row_max = group_max(m);
    let first_max = group_min(select(m == row_max, at, vocab));
    let finite_count = group_sum(finite);
    let row_min = group_min(smallest);
    let holds_finite = m > neg_infinity();
    let threads_with_finite = group_sum(select(holds_finite, 1u32, 0u32));
    let lowest_thread_max = group_min(select(holds_finite, m, infinity()));
    let usable = params_ok && group_max(bad) == 0u32 && finite_count > 0u32;

    let mut chosen = -1i32;
    if usable && t == 0.0f32 {
        chosen = first_max.cast::<i32>();
    }
    let kk = max(k, 0i32).cast::<u32>();
    let try_list = usable
        && t > 0.0f32
        && kk > 0u32
        && kk < finite_count
        && kk <= threads_with_finite
        && list_max > 0u32;
    let mut n = 0u32;
    let mut bound = row_min;
    if try_list {
        // At least k logits are at or above the k-th largest of the threads' maxima: list
        // them all. Two passes with the first pass's coalesced layout: each thread counts
        // its own, an ordered scan of the counts (small integers, exact in f32) gives each
        // thread its run of the list, and the indices, distinct, go to their places in
        // index order by their ranks among the listed.
        bound = kth_of_threads(m, kk, lowest_thread_max, row_max);
        let mut mine = 0.0f32;
        for i in range(thread_id(), vocab, group_size()) {
            let x = load(logits[base + i]).cast::<f32>();
            mine += select(x >= bound && x < infinity(), 1.0f32, 0.0f32);
        }
        let (prefix, _end, total) = ordered_exclusive_scan(mine, partial);
        n = group_max(total.cast::<u32>());
        if n <= list_max {
            let mut slot = prefix.cast::<u32>();
            for i in range(thread_id(), vocab, group_size()) {
                let x = load(logits[base + i]).cast::<f32>();
                if x >= bound && x < infinity() {
                    store(next[slot], i);
                    slot += 1u32;
                }
            }
            barrier();
            for j in range(thread_id(), n, group_size()) {
                let i = load(next[j]);
                let mut rank = 0u32;
                for j2 in range(0u32, n, 1u32) {
                    rank += select(load(next[j2]) < i, 1u32, 0u32);
                }
                store(idx[rank], i);
                store(val[rank], load(logits[base + i]).cast::<f32>());
            }
        }
        barrier();
    }
    let listed = try_list && n <= list_max;
    if listed {
        let kth = kth_of_list(val, n, kk, bound, row_max);
        chosen = draw_survivors(
            idx, val, next, heads, n, vocab, kth, row_max, t, p, mp, u, partial,
        );
    }
    if usable && t > 0.0f32 && !listed {
        let mut theta = row_min;
        if kk > 0u32 && kk < finite_count {
            // Start the search over the row from the k-th largest of the threads' maxima
            // when at least k threads hold a finite logit.
            let mut start = row_min;
            if kk <= threads_with_finite {
                start = kth_of_threads(m, kk, lowest_thread_max, row_max);
            }
            theta = threshold(
                logits, base, vocab, false, kk, 0.0f32, start, row_max, t, partial,
            );
        }
        if p < 1.0f32 {
            let mut kept = 0.0f32;
            for i in range(thread_id(), vocab, group_size()) {
                let x = load(logits[base + i]).cast::<f32>();
                kept += select(x >= theta && x < infinity(), weight(x, row_max, t), 0.0f32);
            }
            let z = ordered_sum(kept, partial);
            theta = threshold(
                logits,
                base,
                vocab,
                true,
                0u32,
                p * z,
                theta,
                row_max,
                t,
                partial,
            );
        }

        // Each thread's contiguous slice of survivors, placed by an ordered scan.
        let chunk = (vocab + group_size() - 1u32) / group_size();
        let start = min(thread_id() * chunk, vocab);
        let stop = min(start + chunk, vocab);
        let mut slice = 0.0f32;
        for i in range(start, stop, 1u32) {
            let x = load(logits[base + i]).cast::<f32>();
            let e = weight(x, row_max, t);
            slice += select(x >= theta && x < infinity() && e >= mp, e, 0.0f32);
        }
        let (prefix, end, total) = ordered_exclusive_scan(slice, partial);
        let target = u * total;
        let owner = prefix < end && prefix <= target && (target < end || end == total);
        let mut pick = -1i32;
        if owner {
            let mut run = prefix;
            let mut found = false;
            for i in range(start, stop, 1u32) {
                let x = load(logits[base + i]).cast::<f32>();
                let e = weight(x, row_max, t);
                let keep = x >= theta && x < infinity() && e >= mp;
                run += select(keep, e, 0.0f32);
                let hit = keep && !found && run > target;
                pick = select(hit || (keep && !found), i.cast::<i32>(), pick);
                found = found || hit;
            }
        }
        chosen = group_max(pick);
    }
    chosen
}

/// The per-row parameters of [`sample`], as device tensors of `batch` rows (a CUDA graph
/// replays a call with whatever they hold).
pub struct SamplingParams<'a> {
    /// f32 `[batch]`, ≥ 0 and finite; 0 is greedy.
    pub temperature: &'a Tensor,
    /// i32 `[batch]`, ≥ 0; 0 (or ≥ vocab) disables.
    pub top_k: &'a Tensor,
    /// f32 `[batch]` in (0, 1]; 1 disables.
    pub top_p: &'a Tensor,
    /// f32 `[batch]` in [0, 1]; 0 disables.
    pub min_p: &'a Tensor,
    /// u32 `[batch, 2]`: each row's Philox key.
    pub seed: &'a Tensor,
    /// u32 `[batch]`: each row's Philox counter (a request's step).
    pub offset: &'a Tensor,
}

/// One token per row of `logits [batch, vocab]` (f32, f16, bf16) into `token` i32
/// `[batch]`, out-of-place. An eager call reads the parameters back and refuses a row out
/// of range, naming it, before anything runs; a call recorded in a graph cannot, and such
/// a row's token is −1.
pub fn sample(
    ctx: &Context,
    logits: &Tensor,
    params: &SamplingParams,
    token: &Tensor,
) -> Result<(), OpError> {
    let (batch, vocab) = check_call(ctx, logits, params, token)?;
    single_pass(ctx, logits, params, token, batch, vocab)
}

/// Validates a call (and, outside a graph, each row's parameters): (batch, vocab).
pub(super) fn check_call(
    ctx: &Context,
    logits: &Tensor,
    params: &SamplingParams,
    token: &Tensor,
) -> Result<(u32, u32), OpError> {
    let (batch, vocab) = check_logits(OP, logits)?;
    let rows = batch as usize;
    let p = params;
    for (name, t, dtype, shape) in [
        ("temperature", p.temperature, DType::F32, vec![rows]),
        ("top_k", p.top_k, DType::I32, vec![rows]),
        ("top_p", p.top_p, DType::F32, vec![rows]),
        ("min_p", p.min_p, DType::F32, vec![rows]),
        ("seed", p.seed, DType::U32, vec![rows, 2]),
        ("offset", p.offset, DType::U32, vec![rows]),
    ] {
        dtype_is(OP, name, t, dtype)?;
        shape_is(OP, name, t, &shape)?;
    }
    dtype_is(OP, "token", token, DType::I32)?;
    shape_is(OP, "token", token, &[rows])?;
    distinct(
        OP,
        token,
        &[
            ("logits", logits),
            ("temperature", p.temperature),
            ("top_k", p.top_k),
            ("top_p", p.top_p),
            ("min_p", p.min_p),
            ("seed", p.seed),
            ("offset", p.offset),
        ],
    )?;
    if !ctx.recording_graph() {
        refuse_bad_rows(p)?;
    }
    Ok((batch, vocab))
}

/// One threadgroup per row.
pub(super) fn single_pass(
    ctx: &Context,
    logits: &Tensor,
    p: &SamplingParams,
    token: &Tensor,
    batch: u32,
    vocab: u32,
) -> Result<(), OpError> {
    sample_kernel::launch(
        ctx,
        sample_kernel::Args {
            logits,
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            min_p: p.min_p,
            seed: p.seed,
            offset: p.offset,
            token,
            vocab,
            list_max: LIST_MAX,
        },
    )
    .grid([batch, 1, 1])
    .group_size(row_group(vocab))
    .run()
    .map_err(runtime(OP))
}

/// The first row whose parameters are out of range, refused with its values.
fn refuse_bad_rows(p: &SamplingParams) -> Result<(), OpError> {
    let read = |t: &Tensor| t.to_vec::<f32>().map_err(runtime(OP));
    let temperature = read(p.temperature)?;
    let top_p = read(p.top_p)?;
    let min_p = read(p.min_p)?;
    let top_k = p.top_k.to_vec::<i32>().map_err(runtime(OP))?;
    for (r, (((&t, &k), &tp), &mp)) in temperature
        .iter()
        .zip(&top_k)
        .zip(&top_p)
        .zip(&min_p)
        .enumerate()
    {
        let why = if !(t.is_finite() && t >= 0.0) {
            format!("temperature = {t} (must be finite and >= 0)")
        } else if k < 0 {
            format!("top_k = {k} (must be >= 0; 0 disables)")
        } else if !(tp > 0.0 && tp <= 1.0) {
            format!("top_p = {tp} (must be in (0, 1]; 1 disables)")
        } else if !(0.0..=1.0).contains(&mp) {
            format!("min_p = {mp} (must be in [0, 1]; 0 disables)")
        } else {
            continue;
        };
        return Err(OpError::invalid(OP, format!("row {r}: {why}")));
    }
    Ok(())
}
