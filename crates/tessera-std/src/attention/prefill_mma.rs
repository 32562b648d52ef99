//! Prefill attention on matrix fragments: flash attention for f16/bf16 at every prefill
//! head_dim. A threadgroup of four simdgroups serves 64 consecutive query rows of one head,
//! 16 rows per simdgroup, whose queries stay in A fragments for the whole walk. Blocks of 32
//! keys reach padded threadgroup tiles by asynchronous 16-byte copies, pipelined across
//! the two tiles: a block's values are copied while its scores are taken, and the next
//! block's keys while its softmax and `P·V` run. Per block a simdgroup computes its 16 × 32
//! scores as accumulator fragments and keeps the online softmax in registers: the scores
//! are scaled, masked (`matrix_mask`) and reduced to row maxima (`matrix_row_max`), the
//! weights taken in place (`matrix_row_exp2_sub`), summed per row and converted to the A
//! operand of `P·V` (`matrix_convert`), which adds into `head_dim / 16` accumulators held
//! in a fragment array; a simdgroup skips the blocks past its rows' last visible key.
//! Heads wider than 128 are split in two column parts: a pair of simdgroups shares 16 rows
//! (32 rows per threadgroup, blocks of 16 keys), each scoring over its half of the dims,
//! the two partial scores meeting in threadgroup memory (`matrix_add`), and each adding
//! `P·V` into its half of the output. The running max is lazy: a row's output is rescaled
//! only when its max passes the one its weights were taken against by more than 8 (so a
//! weight stays below e⁸). Two threadgroup barriers per block (each after a wait for the
//! tile it hands over), one more with two parts.
//!
//! A key masked for one of a simdgroup's rows but not all (causality inside its last
//! blocks, or padding past `n_kv`) still sits in the V tile its `P·V` fragments multiply:
//! a weight of exactly 0 times an infinite or NaN V is NaN. So in the blocks holding such
//! keys a simdgroup first reads their V; when one is not finite it sums that block's `P·V`
//! key by key through its threadgroup slices, each row over its visible keys only, instead
//! of on fragments. Other blocks hold no masked key and skip the check.
//!
//! A quantized paged cache (`quant` 1: int8, 2: e4m3, 3: int4 with `group`-dim scales, the
//! layouts `kv_quant_append` writes) takes the same walk: where the float walk issues an
//! asynchronous copy, each thread loads its 8 codes (int4: 4 bytes) and their row's
//! (group's) scale into registers, and once the tile is free (the values after the scores,
//! the next keys after P·V) stores `code · scale`, computed in f32 and rounded to q's
//! dtype, into the K or V tile, where the float walk would have landed the cache's
//! elements. So the attention is
//! exactly the float kernel's over a cache holding those values, and no dequantized copy
//! exists outside the tiles. A row appended with NaN or inf has scale NaN and zero codes:
//! its elements are NaN in the tile, as a float cache's would be, and the masked-key rule
//! above keeps such a key from poisoning a row that does not see it.

use super::kv_quant::kv_code_value;
use super::kv_quant_int4::kv_nibble_value;
use super::prefill_paged::{prefill_kv_row, prefill_page_scalars};
use super::prefill_tiles::store_normalised_rows;
use super::prefill_varlen::varlen_rows;
use crate::float_range::{f32_range, finite};
use tessera_macros::{func, kernel};

/// The `quant` constexpr of a float cache.
pub const FLOAT_CACHE: u32 = 0;

/// Loads the codes of the 8 elements from column `col` of quantized cache row `row` into
/// `regs[at..]` and returns their scale. `quant` 1 and 2: one code byte an element (int8,
/// e4m3) and one scale a row; 3: int4, two codes a byte (the even element in the low
/// nibble, 4 bytes) and `head_dim / group` scales a row, the 8 elements inside one group
/// (`group` is a multiple of 8).
#[allow(clippy::too_many_arguments)]
#[func]
fn load_quantized<U, F>(
    codes: Mem<U>,
    scales: Mem<F>,
    mut regs: Mem<U>,
    at: u32,
    row: u32,
    col: u32,
    head_dim: u32,
    quant: u32,
    group: u32,
) -> f32 {
    if quant == 3 {
        let base = row * (head_dim / 2) + col / 2;
        for e in 0..4 {
            store(regs[at + e], load(codes[base + e]));
        }
    } else {
        let base = row * head_dim + col;
        for e in 0..8 {
            store(regs[at + e], load(codes[base + e]));
        }
    }
    load(scales[row * (head_dim / group) + col / group]).cast::<f32>()
}

/// Stores the values of the 8 codes [`load_quantized`] left at `regs[from..]` with scale
/// `sc` into `tile` at `at`: each `code · sc` in f32, rounded to `T`.
#[func]
fn store_dequantized<T, U>(
    mut tile: Mem<T>,
    at: u32,
    regs: Mem<U>,
    from: u32,
    sc: f32,
    quant: u32,
) {
    if quant == 3 {
        for e in 0..4 {
            let byte = load(regs[from + e]).cast::<u32>();
            store(
                tile[at + 2 * e],
                (kv_nibble_value(byte, 0) * sc).cast::<T>(),
            );
            store(
                tile[at + 2 * e + 1],
                (kv_nibble_value(byte, 1) * sc).cast::<T>(),
            );
        }
    } else {
        for e in 0..8 {
            let code = load(regs[from + e]).cast::<u32>();
            store(
                tile[at + e],
                (kv_code_value(code, quant / 2) * sc).cast::<T>(),
            );
        }
    }
}

/// Query rows per threadgroup at a head_dim: 16 per simdgroup, or per simdgroup pair where
/// the head is split in two column parts (head_dim over 128).
pub fn prefill_mma_rows(head_dim: u32) -> u32 {
    64 / head_dim.div_ceil(128)
}

/// Flash attention over the keys `j ≤ n_kv − n_q + i` of query row `i` (causal) or all
/// `n_kv`; q and out `[n_q, n_q_heads, D]`, k and v `[n_kv, n_kv_heads, D]`; the outputs of
/// `sdpa_prefill_kernel`. Grid: (n_q_heads, ⌈n_q / rows⌉) with `rows` from
/// [`prefill_mma_rows`], the last query blocks (the most keys when causal) in the first
/// threadgroups; 128 threads. With `varlen`, q, k and v hold packed sequences, `seqs` their
/// table and the grid is (n_q_heads, ⌈longest / rows⌉, sequences) (see `prefill_varlen`);
/// else `seqs` is a stand-in, never read. With `paged` (and `varlen`), k and v are page
/// pools and `seqs` also holds the pages (`prefill_paged`). With `quant` (and `paged`),
/// the pools are `k_codes` and `v_codes` (u8) with their f32 scales, read as
/// [`load_quantized`] says, and `k`, `v` are stand-ins; with `quant` 0
/// ([`FLOAT_CACHE`]) the codes and scales are stand-ins, never read.
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 128)]
pub fn sdpa_prefill_mma_kernel<T, S, U, F>(
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    mut out: Tensor<T>,
    seqs: Tensor<S>,
    k_codes: Tensor<U>,
    v_codes: Tensor<U>,
    k_scale: Tensor<F>,
    v_scale: Tensor<F>,
    n_q: u32,
    n_kv: u32,
    n_q_heads: u32,
    n_kv_heads: u32,
    causal: u32,
    scale: f32,
    #[constexpr] head_dim: u32,
    #[constexpr] varlen: u32,
    #[constexpr] paged: u32,
    #[constexpr] quant: u32,
    #[constexpr] group: u32,
) {
    // P·V sums grow with the softmax sum: where T has f32's exponent range (bf16), P
    // enters the fragments scaled by 2⁻²⁴ (exact) and the output is scaled back, so V near
    // f32's range cannot overflow the f32 accumulators; f16 V cannot, and f16 has no room
    // below, so it keeps P as is.
    let wide = f32_range(v);
    let p_scale = select(wide, 5.960_464_5e-8f32, 1.0f32);
    let unscale = select(wide, 16_777_216.0f32, 1.0f32);
    // Column parts; query rows per threadgroup; keys per block (the K and V tiles, which
    // hold the queries before the walk, and the output and weight slices fit the 32 KiB
    // of threadgroup memory a portable kernel may use); dims per part.
    let parts = (head_dim + 127) / 128;
    let rows = 64 / parts;
    let bk = 32 / parts;
    let dw = head_dim / parts;
    let dp = head_dim + 8;
    let vecs = head_dim / 8;
    let lv = bk * vecs / 128;
    let nfr = dw / 16;
    let tiles = bk / 16;
    let sst = 16;
    let pst = bk + 8;
    let vo = bk * dp;
    let tid = thread_id();
    let lane = simd_lane();
    let sg = simd_id();
    let h = group_id_x();
    let kvh = h / (n_q_heads / n_kv_heads);
    // This simdgroup's 16-row group and column part.
    let rg = sg / parts;
    let d0 = (sg % parts) * dw;
    let (q0, n_q, k0, n_kv, block) = varlen_rows(
        seqs,
        varlen,
        causal,
        group_id_z(),
        group_id_y(),
        rows,
        1,
        n_q,
        n_kv,
        (num_groups_y() - 1 - group_id_y()) * rows,
    );
    let (psize, pshift, pslot, phead) = prefill_page_scalars(seqs, paged);
    let offset = n_kv - n_q;
    let kv_end = select(causal != 0, min(block + rows, n_q) + offset, n_kv);
    let nblocks = (kv_end + bk - 1) / bk;

    // K tile then V tile, each `bk` rows of `dp`; before the walk, the `rows` query rows.
    let kvsh = threadgroup_array::<T>(2 * bk * dp);
    // A quantized walk's next K or V codes and scales, held in registers from their loads
    // until the tile they go to is free.
    let qn = select(quant != 0, lv, 1);
    let kr = stack_array::<U>(qn * 8);
    let vr = stack_array::<U>(qn * 8);
    let ksc = stack_array::<f32>(qn);
    let vsc = stack_array::<f32>(qn);
    // Per simdgroup: 16 rows of f32 (the outputs and row sums on their way out, and the
    // outputs while a block is summed key by key) and of T (that block's weights).
    let fsh = threadgroup_array::<f32>(4 * 16 * sst);
    let psh = threadgroup_array::<T>(4 * 16 * pst);
    // The queries and outputs over this part's dims, and the block's scores then weights.
    let fq = [matrix_a::<T>(); nfr];
    let s = [matrix_acc(); tiles];
    let o = [matrix_acc(); nfr];
    let fp = matrix_a::<T>();
    let fk = matrix_b::<T>();
    let tile = matrix_acc();
    // The running max (log2 units) and sum of each row, the block's max, the max it
    // moves to and the rescale factor.
    let m = matrix_rows();
    let l = matrix_rows();
    let mx = matrix_rows();
    let mn = matrix_rows();
    let fr = matrix_rows();
    matrix_fill(m, neg_infinity());
    matrix_fill(l, 0.0);
    for f in 0..nfr {
        matrix_fill(o[f], 0.0);
    }

    // This lane's row (`sr` of its simdgroup's 16) and half of each row's columns, for
    // the key-by-key sums and the output. A padding row past `n_q` repeats the last.
    let sr = lane / 2;
    let half = lane % 2;
    let row = min(block + rg * 16 + sr, n_q - 1);
    let row_end = select(causal != 0, row + offset + 1, n_kv);
    // The simdgroup's last visible key + 1: blocks from it on are skipped.
    let sg_row = min(block + rg * 16 + 15, n_q - 1);
    let sg_end = select(causal != 0, sg_row + offset + 1, n_kv);
    // Its first row's last visible key + 1: keys from it on are masked for some row.
    let first_row = min(block + rg * 16, n_q - 1);
    let first_end = select(causal != 0, first_row + offset + 1, n_kv);
    // Key `k0 + c` is visible to row `r` of the simdgroup when `c − r` is below this
    // (causal; rows past `n_q` see every key below `n_kv`, the cap, as the last row does).
    let diag0 = select(
        causal != 0,
        (block + rg * 16 + offset + 1).cast::<i32>(),
        2_000_000_000i32,
    );
    // Scores in log2 units, so a weight is one `exp2`.
    let c2 = scale * 1.442695f32;
    let base_s = sg * 16 * sst;
    // The partner's slice (two parts): its partial scores over the other half of the dims.
    let base_partner = (rg * parts + (1 - sg % parts)) * 16 * sst;
    let base_p = sg * 16 * pst;
    // The query rows through the tiles' memory into each simdgroup's fragments, before
    // any copy targets the tiles.
    for i in 0..(rows * vecs / 128) {
        let vi = tid + 128 * i;
        let qrow = min(block + vi / vecs, n_q - 1);
        let base = ((q0 + qrow) * n_q_heads + h) * head_dim + (vi % vecs) * 8;
        let at = (vi / vecs) * dp + (vi % vecs) * 8;
        for e in 0..8 {
            store(kvsh[at + e], load(q[base + e]));
        }
    }
    barrier();
    for f in 0..nfr {
        matrix_load(fq[f], kvsh[rg * 16 * dp + d0 + f * 16], dp);
    }
    barrier();
    // Block 0's keys on their way into the K tile (a threadgroup with no keys to walk
    // copies nothing).
    if nblocks > 0 {
        for i in 0..lv {
            let vi = tid + 128 * i;
            let j = min(vi / vecs, n_kv - 1);
            let at = (vi / vecs) * dp + (vi % vecs) * 8;
            if quant == 0 {
                let src = prefill_kv_row(
                    seqs, k0, j, kvh, n_kv_heads, head_dim, psize, pshift, pslot, phead, paged,
                ) + (vi % vecs) * 8;
                copy_async(kvsh[at], k[src], 8);
            } else {
                let row = prefill_kv_row(
                    seqs, k0, j, kvh, n_kv_heads, 1, psize, pshift, pslot, phead, paged,
                );
                let sc = load_quantized(
                    k_codes,
                    k_scale,
                    kr,
                    i * 8,
                    row,
                    (vi % vecs) * 8,
                    head_dim,
                    quant,
                    group,
                );
                store_dequantized(kvsh, at, kr, i * 8, sc, quant);
            }
        }
    }
    commit_copies();
    for blk in range(0, nblocks, 1) {
        let b = blk * bk;
        // This block's keys have landed, and no thread still reads the previous block's
        // values: its values go into the V tile while the scores are taken.
        wait_copies(0);
        barrier();
        for i in 0..lv {
            let vi = tid + 128 * i;
            let j = min(b + vi / vecs, n_kv - 1);
            let at = vo + (vi / vecs) * dp + (vi % vecs) * 8;
            if quant == 0 {
                let src = prefill_kv_row(
                    seqs, k0, j, kvh, n_kv_heads, head_dim, psize, pshift, pslot, phead, paged,
                ) + (vi % vecs) * 8;
                copy_async(kvsh[at], v[src], 8);
            } else {
                let row = prefill_kv_row(
                    seqs, k0, j, kvh, n_kv_heads, 1, psize, pshift, pslot, phead, paged,
                );
                // Into registers now, into the V tile once the scores are taken.
                let sc = load_quantized(
                    v_codes,
                    v_scale,
                    vr,
                    i * 8,
                    row,
                    (vi % vecs) * 8,
                    head_dim,
                    quant,
                    group,
                );
                store(vsc[i], sc);
            }
        }
        commit_copies();
        // A simdgroup skips the blocks past its rows.
        let work = b < sg_end;
        if work {
            // Scores of the simdgroup's 16 rows against the block's key tiles over its
            // part of the dims (with two parts, also left for the partner).
            for t in 0..tiles {
                matrix_fill(s[t], 0.0);
                for f in 0..nfr {
                    matrix_load_t(fk, kvsh[t * 16 * dp + d0 + f * 16], dp);
                    matrix_mma(s[t], fq[f], fk, s[t]);
                }
                if parts > 1 {
                    matrix_store(s[t], fsh[base_s + t * 16], sst);
                }
            }
        }
        // A quantized block's values, loaded before the scores, go into the V tile.
        if quant != 0 {
            for i in 0..lv {
                let vi = tid + 128 * i;
                let at = vo + (vi / vecs) * dp + (vi % vecs) * 8;
                store_dequantized(kvsh, at, vr, i * 8, load(vsc[i]), quant);
            }
        }
        // This block's values have landed, no simdgroup still reads the key tile (the
        // next block's keys go into it during the softmax and P·V), and with two parts
        // the partner's scores are in.
        wait_copies(0);
        barrier();
        if blk + 1 < nblocks {
            for i in 0..lv {
                let vi = tid + 128 * i;
                let j = min(b + bk + vi / vecs, n_kv - 1);
                let at = (vi / vecs) * dp + (vi % vecs) * 8;
                if quant == 0 {
                    let src = prefill_kv_row(
                        seqs, k0, j, kvh, n_kv_heads, head_dim, psize, pshift, pslot, phead, paged,
                    ) + (vi % vecs) * 8;
                    copy_async(kvsh[at], k[src], 8);
                } else {
                    let row = prefill_kv_row(
                        seqs, k0, j, kvh, n_kv_heads, 1, psize, pshift, pslot, phead, paged,
                    );
                    // Into registers now, into the K tile once P·V is done.
                    let sc = load_quantized(
                        k_codes,
                        k_scale,
                        kr,
                        i * 8,
                        row,
                        (vi % vecs) * 8,
                        head_dim,
                        quant,
                        group,
                    );
                    store(ksc[i], sc);
                }
            }
        }
        commit_copies();
        if work {
            // The whole scores (two parts: plus the partner's), scaled, masked and folded
            // into the block's row max.
            matrix_fill(mx, neg_infinity());
            for t in 0..tiles {
                if parts > 1 {
                    matrix_load(tile, fsh[base_partner + t * 16], sst);
                    matrix_add(s[t], s[t], tile);
                }
                matrix_scale(s[t], c2);
                let k0t = (b + t * 16).cast::<i32>();
                matrix_mask(s[t], diag0 - k0t, n_kv.cast::<i32>() - k0t, neg_infinity());
                matrix_row_max(mx, s[t]);
            }
        }
        // Neither of a pair reuses its slice before the other has read it.
        if parts > 1 {
            barrier();
        }
        if work {
            // Whether a key of the block masked for some row has a V that is not finite
            // (its 0 weight would make that row NaN on fragments).
            let masked0 = select(first_end > b, first_end - b, 0);
            let mut odd = false;
            if masked0 < bk {
                for e in range(lane, (bk - masked0) * dw, 32) {
                    let at = vo + (masked0 + e / dw) * dp + d0 + e % dw;
                    odd = odd || !finite(load(kvsh[at]).cast::<f32>());
                }
            }
            let exact = simd_any(odd);
            // Every row sees key 0, so after the first block `m` is finite. The max moves
            // only past the one the weights were taken against by more than 8 in natural
            // units (so a weight stays below e⁸); rows whose max moved rescale.
            matrix_rows_raise(mn, m, mx, 11.541561f32);
            matrix_rows_exp2_diff(fr, m, mn);
            matrix_rows_mul(l, l, fr);
            matrix_rows_max(m, m, mn);
            for t in 0..tiles {
                // A −∞ score (masked, or a −∞ logit) weighs nothing even while the max is
                // still −∞ (a row whose every logit so far is −∞).
                matrix_row_exp2_sub(s[t], mn);
                matrix_row_sum(l, s[t]);
                matrix_scale(s[t], p_scale);
            }
            for f in 0..nfr {
                matrix_row_scale(o[f], fr);
            }
            if exact {
                // Each row adds the block's P·V over its visible keys only, through the
                // simdgroup's slices (rare).
                for t in 0..tiles {
                    matrix_store(s[t], psh[base_p + t * 16], pst);
                }
                for f in 0..nfr {
                    simd_barrier();
                    matrix_store(o[f], fsh[base_s], 16);
                    simd_barrier();
                    // Lane pair `sr` adds to its own row `sr`, eight columns each.
                    let at = base_s + sr * 16 + half * 8;
                    let col = vo + d0 + f * 16 + half * 8;
                    for e in range(0, 8 * bk, 1) {
                        let i = e / bk;
                        let j = e % bk;
                        let p = load(psh[base_p + sr * pst + j]).cast::<f32>();
                        let pv = p * load(kvsh[col + j * dp + i]).cast::<f32>();
                        let x = load(fsh[at + i]) + select(b + j < row_end, pv, 0.0f32);
                        store(fsh[at + i], x);
                    }
                    simd_barrier();
                    matrix_load(o[f], fsh[base_s], 16);
                }
            } else {
                // O += P·V over the block's key tiles, the weights straight from the
                // score registers.
                for t in 0..tiles {
                    matrix_convert(fp, s[t]);
                    for f in 0..nfr {
                        matrix_load(fk, kvsh[vo + t * 16 * dp + d0 + f * 16], dp);
                        matrix_mma(o[f], fp, fk, o[f]);
                    }
                }
            }
        }
        // A quantized next block's keys, loaded before the softmax, go into the K tile
        // (read again only after the next block's first barrier).
        if quant != 0 && blk + 1 < nblocks {
            for i in 0..lv {
                let vi = tid + 128 * i;
                let at = (vi / vecs) * dp + (vi % vecs) * 8;
                store_dequantized(kvsh, at, kr, i * 8, load(ksc[i]), quant);
            }
        }
    }

    // O / l for the real rows, this part's columns.
    let qrow = block + rg * 16 + sr;
    let o_row = ((q0 + qrow) * n_q_heads + h) * head_dim + d0;
    store_normalised_rows(
        o, l, tile, out, fsh, base_s, qrow, n_q, o_row, unscale, lane,
    );
}
