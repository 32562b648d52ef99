//! The decode-attention kernels: a single-pass kernel that writes the output, a partial
//! kernel that writes one (max, sum, unnormalised output) per KV chunk (flash-decoding and
//! batched decode), and the kernel that combines the chunks (in `decode_combine`).
//!
//! Geometry, shared by the first two. A threadgroup serves `hpt` query heads that share one
//! KV head (GQA: every K/V row is read once for all of them) and one query row (grid y);
//! it has `sgs` simdgroups. A K/V row of `head_dim` elements is read by `L = head_dim/epl`
//! consecutive lanes, `epl` consecutive elements each (one 16-byte load where the dtype
//! allows), so a simdgroup reads `32/L` rows per step and the threadgroup `sgs·32/L`. The
//! per-lane query, output, max and sum live in stack arrays that unrolling turns into
//! registers. A row's score is reduced over its `L` lanes with `lg = log2 L` xor-shuffles;
//! after the walk the `32/L` row slots of a simdgroup are merged with shuffles and the
//! simdgroups through threadgroup memory, in f32 throughout.
//!
//! Visible positions of a query row whose cache holds `n` keys: with `window = 0`, all of
//! `[0, n)`; otherwise the last `window` keys `[lo, n)`, `lo = n - window` (or 0), plus the
//! first `n_sink` keys (attention sinks) `[0, min(n_sink, lo))`. Both ranges are walked as
//! one virtual index `j`: `j < s_end` is position `j`, else `lo + j - s_end`.

use super::paged_rows::{key_row, visible_key_pos};
use super::softmax::{
    merge_factors, normalise_output, online_step, part_weight, score_weight, sink_weight, v_weight,
};
use tessera_macros::{func, kernel};

/// Merges the (max, sum, output slice) of each of `hpt` heads over the `32 / lanes` row
/// slots of a simdgroup (`5 − lg` xor-shuffle rounds), in place.
#[func]
pub(crate) fn merge_row_slots(
    mut ms: Mem<f32>,
    mut ls: Mem<f32>,
    mut os: Mem<f32>,
    lg: u32,
    lanes: u32,
    hpt: u32,
    epl: u32,
) {
    for s in 0..(5 - lg) {
        let off = lanes << s;
        for h in 0..hpt {
            let m_a = load(ms[h]);
            let (m, fa, fb) = merge_factors(m_a, simd_shuffle_xor(m_a, off));
            let l_a = load(ls[h]);
            store(ls[h], l_a * fa + simd_shuffle_xor(l_a, off) * fb);
            store(ms[h], m);
            for e in 0..epl {
                let o = load(os[h * epl + e]);
                store(os[h * epl + e], o * fa + simd_shuffle_xor(o, off) * fb);
            }
        }
    }
}

/// Stages simdgroup `sg`'s merged states in threadgroup memory: its first `lanes` lanes
/// write their output slices (part `part`, `epl` elements, of each of `hpt` heads), lane 0
/// the max and sum.
#[func]
pub(crate) fn stage_simdgroup_states(
    mut sh_o: Mem<f32>,
    mut sh_m: Mem<f32>,
    mut sh_l: Mem<f32>,
    ms: Mem<f32>,
    ls: Mem<f32>,
    os: Mem<f32>,
    sg: u32,
    lane: u32,
    lanes: u32,
    part: u32,
    hpt: u32,
    epl: u32,
    head_dim: u32,
) {
    if lane < lanes {
        for h in 0..hpt {
            for e in 0..epl {
                store(
                    sh_o[(sg * hpt + h) * head_dim + part * epl + e],
                    load(os[h * epl + e]),
                );
            }
            if lane == 0 {
                store(sh_m[sg * hpt + h], load(ms[h]));
                store(sh_l[sg * hpt + h], load(ls[h]));
            }
        }
    }
}

/// Merges the `sgs` simdgroups' staged states of `hpt` heads (after the barrier that
/// follows [`stage_simdgroup_states`]) and writes them as partial state `split` of
/// `splits` of heads `heads ..`: the output rows to `part_o`, (max, sum) to `part_ml`.
#[allow(clippy::too_many_arguments)]
#[func]
pub(crate) fn write_partial_states(
    sh_o: Mem<f32>,
    sh_m: Mem<f32>,
    sh_l: Mem<f32>,
    mut part_o: Mem<f32>,
    mut part_ml: Mem<f32>,
    sgs: u32,
    hpt: u32,
    head_dim: u32,
    heads: u32,
    splits: u32,
    split: u32,
) {
    for idx in range(thread_id(), hpt * head_dim, sgs * 32) {
        let h = idx / head_dim;
        let d = idx % head_dim;
        let mut m = neg_infinity();
        for s in 0..sgs {
            m = max(m, load(sh_m[s * hpt + h]));
        }
        let mut den = 0.0f32;
        let mut acc = 0.0f32;
        for s in 0..sgs {
            let wgt = part_weight(load(sh_m[s * hpt + h]), m);
            den += load(sh_l[s * hpt + h]) * wgt;
            acc += load(sh_o[(s * hpt + h) * head_dim + d]) * wgt;
        }
        let slot = (heads + h) * splits + split;
        store(part_o[slot * head_dim + d], acc);
        if d == 0 {
            store(part_ml[slot * 2], m);
            store(part_ml[slot * 2 + 1], den);
        }
    }
}

/// Single-pass GQA decode attention for one query row per grid-y index: `out[row, h, :] =
/// softmax(scale · q·Kᵀ over the visible keys [, learned sink logit]) · V`. Row `row`
/// sees `len0 + row·len_step` keys of the cache at `row·row_cache_rows` rows. `sinks` is
/// read only when `has_sink_logit != 0`.
#[kernel]
pub fn sdpa_decode_kernel<T>(
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    sinks: Tensor<T>,
    mut out: Tensor<T>,
    n_q_heads: u32,
    gqa: u32,
    kv_stride: u32,
    row_cache_rows: u32,
    len0: u32,
    len_step: u32,
    window: u32,
    n_sink: u32,
    has_sink_logit: u32,
    scale: f32,
    #[constexpr] head_dim: u32,
    #[constexpr] epl: u32,
    #[constexpr] hpt: u32,
    #[constexpr] sgs: u32,
    #[constexpr] lg: u32,
) {
    let lanes = head_dim / epl;
    let lane = simd_lane();
    let sg = simd_id();
    let sub = lane / lanes;
    let part = lane % lanes;
    let kvh = group_id_x() / (gqa / hpt);
    let h0 = group_id_x() * hpt;
    let row = group_id_y();
    let n = len0 + row * len_step;
    let lo = select(window > 0 && n > window, n - window, 0);
    let s_end = min(n_sink, lo);
    let count = s_end + n - lo;
    let cache = (row * row_cache_rows + kvh * kv_stride) * head_dim;
    let qs = stack_array::<f32>(hpt * epl);
    let os = stack_array::<f32>(hpt * epl);
    let ms = stack_array::<f32>(hpt);
    let ls = stack_array::<f32>(hpt);
    let ks = stack_array::<f32>(epl);
    let vs = stack_array::<f32>(epl);
    for h in 0..hpt {
        let qbase = (row * n_q_heads + h0 + h) * head_dim + part * epl;
        for e in 0..epl {
            store(qs[h * epl + e], load(q[qbase + e]).cast::<f32>() * scale);
            store(os[h * epl + e], 0.0f32);
        }
        store(ms[h], neg_infinity());
        store(ls[h], 0.0f32);
    }
    for j0 in range(sg * (32 / lanes), count, sgs * (32 / lanes)) {
        let j = j0 + sub;
        let valid = j < count;
        let pos = visible_key_pos(j, count, j0, s_end, lo);
        let base = cache + pos * head_dim + part * epl;
        for e in 0..epl {
            store(ks[e], load(k[base + e]).cast::<f32>());
        }
        for e in 0..epl {
            store(vs[e], load(v[base + e]).cast::<f32>());
        }
        for h in 0..hpt {
            let mut p = 0.0f32;
            for e in 0..epl {
                p += load(qs[h * epl + e]) * load(ks[e]);
            }
            for s in 0..lg {
                p += simd_shuffle_xor(p, (lanes / 2) >> s);
            }
            let (m2, f, w) = online_step(load(ms[h]), p, valid);
            store(ms[h], m2);
            store(ls[h], load(ls[h]) * f + w);
            let wv = v_weight(w);
            for e in 0..epl {
                store(
                    os[h * epl + e],
                    load(os[h * epl + e]) * f + wv * load(vs[e]),
                );
            }
        }
    }
    // Merge the 32/L row slots of each simdgroup.
    merge_row_slots(ms, ls, os, lg, lanes, hpt, epl);
    // Merge the simdgroups through threadgroup memory.
    let sh_o = threadgroup_array::<f32>(sgs * hpt * head_dim);
    let sh_m = threadgroup_array::<f32>(sgs * hpt);
    let sh_l = threadgroup_array::<f32>(sgs * hpt);
    stage_simdgroup_states(
        sh_o, sh_m, sh_l, ms, ls, os, sg, lane, lanes, part, hpt, epl, head_dim,
    );
    barrier();
    let use_sink = has_sink_logit != 0;
    for idx in range(thread_id(), hpt * head_dim, sgs * 32) {
        let h = idx / head_dim;
        let d = idx % head_dim;
        let mut m = neg_infinity();
        for s in 0..sgs {
            m = max(m, load(sh_m[s * hpt + h]));
        }
        let sink = select(
            use_sink,
            load(sinks[select(use_sink, h0 + h, 0)]).cast::<f32>(),
            neg_infinity(),
        );
        let mt = max(m, sink);
        let mut den = select(use_sink, sink_weight(sink, mt), 0.0f32);
        let mut acc = 0.0f32;
        for s in 0..sgs {
            let wgt = part_weight(load(sh_m[s * hpt + h]), mt);
            den += load(sh_l[s * hpt + h]) * wgt;
            acc += load(sh_o[(s * hpt + h) * head_dim + d]) * wgt;
        }
        let res = normalise_output(acc, den);
        store(
            out[(row * n_q_heads + h0 + h) * head_dim + d],
            res.cast::<T>(),
        );
    }
}

/// Partial GQA decode attention over KV chunk `group_id_z()` of `chunk` visible keys:
/// writes the chunk's running max and sum to `part_ml[((row·n_q_heads + h)·splits + z)·2
/// + {0, 1}]` and its unnormalised output (V scaled by 2⁻²⁴, `v_weight`) to `part_o[((row·n_q_heads + h)·splits + z)·D +
/// d]`. Row `row` sees `kv_lens[row]` keys when `per_row_lens != 0` (clamped to
/// `kv_stride`), else `len0 + row·len_step`. Each simdgroup step issues the K and V loads
/// of `unroll` row slots before any of their arithmetic, so that `2·unroll` 16-byte loads
/// per lane are in flight while the previous step's scores are reduced. With `paged != 0`
/// the keys of row `row` live in pages: `pages[starts[row] ..]` lists them, `page_size`
/// keys a page, laid out as `paged_rows::key_row` says.
#[kernel]
pub fn sdpa_decode_partial_kernel<T>(
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    kv_lens: Tensor<u32>,
    pages: Tensor<u32>,
    starts: Tensor<u32>,
    mut part_o: Tensor<f32>,
    mut part_ml: Tensor<f32>,
    n_q_heads: u32,
    gqa: u32,
    kv_stride: u32,
    row_cache_rows: u32,
    len0: u32,
    len_step: u32,
    window: u32,
    n_sink: u32,
    chunk: u32,
    scale: f32,
    page_size: u32,
    page_shift: u32,
    page_rows: u32,
    slot_rows: u32,
    head_rows: u32,
    #[constexpr] head_dim: u32,
    #[constexpr] epl: u32,
    #[constexpr] hpt: u32,
    #[constexpr] sgs: u32,
    #[constexpr] lg: u32,
    #[constexpr] per_row_lens: u32,
    #[constexpr] unroll: u32,
    #[constexpr] paged: u32,
) {
    let lanes = head_dim / epl;
    let lane = simd_lane();
    let sg = simd_id();
    let sub = lane / lanes;
    let part = lane % lanes;
    let kvh = group_id_x() / (gqa / hpt);
    let h0 = group_id_x() * hpt;
    let row = group_id_y();
    let split = group_id_z();
    let splits = num_groups_z();
    // A device-side length is the same for every lane; the broadcast says so, which lets
    // the walk below hold simdgroup collectives.
    let n = if per_row_lens != 0 {
        simd_broadcast(min(load(kv_lens[row]), kv_stride), 0)
    } else {
        len0 + row * len_step
    };
    let lo = select(window > 0 && n > window, n - window, 0);
    let s_end = min(n_sink, lo);
    let count = s_end + n - lo;
    let jb = split * chunk;
    let je = min(jb + chunk, count);
    let cache = (row * row_cache_rows + kvh * kv_stride) * head_dim;
    let first = if paged != 0 { load(starts[row]) } else { 0 };
    let qs = stack_array::<f32>(hpt * epl);
    let os = stack_array::<f32>(hpt * epl);
    let ms = stack_array::<f32>(hpt);
    let ls = stack_array::<f32>(hpt);
    let ks = stack_array::<T>(unroll * epl);
    let vs = stack_array::<T>(unroll * epl);
    let rows = 32 / lanes;
    for h in 0..hpt {
        let qbase = (row * n_q_heads + h0 + h) * head_dim + part * epl;
        for e in 0..epl {
            store(qs[h * epl + e], load(q[qbase + e]).cast::<f32>() * scale);
            store(os[h * epl + e], 0.0f32);
        }
        store(ms[h], neg_infinity());
        store(ls[h], 0.0f32);
    }
    for j0 in range(jb + sg * rows * unroll, je, sgs * rows * unroll) {
        for u in 0..unroll {
            let j = j0 + u * rows + sub;
            let pos = visible_key_pos(j, je, j0, s_end, lo);
            let base = key_row(
                pages, first, pos, cache, kvh, page_size, page_shift, page_rows, slot_rows,
                head_rows, head_dim, paged,
            ) + part * epl;
            for e in 0..epl {
                store(ks[u * epl + e], load(k[base + e]));
            }
            for e in 0..epl {
                store(vs[u * epl + e], load(v[base + e]));
            }
        }
        // One rescale per head per step: the step's scores first, then one running-max
        // update, then the weighted V rows.
        let ps = stack_array::<f32>(unroll);
        for h in 0..hpt {
            let mut mx = load(ms[h]);
            for u in 0..unroll {
                let mut p = 0.0f32;
                for e in 0..epl {
                    p += load(qs[h * epl + e]) * load(ks[u * epl + e]).cast::<f32>();
                }
                for s in 0..lg {
                    p += simd_shuffle_xor(p, (lanes / 2) >> s);
                }
                let valid = j0 + u * rows + sub < je;
                let pv = select(valid, p, neg_infinity());
                store(ps[u], pv);
                mx = max(mx, pv);
            }
            let dead = mx == neg_infinity();
            let f = select(dead, 1.0f32, exp(load(ms[h]) - mx));
            let mut lsum = load(ls[h]) * f;
            for e in 0..epl {
                store(os[h * epl + e], load(os[h * epl + e]) * f);
            }
            for u in 0..unroll {
                let w = score_weight(load(ps[u]), mx);
                lsum += w;
                let wv = v_weight(w);
                for e in 0..epl {
                    store(
                        os[h * epl + e],
                        load(os[h * epl + e]) + wv * load(vs[u * epl + e]).cast::<f32>(),
                    );
                }
            }
            store(ls[h], lsum);
            store(ms[h], mx);
        }
    }
    merge_row_slots(ms, ls, os, lg, lanes, hpt, epl);
    let sh_o = threadgroup_array::<f32>(sgs * hpt * head_dim);
    let sh_m = threadgroup_array::<f32>(sgs * hpt);
    let sh_l = threadgroup_array::<f32>(sgs * hpt);
    stage_simdgroup_states(
        sh_o, sh_m, sh_l, ms, ls, os, sg, lane, lanes, part, hpt, epl, head_dim,
    );
    barrier();
    let heads = row * n_q_heads + h0;
    write_partial_states(
        sh_o, sh_m, sh_l, part_o, part_ml, sgs, hpt, head_dim, heads, splits, split,
    );
}
