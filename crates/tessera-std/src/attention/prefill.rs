//! Prefill attention: tiled flash attention over a whole prompt, causal or full, with GQA
//! and f32 accumulation. A threadgroup of `sgs` simdgroups serves `sgs·rq` consecutive
//! query rows of one head; K/V tiles of `bk` keys are staged through threadgroup memory (K
//! rows padded by one element so lane j reading key j hits its own bank; V is read
//! straight from memory, 32 consecutive elements per load). Lane j scores
//! key j of the tile for each of its simdgroup's `rq` rows, the online softmax runs per
//! row, and each lane accumulates the output dims `e·32 + lane`, the probabilities
//! broadcast by shuffles. It serves f32; f16/bf16 go to the fragment kernel (`prefill_mma`).

use super::checks::{dims, gqa, indexable, same_dim, same_float_dtype, scale_ok};
use super::kv_quant::{KvFormat, KvScales};
use super::paged_rows::PageWalk;
use super::prefill_mma::{prefill_mma_rows, sdpa_prefill_mma_kernel, FLOAT_CACHE};
use super::prefill_paged::{prefill_kv_row, prefill_page_scalars};
use super::prefill_tiles::{
    prefill_tile_shared_bytes, sdpa_prefill_tiles_kernel, PREFILL_TILE_ROWS,
};
use super::prefill_varlen::varlen_rows;
use super::softmax::{normalise_output, part_weight, score_weight, v_weight};
use crate::error::{runtime, OpError};
use crate::validate::shape_is;
use tessera_macros::kernel;
use tessera_runtime::{BackendKind, Context, DType, Tensor};

/// Head dims the prefill kernel is specialised for.
pub const PREFILL_HEAD_DIMS: [u32; 5] = [64, 96, 128, 192, 256];

/// Simdgroups per prefill threadgroup and query rows per simdgroup.
const SGS: u32 = 4;
const RQ: u32 = 4;

/// Keys per tile for a head_dim: 32 up to 128, else 16 (the K tile stays under 32 KiB).
pub fn prefill_tile(head_dim: u32) -> u32 {
    if head_dim <= 128 {
        32
    } else {
        16
    }
}

/// `out[i, h] = softmax_j(scale · q[i, h]·k[j, h/g]) · v[j, h/g]` over keys `j ≤ n_kv -
/// n_q + i` (causal) or all `n_kv`; q and out `[n_q, n_q_heads, D]`, k and v `[n_kv,
/// n_kv_heads, D]`. Grid: (query blocks, n_q_heads). With `varlen`, q, k and v hold packed
/// sequences, `seqs` their table and the grid is (query blocks of the longest, n_q_heads,
/// sequences) (see `prefill_varlen`); else `seqs` is a stand-in, never read. With `paged`
/// (and `varlen`), k and v are page pools and `seqs` also holds the pages (`prefill_paged`).
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn sdpa_prefill_kernel<T, S>(
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    mut out: Tensor<T>,
    seqs: Tensor<S>,
    n_q: u32,
    n_kv: u32,
    n_q_heads: u32,
    n_kv_heads: u32,
    causal: u32,
    scale: f32,
    #[constexpr] head_dim: u32,
    #[constexpr] bk: u32,
    #[constexpr] rq: u32,
    #[constexpr] sgs: u32,
    #[constexpr] varlen: u32,
    #[constexpr] paged: u32,
) {
    let epl = head_dim / 32;
    let lane = simd_lane();
    let sg = simd_id();
    let h = group_id_y();
    let kvh = h / (n_q_heads / n_kv_heads);
    let tile = group_id_x();
    let (q0, n_q, k0, n_kv, block) = varlen_rows(
        seqs,
        varlen,
        causal,
        group_id_z(),
        tile,
        sgs * rq,
        0,
        n_q,
        n_kv,
        tile * sgs * rq,
    );
    let (psize, pshift, pslot, phead) = prefill_page_scalars(seqs, paged);
    let row0 = block + sg * rq;
    let offset = n_kv - n_q;
    let last = min(block + sgs * rq, n_q) - 1 + offset;
    let kv_end = select(causal != 0, min(last + 1, n_kv), n_kv);
    let ks = threadgroup_array::<f32>(bk * (head_dim + 1));
    let os = stack_array::<f32>(rq * epl);
    let ms = stack_array::<f32>(rq);
    let ls = stack_array::<f32>(rq);
    let ps = stack_array::<f32>(rq);
    for r in 0..rq {
        store(ms[r], neg_infinity());
        store(ls[r], 0.0f32);
        for e in 0..epl {
            store(os[r * epl + e], 0.0f32);
        }
    }
    for kt in range(0, kv_end, bk) {
        for i in range(thread_id(), bk * head_dim, sgs * 32) {
            let j = i / head_dim;
            let d = i % head_dim;
            let key = min(kt + j, n_kv - 1);
            store(
                ks[j * (head_dim + 1) + d],
                load(
                    k[prefill_kv_row(
                        seqs, k0, key, kvh, n_kv_heads, head_dim, psize, pshift, pslot, phead,
                        paged,
                    ) + d],
                )
                .cast::<f32>(),
            );
        }
        barrier();
        // Scores of key `kt + lane` for each row, and the online-softmax update.
        let key = kt + lane;
        let kl = select(lane < bk, lane, 0);
        for r in 0..rq {
            let row = min(row0 + r, n_q - 1);
            let valid = lane < bk && key < kv_end && (causal == 0 || key <= row + offset);
            let qb = ((q0 + row) * n_q_heads + h) * head_dim;
            let mut s = 0.0f32;
            for d in 0..head_dim {
                s += load(q[qb + d]).cast::<f32>() * load(ks[kl * (head_dim + 1) + d]);
            }
            let s = s * scale;
            let m_old = load(ms[r]);
            let m_new = max(m_old, simd_max(select(valid, s, neg_infinity())));
            let p = select(valid, score_weight(s, m_new), 0.0f32);
            let f = part_weight(m_old, m_new);
            store(ls[r], load(ls[r]) * f + simd_sum(p));
            store(ms[r], m_new);
            store(ps[r], v_weight(p));
            for e in 0..epl {
                store(os[r * epl + e], load(os[r * epl + e]) * f);
            }
        }
        // P·V: V rows straight from memory (32 consecutive elements per load), each
        // probability broadcast from the lane that scored it.
        // A key a row does not see adds nothing, not 0·v (an infinite v of a masked key
        // would make it NaN).
        for j in 0..bk {
            let key = kt + j;
            let vrow = prefill_kv_row(
                seqs,
                k0,
                min(key, n_kv - 1),
                kvh,
                n_kv_heads,
                head_dim,
                psize,
                pshift,
                pslot,
                phead,
                paged,
            );
            for e in 0..epl {
                let vv = load(v[vrow + e * 32 + lane]).cast::<f32>();
                for r in 0..rq {
                    let seen =
                        key < kv_end && (causal == 0 || key <= min(row0 + r, n_q - 1) + offset);
                    let pj = simd_shuffle(load(ps[r]), j);
                    store(
                        os[r * epl + e],
                        load(os[r * epl + e]) + select(seen, pj * vv, 0.0f32),
                    );
                }
            }
        }
        barrier();
    }
    for r in 0..rq {
        let row = row0 + r;
        if row < n_q {
            let l = load(ls[r]);
            for e in 0..epl {
                let res = normalise_output(load(os[r * epl + e]), l);
                store(
                    out[((q0 + row) * n_q_heads + h) * head_dim + e * 32 + lane],
                    res.cast::<T>(),
                );
            }
        }
    }
}

/// Prefill attention: q `[n_q, n_q_heads, D]`, k and v `[n_kv, n_kv_heads, D]` (token
/// major, the prompt's keys last), out like q. Causal: query i sits at position `n_kv -
/// n_q + i` and sees keys up to it (needs `n_kv >= n_q`). head_dim 64, 96, 128, 192, 256.
#[allow(clippy::too_many_arguments)]
pub fn sdpa_prefill(
    ctx: &Context,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    causal: bool,
    scale: Option<f32>,
) -> Result<(), OpError> {
    const OP: &str = "sdpa_prefill";
    same_float_dtype(OP, q, k, v, out)?;
    let qs = dims(OP, "q", q, "n_q, n_q_heads, head_dim")?;
    let ks = dims(OP, "k", k, "n_kv, n_kv_heads, head_dim")?;
    shape_is(OP, "v", v, ks)?;
    shape_is(OP, "out", out, qs)?;
    same_dim(OP, "k's head_dim", ks[2], qs[2], "q")?;
    let head_dim = prefill_head_dim(OP, qs[2])?;
    gqa(OP, qs[1], ks[1])?;
    indexable(OP, &[("q", q), ("k", k)])?;
    if ks[0] < qs[0] {
        return Err(OpError::invalid(
            OP,
            format!(
                "n_kv = {} must be at least n_q = {} (the prompt's own keys are the last n_q)",
                ks[0], qs[0]
            ),
        ));
    }
    let scale = scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
    scale_ok(OP, scale)?;
    let rows = PrefillRows {
        n_q: qs[0] as u32,
        n_kv: ks[0] as u32,
        n_q_heads: qs[1] as u32,
        n_kv_heads: ks[1] as u32,
        head_dim,
        causal: u32::from(causal),
        scale,
    };
    prefill_launch(ctx, OP, (q, k, v, out), &rows, (None, None, None))
}

/// head_dim is one the prefill kernels are specialised for.
pub(crate) fn prefill_head_dim(op: &'static str, d: usize) -> Result<u32, OpError> {
    match PREFILL_HEAD_DIMS.iter().find(|&&x| x as usize == d) {
        Some(&x) => Ok(x),
        None => Err(OpError::invalid(
            op,
            format!("head_dim {d} is not supported; expected one of {PREFILL_HEAD_DIMS:?}"),
        )),
    }
}

/// The checked scalars of a prefill launch: q's rows and k's (for packed sequences, the
/// totals), the heads, head_dim, causal and the softmax scale.
pub(crate) struct PrefillRows {
    pub n_q: u32,
    pub n_kv: u32,
    pub n_q_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub causal: u32,
    pub scale: f32,
}

/// Where a prefill's keys come from, beyond q, k and v themselves (see [`prefill_launch`]):
/// the packed batch's table, the page walk, the quantized cache's scales.
pub(crate) type PrefillSource<'a> = (
    Option<(&'a Tensor, u32, u32)>,
    Option<&'a PageWalk<'a>>,
    Option<&'a KvScales<'a>>,
);

/// Launches the prefill of checked tensors: f16/bf16 on matrix fragments or tile
/// products, f32 on the CUDA-core tiles, all with the same arguments, failures named `op`.
/// `packed`: the sequence table, the most queries a sequence has and the sequence count of
/// a packed batch (`prefill_varlen`); `walk` (with `packed`): k and v are page pools of
/// that walk, the table holding the pages; `quant` (with `walk`, f16/bf16 q): k and v are
/// code pools of that format with these scales, which the f16/bf16 kernel the float cache
/// would run on dequantizes into its tiles.
pub(crate) fn prefill_launch(
    ctx: &Context,
    op: &'static str,
    (q, k, v, out): (&Tensor, &Tensor, &Tensor, &Tensor),
    r: &PrefillRows,
    (packed, walk, quant): PrefillSource,
) -> Result<(), OpError> {
    let (seqs, rows_q, batch) = packed.unwrap_or((q, r.n_q, 1));
    let varlen = u32::from(packed.is_some());
    let paged = PageWalk::scalars(walk)[5];
    let (n_q, n_kv, n_q_heads, n_kv_heads) = (r.n_q, r.n_kv, r.n_q_heads, r.n_kv_heads);
    let (head_dim, causal, scale) = (r.head_dim, r.causal, r.scale);
    let half = matches!(q.dtype(), DType::F16 | DType::BF16);
    if quant.is_some() && (!half || walk.is_none()) {
        return Err(OpError::invalid(
            op,
            "a quantized cache is read by the paged f16/bf16 prefill only",
        ));
    }
    if half {
        // Over a float cache the kernels read k and v, the codes and scales stand-ins (k
        // and v); over a quantized one the codes and scales, the float pools stand-ins (q).
        let (kf, vf, kc, vc, ks, vs, quant, group) = match quant {
            None => {
                let [_, _, _, quant, group] = prefill_mma_constexprs(head_dim, varlen, paged);
                (k, v, k, v, k, v, quant, group)
            }
            Some(s) => {
                let (quant, group) = (s.format.code() + 1, s.format.group(head_dim));
                (q, q, k, v, s.k_scale, s.v_scale, quant, group)
            }
        };
        // The two f16/bf16 kernels take the same arguments.
        macro_rules! launch_half {
            ($kernel:ident, $rows:expr, $threads:expr) => {{
                let args = $kernel::Args {
                    q,
                    k: kf,
                    v: vf,
                    out,
                    seqs,
                    k_codes: kc,
                    v_codes: vc,
                    k_scale: ks,
                    v_scale: vs,
                    n_q,
                    n_kv,
                    n_q_heads,
                    n_kv_heads,
                    causal,
                    scale,
                };
                let consts = $kernel::Consts {
                    head_dim,
                    varlen,
                    paged,
                    quant,
                    group,
                };
                $kernel::launch(ctx, args, consts)
                    .grid([n_q_heads, rows_q.div_ceil($rows), batch])
                    .group_size($threads)
                    .run()
            }};
        }
        let groups = n_q_heads as u64 * rows_q.div_ceil(PREFILL_TILE_ROWS) as u64 * batch as u64;
        match half_prefill_kernel(ctx, head_dim, groups) {
            HalfPrefill::Tiles => launch_half!(sdpa_prefill_tiles_kernel, PREFILL_TILE_ROWS, 256),
            HalfPrefill::Fragments => {
                launch_half!(sdpa_prefill_mma_kernel, prefill_mma_rows(head_dim), 128)
            }
        }
    } else {
        let args = sdpa_prefill_kernel::Args {
            q,
            k,
            v,
            out,
            seqs,
            n_q,
            n_kv,
            n_q_heads,
            n_kv_heads,
            causal,
            scale,
        };
        let consts = sdpa_prefill_kernel::Consts {
            head_dim,
            bk: prefill_tile(head_dim),
            rq: RQ,
            sgs: SGS,
            varlen,
            paged,
        };
        sdpa_prefill_kernel::launch(ctx, args, consts)
            .grid([rows_q.div_ceil(SGS * RQ), n_q_heads, batch])
            .group_size(SGS * 32)
            .run()
    }
    .map_err(runtime(op))
}

/// The kernel of an f16/bf16 prefill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalfPrefill {
    /// `prefill_tiles`: warpgroup tile products (head_dim a multiple of 64).
    Tiles,
    /// `prefill_mma`: matrix fragments on one simdgroup each (every head_dim, 32 KiB).
    Fragments,
}

/// The kernel f16/bf16 prefill at `head_dim` runs on `ctx` when the tile-product kernel
/// would launch `groups` threadgroups: on tile products where the device's threadgroup
/// memory holds their stages (CUDA and the CPU interpreter; not Apple GPUs' 32 KiB) and
/// they make at least a wave (one a compute unit; the CPU, whose speed is not the point,
/// always takes them), else on fragments, whose 64-row threadgroups of 128 threads fill
/// twice as many units and share them.
pub fn half_prefill_kernel(ctx: &Context, head_dim: u32, groups: u64) -> HalfPrefill {
    let info = ctx.info();
    let fits = prefill_tile_shared_bytes(head_dim) <= info.max_shared_bytes;
    let wave = info.kind == BackendKind::Cpu || groups >= info.compute_units as u64;
    if head_dim.is_multiple_of(64) && fits && wave {
        HalfPrefill::Tiles
    } else {
        HalfPrefill::Fragments
    }
}

/// The constexprs a prefill specialisation takes, in declaration order.
pub fn prefill_constexprs(head_dim: u32, varlen: u32, paged: u32) -> [u32; 6] {
    [head_dim, prefill_tile(head_dim), RQ, SGS, varlen, paged]
}

/// The constexprs of a fragment- or tile-product-kernel specialisation over a float cache,
/// in declaration order (`quant` 0, the group a stand-in).
pub fn prefill_mma_constexprs(head_dim: u32, varlen: u32, paged: u32) -> [u32; 5] {
    [head_dim, varlen, paged, FLOAT_CACHE, head_dim]
}

/// The constexprs of a fragment- or tile-product-kernel specialisation over a quantized
/// paged cache of `format` (`paged` the walk's mode), in declaration order.
pub fn prefill_mma_quant_constexprs(head_dim: u32, paged: u32, format: KvFormat) -> [u32; 5] {
    [
        head_dim,
        1,
        paged,
        format.code() + 1,
        format.group(head_dim),
    ]
}
