//! Prefill attention on warpgroup tile products, software-pipelined, for head_dim 64 and
//! 128: the layout of `prefill_tiles` (two warpgroups, 128 query rows, queries in swizzled
//! tiles, the softmax in registers, `P·V` with the weights as A operands in registers), with
//! blocks of 64 keys and the next block's scores `Q·Kᵀ` computed on the tensor cores while
//! this block's softmax runs on the ALUs: the scores alternate between two accumulator
//! arrays (the walk goes two blocks at a time), and per block the threadgroup meets once.
//!
//! Per block `i` (after one barrier, with `K_{i+1}` and `V_i` landed, `P_{i−1}·V_{i−1}`
//! possibly still on the tensor cores):
//! 1. start the copies of `K_{i+3}` (three key stages) and `V_{i+2}` (four value stages);
//! 2. start `S_{i+1} = Q·K_{i+1}ᵀ`;
//! 3. the softmax of `S_i` (scale, mask where needed, row max, lazy rescale, `exp2`, sums),
//!    under `P_{i−1}·V_{i−1}` and `S_{i+1}`;
//! 4. retire both, rescale `O`, convert `P_i` to A operands (or, when a masked key of the
//!    block has a value that is not finite, the exact key-by-key sum of `prefill_tiles`),
//!    zero `S_i`'s accumulators for `S_{i+2}`;
//! 5. start `O += P_i·V_i`, left in flight into the next block.
//!
//! Every accumulator change happens with no product in flight (ptxas serialises warpgroup
//! products around such changes otherwise).
//! The stages a block refills were last read by products every warpgroup retired before
//! the barrier. Head sizes above 128 need more threadgroup memory than these stages take
//! and run `prefill_tiles`.

use super::prefill_paged::prefill_page_scalars;
use super::prefill_tiles::{
    add_visible_pv, fetch_kv_block, fetch_queries, non_finite_values, store_output_slice,
};
use super::prefill_varlen::varlen_rows;
use crate::float_range::f32_range;
use tessera_macros::kernel;

/// Threadgroup memory of a launch at `head_dim`, in bytes (16-bit elements): the query
/// tiles, three key and four value stages of 64 keys, the weights' and outputs' slices of
/// the exact path.
pub fn prefill_pipelined_shared_bytes(head_dim: u32) -> usize {
    let d = head_dim as usize;
    2 * (128 * d + 7 * 64 * d + 8 * 16 * 72) + 4 * 8 * 256
}

/// The attention of `sdpa_prefill_tiles_kernel` (same arguments, grid and 256 threads) for
/// head_dim 64 or 128.
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 256)]
pub fn sdpa_prefill_pipelined_kernel<T, S>(
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
    // P enters the fragments scaled by 2⁻²⁴ where T has f32's exponent range (see
    // `prefill_mma`).
    let wide = f32_range(v);
    let p_scale = select(wide, 5.960_464_5e-8f32, 1.0f32);
    let unscale = select(wide, 16_777_216.0f32, 1.0f32);
    let rows = 128;
    let dt = head_dim / 64;
    let nfr = head_dim / 16;
    let pst = 72;
    let stage = 64 * head_dim;
    let tid = thread_id();
    let lane = simd_lane();
    let sg = simd_id();
    let h = group_id_x();
    let kvh = h / (n_q_heads / n_kv_heads);
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
    let nblocks = (kv_end + 63) / 64;

    // Query tile `c` at 8192c; key stage `i` at `i·stage` (tile `c` at 4096c, a row per
    // key); value stage `i` at `i·stage` (a [64 keys, head_dim] tile, `value_at`).
    let sq = threadgroup_array::<T>(rows * head_dim);
    let sk = threadgroup_array::<T>(3 * stage);
    let sv = threadgroup_array::<T>(4 * stage);
    let psh = threadgroup_array::<T>(8 * 16 * pst);
    let fsh = threadgroup_array::<f32>(8 * 256);
    let s0 = [matrix_acc(); 4];
    let s1 = [matrix_acc(); 4];
    let o = [matrix_acc(); nfr];
    let pa = [matrix_a::<T>(); 4];
    let tile = matrix_acc();
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
    let sr = lane / 2;
    let row = min(block + sg * 16 + sr, n_q - 1);
    let row_end = select(causal != 0, row + offset + 1, n_kv);
    let tg_first_end = select(causal != 0, min(block, n_q - 1) + offset + 1, n_kv);
    let sg_first_end = select(
        causal != 0,
        min(block + sg * 16, n_q - 1) + offset + 1,
        n_kv,
    );
    let diag0 = select(
        causal != 0,
        (block + sg * 16 + offset + 1).cast::<i32>(),
        2_000_000_000i32,
    );
    let c2 = scale * 1.442695f32;
    let base_s = sg * 256;
    let base_p = sg * 16 * pst;

    // Copies: the queries with keys 0 … 128 and values 0 … 64; then keys 128 … 192 and
    // values 64 … 128; block `i` adds keys of block `i + 3` and values of block `i + 2`.
    fetch_queries(sq, q, q0, block, n_q, h, n_q_heads, head_dim, tid);
    for i in 0..2 {
        let count = select(nblocks > i, 64, 0);
        fetch_kv_block(
            sk,
            i * stage,
            k,
            seqs,
            i * 64,
            count,
            n_kv,
            k0,
            kvh,
            n_kv_heads,
            head_dim,
            psize,
            pshift,
            pslot,
            phead,
            paged,
            0,
            tid,
        );
    }
    let count = select(nblocks > 0, 64, 0);
    fetch_kv_block(
        sv, 0, v, seqs, 0, count, n_kv, k0, kvh, n_kv_heads, head_dim, psize, pshift, pslot, phead,
        paged, 1, tid,
    );
    commit_copies();
    let count = select(nblocks > 2, 64, 0);
    fetch_kv_block(
        sk,
        2 * stage,
        k,
        seqs,
        128,
        count,
        n_kv,
        k0,
        kvh,
        n_kv_heads,
        head_dim,
        psize,
        pshift,
        pslot,
        phead,
        paged,
        0,
        tid,
    );
    let count = select(nblocks > 1, 64, 0);
    fetch_kv_block(
        sv, stage, v, seqs, 64, count, n_kv, k0, kvh, n_kv_heads, head_dim, psize, pshift, pslot,
        phead, paged, 1, tid,
    );
    commit_copies();
    // Block 0's scores.
    wait_copies(1);
    barrier();
    for t in 0..4 {
        matrix_fill(s0[t], 0.0);
        matrix_fill(s1[t], 0.0);
    }
    if nblocks > 0 {
        for c in 0..dt {
            matrix_mma_tiles_async(s0, sq[c * 8192], sk[c * 4096]);
        }
    }
    matrix_mma_wait(s0, 0);

    for pair in range(0, (nblocks + 1) / 2, 1) {
        let even = 2 * pair;
        // Block even: its keys' scores are in s0, its values have landed, and every
        // warpgroup has retired the product that read the stages refilled now.
        let b = even * 64;
        let more = even + 1 < nblocks;
        wait_copies(1);
        barrier();
        let ahead_k = select(even + 3 < nblocks, 64, 0);
        fetch_kv_block(
            sk,
            ((even + 3) % 3) * stage,
            k,
            seqs,
            b + 192,
            ahead_k,
            n_kv,
            k0,
            kvh,
            n_kv_heads,
            head_dim,
            psize,
            pshift,
            pslot,
            phead,
            paged,
            0,
            tid,
        );
        let ahead_v = select(even + 2 < nblocks, 64, 0);
        fetch_kv_block(
            sv,
            ((even + 2) % 4) * stage,
            v,
            seqs,
            b + 128,
            ahead_v,
            n_kv,
            k0,
            kvh,
            n_kv_heads,
            head_dim,
            psize,
            pshift,
            pslot,
            phead,
            paged,
            1,
            tid,
        );
        commit_copies();
        // The next block's scores (into accumulators zeroed a block ago) run on the tensor
        // cores under this block's softmax.
        if more {
            for c in 0..dt {
                matrix_mma_tiles_async(s1, sq[c * 8192], sk[((even + 1) % 3) * stage + c * 4096]);
            }
        }
        matrix_fill(mx, neg_infinity());
        let masks = b + 64 > sg_first_end || b + 64 > n_kv;
        for t in 0..4 {
            matrix_scale(s0[t], c2);
            if masks {
                let k0t = (b + t * 16).cast::<i32>();
                matrix_mask(s0[t], diag0 - k0t, n_kv.cast::<i32>() - k0t, neg_infinity());
            }
            matrix_row_max(mx, s0[t]);
        }
        matrix_rows_raise(mn, m, mx, 11.541561f32);
        matrix_rows_exp2_diff(fr, m, mn);
        matrix_rows_mul(l, l, fr);
        matrix_rows_max(m, m, mn);
        for t in 0..4 {
            matrix_row_exp2_sub(s0[t], mn);
            matrix_row_sum(l, s0[t]);
            matrix_scale(s0[t], p_scale);
        }
        // The previous block's P·V and the next block's scores retire: no product is in
        // flight while accumulators change below (a product in flight across such changes
        // would be serialised).
        matrix_mma_wait(o, 0);
        matrix_mma_wait(s1, 0);
        for f in 0..nfr {
            matrix_row_scale(o[f], fr);
        }
        let vb = (even % 4) * stage;
        // Whether a key masked for some row has a value that is not finite.
        let masked0 = max(tg_first_end, b);
        let bad_end = min(b + 64, n_kv);
        let mut exact = false;
        if masked0 < bad_end {
            exact = group_max(non_finite_values(
                sv, vb, b, masked0, bad_end, head_dim, tid,
            )) != 0;
        }
        if exact {
            for t in 0..4 {
                matrix_store(s0[t], psh[base_p + t * 16], pst);
            }
            for f in 0..nfr {
                simd_barrier();
                matrix_store(o[f], fsh[base_s], 16);
                simd_barrier();
                add_visible_pv(
                    fsh,
                    base_s,
                    psh,
                    base_p,
                    pst,
                    sv,
                    vb,
                    f * 16,
                    b,
                    row_end,
                    64,
                    head_dim,
                    lane,
                );
                simd_barrier();
                matrix_load(o[f], fsh[base_s], 16);
            }
        } else {
            for i in 0..4 {
                matrix_convert(pa[i], s0[i]);
            }
        }
        // These accumulators take the scores two blocks on.
        for t in 0..4 {
            matrix_fill(s0[t], 0.0);
        }
        // This block's P·V runs on under the next block's barrier, copies and scores.
        if !exact {
            matrix_mma_tiles_kn_async(o, pa, sv[vb]);
        }
        let odd = even + 1;
        if odd < nblocks {
            // Block odd: its keys' scores are in s1, its values have landed, and every
            // warpgroup has retired the product that read the stages refilled now.
            let b = odd * 64;
            let more = odd + 1 < nblocks;
            wait_copies(1);
            barrier();
            let ahead_k = select(odd + 3 < nblocks, 64, 0);
            fetch_kv_block(
                sk,
                ((odd + 3) % 3) * stage,
                k,
                seqs,
                b + 192,
                ahead_k,
                n_kv,
                k0,
                kvh,
                n_kv_heads,
                head_dim,
                psize,
                pshift,
                pslot,
                phead,
                paged,
                0,
                tid,
            );
            let ahead_v = select(odd + 2 < nblocks, 64, 0);
            fetch_kv_block(
                sv,
                ((odd + 2) % 4) * stage,
                v,
                seqs,
                b + 128,
                ahead_v,
                n_kv,
                k0,
                kvh,
                n_kv_heads,
                head_dim,
                psize,
                pshift,
                pslot,
                phead,
                paged,
                1,
                tid,
            );
            commit_copies();
            // The next block's scores (into accumulators zeroed a block ago) run on the tensor
            // cores under this block's softmax.
            if more {
                for c in 0..dt {
                    matrix_mma_tiles_async(
                        s0,
                        sq[c * 8192],
                        sk[((odd + 1) % 3) * stage + c * 4096],
                    );
                }
            }
            matrix_fill(mx, neg_infinity());
            let masks = b + 64 > sg_first_end || b + 64 > n_kv;
            for t in 0..4 {
                matrix_scale(s1[t], c2);
                if masks {
                    let k0t = (b + t * 16).cast::<i32>();
                    matrix_mask(s1[t], diag0 - k0t, n_kv.cast::<i32>() - k0t, neg_infinity());
                }
                matrix_row_max(mx, s1[t]);
            }
            matrix_rows_raise(mn, m, mx, 11.541561f32);
            matrix_rows_exp2_diff(fr, m, mn);
            matrix_rows_mul(l, l, fr);
            matrix_rows_max(m, m, mn);
            for t in 0..4 {
                matrix_row_exp2_sub(s1[t], mn);
                matrix_row_sum(l, s1[t]);
                matrix_scale(s1[t], p_scale);
            }
            // The previous block's P·V and the next block's scores retire: no product is in
            // flight while accumulators change below (a product in flight across such changes
            // would be serialised).
            matrix_mma_wait(o, 0);
            matrix_mma_wait(s0, 0);
            for f in 0..nfr {
                matrix_row_scale(o[f], fr);
            }
            let vb = (odd % 4) * stage;
            // Whether a key masked for some row has a value that is not finite.
            let masked0 = max(tg_first_end, b);
            let bad_end = min(b + 64, n_kv);
            let mut exact = false;
            if masked0 < bad_end {
                exact = group_max(non_finite_values(
                    sv, vb, b, masked0, bad_end, head_dim, tid,
                )) != 0;
            }
            if exact {
                for t in 0..4 {
                    matrix_store(s1[t], psh[base_p + t * 16], pst);
                }
                for f in 0..nfr {
                    simd_barrier();
                    matrix_store(o[f], fsh[base_s], 16);
                    simd_barrier();
                    add_visible_pv(
                        fsh,
                        base_s,
                        psh,
                        base_p,
                        pst,
                        sv,
                        vb,
                        f * 16,
                        b,
                        row_end,
                        64,
                        head_dim,
                        lane,
                    );
                    simd_barrier();
                    matrix_load(o[f], fsh[base_s], 16);
                }
            } else {
                for i in 0..4 {
                    matrix_convert(pa[i], s1[i]);
                }
            }
            // These accumulators take the scores two blocks on.
            for t in 0..4 {
                matrix_fill(s1[t], 0.0);
            }
            // This block's P·V runs on under the next block's barrier, copies and scores.
            if !exact {
                matrix_mma_tiles_kn_async(o, pa, sv[vb]);
            }
        }
    }
    matrix_mma_wait(o, 0);
    // (A threadgroup with no keys to walk still copied its queries.)
    wait_copies(0);

    // The row sums to their lanes, then O / l for the real rows.
    matrix_fill(tile, 1.0);
    matrix_row_scale(tile, l);
    matrix_store(tile, fsh[base_s], 16);
    simd_barrier();
    let lr = load(fsh[base_s + sr * 16]);
    let qrow = block + sg * 16 + sr;
    for f in 0..nfr {
        simd_barrier();
        matrix_store(o[f], fsh[base_s], 16);
        simd_barrier();
        let o_at = ((q0 + qrow) * n_q_heads + h) * head_dim + f * 16;
        store_output_slice(out, fsh, base_s, lr, unscale, qrow, n_q, o_at, lane);
    }
}
