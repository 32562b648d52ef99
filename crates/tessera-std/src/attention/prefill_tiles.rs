//! Prefill attention on warpgroup tile products: flash attention for f16/bf16 at head_dim
//! 64, 128, 192 and 256 where the device has the threadgroup memory (about 200 KiB). A
//! threadgroup of two warpgroups (eight simdgroups, 256 threads) serves 128 consecutive
//! query rows of one head, 16 rows per simdgroup. The queries sit in swizzled tiles for the
//! whole walk; blocks of `bk` keys (128, or 64 above head_dim 128) arrive by asynchronous
//! 16-byte copies into two buffers, one block ahead: the next block's keys and values
//! are copied (from the block's second barrier on) while this block's `P·V` and the next
//! block's first barrier and scores run; `P·V` is left in flight until the next block's
//! scores are waited for. Per block:
//! - the scores `Q·Kᵀ` are one tile product per 64 dims (`matrix_mma_tiles_async`, K
//!   tiles with a row per key), into `bk / 16` accumulators per simdgroup;
//! - the online softmax stays in registers (scale, mask only in blocks that hold a masked
//!   key, row max, lazy rescale, `exp2`, row sums) as in `prefill_mma`;
//! - the weights are converted in registers to A operands (`matrix_convert`) and
//!   `O += P·V` is a tile product with A from registers (`matrix_mma_tiles_kn_async`, the
//!   V tile `[keys, dims]` as copied, rows along K), into `head_dim / 16` accumulators.
//!
//! A key masked for some row but not all (causality, in the blocks on the diagonal) still
//! sits in the V tile every row's `P·V` multiplies: a weight of exactly 0 times an infinite
//! or NaN V is NaN. In such blocks the threads first check those keys' V; when one is not
//! finite the whole threadgroup sums that block's `P·V` key by key through threadgroup
//! slices, each row over its visible keys only (rare; keys past `n_kv` are zero-filled and
//! never need it).
//!
//! A quantized paged cache (`quant` 1: int8, 2: e4m3, 3: int4, as in `prefill_mma`) lands
//! each block as values instead of copies: the threads load the codes and scales and store
//! `code · scale` (f32, rounded to q's dtype) where the copies would have landed, the first
//! block before the walk and each next block into the other buffers right after this
//! block's `P·V` is issued, so the loads overlap the product.

use super::kv_quant::kv_code_value;
use super::kv_quant_int4::kv_nibble_value;
use super::prefill_paged::{prefill_kv_row, prefill_page_scalars};
use super::prefill_varlen::varlen_rows;
use super::softmax::normalise;
use crate::float_range::{f32_range, finite};
use crate::matmul::pipelined::swizzled;
use tessera_macros::{func, kernel};

/// Index of element `(key, dim)` of a value tile of `head_dim` columns: 64-key tiles
/// `64·head_dim` apart, each `[64 keys, head_dim]` in 64-column blocks 4096 apart, rows
/// along K (what `matrix_mma_tiles_kn` reads).
#[func]
pub fn value_at(key: u32, dim: u32, head_dim: u32) -> u32 {
    (key / 64) * 64 * head_dim + (dim / 64) * 4096 + swizzled(key % 64, dim % 64)
}

/// Starts the 16-byte copies of keys `key0 … key0 + count` (those below `n_kv`; the rest
/// zero-filled) of KV head `kvh` into the tile at `at` of `dst`: as key tiles (`values`
/// 0: 64-dim tile `c` at `at + c·count·64`, a row per key) or as a value tile (`values` 1,
/// see [`value_at`]). The rows are found as `prefill_kv_row` finds them.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn fetch_kv_block<T, S>(
    mut dst: Mem<T>,
    at: u32,
    src: Mem<T>,
    seqs: Mem<S>,
    key0: u32,
    count: u32,
    n_kv: u32,
    k0: u32,
    kvh: u32,
    n_kv_heads: u32,
    head_dim: u32,
    page: u32,
    shift: u32,
    slot: u32,
    head: u32,
    paged: u32,
    values: u32,
    tid: u32,
) {
    // A thread keeps one 16-byte chunk of a row and walks rows `passes` apart.
    let chunks = head_dim / 8;
    let passes = 256 / chunks;
    let c8 = (tid % chunks) * 8;
    let first = select(tid < passes * chunks, tid / chunks, count);
    for j in range(first, count, passes) {
        let ok = key0 + j < n_kv;
        let row = prefill_kv_row(
            seqs,
            k0,
            min(key0 + j, n_kv - 1),
            kvh,
            n_kv_heads,
            head_dim,
            page,
            shift,
            slot,
            head,
            paged,
        );
        let to = select(
            values != 0,
            value_at(j, c8, head_dim),
            (c8 / 64) * count * 64 + swizzled(j, c8 % 64),
        );
        copy_async_or_zero(dst[at + to], src[select(ok, row + c8, 0)], 8, ok);
    }
}

/// Stores the values of keys `key0 … key0 + count` (those below `n_kv`; the rest zeros)
/// of KV head `kvh` of a quantized cache (`quant` 1: int8, 2: e4m3, 3: int4 with `group`
/// dims a scale; `codes` and `scales` as `kv_quant_append` writes them) into the tile at
/// `at` of `dst`, where [`fetch_kv_block`] lands a float cache's elements: each `code ·
/// scale` computed in f32 and rounded to `T`. The loads are plain, so the stores wait for
/// them; the kernel issues this under an asynchronous product.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn fetch_quant_kv_block<T, S, U, F>(
    mut dst: Mem<T>,
    at: u32,
    codes: Mem<U>,
    scales: Mem<F>,
    seqs: Mem<S>,
    key0: u32,
    count: u32,
    n_kv: u32,
    k0: u32,
    kvh: u32,
    n_kv_heads: u32,
    head_dim: u32,
    page: u32,
    shift: u32,
    slot: u32,
    head: u32,
    paged: u32,
    values: u32,
    tid: u32,
    quant: u32,
    group: u32,
) {
    let chunks = head_dim / 8;
    let passes = 256 / chunks;
    let c8 = (tid % chunks) * 8;
    let first = select(tid < passes * chunks, tid / chunks, count);
    for j in range(first, count, passes) {
        let ok = key0 + j < n_kv;
        let row = prefill_kv_row(
            seqs,
            k0,
            min(key0 + j, n_kv - 1),
            kvh,
            n_kv_heads,
            1,
            page,
            shift,
            slot,
            head,
            paged,
        );
        let to = select(
            values != 0,
            value_at(j, c8, head_dim),
            (c8 / 64) * count * 64 + swizzled(j, c8 % 64),
        );
        let sc = select(
            ok,
            load(scales[row * (head_dim / group) + c8 / group]).cast::<f32>(),
            0.0f32,
        );
        if quant == 3 {
            let base = row * (head_dim / 2) + c8 / 2;
            for e in 0..4 {
                let byte = load(codes[base + e]).cast::<u32>();
                store(
                    dst[at + to + 2 * e],
                    (kv_nibble_value(byte, 0) * sc).cast::<T>(),
                );
                store(
                    dst[at + to + 2 * e + 1],
                    (kv_nibble_value(byte, 1) * sc).cast::<T>(),
                );
            }
        } else {
            let base = row * head_dim + c8;
            for e in 0..8 {
                let code = load(codes[base + e]).cast::<u32>();
                store(
                    dst[at + to + e],
                    (kv_code_value(code, quant / 2) * sc).cast::<T>(),
                );
            }
        }
    }
}

/// Starts the 16-byte copies of query rows `block … block + 128` of head `h` (those below
/// `n_q`; the rest zero-filled) into the query tiles of `dst` (64-dim tile `c` at 8192c,
/// a row per query).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn fetch_queries<T>(
    mut dst: Mem<T>,
    src: Mem<T>,
    q0: u32,
    block: u32,
    n_q: u32,
    h: u32,
    n_q_heads: u32,
    head_dim: u32,
    tid: u32,
) {
    let chunks = head_dim / 8;
    let passes = 256 / chunks;
    let c8 = (tid % chunks) * 8;
    let first = select(tid < passes * chunks, tid / chunks, 128);
    for r in range(first, 128, passes) {
        let ok = block + r < n_q;
        let from = select(ok, ((q0 + block + r) * n_q_heads + h) * head_dim + c8, 0);
        copy_async_or_zero(
            dst[(c8 / 64) * 8192 + swizzled(r, c8 % 64)],
            src[from],
            8,
            ok,
        );
    }
}

/// 1 if a value of keys `from … to` (block keys from `b`) in the value tile at `at` of
/// `sv` is not finite among those this thread checks, else 0 (`group_max` of it over the
/// threadgroup answers for the block).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn non_finite_values<T>(
    sv: Mem<T>,
    at: u32,
    b: u32,
    from: u32,
    to: u32,
    head_dim: u32,
    tid: u32,
) -> u32 {
    let mut odd = 0u32;
    for e in range(tid, (to - from) * head_dim, 256) {
        let j = from - b + e / head_dim;
        let x = load(sv[at + value_at(j, e % head_dim, head_dim)]).cast::<f32>();
        odd = odd | select(finite(x), 0u32, 1u32);
    }
    odd
}

/// The exact path's sum for one 16-column slice: lane pair `r` of the simdgroup adds to
/// row `r` of the 16 × 16 f32 slice at `at` of `fsh` (eight columns each) the block's
/// `P·V` over the keys its row sees (`b + j < row_end`), P from row `r` of the weights at
/// `p_at` of `psh` (stride `pst`), V columns `col …` of the value tile at `vb` of `sv`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn add_visible_pv<T>(
    mut fsh: Mem<f32>,
    at: u32,
    psh: Mem<T>,
    p_at: u32,
    pst: u32,
    sv: Mem<T>,
    vb: u32,
    col: u32,
    b: u32,
    row_end: u32,
    keys: u32,
    head_dim: u32,
    lane: u32,
) {
    let r = lane / 2;
    let to = at + r * 16 + (lane % 2) * 8;
    let c0 = col + (lane % 2) * 8;
    for e in range(0, 8 * keys, 1) {
        let i = e / keys;
        let j = e % keys;
        let p = load(psh[p_at + r * pst + j]).cast::<f32>();
        let pv = p * load(sv[vb + value_at(j, c0 + i, head_dim)]).cast::<f32>();
        let x = load(fsh[to + i]) + select(b + j < row_end, pv, 0.0f32);
        store(fsh[to + i], x);
    }
}

/// Lane pair `r` of the simdgroup writes row `block + 16·sg + r` (if below `n_q`), eight
/// columns from `col`, of the output: the 16 × 16 f32 slice at `at` of `fsh` over the
/// row's sum `lr`, times `unscale`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn store_output_slice<T>(
    mut out: Mem<T>,
    fsh: Mem<f32>,
    at: u32,
    lr: f32,
    unscale: f32,
    qrow: u32,
    n_q: u32,
    o_at: u32,
    lane: u32,
) {
    if qrow < n_q {
        let from = at + (lane / 2) * 16 + (lane % 2) * 8;
        let to = o_at + (lane % 2) * 8;
        for i in 0..8 {
            let x = normalise(load(fsh[from + i]), lr) * unscale;
            store(out[to + i], x.cast::<T>());
        }
    }
}

/// The attention's output of a simdgroup: `o` (its 16 rows, 16 columns an accumulator)
/// over the row sums `l`, times `unscale`, to the rows of `out` from element `o_row` (row
/// `qrow`, this lane pair's, written only below `n_q`), through the 16 × 16 f32 slice at
/// `at` of `fsh`; `tile` is scratch. Lane pair `r` writes row `r`, eight columns each.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn store_normalised_rows<T>(
    o: [MatrixAcc],
    l: MatrixRows,
    tile: MatrixAcc,
    mut out: Mem<T>,
    mut fsh: Mem<f32>,
    at: u32,
    qrow: u32,
    n_q: u32,
    o_row: u32,
    unscale: f32,
    lane: u32,
) {
    // The row sums to their lanes.
    matrix_fill(tile, 1.0);
    matrix_row_scale(tile, l);
    matrix_store(tile, fsh[at], 16);
    simd_barrier();
    let lr = load(fsh[at + (lane / 2) * 16]);
    for f in 0..o.len() {
        simd_barrier();
        matrix_store(o[f], fsh[at], 16);
        simd_barrier();
        store_output_slice(out, fsh, at, lr, unscale, qrow, n_q, o_row + f * 16, lane);
    }
}

/// Query rows per threadgroup.
pub const PREFILL_TILE_ROWS: u32 = 128;

/// Keys per block at a head_dim.
pub fn prefill_tile_keys(head_dim: u32) -> u32 {
    if head_dim > 128 {
        64
    } else {
        128
    }
}

/// Threadgroup memory of a launch at `head_dim`, in bytes (16-bit elements): the query
/// tiles, two key and two value buffers, the weights' and outputs' slices of the exact
/// path.
pub fn prefill_tile_shared_bytes(head_dim: u32) -> usize {
    let bk = prefill_tile_keys(head_dim) as usize;
    let d = head_dim as usize;
    2 * (PREFILL_TILE_ROWS as usize * d + 4 * bk * d + 8 * 16 * (bk + 8)) + 4 * 8 * 256
}

/// Flash attention over the keys `j ≤ n_kv − n_q + i` of query row `i` (causal) or all
/// `n_kv`; the arguments and outputs of `sdpa_prefill_mma_kernel` (varlen and paged
/// included). Grid: (n_q_heads, ⌈n_q / 128⌉, sequences), the last query blocks (the most
/// keys when causal) in the first threadgroups; 256 threads. With `quant` (and `paged`),
/// the pools are `k_codes` and `v_codes` with their scales, read as
/// [`fetch_quant_kv_block`] says (a block's values stored under the previous block's
/// `P·V`), and `k`, `v` are stand-ins; with `quant` 0 the codes and scales are stand-ins,
/// never read.
#[allow(clippy::too_many_arguments)]
#[kernel(group_size = 256)]
pub fn sdpa_prefill_tiles_kernel<T, S, U, F>(
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
    // P enters the fragments scaled by 2⁻²⁴ where T has f32's exponent range (see
    // `prefill_mma`).
    let wide = f32_range(v);
    let p_scale = select(wide, 5.960_464_5e-8f32, 1.0f32);
    let unscale = select(wide, 16_777_216.0f32, 1.0f32);
    let rows = 128;
    let bk = 128 / ((head_dim + 127) / 128);
    // 64-dim tiles of a row, score accumulators.
    let dt = head_dim / 64;
    let tiles = bk / 16;
    let nfr = head_dim / 16;
    let pst = bk + 8;
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
    let nblocks = (kv_end + bk - 1) / bk;

    // Query tile `c` (dims 64c …) at 8192c; key buffer `i` at `i·bk·head_dim` (tile `c`
    // at `c·bk·64`, a row per key); value buffer `i` likewise (key tile `t` at
    // `t·64·head_dim`, a [64 keys, head_dim] tile in 64-column blocks 4096 apart).
    let sq = threadgroup_array::<T>(rows * head_dim);
    let sk = threadgroup_array::<T>(2 * bk * head_dim);
    let sv = threadgroup_array::<T>(2 * bk * head_dim);
    // Per simdgroup, for the exact path and the output: a block's weights, and 16 × 16 f32.
    let psh = threadgroup_array::<T>(8 * 16 * pst);
    let fsh = threadgroup_array::<f32>(8 * 256);
    let s = [matrix_acc(); tiles];
    let o = [matrix_acc(); nfr];
    let pa = [matrix_a::<T>(); 4];
    let pb = [matrix_a::<T>(); 4];
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

    // This lane's row (`sr` of its simdgroup's 16).
    let sr = lane / 2;
    let row = min(block + sg * 16 + sr, n_q - 1);
    let row_end = select(causal != 0, row + offset + 1, n_kv);
    // The threadgroup's first row's last visible key + 1: keys from it on are masked for
    // some row; the simdgroup's likewise (it masks only blocks reaching past it).
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

    // The queries (rows past `n_q` zero-filled) with block 0's keys, then its values.
    fetch_queries(sq, q, q0, block, n_q, h, n_q_heads, head_dim, tid);
    let first = select(nblocks > 0, bk, 0);
    if quant == 0 {
        fetch_kv_block(
            sk, 0, k, seqs, 0, first, n_kv, k0, kvh, n_kv_heads, head_dim, psize, pshift, pslot,
            phead, paged, 0, tid,
        );
    } else {
        fetch_quant_kv_block(
            sk, 0, k_codes, k_scale, seqs, 0, first, n_kv, k0, kvh, n_kv_heads, head_dim, psize,
            pshift, pslot, phead, paged, 0, tid, quant, group,
        );
    }
    commit_copies();
    if quant == 0 {
        fetch_kv_block(
            sv, 0, v, seqs, 0, first, n_kv, k0, kvh, n_kv_heads, head_dim, psize, pshift, pslot,
            phead, paged, 1, tid,
        );
    } else {
        fetch_quant_kv_block(
            sv, 0, v_codes, v_scale, seqs, 0, first, n_kv, k0, kvh, n_kv_heads, head_dim, psize,
            pshift, pslot, phead, paged, 1, tid, quant, group,
        );
    }
    commit_copies();

    for blk in range(0, nblocks, 1) {
        let b = blk * bk;
        let kb = (blk % 2) * bk * head_dim;
        // This block's keys have landed (its values may not have).
        wait_copies(1);
        barrier();
        let nb = b + bk;
        let more = blk + 1 < nblocks;
        let nk = ((blk + 1) % 2) * bk * head_dim;
        let next = select(more, bk, 0);

        // Scores: one product per 64 dims.
        for t in 0..tiles {
            matrix_fill(s[t], 0.0);
        }
        for c in 0..dt {
            matrix_mma_tiles_async(s, sq[c * 8192], sk[kb + c * bk * 64]);
        }
        matrix_mma_wait(s, 0);

        // Scaled, masked where the block reaches past the simdgroup's first row's keys or
        // past `n_kv`, folded into the row max; then the lazy rescale and the weights.
        matrix_fill(mx, neg_infinity());
        let masks = b + bk > sg_first_end || b + bk > n_kv;
        for t in 0..tiles {
            matrix_scale(s[t], c2);
            if masks {
                let k0t = (b + t * 16).cast::<i32>();
                matrix_mask(s[t], diag0 - k0t, n_kv.cast::<i32>() - k0t, neg_infinity());
            }
            matrix_row_max(mx, s[t]);
        }
        matrix_rows_raise(mn, m, mx, 11.541561f32);
        matrix_rows_exp2_diff(fr, m, mn);
        matrix_rows_mul(l, l, fr);
        matrix_rows_max(m, m, mn);
        for t in 0..tiles {
            matrix_row_exp2_sub(s[t], mn);
            matrix_row_sum(l, s[t]);
            matrix_scale(s[t], p_scale);
        }
        for f in 0..nfr {
            matrix_row_scale(o[f], fr);
        }

        // This block's values have landed, and every warpgroup has retired the products
        // that read the other buffers (the last block's scores and P·V): the next block's
        // keys and values go into them, under this block's P·V.
        wait_copies(0);
        barrier();
        if quant == 0 {
            fetch_kv_block(
                sk, nk, k, seqs, nb, next, n_kv, k0, kvh, n_kv_heads, head_dim, psize, pshift,
                pslot, phead, paged, 0, tid,
            );
        }
        commit_copies();
        if quant == 0 {
            fetch_kv_block(
                sv, nk, v, seqs, nb, next, n_kv, k0, kvh, n_kv_heads, head_dim, psize, pshift,
                pslot, phead, paged, 1, tid,
            );
        }
        commit_copies();
        // Whether a key masked for some row (those from `tg_first_end` on, below `n_kv`)
        // has a value that is not finite.
        let masked0 = max(tg_first_end, b);
        let bad_end = min(nb, n_kv);
        let mut exact = false;
        if masked0 < bad_end {
            exact = group_max(non_finite_values(
                sv, kb, b, masked0, bad_end, head_dim, tid,
            )) != 0;
        }
        if exact {
            // Each row adds the block's P·V over its visible keys only.
            for t in 0..tiles {
                matrix_store(s[t], psh[base_p + t * 16], pst);
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
                    kb,
                    f * 16,
                    b,
                    row_end,
                    bk,
                    head_dim,
                    lane,
                );
                simd_barrier();
                matrix_load(o[f], fsh[base_s], 16);
            }
        } else {
            // The weights straight from the score registers.
            for i in 0..4 {
                matrix_convert(pa[i], s[i]);
            }
            if bk > 64 {
                for i in 0..4 {
                    matrix_convert(pb[i], s[4 + i]);
                }
            }
        }
        // O += P·V.
        if !exact {
            matrix_mma_tiles_kn_async(o, pa, sv[kb]);
            if bk > 64 {
                matrix_mma_tiles_kn_async(o, pb, sv[kb + 64 * head_dim]);
            }
        }
        // A quantized cache's next block, loaded and stored into the other buffers while
        // the product runs.
        if quant != 0 {
            fetch_quant_kv_block(
                sk, nk, k_codes, k_scale, seqs, nb, next, n_kv, k0, kvh, n_kv_heads, head_dim,
                psize, pshift, pslot, phead, paged, 0, tid, quant, group,
            );
            fetch_quant_kv_block(
                sv, nk, v_codes, v_scale, seqs, nb, next, n_kv, k0, kvh, n_kv_heads, head_dim,
                psize, pshift, pslot, phead, paged, 1, tid, quant, group,
            );
        }
        matrix_mma_wait(o, 0);
    }
    matrix_mma_wait(o, 0);

    // (A threadgroup with no keys to walk still copied its queries.)
    wait_copies(0);
    // O / l for the real rows.
    let qrow = block + sg * 16 + sr;
    let o_row = ((q0 + qrow) * n_q_heads + h) * head_dim;
    store_normalised_rows(
        o, l, tile, out, fsh, base_s, qrow, n_q, o_row, unscale, lane,
    );
}
