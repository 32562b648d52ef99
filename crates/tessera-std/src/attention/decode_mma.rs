//! Split-KV decode attention on matrix fragments, for f16/bf16 caches with head_dim 64,
//! 128 or 256. One threadgroup of four simdgroups serves up to 16 query heads that share
//! a KV head (the group's heads are the 16 rows of the fragments, padded with zero
//! queries) over one KV chunk, so each K/V row is read once for the whole group and the
//! per-head work runs on the matrix units instead of the CUDA cores. Query rows that share
//! one cache (a block of new tokens, `sdpa_multi_query`) fill the 16 rows with whole GQA
//! groups of several query rows, so the cache is read once per `16 / gqa` rows.
//!
//! The chunk is walked in blocks of `block_keys` keys (`mma_block_keys`: 4096 elements of
//! K or V, twice that for one-byte codes where threadgroup memory allows). Each thread
//! holds its vectors of 8 elements of the next block's K and V in registers (issued before
//! the current block's arithmetic; the queries' loads go out first, then the first
//! block's), and stores them into padded threadgroup tiles at the top of the next step.
//! Per block: the scores `Q·Kᵀ` (each simdgroup one 16-key tile over a quarter, half or
//! all of head_dim; the partial tiles are summed by the softmax threads); an online
//! softmax by 8 threads per head row (the score tiles are stored with a row stride of 24
//! floats, which keeps the fragment stores free of bank conflicts); `O += P·V` with each simdgroup owning a quarter of
//! the output columns in accumulator fragments.
//!
//! The running max is updated lazily, per head row: the block's scores are exponentiated
//! against the row's reference max `m` unless the row's maximum exceeds `m + 8`; only then
//! (once at the start, and rarely after) its `m` moves, and the row's rescale factor
//! (else exactly 1) goes to threadgroup memory with the weights. After the block's barrier
//! a simdgroup that sees a factor below 1 rescales its accumulators through its own slice
//! of threadgroup memory behind simdgroup barriers, so the decision costs no threadgroup
//! reduction. Weights stay below `e⁸`, so f32 sums and f16/bf16 weights cannot overflow,
//! and `(m, l, O)` are written out in the same frame, exactly as the combine kernel
//! expects. A call of one chunk (`direct`) writes `O / l` to the output itself and needs
//! no combine launch.
//!
//! A quantized cache (`quant` 1: int8, 2: e4m3 codes, `kv_quant`'s layout) takes the same
//! walk for bf16 queries: a thread holds its K/V codes (one byte each) in registers and
//! writes their values, exact in bf16, into the tiles; each key's K scale multiplies its
//! score and its V scale its softmax weight before the weights enter the fragments, so no
//! dequantized element exists and the matrix products are the float kernel's.

use super::kv_quant::kv_code_value;
use super::paged_rows::{key_row, visible_key_pos};
use super::softmax::{normalise, score_weight};
use crate::float_range::f32_range;
use tessera_macros::{func, kernel};

/// The head dims the fragment kernel serves.
pub const MMA_HEAD_DIMS: [u32; 3] = [64, 128, 256];

/// Keys per block for `head_dim`: a K or V block is 4096 elements, or for a quantized
/// cache (`quantized`) on a device whose threadgroups hold `max_shared` ≥ 64 KiB, 8192
/// codes (at most 64 keys: four score tiles), so a block carries the float block's bytes.
pub fn mma_block_keys(head_dim: u32, quantized: bool, max_shared: usize) -> u32 {
    if quantized && max_shared >= 64 * 1024 {
        (8192 / head_dim).min(64)
    } else {
        4096 / head_dim
    }
}

/// The (query row, head) of fragment row `r`, as the row's index in `q`'s `[rows ·
/// n_q_heads]` head vectors, and whether it is real. Fragment row `r` is head `h0 + r %
/// hpr` of query row `row0 + r / hpr`: with `hpr = 16` one query row's heads `h0 ..` of
/// `nh`, with `hpr = gqa` whole GQA groups of `16 / hpr` query rows. A padding row's index
/// may lie past `q`: a load through it takes `first_head` instead.
#[func]
fn frag_head(
    r: u32,
    hpr: u32,
    nh: u32,
    row0: u32,
    rows: u32,
    n_q_heads: u32,
    h0: u32,
) -> (u32, bool) {
    // (With hpr = 16 the selects fold to the one-row form.)
    let one = hpr == 16;
    let rr = r / hpr;
    let hh = select(one, r, r % hpr);
    let ok = select(one, r < nh, rr < 16 / hpr && hh < nh && row0 + rr < rows);
    let off = select(one, r, rr * n_q_heads + hh);
    (row0 * n_q_heads + h0 + off, ok)
}

/// The value element `x` of a K/V register stands for, in the tiles' dtype: the code's
/// value for a quantized cache (`quant` 1: int8, 2: e4m3; exact in bf16), else `x`; `T`
/// is `tile`'s element type.
#[func]
fn tile_value<C, T>(x: C, tile: Mem<T>, quant: u32) -> T {
    let code = kv_code_value(x.cast::<u32>(), quant / 2).cast::<T>();
    select(quant != 0, code, x.cast::<T>())
}

/// Score `s` of a key with K scale `k_sc` (quantized caches, `quant != 0`): `s · k_sc`,
/// NaN where the scale is not finite (a row that held NaN or inf when appended), as the
/// key's dequantized elements would make it; `s` itself for a float cache.
#[func]
fn key_scaled(s: f32, k_sc: f32, quant: u32) -> f32 {
    let scaled = select(
        abs(k_sc) <= 3.402_823_5e38f32,
        s * k_sc,
        0x7FC0_0000u32.bitcast::<f32>(),
    );
    select(quant != 0, scaled, s)
}

/// The head a query load of fragment row `(head, ok)` reads: its own, or for a padding row
/// the group's first head (`row0 · n_q_heads + h0`), which always exists.
#[func]
fn loaded_head(head: u32, ok: bool, first_head: u32) -> u32 {
    select(ok, head, first_head)
}

/// Partial GQA decode attention over KV chunk `group_id_z()` of `chunk` visible keys, on
/// matrix fragments; the same outputs as `sdpa_decode_partial_kernel`. Grid x is `KV head
/// · ceil(gqa / 16) + head block`, y the block of `16 / heads_per_row` query rows, z the chunk;
/// 128 threads. Packing several query rows (`heads_per_row = gqa ≤ 8` rather than 16, for
/// rows that share one cache without a window) reads each K/V block once for all of them;
/// row `r` then sees the keys before `len0 + r · len_step`. With `direct = 1` (one chunk,
/// no sink logit) the kernel writes the output rows to `out` instead of partial states.
/// With `paged != 0` the keys of row `row` live in pages listed from `pages[starts[row]]`,
/// as `paged_rows::key_row` says. With `quant != 0` `k` and `v` hold codes and key row
/// `r` (`key_row` in rows) has its scales at `k_scale[r]`, `v_scale[r]`; with `quant = 0`
/// `C` is `T` and the scales are not read.
#[kernel(group_size = 128, groups_per_core = 4)]
pub fn sdpa_decode_mma_kernel<T, C>(
    q: Tensor<T>,
    k: Tensor<C>,
    v: Tensor<C>,
    k_scale: Tensor<f32>,
    v_scale: Tensor<f32>,
    kv_lens: Tensor<u32>,
    pages: Tensor<u32>,
    starts: Tensor<u32>,
    mut part_o: Tensor<f32>,
    mut part_ml: Tensor<f32>,
    mut out: Tensor<T>,
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
    rows: u32,
    page_size: u32,
    page_shift: u32,
    page_rows: u32,
    slot_rows: u32,
    head_rows: u32,
    #[constexpr] head_dim: u32,
    #[constexpr] per_row_lens: u32,
    #[constexpr] heads_per_row: u32,
    #[constexpr] direct: u32,
    #[constexpr] paged: u32,
    #[constexpr] quant: u32,
    #[constexpr] block_keys: u32,
) {
    // P·V sums grow with the softmax sum, so V near f32's range would overflow the f32
    // accumulators: where T has f32's exponent range (bf16), P enters the fragments scaled
    // by 2⁻²⁴ (exact) and the result is scaled back; f16 V cannot overflow them and f16
    // has no room below, so it keeps P as is. Partial outputs leave scaled by 2⁻²⁴ either
    // way, as the combine expects (softmax::v_weight).
    let wide = f32_range(q);
    let p_scale = select(wide, 5.960_464_5e-8f32, 1.0f32);
    let unscale = select(wide, 16_777_216.0f32, 1.0f32);
    let to_partial = select(wide, 1.0f32, 5.960_464_5e-8f32);
    let bk = block_keys;
    // Vectors of 8 elements of a K or V block a thread holds in registers.
    let nv = bk * head_dim / 1024;
    let dp = head_dim + 8;
    let pp = bk + 8;
    let kpl = bk / 8;
    let tiles = bk / 16;
    let parts = 4 / tiles;
    let vecs = head_dim / 8;
    let cols = head_dim / 4;
    let nfr = cols / 16;
    let tid = thread_id();
    let lane = simd_lane();
    let sg = simd_id();
    let gblocks = (gqa + 15) / 16;
    let kvh = group_id_x() / gblocks;
    let h0 = kvh * gqa + (group_id_x() % gblocks) * 16;
    let nh = min(16, kvh * gqa + gqa - h0);
    let hpr = heads_per_row;
    let rpg = 16 / hpr;
    let row = group_id_y() * rpg;
    let row_last = select(rpg > 1, min(row + rpg, rows) - 1, row);
    let split = group_id_z();
    let splits = num_groups_z();
    // A device-side length is the same on every thread; the reduction proves it, so the
    // block walk below may hold barriers.
    let n = if per_row_lens != 0 {
        group_max(min(load(kv_lens[row]), kv_stride))
    } else {
        len0 + row_last * len_step
    };
    let lo = select(window > 0 && n > window, n - window, 0);
    let s_end = min(n_sink, lo);
    let count = s_end + n - lo;
    let jb = split * chunk;
    let je = min(jb + chunk, count);
    let nblocks = select(je > jb, (je - jb + bk - 1) / bk, 0);
    let cache = (row * row_cache_rows + kvh * kv_stride) * head_dim;
    let first = if paged != 0 { load(starts[row]) } else { 0 };

    let ksh = threadgroup_array::<T>(bk * dp);
    let vsh = threadgroup_array::<T>(bk * dp);
    let qsh = threadgroup_array::<T>(16 * dp);
    let psh = threadgroup_array::<T>(16 * pp);
    let fsh = threadgroup_array::<f32>(1536);
    let rsh = threadgroup_array::<f32>(16);
    // A quantized block's K scales, then its V scales.
    let scsh = threadgroup_array::<f32>(select(quant != 0, 2 * bk, 4));
    // One-byte codes in blocks past the float block's 4096 elements arrive by 16-byte
    // copies into `csh` (K then V, each thread's own 16-code vectors) instead of
    // registers, which the larger block would exhaust.
    let via_copies = quant != 0 && bk * head_dim > 4096;
    let cvecs = head_dim / 16;
    // 16 codes a copy (`cw` is 16 bytes of a float cache too, which never copies).
    let cw = select(quant != 0, 16u32, 8u32);
    let nc = bk * head_dim / 2048;
    let csh = threadgroup_array::<C>(select(via_copies, 2 * bk * head_dim, 16));
    let kr = stack_array::<C>(select(via_copies, 8, 8 * nv));
    let vr = stack_array::<C>(select(via_copies, 8, 8 * nv));
    let mut k_sc = 0.0f32;
    let mut v_sc = 0.0f32;
    let sv = stack_array::<f32>(kpl);
    let fq = matrix_a::<T>();
    let fk = matrix_b::<T>();
    let sacc = matrix_acc();
    let o0 = matrix_acc();
    let o1 = matrix_acc();
    let o2 = matrix_acc();
    let o3 = matrix_acc();
    matrix_fill(o0, 0.0);
    matrix_fill(o1, 0.0);
    matrix_fill(o2, 0.0);
    matrix_fill(o3, 0.0);

    // Softmax state of head row `sr`, replicated over its 8 threads; `l` is this thread's
    // share of the row sum.
    let sr = tid / 8;
    let sc0 = (tid % 8) * kpl;
    // Its last visible key: its own query row's when rows are packed (no window, so a key's
    // chunk index is its position).
    let sr_end = if rpg > 1 {
        let (sr_head, _) = frag_head(sr, hpr, nh, row, rows, n_q_heads, h0);
        min(je, len0 + (sr_head / n_q_heads) * len_step)
    } else {
        je
    };
    // Its keys as (score tile, column in the tile): 16 / kpl threads share a tile.
    let scb = (tid % 8) / (16 / kpl);
    let sco = ((tid % 8) % (16 / kpl)) * kpl;
    let mut m = neg_infinity();
    let mut l = 0.0f32;
    // The queries' 16-byte vectors are fetched first, ahead of the first K/V block, where
    // registers allow (head_dim ≤ 128; at 256 the registers cost a quarter of the speed).
    let qvecs = head_dim / 64;
    let qpre = select(head_dim <= 128, qvecs, 0);
    let qr = stack_array::<T>(16);
    for i in 0..qpre {
        let vi = tid + 128 * i;
        let (qh, ok) = frag_head(vi / vecs, hpr, nh, row, rows, n_q_heads, h0);
        let base = loaded_head(qh, ok, row * n_q_heads + h0) * head_dim + (vi % vecs) * 8;
        for e in 0..8 {
            let x = select(ok, load(q[base + e]).cast::<f32>(), 0.0f32);
            store(qr[i * 8 + e], x.cast::<T>());
        }
    }
    for it in range(0, nblocks + 1, 1) {
        // The registers hold block `it − 1`: into the tiles with it, then fetch block `it`
        // into the same registers, then compute on the tiles.
        if it > 0 {
            barrier();
            if via_copies {
                // This thread's own copies: visible to it after the wait, no barrier.
                wait_copies(0);
                for i in 0..nc {
                    let ci = tid + 128 * i;
                    let at = (ci / cvecs) * dp + (ci % cvecs) * 16;
                    for e in 0..16 {
                        let x = load(csh[ci * 16 + e]);
                        store(ksh[at + e], tile_value(x, ksh, quant));
                    }
                    for e in 0..16 {
                        let x = load(csh[bk * head_dim + ci * 16 + e]);
                        store(vsh[at + e], tile_value(x, vsh, quant));
                    }
                }
            } else {
                for i in 0..nv {
                    let vi = tid + 128 * i;
                    let at = (vi / vecs) * dp + (vi % vecs) * 8;
                    for e in 0..8 {
                        store(ksh[at + e], tile_value(load(kr[i * 8 + e]), ksh, quant));
                    }
                    for e in 0..8 {
                        store(vsh[at + e], tile_value(load(vr[i * 8 + e]), vsh, quant));
                    }
                }
            }
            if quant != 0 && tid < bk {
                store(scsh[tid], k_sc);
                store(scsh[bk + tid], v_sc);
            }
        }
        if it < nblocks {
            let b = jb + it * bk;
            if via_copies {
                for i in 0..nc {
                    let ci = tid + 128 * i;
                    let j = b + ci / cvecs;
                    let pos = visible_key_pos(j, je, b, s_end, lo);
                    let base = key_row(
                        pages, first, pos, cache, kvh, page_size, page_shift, page_rows, slot_rows,
                        head_rows, head_dim, paged,
                    ) + (ci % cvecs) * 16;
                    copy_async(csh[ci * 16], k[base], cw);
                    copy_async(csh[bk * head_dim + ci * 16], v[base], cw);
                }
                commit_copies();
            } else {
                for i in 0..nv {
                    let vi = tid + 128 * i;
                    let j = b + vi / vecs;
                    let pos = visible_key_pos(j, je, b, s_end, lo);
                    let base = key_row(
                        pages, first, pos, cache, kvh, page_size, page_shift, page_rows, slot_rows,
                        head_rows, head_dim, paged,
                    ) + (vi % vecs) * 8;
                    for e in 0..8 {
                        store(kr[i * 8 + e], load(k[base + e]));
                    }
                    for e in 0..8 {
                        store(vr[i * 8 + e], load(v[base + e]));
                    }
                }
            }
            if quant != 0 && tid < bk {
                let j = b + tid;
                let pos = visible_key_pos(j, je, b, s_end, lo);
                let r = key_row(
                    pages,
                    first,
                    pos,
                    row * row_cache_rows + kvh * kv_stride,
                    kvh,
                    page_size,
                    page_shift,
                    page_rows,
                    slot_rows,
                    head_rows,
                    1,
                    paged,
                );
                k_sc = load(k_scale[r]);
                v_sc = load(v_scale[r]);
            }
        }
        if it == 0 {
            // The group's queries as the 16 rows of the score product (zeros past `nh`).
            for i in 0..qvecs {
                let vi = tid + 128 * i;
                let at = (vi / vecs) * dp + (vi % vecs) * 8;
                if i < qpre {
                    for e in 0..8 {
                        store(qsh[at + e], load(qr[i * 8 + e]));
                    }
                } else {
                    let (qh, ok) = frag_head(vi / vecs, hpr, nh, row, rows, n_q_heads, h0);
                    let first = row * n_q_heads + h0;
                    let base = loaded_head(qh, ok, first) * head_dim + (vi % vecs) * 8;
                    for e in 0..8 {
                        let x = select(ok, load(q[base + e]).cast::<f32>(), 0.0f32);
                        store(qsh[at + e], x.cast::<T>());
                    }
                }
            }
        }
        if it > 0 {
            let b = jb + (it - 1) * bk;
            barrier();
            // Scores: simdgroup sg takes key tile sg % tiles over part sg / tiles of D.
            let tile = sg % tiles;
            let d0 = (sg / tiles) * (head_dim / parts);
            matrix_fill(sacc, 0.0);
            for kk in 0..(head_dim / parts / 16) {
                matrix_load(fq, qsh[d0 + kk * 16], dp);
                matrix_load_t(fk, ksh[tile * 16 * dp + d0 + kk * 16], dp);
                matrix_mma(sacc, fq, fk, sacc);
            }
            matrix_store(sacc, fsh[sg * 384], 24);
            barrier();
            let mut mx = neg_infinity();
            for i in 0..kpl {
                let key_sc = if quant != 0 {
                    load(scsh[sc0 + i])
                } else {
                    1.0f32
                };
                let mut s = 0.0f32;
                for p in 0..parts {
                    s += load(fsh[(p * tiles + scb) * 384 + sr * 24 + sco + i]);
                }
                let sc = select(
                    b + sc0 + i < sr_end,
                    key_scaled(s, key_sc, quant) * scale,
                    neg_infinity(),
                );
                store(sv[i], sc);
                mx = max(mx, sc);
            }
            for s in 0..3 {
                mx = max(mx, simd_shuffle_xor(mx, 4 >> s));
            }
            // A row whose maximum passed `m + 8` moves `m` and rescales by `fr < 1`; the
            // others keep `fr = 1`, so after the barrier a simdgroup sees from `rsh` alone
            // whether its accumulators need rescaling.
            let grow = mx > m + 8.0f32;
            let mn = select(grow, max(m, mx), m);
            let fr = select(grow, exp(m - mn), 1.0f32);
            l *= fr;
            m = mn;
            if tid % 8 == 0 {
                store(rsh[sr], fr);
            }
            let mut ls = 0.0f32;
            for i in 0..kpl {
                // A packed row may see none of a block, and a row's logits may all be −∞
                // (a −∞ in q): `m` can still be −∞.
                let p = score_weight(load(sv[i]), m);
                ls += p;
                // A quantized key's V scale joins its weight; a key the row does not see
                // adds nothing, whatever its scale.
                let seen = b + sc0 + i < sr_end;
                let vs = if quant != 0 {
                    load(scsh[bk + sc0 + i])
                } else {
                    1.0f32
                };
                let pv = select(quant != 0, select(seen, p * vs, 0.0f32), p);
                store(psh[sr * pp + sc0 + i], (pv * p_scale).cast::<T>());
            }
            l += ls;
            barrier();
            // Each simdgroup rescales its own columns through its own slice of `fsh`
            // (the scores in it are consumed), ordered by simdgroup barriers only.
            if simd_any(load(rsh[lane % 16]) < 1.0f32) {
                let reg = sg * 256;
                for f in 0..nfr {
                    if f > 0 {
                        simd_barrier();
                    }
                    if f == 0 {
                        matrix_store(o0, fsh[reg], 16);
                    }
                    if f == 1 {
                        matrix_store(o1, fsh[reg], 16);
                    }
                    if f == 2 {
                        matrix_store(o2, fsh[reg], 16);
                    }
                    if f == 3 {
                        matrix_store(o3, fsh[reg], 16);
                    }
                    simd_barrier();
                    for e in range(lane, 256, 32) {
                        store(fsh[reg + e], load(fsh[reg + e]) * load(rsh[e / 16]));
                    }
                    simd_barrier();
                    if f == 0 {
                        matrix_load(o0, fsh[reg], 16);
                    }
                    if f == 1 {
                        matrix_load(o1, fsh[reg], 16);
                    }
                    if f == 2 {
                        matrix_load(o2, fsh[reg], 16);
                    }
                    if f == 3 {
                        matrix_load(o3, fsh[reg], 16);
                    }
                }
            }
            // O += P·V over the block's key tiles, on this simdgroup's output columns.
            let c0 = sg * cols;
            for kt in 0..tiles {
                matrix_load(fq, psh[kt * 16], pp);
                matrix_load(fk, vsh[kt * 16 * dp + c0], dp);
                matrix_mma(o0, fq, fk, o0);
                if nfr > 1 {
                    matrix_load(fk, vsh[kt * 16 * dp + c0 + 16], dp);
                    matrix_mma(o1, fq, fk, o1);
                }
                if nfr > 2 {
                    matrix_load(fk, vsh[kt * 16 * dp + c0 + 32], dp);
                    matrix_mma(o2, fq, fk, o2);
                    matrix_load(fk, vsh[kt * 16 * dp + c0 + 48], dp);
                    matrix_mma(o3, fq, fk, o3);
                }
            }
        }
    }

    // The row sums, then (m, l) and O of the real heads.
    for s in 0..3 {
        l += simd_shuffle_xor(l, 4 >> s);
    }
    let (sr_head, sr_real) = frag_head(sr, hpr, nh, row, rows, n_q_heads, h0);
    if direct != 0 {
        // Every simdgroup is past its last reads of the rescale factors.
        barrier();
    }
    if tid % 8 == 0 && sr_real {
        if direct != 0 {
            store(rsh[sr], l);
        } else {
            let slot = sr_head * splits + split;
            store(part_ml[slot * 2], m);
            store(part_ml[slot * 2 + 1], l);
        }
    }
    let reg = sg * 256;
    for f in 0..nfr {
        barrier();
        if f == 0 {
            matrix_store(o0, fsh[reg], 16);
        }
        if f == 1 {
            matrix_store(o1, fsh[reg], 16);
        }
        if f == 2 {
            matrix_store(o2, fsh[reg], 16);
        }
        if f == 3 {
            matrix_store(o3, fsh[reg], 16);
        }
        barrier();
        for e in range(lane, 256, 32) {
            let (head, real) = frag_head(e / 16, hpr, nh, row, rows, n_q_heads, h0);
            if real {
                let col = sg * cols + f * 16 + e % 16;
                if direct != 0 {
                    // One chunk: the output itself (zeros for a row that saw no key).
                    let l = load(rsh[e / 16]);
                    let x = normalise(load(fsh[reg + e]), l) * unscale;
                    store(out[head * head_dim + col], x.cast::<T>());
                } else {
                    let slot = head * splits + split;
                    // Partial outputs carry V scaled by 2⁻²⁴, as the combine expects
                    // (softmax::v_weight).
                    store(
                        part_o[slot * head_dim + col],
                        load(fsh[reg + e]) * to_partial,
                    );
                }
            }
        }
    }
}
