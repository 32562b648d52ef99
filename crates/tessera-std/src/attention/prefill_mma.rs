//! Prefill attention on matrix fragments: flash attention for f16/bf16 at every prefill
//! head_dim. A threadgroup of four simdgroups serves 64 consecutive query rows of one head,
//! 16 rows per simdgroup, whose queries stay in A fragments for the whole walk. Blocks of 32
//! keys reach padded threadgroup tiles by asynchronous 16-byte copies, pipelined across
//! the two tiles: a block's values are copied while its scores are taken, and the next
//! block's keys while its softmax and `P·V` run. Per block a simdgroup computes its 16 × 32
//! scores as fragments, takes
//! the row softmax through its own slice of threadgroup memory, and adds `P·V` into
//! `head_dim / 16` accumulator fragments (with one part, a simdgroup skips the blocks past
//! its rows' last visible key). Heads wider than 128 are split in two column parts: a pair of simdgroups
//! shares 16 rows (32 rows per threadgroup, blocks of 16 keys), each scoring over its half
//! of the dims, the two partial scores meeting in threadgroup memory, and each adding `P·V`
//! into its half of the output. The running max is lazy: a row's output is rescaled only
//! when its max passes the one its weights were taken against by more than 8 (so a weight
//! stays below e⁸). Two threadgroup barriers per block (each after a wait for the tile it
//! hands over), one more with two parts; the rest is ordered by simdgroup barriers.
//!
//! A key masked for one of a simdgroup's rows but not all (causality inside its last
//! blocks, or padding past `n_kv`) still sits in the V tile its `P·V` fragments multiply:
//! a weight of exactly 0 times an infinite or NaN V is NaN. So in the blocks holding such
//! keys a simdgroup first reads their V; when one is not finite it sums that block's `P·V`
//! key by key, each row over its visible keys only, instead of on fragments. Other blocks
//! hold no masked key and skip the check.

use super::prefill_paged::{prefill_kv_row, prefill_page_scalars};
use super::prefill_varlen::varlen_rows;
use super::softmax::normalise;
use crate::float_range::{f32_range, finite};
use tessera_macros::kernel;

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
/// pools and `seqs` also holds the pages (`prefill_paged`).
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 128)]
pub fn sdpa_prefill_mma_kernel<T, S>(
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
    #[constexpr] varlen: u32,
    #[constexpr] paged: u32,
) {
    // P·V sums grow with the softmax sum: where T has f32's exponent range (bf16), P
    // enters the fragments scaled by 2⁻²⁴ (exact) and the output is scaled back, so V near
    // f32's range cannot overflow the f32 accumulators; f16 V cannot, and f16 has no room
    // below, so it keeps P as is.
    let wide = f32_range(v);
    let p_scale = select(wide, 5.960_464_5e-8f32, 1.0f32);
    let unscale = select(wide, 16_777_216.0f32, 1.0f32);
    // Column parts; query rows per threadgroup; keys per block (the K and V tiles, which
    // hold the queries before the walk, and the score and weight slices fit the 32 KiB of
    // threadgroup memory a portable kernel may use); dims per part.
    let parts = (head_dim + 127) / 128;
    let rows = 64 / parts;
    let bk = 32 / parts;
    let dw = head_dim / parts;
    let dp = head_dim + 8;
    let vecs = head_dim / 8;
    let lv = bk * vecs / 128;
    let nfr = dw / 16;
    let tiles = bk / 16;
    let kpl = bk / 2;
    let sst = bk + 4;
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
    let fsh = threadgroup_array::<f32>(4 * 16 * sst);
    let psh = threadgroup_array::<T>(4 * 16 * pst);
    let sv = stack_array::<f32>(kpl);
    let fq0 = matrix_a::<T>();
    let fq1 = matrix_a::<T>();
    let fq2 = matrix_a::<T>();
    let fq3 = matrix_a::<T>();
    let fq4 = matrix_a::<T>();
    let fq5 = matrix_a::<T>();
    let fq6 = matrix_a::<T>();
    let fq7 = matrix_a::<T>();
    let fp = matrix_a::<T>();
    let fk = matrix_b::<T>();
    let sacc = matrix_acc();
    let o0 = matrix_acc();
    let o1 = matrix_acc();
    let o2 = matrix_acc();
    let o3 = matrix_acc();
    let o4 = matrix_acc();
    let o5 = matrix_acc();
    let o6 = matrix_acc();
    let o7 = matrix_acc();
    matrix_fill(o0, 0.0);
    matrix_fill(o1, 0.0);
    matrix_fill(o2, 0.0);
    matrix_fill(o3, 0.0);
    matrix_fill(o4, 0.0);
    matrix_fill(o5, 0.0);
    matrix_fill(o6, 0.0);
    matrix_fill(o7, 0.0);

    // This lane's softmax row (`sr` of its simdgroup's 16) and half of each block's keys;
    // `l` is its half's share of the row sum. A padding row past `n_q` repeats the last.
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
    // Scores in log2 units, so a weight is one `exp2`.
    let c2 = scale * 1.442695f32;
    let base_s = sg * 16 * sst;
    // The partner's score slice (two parts): the other half of the same rows' dims.
    let base_partner = (rg * parts + (1 - sg % parts)) * 16 * sst;
    let base_p = sg * 16 * pst;
    let mut m = neg_infinity();
    let mut l = 0.0f32;
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
        let at = rg * 16 * dp + d0 + f * 16;
        if f == 0 {
            matrix_load(fq0, kvsh[at], dp);
        }
        if f == 1 {
            matrix_load(fq1, kvsh[at], dp);
        }
        if f == 2 {
            matrix_load(fq2, kvsh[at], dp);
        }
        if f == 3 {
            matrix_load(fq3, kvsh[at], dp);
        }
        if f == 4 {
            matrix_load(fq4, kvsh[at], dp);
        }
        if f == 5 {
            matrix_load(fq5, kvsh[at], dp);
        }
        if f == 6 {
            matrix_load(fq6, kvsh[at], dp);
        }
        if f == 7 {
            matrix_load(fq7, kvsh[at], dp);
        }
    }
    barrier();
    // Block 0's keys on their way into the K tile (a threadgroup with no keys to walk
    // copies nothing).
    if nblocks > 0 {
        for i in 0..lv {
            let vi = tid + 128 * i;
            let j = min(vi / vecs, n_kv - 1);
            let src = prefill_kv_row(
                seqs, k0, j, kvh, n_kv_heads, head_dim, psize, pshift, pslot, phead, paged,
            ) + (vi % vecs) * 8;
            copy_async(kvsh[(vi / vecs) * dp + (vi % vecs) * 8], k[src], 8);
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
            let src = prefill_kv_row(
                seqs, k0, j, kvh, n_kv_heads, head_dim, psize, pshift, pslot, phead, paged,
            ) + (vi % vecs) * 8;
            copy_async(kvsh[vo + (vi / vecs) * dp + (vi % vecs) * 8], v[src], 8);
        }
        commit_copies();
        // A simdgroup skips the blocks past its rows; with two parts the pair still meets
        // the other groups at the barriers between the sections.
        let work = b < sg_end || parts > 1;
        if work {
            // Scores of the simdgroup's 16 rows against the block's key tiles, over
            // its part of the dims.
            for t in 0..tiles {
                matrix_fill(sacc, 0.0);
                for f in 0..nfr {
                    matrix_load_t(fk, kvsh[t * 16 * dp + d0 + f * 16], dp);
                    if f == 0 {
                        matrix_mma(sacc, fq0, fk, sacc);
                    }
                    if f == 1 {
                        matrix_mma(sacc, fq1, fk, sacc);
                    }
                    if f == 2 {
                        matrix_mma(sacc, fq2, fk, sacc);
                    }
                    if f == 3 {
                        matrix_mma(sacc, fq3, fk, sacc);
                    }
                    if f == 4 {
                        matrix_mma(sacc, fq4, fk, sacc);
                    }
                    if f == 5 {
                        matrix_mma(sacc, fq5, fk, sacc);
                    }
                    if f == 6 {
                        matrix_mma(sacc, fq6, fk, sacc);
                    }
                    if f == 7 {
                        matrix_mma(sacc, fq7, fk, sacc);
                    }
                }
                matrix_store(sacc, fsh[base_s + t * 16], sst);
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
                let src = prefill_kv_row(
                    seqs, k0, j, kvh, n_kv_heads, head_dim, psize, pshift, pslot, phead, paged,
                ) + (vi % vecs) * 8;
                copy_async(kvsh[(vi / vecs) * dp + (vi % vecs) * 8], k[src], 8);
            }
        }
        commit_copies();
        let mut mx = neg_infinity();
        // (Indices as `row start + i`, so the reads become 16-byte loads.)
        let srow = base_s + sr * sst + half * kpl;
        let prow = base_partner + sr * sst + half * kpl;
        let key0 = b + half * kpl;
        if work {
            for i in 0..kpl {
                let mut s = load(fsh[srow + i]);
                if parts > 1 {
                    s += load(fsh[prow + i]);
                }
                let sc = select(key0 + i < row_end, s * c2, neg_infinity());
                store(sv[i], sc);
                mx = max(mx, sc);
            }
        }
        // Both of a pair take the same softmax; neither reuses its slice before the
        // other has read it.
        if parts > 1 {
            barrier();
        }
        if work {
            mx = max(mx, simd_shuffle_xor(mx, 1));
            // Every row sees key 0, so after the first block `m` is finite. (A margin of 8
            // in natural units.)
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
            let grow = mx > m + 11.541561f32;
            let mn = select(grow, mx, m);
            let fr = select(grow, exp2(m - mn), 1.0f32);
            l *= fr;
            m = mn;
            let mut ls = 0.0f32;
            for i in 0..kpl {
                // A −∞ score (masked, or a −∞ logit) weighs nothing even while `m` is
                // still −∞ (a row whose every logit so far is −∞).
                let x = load(sv[i]);
                let p = select(x == neg_infinity(), 0.0f32, exp2(x - m));
                ls += p;
                store(
                    psh[base_p + sr * pst + half * kpl + i],
                    (p * p_scale).cast::<T>(),
                );
            }
            l += ls;
            simd_barrier();
            // Rows whose max moved rescale their outputs through the score slice; with
            // `exact`, each row also adds the block's P·V over its visible keys there.
            if simd_any(fr < 1.0f32) || exact {
                for f in 0..nfr {
                    if f > 0 {
                        simd_barrier();
                    }
                    if f == 0 {
                        matrix_store(o0, fsh[base_s], 16);
                    }
                    if f == 1 {
                        matrix_store(o1, fsh[base_s], 16);
                    }
                    if f == 2 {
                        matrix_store(o2, fsh[base_s], 16);
                    }
                    if f == 3 {
                        matrix_store(o3, fsh[base_s], 16);
                    }
                    if f == 4 {
                        matrix_store(o4, fsh[base_s], 16);
                    }
                    if f == 5 {
                        matrix_store(o5, fsh[base_s], 16);
                    }
                    if f == 6 {
                        matrix_store(o6, fsh[base_s], 16);
                    }
                    if f == 7 {
                        matrix_store(o7, fsh[base_s], 16);
                    }
                    simd_barrier();
                    // Lane pair `sr` scales its own row `sr`, eight columns each.
                    let at = base_s + sr * 16 + half * 8;
                    for i in 0..8 {
                        store(fsh[at + i], load(fsh[at + i]) * fr);
                    }
                    // With `exact`, the block's P·V over the row's visible keys: a
                    // loop left rolled (rare), so this one still unrolls.
                    let col = vo + d0 + f * 16 + half * 8;
                    for e in range(0, select(exact, 8 * bk, 0), 1) {
                        let i = e / bk;
                        let j = e % bk;
                        let p = load(psh[base_p + sr * pst + j]).cast::<f32>();
                        let pv = p * load(kvsh[col + j * dp + i]).cast::<f32>();
                        let x = load(fsh[at + i]) + select(b + j < row_end, pv, 0.0f32);
                        store(fsh[at + i], x);
                    }
                    simd_barrier();
                    if f == 0 {
                        matrix_load(o0, fsh[base_s], 16);
                    }
                    if f == 1 {
                        matrix_load(o1, fsh[base_s], 16);
                    }
                    if f == 2 {
                        matrix_load(o2, fsh[base_s], 16);
                    }
                    if f == 3 {
                        matrix_load(o3, fsh[base_s], 16);
                    }
                    if f == 4 {
                        matrix_load(o4, fsh[base_s], 16);
                    }
                    if f == 5 {
                        matrix_load(o5, fsh[base_s], 16);
                    }
                    if f == 6 {
                        matrix_load(o6, fsh[base_s], 16);
                    }
                    if f == 7 {
                        matrix_load(o7, fsh[base_s], 16);
                    }
                }
            }
            // O += P·V over the block's key tiles (summed above where `exact`).
            if !exact {
                for t in 0..tiles {
                    matrix_load(fp, psh[base_p + t * 16], pst);
                    for f in 0..nfr {
                        matrix_load(fk, kvsh[vo + t * 16 * dp + d0 + f * 16], dp);
                        if f == 0 {
                            matrix_mma(o0, fp, fk, o0);
                        }
                        if f == 1 {
                            matrix_mma(o1, fp, fk, o1);
                        }
                        if f == 2 {
                            matrix_mma(o2, fp, fk, o2);
                        }
                        if f == 3 {
                            matrix_mma(o3, fp, fk, o3);
                        }
                        if f == 4 {
                            matrix_mma(o4, fp, fk, o4);
                        }
                        if f == 5 {
                            matrix_mma(o5, fp, fk, o5);
                        }
                        if f == 6 {
                            matrix_mma(o6, fp, fk, o6);
                        }
                        if f == 7 {
                            matrix_mma(o7, fp, fk, o7);
                        }
                    }
                }
            }
        }
    }

    // The row sums, then O / l for the real rows: lane pair `sr` writes row `sr`, eight
    // columns (16 bytes) each.
    l += simd_shuffle_xor(l, 1);
    let qrow = block + rg * 16 + sr;
    for f in 0..nfr {
        simd_barrier();
        if f == 0 {
            matrix_store(o0, fsh[base_s], 16);
        }
        if f == 1 {
            matrix_store(o1, fsh[base_s], 16);
        }
        if f == 2 {
            matrix_store(o2, fsh[base_s], 16);
        }
        if f == 3 {
            matrix_store(o3, fsh[base_s], 16);
        }
        if f == 4 {
            matrix_store(o4, fsh[base_s], 16);
        }
        if f == 5 {
            matrix_store(o5, fsh[base_s], 16);
        }
        if f == 6 {
            matrix_store(o6, fsh[base_s], 16);
        }
        if f == 7 {
            matrix_store(o7, fsh[base_s], 16);
        }
        simd_barrier();
        if qrow < n_q {
            let at = base_s + sr * 16 + half * 8;
            let o_at = ((q0 + qrow) * n_q_heads + h) * head_dim + d0 + f * 16 + half * 8;
            for i in 0..8 {
                let x = normalise(load(fsh[at + i]), l) * unscale;
                store(out[o_at + i], x.cast::<T>());
            }
        }
    }
}
