//! The kernels of the chunked Gated DeltaNet prefill (chunks of 64 tokens, matrix
//! fragments for every product). `P` is the tensor-core input type (f16 or bf16).
//!
//! 1. [`gdn_chunk_prep_kernel`], one threadgroup per (chunk, value head), all chunks in
//!    parallel: chunk-local cumulative log decay `gc`; `A = strict_lower(β·K·Kᵀ ⊙
//!    e^{gc_i − gc_j})`; `Ai = (I + A)⁻¹` blockwise (below); `w = Ai·(β·e^{gc}·K)` (kept
//!    as −w), `u = Ai·(β·V)`; `Aqk = scale·tril(Q·Kᵀ ⊙ e^{gc_i − gc_j})`;
//!    `qg = scale·e^{gc}·Q`, `kg = e^{gc_last − gc}·K` and the chunk decay `e^{gc_last}`.
//!    Rows past a sequence's end are zero in qg, kg, w and Aqk, and carry no weight (β = 0)
//!    anywhere.
//! 2. [`gdn_chunk_state_kernel`], one threadgroup per (32 value rows, value head,
//!    sequence), walking the sequence's chunks in order with its slice of the state in
//!    accumulator fragments: `V_new = u + (−w)·Sᵀ`, `S ← e^{gc_last}·S + V_newᵀ·kg`; S at
//!    each chunk's start and V_new go out for step 3; the final state in the decode
//!    layout.
//! 3. [`gdn_chunk_out_kernel`], all chunks in parallel: `o = qg·Sᵀ + Aqk·V_new`.
//!
//! For Dk = 256, [`gdn_chunk_state_wide_kernel`] does steps 2 and 3 in one walk.
//!
//! Non-finite values: the chunk's triangular products carry a NaN or ∞ at token t to the
//! chunk's earlier tokens too (an exact 0 weight of a later token times ∞ is NaN), and the
//! f16 staging overflows on data near f16's limit (or an f32 state past it). Both show as
//! a non-finite output (every staged product reaches `o` or the final state), so the
//! kernels that write the outputs check what they store and set the chunk's flag in `redo`
//! `[NC, Hv]` (the prep kernel clears it); the op then redoes the flagged (sequence, value
//! head) pairs token by token in f32 (`super::prefill_recurrent`), which is exact on any
//! value. Finite data in range sets no flag, so the common path pays only the checks.
//!
//! The inverse: with `D_i = (I + A_ii)⁻¹` for the four 16×16 diagonal blocks (forward
//! substitution in registers, one column per thread) and `G_ik = −D_i·A_ik` for the six
//! blocks below them, the blocks of `Ai` below the diagonal follow diagonal by diagonal
//! as `Ai_ij = Σ_{k=j}^{i−1} G_ik·Ai_kj` (with `Ai_jj = D_j`): four rounds of fragment
//! products instead of 64 dependent rows.
//!
//! Scratch layouts (chunk-major): `ops [NC, Hv, 3·Dk/64 + 1, 64, 64]` holds the P operands
//! as contiguous 64×64 slabs (each one contiguous 8 KiB read): −w and qg by 64 columns,
//! Aqk, kg by 64 columns;
//! u `[NC, Hv, 64, Dv]` in P, decay `[NC, Hv]`; S at chunk starts `hs [NC, Hv, Dv, Dk]`
//! and V_new `vn [NC, Hv, 64, Dv]` in P; the chunk table `[NC, 2]` holds each
//! chunk's first token and length, `seq_chunks [N + 1]` each sequence's first chunk.
//!
//! Threadgroup tiles are padded (row strides of 24, 40 or 72 elements for 16-, 32- and
//! 64-wide operands, `Dk + 8` for the state) so fragment loads and stores meet no bank
//! conflicts.

use crate::float_range::finite;
use tessera_macros::{func, kernel};

/// Per (chunk, value head): everything of the chunk that does not depend on the state.
/// Compiled for four resident threadgroups per core: it holds eight accumulators through
/// the staging loop, and unbounded it takes enough registers to leave room for two.
#[kernel(group_size = 128, groups_per_core = 4)]
pub fn gdn_chunk_prep_kernel<T, P>(
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    g: Tensor<f32>,
    beta: Tensor<f32>,
    chunks: Tensor<u32>,
    mut ops: Tensor<P>,
    mut u: Tensor<P>,
    mut decay: Tensor<f32>,
    mut redo: Tensor<u32>,
    scale: f32,
    #[constexpr] dk: u32,
    #[constexpr] dv: u32,
    #[constexpr] hv: u32,
    #[constexpr] hk: u32,
) {
    let c = group_id_x();
    let h = group_id_y();
    let kh = h / (hv / hk);
    let tid = thread_id();
    let lane = simd_lane();
    let sg = simd_id();
    let bos = load(chunks[c * 2]);
    let len = load(chunks[c * 2 + 1]);
    let nd = dk / 64;
    // First slab of this (chunk, head) in `ops`, and its first row in `u`.
    let slab0 = (c * hv + h) * (3 * nd + 1);
    let ch = (c * hv + h) * 64;
    let sgc = threadgroup_array::<f32>(64);
    let sb = threadgroup_array::<f32>(64);
    // f32 staging of products: K·Kᵀ, then A, then fragment results on their way to P.
    let sa = threadgroup_array::<f32>(4096);
    // Ai, row stride 72.
    let sai = threadgroup_array::<P>(64 * 72);
    // Operand tiles: Q and K steps (64×16 each, stride 24), then the six blocks of −A and
    // G below the diagonal (16×16, stride 24), then the w/u right-hand sides.
    let sx = threadgroup_array::<P>(3072);
    // This thread's 8 columns of the next staging step (Q then K, or one of K/V).
    let xr = stack_array::<f32>(16);
    let fa = matrix_a::<P>();
    let fq = matrix_a::<P>();
    let fb = matrix_b::<P>();
    let acc = matrix_acc();
    let kk0 = matrix_acc();
    let kk1 = matrix_acc();
    let kk2 = matrix_acc();
    let kk3 = matrix_acc();
    let qk0 = matrix_acc();
    let qk1 = matrix_acc();
    let qk2 = matrix_acc();
    let qk3 = matrix_acc();

    // Chunk-local cumulative log decay and β. Every simdgroup scans the 64 gates (rows
    // `lane` and `32 + lane`), and simdgroup 0 publishes them.
    let r1 = lane + 32;
    let ok0 = lane < len;
    let ok1 = r1 < len;
    let gi0 = (bos + select(ok0, lane, 0)) * hv + h;
    let gi1 = (bos + select(ok1, r1, 0)) * hv + h;
    let g0 = select(ok0, load(g[gi0]), 0.0);
    let g1 = select(ok1, load(g[gi1]), 0.0);
    let p0 = simd_prefix_sum(g0);
    let p1 = simd_prefix_sum(g1) + simd_sum(g0);
    if sg == 0 {
        store(sgc[lane], p0);
        store(sgc[r1], p1);
        store(sb[lane], select(ok0, load(beta[gi0]), 0.0));
        store(sb[r1], select(ok1, load(beta[gi1]), 0.0));
    }
    barrier();
    let glast = load(sgc[63]);

    // Staging geometry: thread `tid` moves 8 consecutive columns of row `sr`.
    let sr = tid / 2;
    let sc = (tid % 2) * 8;
    let sok = sr < len;
    let srow = bos + select(sok, sr, 0);
    let kbase = (srow * hk + kh) * dk + sc;
    let vbase = (srow * hv + h) * dv + sc;
    let gcr = load(sgc[sr]);
    let fqg = select(sok, exp(gcr) * scale, 0.0);
    let fkg = select(sok, exp(glast - gcr), 0.0);

    // K·Kᵀ and Q·Kᵀ over Dk in steps of 16 columns (simdgroup sg owns rows sg·16.. of
    // both 64×64 products); the registers hold the next step while the tiles serve the
    // current one. qg and kg leave from the same registers.
    matrix_fill(kk0, 0.0);
    matrix_fill(kk1, 0.0);
    matrix_fill(kk2, 0.0);
    matrix_fill(kk3, 0.0);
    matrix_fill(qk0, 0.0);
    matrix_fill(qk1, 0.0);
    matrix_fill(qk2, 0.0);
    matrix_fill(qk3, 0.0);
    for kb in range(0, dk + 16, 16) {
        if kb > 0 {
            barrier();
            let kc = kb - 16;
            let at = sr * 64 + kc % 64 + sc;
            let oq = (slab0 + nd + kc / 64) * 4096 + at;
            let ok = (slab0 + 2 * nd + 1 + kc / 64) * 4096 + at;
            for e in 0..8 {
                store(
                    sx[sr * 24 + sc + e],
                    select(sok, load(xr[e]), 0.0).cast::<P>(),
                );
            }
            for e in 0..8 {
                store(
                    sx[1536 + sr * 24 + sc + e],
                    select(sok, load(xr[8 + e]), 0.0).cast::<P>(),
                );
            }
            for e in 0..8 {
                store(ops[oq + e], (load(xr[e]) * fqg).cast::<P>());
            }
            for e in 0..8 {
                store(ops[ok + e], (load(xr[8 + e]) * fkg).cast::<P>());
            }
        }
        if kb < dk {
            for e in 0..8 {
                store(xr[e], load(q[kbase + kb + e]).cast::<f32>());
            }
            for e in 0..8 {
                store(xr[8 + e], load(k[kbase + kb + e]).cast::<f32>());
            }
        }
        if kb > 0 {
            barrier();
            matrix_load(fq, sx[sg * 384], 24);
            matrix_load(fa, sx[1536 + sg * 384], 24);
            matrix_load_t(fb, sx[1536], 24);
            matrix_mma(kk0, fa, fb, kk0);
            matrix_mma(qk0, fq, fb, qk0);
            matrix_load_t(fb, sx[1536 + 384], 24);
            matrix_mma(kk1, fa, fb, kk1);
            matrix_mma(qk1, fq, fb, qk1);
            matrix_load_t(fb, sx[1536 + 768], 24);
            matrix_mma(kk2, fa, fb, kk2);
            matrix_mma(qk2, fq, fb, qk2);
            matrix_load_t(fb, sx[1536 + 1152], 24);
            matrix_mma(kk3, fa, fb, kk3);
            matrix_mma(qk3, fq, fb, qk3);
        }
    }
    matrix_store(kk0, sa[sg * 1024], 64);
    matrix_store(kk1, sa[sg * 1024 + 16], 64);
    matrix_store(kk2, sa[sg * 1024 + 32], 64);
    matrix_store(kk3, sa[sg * 1024 + 48], 64);
    barrier();
    // A = strict_lower(β_i·e^{gc_i − gc_j}·(K·Kᵀ)_ij) in place; −A of the six blocks below
    // the diagonal, block (bi, bj) as tile bi·(bi − 1)/2 + bj.
    for e in range(tid, 4096, 128) {
        let i = e / 64;
        let j = e % 64;
        let x = select(
            i > j,
            load(sa[e]) * exp(load(sgc[i]) - load(sgc[j])) * load(sb[i]),
            0.0,
        );
        store(sa[e], x);
        let bi = i / 16;
        let bj = j / 16;
        if bi > bj {
            store(
                sx[(bi * (bi - 1) / 2 + bj) * 384 + (i % 16) * 24 + j % 16],
                (0.0 - x).cast::<P>(),
            );
        }
    }
    barrier();
    // D_b = (I + A_bb)⁻¹: thread b·16 + j solves column j of diagonal block b.
    if tid < 64 {
        let d0 = (tid / 16) * 16;
        let jc = tid % 16;
        let xs = stack_array::<f32>(16);
        for i in 0..16 {
            let mut x = select(i == jc, 1.0, 0.0);
            for m in 0..16 {
                if m < i {
                    x -= load(sa[(d0 + i) * 64 + d0 + m]) * load(xs[m]);
                }
            }
            store(xs[i], x);
            store(sai[(d0 + i) * 72 + d0 + jc], x.cast::<P>());
        }
    }
    barrier();
    // G_ik = D_i·(−A_ik) over the −A tiles: simdgroup sg takes tiles sg and sg + 4.
    for t2 in 0..2 {
        let ti = sg + 4 * t2;
        if ti < 6 {
            let bi = select(ti < 1, 1, select(ti < 3, 2, 3));
            matrix_fill(acc, 0.0);
            matrix_load(fa, sai[bi * 16 * 72 + bi * 16], 72);
            matrix_load(fb, sx[ti * 384], 24);
            matrix_mma(acc, fa, fb, acc);
            matrix_store(acc, sa[ti * 384], 24);
        }
    }
    barrier();
    for e in range(tid, 1536, 128) {
        let at = (e / 256) * 384 + ((e % 256) / 16) * 24 + e % 16;
        store(sx[at], load(sa[at]).cast::<P>());
    }
    barrier();
    // Diagonal `lvl` below the main one: Ai_ij = Σ_{k=j}^{i−1} G_ik·Ai_kj, i = j + lvl,
    // simdgroup sg taking j = sg.
    for lvl in 1..4 {
        if sg < 4 - lvl {
            let i = sg + lvl;
            matrix_fill(acc, 0.0);
            for kq in 0..3 {
                if kq < lvl {
                    let kb = sg + kq;
                    matrix_load(fa, sx[(i * (i - 1) / 2 + kb) * 384], 24);
                    matrix_load(fb, sai[kb * 16 * 72 + sg * 16], 72);
                    matrix_mma(acc, fa, fb, acc);
                }
            }
            matrix_store(acc, sa[sg * 384], 24);
        }
        barrier();
        for e in range(tid, (4 - lvl) * 256, 128) {
            let bj = e / 256;
            let r = (e % 256) / 16;
            let cc = e % 16;
            store(
                sai[((bj + lvl) * 16 + r) * 72 + bj * 16 + cc],
                load(sa[bj * 384 + r * 24 + cc]).cast::<P>(),
            );
        }
        barrier();
    }
    // Aqk = scale·tril(Q·Kᵀ ⊙ e^{gc_i − gc_j}), 8 consecutive columns per thread.
    matrix_store(qk0, sa[sg * 1024], 64);
    matrix_store(qk1, sa[sg * 1024 + 16], 64);
    matrix_store(qk2, sa[sg * 1024 + 32], 64);
    matrix_store(qk3, sa[sg * 1024 + 48], 64);
    barrier();
    for vi in range(tid, 512, 128) {
        let i = vi / 8;
        let j0 = (vi % 8) * 8;
        let gi = load(sgc[i]);
        for e in 0..8 {
            let j = j0 + e;
            let x = select(
                i >= j && i < len,
                load(sa[i * 64 + j]) * exp(gi - load(sgc[j])) * scale,
                0.0,
            );
            store(ops[(slab0 + 2 * nd) * 4096 + i * 64 + j], x.cast::<P>());
        }
    }
    // w = Ai·(β·e^{gc}·K) and u = Ai·(β·V), 16 columns a step (Ai is lower triangular,
    // so simdgroup sg needs the first sg + 1 column blocks). A w block waits in `sa`
    // (its column mod 64) and leaves as −w in P at the next step.
    let fx = load(sb[sr]);
    let fxk = fx * exp(gcr);
    for kb in range(0, dk + dv + 16, 16) {
        if kb > 0 {
            barrier();
            for e in 0..8 {
                store(sx[sr * 24 + sc + e], load(xr[e]).cast::<P>());
            }
            if kb >= 32 && kb - 32 < dk {
                let pb = kb - 32;
                for e in 0..8 {
                    store(
                        ops[(slab0 + pb / 64) * 4096 + sr * 64 + pb % 64 + sc + e],
                        (0.0 - load(sa[sr * 64 + pb % 64 + sc + e])).cast::<P>(),
                    );
                }
            }
        }
        if kb < dk {
            for e in 0..8 {
                store(xr[e], load(k[kbase + kb + e]).cast::<f32>() * fxk);
            }
        } else if kb < dk + dv {
            for e in 0..8 {
                store(xr[e], load(v[vbase + kb - dk + e]).cast::<f32>() * fx);
            }
        }
        if kb > 0 {
            let ob = kb - 16;
            barrier();
            matrix_fill(acc, 0.0);
            for j in 0..4 {
                if j <= sg {
                    matrix_load(fa, sai[sg * 16 * 72 + j * 16], 72);
                    matrix_load(fb, sx[j * 384], 24);
                    matrix_mma(acc, fa, fb, acc);
                }
            }
            if ob < dk {
                matrix_store(acc, sa[sg * 1024 + ob % 64], 64);
            } else {
                matrix_store(acc, u[(ch + sg * 16) * dv + ob - dk], dv);
            }
        }
    }
    if tid == 0 {
        store(decay[c * hv + h], exp(glast));
        store(redo[c * hv + h], 0u32);
    }
}

/// Checks the `rows` × `cols` block at `at` of `x` (row stride `stride`), `threads` threads
/// from `tid`: flags chunk `c` of head `h` in `redo` when a value is not finite.
#[allow(clippy::too_many_arguments)]
#[func]
fn flag_non_finite<S>(
    mut redo: Mem<u32>,
    at: u32,
    x: Mem<S>,
    rows: u32,
    cols: u32,
    stride: u32,
    tid: u32,
    threads: u32,
    flag_at: u32,
) {
    let mut bad = false;
    for e in range(tid, rows * cols, threads) {
        bad = bad || !finite(load(x[at + (e / cols) * stride + e % cols]).cast::<f32>());
    }
    if bad {
        store(redo[flag_at], 1u32);
    }
}

/// Moves this thread's 16 elements of each of `nd` 64×64 slabs from the registers `xr`
/// (from slab `first`) into the padded tiles (row stride 72) of a 256-thread group.
#[func]
fn slabs_to_tiles<P>(mut tiles: Mem<P>, xr: Mem<P>, first: u32, nd: u32, tid: u32) {
    for sl in 0..nd {
        for i in 0..2 {
            let vi = tid + 256 * i;
            let at = sl * 4608 + (vi / 8) * 72 + (vi % 8) * 8;
            for e in 0..8 {
                store(tiles[at + e], load(xr[(first + sl) * 16 + i * 8 + e]));
            }
        }
    }
}

/// Fetches this thread's 16 elements of each of `nd` contiguous 64×64 slabs of `ops`
/// (slabs `s0 ..` of those at `at0`) into the registers `xr` (from slab `first`).
#[func]
fn fetch_slabs<P>(mut xr: Mem<P>, first: u32, ops: Mem<P>, at0: u32, s0: u32, nd: u32, tid: u32) {
    for sl in 0..nd {
        for i in 0..2 {
            let at = at0 + (s0 + sl) * 4096 + (tid + 256 * i) * 8;
            for e in 0..8 {
                store(xr[(first + sl) * 16 + i * 8 + e], load(ops[at + e]));
            }
        }
    }
}

/// Per (32 value rows, value head, sequence): the state recurrence over the chunks, for
/// Dk ≤ 128. The f32 state slice lives in accumulator fragments for the whole walk (each
/// of the eight simdgroups holds 16 rows by Dk/4 columns); per chunk it goes to
/// threadgroup memory once, rounded to P, as the operand of `V_new = u + (−w)·Sᵀ`, and to
/// `hs` for [`gdn_chunk_out_kernel`]. The chunk's w and kg slabs pass through padded
/// tiles and its u through the V_new tile; each thread holds the next chunk's slabs and
/// its part of u in registers, issued as soon as the current ones are in threadgroup
/// memory. V_new goes to `vn` (P) for the output kernel.
#[kernel(group_size = 256)]
pub fn gdn_chunk_state_kernel<S, P>(
    ops: Tensor<P>,
    u: Tensor<P>,
    decay: Tensor<f32>,
    seq_chunks: Tensor<u32>,
    h0: Tensor<S>,
    mut hs: Tensor<P>,
    mut vn: Tensor<P>,
    mut state_out: Tensor<S>,
    mut redo: Tensor<u32>,
    use_h0: u32,
    #[constexpr] dk: u32,
    #[constexpr] dv: u32,
    #[constexpr] hv: u32,
) {
    let nd = dk / 64;
    let ds = dk + 8;
    let v0 = group_id_x() * 32;
    let h = group_id_y();
    let n = group_id_z();
    let tid = thread_id();
    let sg = simd_id();
    // Simdgroup sg: state rows vr.. and columns kc.. (two fragments when Dk = 128);
    // V_new rows nr.. (of the chunk) and columns nc.. (of the slice).
    let vr = (sg % 2) * 16;
    let kc = (sg / 2) * (dk / 4);
    let nr = (sg % 4) * 16;
    let nc = (sg / 4) * 16;
    let rows_ok = v0 + vr < dv;
    let cols_ok = v0 + nc < dv;
    // S in P (row stride Dk + 8), the slab tiles (64×64, stride 72), V_new in P.
    let ssp = threadgroup_array::<P>(32 * ds);
    let tiles = threadgroup_array::<P>(nd * 64 * 72);
    let svp = threadgroup_array::<P>(64 * 40);
    // This thread's 16 elements of each of the next chunk's slabs: w (nd), then kg (nd);
    // and 8 of its u (row tid / 4, columns (tid % 4)·8.. of the slice).
    let xr = stack_array::<P>(32 * nd);
    let ur = stack_array::<P>(8);
    let ucol = select(v0 + (tid % 4) * 8 < dv, v0 + (tid % 4) * 8, 0);
    let fa = matrix_a::<P>();
    let fb = matrix_b::<P>();
    let s0 = matrix_acc();
    let s1 = matrix_acc();
    let vacc = matrix_acc();
    let sbase = ((n * hv + h) * dv + v0 + vr) * dk + kc;
    if use_h0 == 1 && rows_ok {
        matrix_load(s0, h0[sbase], dk);
        if nd == 2 {
            matrix_load(s1, h0[sbase + 16], dk);
        }
    } else {
        matrix_fill(s0, 0.0);
        matrix_fill(s1, 0.0);
    }
    let c_begin = group_max(load(seq_chunks[n]));
    let c_end = group_max(load(seq_chunks[n + 1]));
    let nch = c_end - c_begin;
    let mut d_next = 0.0f32;
    // Iteration `it` fetches chunk c_begin + it and computes chunk c_begin + it − 1.
    for it in range(0, nch + 1, 1) {
        let dc = d_next;
        let cn = c_begin + it;
        let cc = c_begin + max(it, 1) - 1;
        let slabs_next = (cn * hv + h) * (3 * nd + 1) * 4096;
        if it > 0 {
            // The (−w) slabs into the tiles, u into the V_new tile; S to threadgroup
            // memory and to `hs`.
            slabs_to_tiles(tiles, xr, 0, nd, tid);
            matrix_store(s0, ssp[vr * ds + kc], ds);
            if nd == 2 {
                matrix_store(s1, ssp[vr * ds + kc + 16], ds);
            }
            if rows_ok {
                let ho = ((cc * hv + h) * dv + v0 + vr) * dk + kc;
                matrix_store(s0, hs[ho], dk);
                if nd == 2 {
                    matrix_store(s1, hs[ho + 16], dk);
                }
            }
            for e in 0..8 {
                store(svp[(tid / 4) * 40 + (tid % 4) * 8 + e], load(ur[e]));
            }
        }
        if it < nch {
            // Uniform across the simdgroup, as the scale of a fragment must be.
            d_next = simd_broadcast(load(decay[cn * hv + h]), 0);
            let ua = ((cn * hv + h) * 64 + tid / 4) * dv + ucol;
            for e in 0..8 {
                store(ur[e], load(u[ua + e]));
            }
            fetch_slabs(xr, 0, ops, slabs_next, 0, nd, tid);
        }
        if it > 0 {
            barrier();
            // V_new = u + (−w)·Sᵀ, each simdgroup on its own block of the V_new tile.
            matrix_load(vacc, svp[nr * 40 + nc], 40);
            for kk in 0..(dk / 16) {
                matrix_load(fa, tiles[(kk / 4) * 4608 + nr * 72 + (kk % 4) * 16], 72);
                matrix_load_t(fb, ssp[nc * ds + kk * 16], ds);
                matrix_mma(vacc, fa, fb, vacc);
            }
            matrix_store(vacc, svp[nr * 40 + nc], 40);
            if cols_ok {
                matrix_store(vacc, vn[((cc * hv + h) * 64 + nr) * dv + v0 + nc], dv);
            }
            barrier();
            // The kg slabs into the tiles.
            slabs_to_tiles(tiles, xr, nd, nd, tid);
        }
        if it < nch {
            // kg by 64 columns: ops slabs 2·nd + 1 ...
            fetch_slabs(xr, nd, ops, slabs_next, 2 * nd + 1, nd, tid);
        }
        if it > 0 {
            barrier();
            // S ← e^{gc_last}·S + V_newᵀ·kg.
            matrix_scale(s0, dc);
            if nd == 2 {
                matrix_scale(s1, dc);
            }
            let kt = (kc / 64) * 4608 + kc % 64;
            for j in 0..4 {
                matrix_load_t(fa, svp[j * 16 * 40 + vr], 40);
                matrix_load(fb, tiles[kt + j * 16 * 72], 72);
                matrix_mma(s0, fa, fb, s0);
                if nd == 2 {
                    matrix_load(fb, tiles[kt + j * 16 * 72 + 16], 72);
                    matrix_mma(s1, fa, fb, s1);
                }
            }
            barrier();
        }
    }
    if rows_ok {
        matrix_store(s0, state_out[sbase], dk);
        if nd == 2 {
            matrix_store(s1, state_out[sbase + 16], dk);
        }
    }
    // The final state as stored (the last update is staged in P too); none without chunks.
    if nch > 0 {
        barrier();
        flag_non_finite(
            redo,
            ((n * hv + h) * dv + v0) * dk,
            state_out,
            min(dv - v0, 32),
            dk,
            dk,
            tid,
            256,
            (c_end - 1) * hv + h,
        );
    }
}

/// Per (chunk, value head, 64 value columns): `o = qg·Sᵀ + Aqk·V_new` from the chunk's
/// slabs and what [`gdn_chunk_state_kernel`] left (S at the chunk's start in `hs`,
/// V_new in `vn`), all chunks in parallel. Simdgroup sg owns rows sg·16.. and four
/// 16-column accumulators; operands pass through two padded 64×64 tiles.
#[kernel]
pub fn gdn_chunk_out_kernel<T, P>(
    ops: Tensor<P>,
    hs: Tensor<P>,
    vn: Tensor<P>,
    chunks: Tensor<u32>,
    mut o: Tensor<T>,
    mut redo: Tensor<u32>,
    #[constexpr] dk: u32,
    #[constexpr] dv: u32,
    #[constexpr] hv: u32,
) {
    let nd = dk / 64;
    let c = group_id_x();
    let h = group_id_y();
    let vb = group_id_z() * 64;
    let tid = thread_id();
    let sg = simd_id();
    let bos = load(chunks[c * 2]);
    let len = load(chunks[c * 2 + 1]);
    let slab0 = (c * hv + h) * (3 * nd + 1);
    let ta = threadgroup_array::<P>(64 * 72);
    let tb = threadgroup_array::<P>(64 * 72);
    let so = threadgroup_array::<f32>(64 * 40);
    let fa = matrix_a::<P>();
    let fb = matrix_b::<P>();
    let o0 = matrix_acc();
    let o1 = matrix_acc();
    let o2 = matrix_acc();
    let o3 = matrix_acc();
    matrix_fill(o0, 0.0);
    matrix_fill(o1, 0.0);
    matrix_fill(o2, 0.0);
    matrix_fill(o3, 0.0);
    // Step kb < nd: qg slab kb against S rows vb.. (columns kb·64..); step nd: Aqk
    // against V_new columns vb... Rows or columns past Dv only feed accumulators that are
    // never stored, so their loads are clamped, not masked.
    for kb in 0..(nd + 1) {
        if kb > 0 {
            barrier();
        }
        let sa = select(kb < nd, slab0 + nd + kb, slab0 + 2 * nd) * 4096;
        for i in 0..4 {
            let vi = tid + 128 * i;
            let r = vi / 8;
            let cv = (vi % 8) * 8;
            for e in 0..8 {
                store(ta[r * 72 + cv + e], load(ops[sa + vi * 8 + e]));
            }
            if kb < nd {
                let v = select(vb + r < dv, vb + r, 0);
                let src = ((c * hv + h) * dv + v) * dk + kb * 64 + cv;
                for e in 0..8 {
                    store(tb[r * 72 + cv + e], load(hs[src + e]));
                }
            } else {
                let col = select(vb + cv < dv, vb + cv, 0);
                let src = ((c * hv + h) * 64 + r) * dv + col;
                for e in 0..8 {
                    store(tb[r * 72 + cv + e], load(vn[src + e]));
                }
            }
        }
        barrier();
        for kk in 0..4 {
            matrix_load(fa, ta[sg * 16 * 72 + kk * 16], 72);
            if kb < nd {
                matrix_load_t(fb, tb[kk * 16], 72);
                matrix_mma(o0, fa, fb, o0);
                matrix_load_t(fb, tb[16 * 72 + kk * 16], 72);
                matrix_mma(o1, fa, fb, o1);
                matrix_load_t(fb, tb[32 * 72 + kk * 16], 72);
                matrix_mma(o2, fa, fb, o2);
                matrix_load_t(fb, tb[48 * 72 + kk * 16], 72);
                matrix_mma(o3, fa, fb, o3);
            } else {
                matrix_load(fb, tb[kk * 16 * 72], 72);
                matrix_mma(o0, fa, fb, o0);
                matrix_load(fb, tb[kk * 16 * 72 + 16], 72);
                matrix_mma(o1, fa, fb, o1);
                matrix_load(fb, tb[kk * 16 * 72 + 32], 72);
                matrix_mma(o2, fa, fb, o2);
                matrix_load(fb, tb[kk * 16 * 72 + 48], 72);
                matrix_mma(o3, fa, fb, o3);
            }
        }
    }
    // The rows of the chunk, 32 columns at a time through `so`; a value that is not
    // finite flags the chunk.
    let mut bad = false;
    for half in 0..2 {
        if half == 0 {
            matrix_store(o0, so[sg * 16 * 40], 40);
            matrix_store(o1, so[sg * 16 * 40 + 16], 40);
        } else {
            barrier();
            matrix_store(o2, so[sg * 16 * 40], 40);
            matrix_store(o3, so[sg * 16 * 40 + 16], 40);
        }
        barrier();
        for i in 0..2 {
            let vi = tid + 128 * i;
            let r = vi / 4;
            let cv = (vi % 4) * 8;
            let col = vb + half * 32 + cv;
            if r < len && col < dv {
                for e in 0..8 {
                    let y = load(so[r * 40 + cv + e]).cast::<T>();
                    store(o[((bos + r) * hv + h) * dv + col + e], y);
                    bad = bad || !finite(y.cast::<f32>());
                }
            }
        }
    }
    if bad {
        store(redo[c * hv + h], 1u32);
    }
}

/// Per (16 value rows, value head, sequence): the state recurrence over the chunks, for
/// Dk = 256, whose f32 state slice and its staging copy (24 KiB) leave no room for the
/// operand tiles of [`gdn_chunk_state_kernel`] under the 32 KiB threadgroup limit. Its
/// fragment operands come straight from device memory.
#[kernel]
pub fn gdn_chunk_state_wide_kernel<T, S, P>(
    ops: Tensor<P>,
    u: Tensor<P>,
    decay: Tensor<f32>,
    chunks: Tensor<u32>,
    seq_chunks: Tensor<u32>,
    h0: Tensor<S>,
    mut o: Tensor<T>,
    mut state_out: Tensor<S>,
    mut redo: Tensor<u32>,
    use_h0: u32,
    #[constexpr] dk: u32,
    #[constexpr] dv: u32,
    #[constexpr] hv: u32,
) {
    let nd = dk / 64;
    let v0 = group_id_x() * 16;
    let h = group_id_y();
    let n = group_id_z();
    let tid = thread_id();
    let sg = simd_id();
    let ss = threadgroup_array::<f32>(16 * dk);
    let ssp = threadgroup_array::<P>(16 * dk);
    let svn = threadgroup_array::<f32>(1024);
    let svp = threadgroup_array::<P>(1024);
    let fa = matrix_a::<P>();
    let fb = matrix_b::<P>();
    let acc = matrix_acc();
    let sbase = ((n * hv + h) * dv + v0) * dk;
    for e in range(tid, 16 * dk, 128) {
        let x = select(
            use_h0 == 1,
            load(h0[select(use_h0 == 1, sbase + e, 0)]).cast::<f32>(),
            0.0,
        );
        store(ss[e], x);
    }
    let c_begin = group_max(load(seq_chunks[n]));
    let c_end = group_max(load(seq_chunks[n + 1]));
    barrier();
    for c in range(c_begin, c_end, 1) {
        let ch = (c * hv + h) * 64;
        // First slab of this (chunk, head) in `ops`.
        let slab = (c * hv + h) * (3 * nd + 1);
        for e in range(tid, 16 * dk, 128) {
            store(ssp[e], load(ss[e]).cast::<P>());
        }
        barrier();
        // V_new = u + (−w)·Sᵀ: simdgroup sg owns rows sg·16.. of the chunk.
        matrix_load(acc, u[(ch + sg * 16) * dv + v0], dv);
        for kk in range(0, dk, 16) {
            matrix_load(
                fa,
                ops[(slab + kk / 64) * 4096 + sg * 16 * 64 + kk % 64],
                64,
            );
            matrix_load_t(fb, ssp[kk], dk);
            matrix_mma(acc, fa, fb, acc);
        }
        matrix_store(acc, svn[sg * 256], 16);
        barrier();
        let dc = load(decay[c * hv + h]);
        for e in range(tid, 1024, 128) {
            store(svp[e], load(svn[e]).cast::<P>());
        }
        for e in range(tid, 16 * dk, 128) {
            store(ss[e], load(ss[e]) * dc);
        }
        barrier();
        // o = qg·Sᵀ + Aqk·V_new (qg carries scale·e^{gc}).
        matrix_fill(acc, 0.0);
        for kk in range(0, dk, 16) {
            matrix_load(
                fa,
                ops[(slab + nd + kk / 64) * 4096 + sg * 16 * 64 + kk % 64],
                64,
            );
            matrix_load_t(fb, ssp[kk], dk);
            matrix_mma(acc, fa, fb, acc);
        }
        for j in 0..4 {
            matrix_load(fa, ops[(slab + 2 * nd) * 4096 + sg * 16 * 64 + j * 16], 64);
            matrix_load(fb, svp[j * 256], 16);
            matrix_mma(acc, fa, fb, acc);
        }
        matrix_store(acc, svn[sg * 256], 16);
        // S ← e^{gc_last}·S + V_newᵀ·kg, 16 columns of Dk per simdgroup step.
        for kd in range(sg * 16, dk, 64) {
            matrix_load(acc, ss[kd], dk);
            for j in 0..4 {
                matrix_load_t(fa, svp[j * 256], 16);
                matrix_load(
                    fb,
                    ops[(slab + 2 * nd + 1 + kd / 64) * 4096 + j * 16 * 64 + kd % 64],
                    64,
                );
                matrix_mma(acc, fa, fb, acc);
            }
            matrix_store(acc, ss[kd], dk);
        }
        barrier();
        let bos = load(chunks[c * 2]);
        let len = load(chunks[c * 2 + 1]);
        let mut bad = false;
        for e in range(tid, 1024, 128) {
            let i = e / 16;
            if i < len {
                let y = load(svn[e]).cast::<T>();
                store(o[((bos + i) * hv + h) * dv + v0 + e % 16], y);
                bad = bad || !finite(y.cast::<f32>());
            }
        }
        if bad {
            store(redo[c * hv + h], 1u32);
        }
        barrier();
    }
    let mut bad = false;
    for e in range(tid, 16 * dk, 128) {
        let y = load(ss[e]).cast::<S>();
        store(state_out[sbase + e], y);
        bad = bad || !finite(y.cast::<f32>());
    }
    if bad && c_end > c_begin {
        store(redo[(c_end - 1) * hv + h], 1u32);
    }
}
