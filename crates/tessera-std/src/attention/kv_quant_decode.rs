//! Decode attention over a quantized paged cache (`kv_quant`'s layout): the split-KV
//! decode kernel with K and V read as one byte an element plus one f32 scale a row, the
//! code turned into its value in registers right after the load (no dequantized copy of
//! the cache exists anywhere). A row's K scale multiplies its reduced score once, its V
//! scale the row's softmax weight once, so the per-element work is the code's value and
//! the multiply-add the float kernel does. A key whose K scale is not finite (NaN from a
//! row that held NaN or inf when appended) scores NaN, so the output it reaches is NaN. The chunks are combined by the float decode's
//! combine kernel; the table check, GQA, window, sinks and sink logit are
//! `sdpa_decode_paged`'s.
//!
//! An int4 cache (`format` 2, `kv_quant_int4`'s layout) packs two codes a byte and keeps
//! a scale per group of dims: each lane's `epl` (16) consecutive elements are `epl / 2`
//! bytes in one group, so the lane's group K scale multiplies its partial dot product
//! before the lanes' sums meet, and its group V scale its weight.
//!
//! bf16 queries over int8 or e4m3 at head_dim 64, 128 or 256 take the fragment kernel
//! instead (`decode_mma.rs`, `quant != 0`); this kernel serves f16 and f32 queries, the
//! other head dims, and int4 caches for every query dtype.

use super::decode::DecodeOptions;
use super::decode_kernels::{merge_row_slots, stage_simdgroup_states, write_partial_states};
use super::kv_quant::{kv_code_value, KvScales};
use super::kv_quant_int4::kv_nibble_value;
use super::paged::{check_shapes, paged_attention, PagedKv, PagedWorkspace};
use super::paged_rows::{key_row, visible_key_pos, PageWalk};
use super::plan::{DecodeCall, Geometry};
use super::softmax::{score_weight, v_weight};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

const OP: &str = "sdpa_decode_paged_quant";
const MQ_OP: &str = "sdpa_multi_query_paged_quant";

/// Partial GQA decode attention over KV chunk `group_id_z()` of `chunk` visible keys of a
/// quantized paged cache; the outputs, geometry and page walk of
/// `sdpa_decode_partial_kernel` with per-row lengths. Key `pos`'s row `r` (from
/// `key_row` in rows) holds codes at `r · head_dim` of `k` and `v` and scales at
/// `k_scale[r]`, `v_scale[r]`; `format` is `kv_quant::KV_INT8` or `KV_E4M3`, or `KV_INT4`
/// with `head_dim / 2` bytes a row and scales at `r · head_dim / group` on (`group` is
/// head_dim for the byte formats).
#[kernel]
pub fn sdpa_decode_quant_partial_kernel<T>(
    q: Tensor<T>,
    k: Tensor<u8>,
    v: Tensor<u8>,
    k_scale: Tensor<f32>,
    v_scale: Tensor<f32>,
    kv_lens: Tensor<u32>,
    pages: Tensor<u32>,
    starts: Tensor<u32>,
    mut part_o: Tensor<f32>,
    mut part_ml: Tensor<f32>,
    n_q_heads: u32,
    gqa: u32,
    kv_stride: u32,
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
    #[constexpr] unroll: u32,
    #[constexpr] paged: u32,
    #[constexpr] format: u32,
    #[constexpr] group: u32,
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
    let n = simd_broadcast(min(load(kv_lens[row]), kv_stride), 0);
    let lo = select(window > 0 && n > window, n - window, 0);
    let s_end = min(n_sink, lo);
    let count = s_end + n - lo;
    let jb = split * chunk;
    let je = min(jb + chunk, count);
    let first = load(starts[row]);
    let qs = stack_array::<f32>(hpt * epl);
    let os = stack_array::<f32>(hpt * epl);
    let ms = stack_array::<f32>(hpt);
    let ls = stack_array::<f32>(hpt);
    let ks = stack_array::<u8>(unroll * epl);
    let vs = stack_array::<u8>(unroll * epl);
    let kscales = stack_array::<f32>(unroll);
    let vscales = stack_array::<f32>(unroll);
    let rows = 32 / lanes;
    // Elements a byte: 2 for packed int4 codes.
    let packing = select(format == 2, 2u32, 1u32);
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
            let r = key_row(
                pages, first, pos, 0, kvh, page_size, page_shift, page_rows, slot_rows, head_rows,
                1, paged,
            );
            // int4: the lane's `epl` elements are `epl / 2` bytes and lie in one group.
            let base = r * (head_dim / packing) + part * (epl / packing);
            for e in 0..epl / packing {
                store(ks[u * epl + e], load(k[base + e]));
            }
            for e in 0..epl / packing {
                store(vs[u * epl + e], load(v[base + e]));
            }
            let sc = r * (head_dim / group) + part * epl / group;
            store(kscales[u], load(k_scale[sc]));
            store(vscales[u], load(v_scale[sc]));
        }
        let ps = stack_array::<f32>(unroll);
        for h in 0..hpt {
            let mut mx = load(ms[h]);
            for u in 0..unroll {
                let mut p = 0.0f32;
                for e in 0..epl {
                    let x = if format == 2 {
                        kv_nibble_value(load(ks[u * epl + e / 2]).cast::<u32>(), e % 2)
                    } else {
                        kv_code_value(load(ks[u * epl + e]).cast::<u32>(), format)
                    };
                    p += load(qs[h * epl + e]) * x;
                }
                // A non-finite K scale makes the score NaN, as the key's dequantized
                // elements (±inf, NaN at a zero code) make the exact dot product.
                let ksc = load(kscales[u]);
                let kfactor = select(
                    abs(ksc) <= 3.4028235e38f32,
                    ksc,
                    0x7FC0_0000u32.bitcast::<f32>(),
                );
                // int4: each lane's group scale joins its partial sum before the lanes'
                // sums meet; one scale a row multiplies the reduced score once.
                if format == 2 {
                    p *= kfactor;
                }
                for s in 0..lg {
                    p += simd_shuffle_xor(p, (lanes / 2) >> s);
                }
                let valid = j0 + u * rows + sub < je;
                let scored = if format == 2 { p } else { p * kfactor };
                let pv = select(valid, scored, neg_infinity());
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
                let wv = v_weight(w) * load(vscales[u]);
                for e in 0..epl {
                    let x = if format == 2 {
                        kv_nibble_value(load(vs[u * epl + e / 2]).cast::<u32>(), e % 2)
                    } else {
                        kv_code_value(load(vs[u * epl + e]).cast::<u32>(), format)
                    };
                    store(os[h * epl + e], load(os[h * epl + e]) + wv * x);
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

/// Launches the quantized partial kernel for a checked paged `call` (`scales` its cache's)
/// walking `walk`, in `splits` chunks of `chunk` keys with geometry `g` (the plan's for u8
/// rows), into the split-KV scratch `part_o` and `part_ml`.
pub(crate) fn launch_partial(
    ctx: &Context,
    call: &DecodeCall,
    scales: &KvScales,
    walk: &PageWalk,
    (g, chunk, splits): (Geometry, u32, u32),
    (part_o, part_ml): (&Tensor, &Tensor),
) -> tessera_runtime::Result<()> {
    let kv_lens = call.kv_lens.unwrap_or(walk.starts);
    sdpa_decode_quant_partial_kernel::launch(
        ctx,
        sdpa_decode_quant_partial_kernel::Args {
            q: call.q,
            k: call.k,
            v: call.v,
            k_scale: scales.k_scale,
            v_scale: scales.v_scale,
            kv_lens,
            pages: walk.pages,
            starts: walk.starts,
            part_o,
            part_ml,
            n_q_heads: call.n_q_heads,
            gqa: call.n_q_heads / call.n_kv_heads,
            kv_stride: call.kv_stride,
            window: call.window,
            n_sink: call.n_sink,
            chunk,
            scale: call.scale,
            page_size: walk.page_size,
            page_shift: walk.page_size.trailing_zeros(),
            page_rows: walk.page_rows,
            slot_rows: walk.slot_rows,
            head_rows: walk.head_rows,
        },
        sdpa_decode_quant_partial_kernel::Consts {
            head_dim: call.head_dim,
            epl: g.epl,
            hpt: g.hpt,
            sgs: g.sgs,
            lg: g.lg,
            unroll: g.unroll,
            paged: walk.mode(),
            format: scales.format.code(),
            group: scales.format.group(call.head_dim),
        },
    )
    .grid([call.n_q_heads / g.hpt, call.rows, splits])
    .group_size(g.sgs * 32)
    .run()
}

/// [`super::sdpa_decode_paged`] over a quantized cache: `kv`'s pools are u8 codes in
/// `scales.format` with `scales`' per-(token, KV head) f32 scales, or for int4 packed
/// codes with per-(token, KV head, group) scales (see `kv_quant` and `kv_quant_int4` for
/// the layouts), `q` and `out` a float dtype. Everything else — tables and their device-side
/// check, GQA, window, sinks, sink logits, split count, workspace — as
/// `sdpa_decode_paged` takes it.
pub fn sdpa_decode_paged_quant(
    ctx: &Context,
    q: &Tensor,
    kv: &PagedKv,
    scales: &KvScales,
    out: &Tensor,
    opts: &DecodeOptions,
    ws: &PagedWorkspace,
) -> Result<(), OpError> {
    let s = check_shapes(OP, q, kv, out, (false, Some(scales)))?;
    let eager = !ctx.recording_graph();
    paged_attention(
        ctx,
        (q, kv, out),
        &s,
        (false, eager),
        opts,
        ws,
        Some(*scales),
    )
}

/// [`super::sdpa_multi_query_paged`] over a quantized cache: `q` `[batch, n_query,
/// n_q_heads, head_dim]` (speculative verification, each sequence's last `n_query` tokens
/// already appended by `kv_quant_append`), causal or full, the pools and scales as
/// [`sdpa_decode_paged_quant`] reads them. `ws` for `batch · n_query` rows.
#[allow(clippy::too_many_arguments)]
pub fn sdpa_multi_query_paged_quant(
    ctx: &Context,
    q: &Tensor,
    kv: &PagedKv,
    scales: &KvScales,
    out: &Tensor,
    causal: bool,
    opts: &DecodeOptions,
    ws: &PagedWorkspace,
) -> Result<(), OpError> {
    let s = check_shapes(MQ_OP, q, kv, out, (true, Some(scales)))?;
    let eager = !ctx.recording_graph();
    paged_attention(
        ctx,
        (q, kv, out),
        &s,
        (causal, eager),
        opts,
        ws,
        Some(*scales),
    )
}

use crate::error::OpError;
