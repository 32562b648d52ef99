//! The two kernels of the chunked Gated DeltaNet prefill (chunks of 64 tokens, matrix
//! fragments for every product). `P` is the tensor-core input type (f16 or bf16).
//!
//! 1. [`gdn_chunk_prep_kernel`], one threadgroup per (chunk, value head), all chunks in
//!    parallel: chunk-local cumulative log decay `gc`; `A = strict_lower(β·K·Kᵀ ⊙
//!    e^{gc_i − gc_j})`; `Ai = (I + A)⁻¹` by forward substitution (a column per thread);
//!    `w = Ai·(β·e^{gc}·K)`, `u = Ai·(β·V)`; `Aqk = scale·tril(Q·Kᵀ ⊙ e^{gc_i − gc_j})`;
//!    `qg = −scale·e^{gc}·Q`, `kg = e^{gc_last − gc}·K` and the chunk decay `e^{gc_last}`.
//!    Rows past a sequence's end are zero in every output.
//! 2. [`gdn_chunk_state_kernel`], one threadgroup per (16 value rows, value head,
//!    sequence), walking the sequence's chunks in order with its slice of the state in
//!    threadgroup memory: `V_new = u − w·Sᵀ`, `o = qg·(−S)ᵀ + Aqk·V_new`,
//!    `S ← e^{gc_last}·S + V_newᵀ·kg`; the final state in the decode layout.
//!
//! Scratch layouts (chunk-major): w, qg, kg `[NC, Hv, 64, Dk]`, u `[NC, Hv, 64, Dv]`,
//! Aqk `[NC, Hv, 64, 64]`, decay `[NC, Hv]`; the chunk table `[NC, 2]` holds each chunk's
//! first token and length, `seq_chunks [N + 1]` each sequence's first chunk.

use tessera_macros::kernel;

/// Per (chunk, value head): everything of the chunk that does not depend on the state.
#[kernel]
pub fn gdn_chunk_prep_kernel<T, P>(
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    g: Tensor<f32>,
    beta: Tensor<f32>,
    chunks: Tensor<u32>,
    mut w: Tensor<P>,
    mut u: Tensor<f32>,
    mut qg: Tensor<P>,
    mut kg: Tensor<P>,
    mut aqk: Tensor<P>,
    mut decay: Tensor<f32>,
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
    let sg = simd_id();
    let bos = load(chunks[c * 2]);
    let len = load(chunks[c * 2 + 1]);
    let sgl = threadgroup_array::<f32>(64);
    let sgc = threadgroup_array::<f32>(64);
    let sb = threadgroup_array::<f32>(64);
    let sa = threadgroup_array::<f32>(4096);
    let sai = threadgroup_array::<P>(4096);
    let sx = threadgroup_array::<P>(1024);
    let sy = threadgroup_array::<P>(1024);
    let fa = matrix_a::<P>();
    let fb = matrix_b::<P>();
    let acc0 = matrix_acc();
    let acc1 = matrix_acc();
    let acc2 = matrix_acc();
    let acc3 = matrix_acc();
    // Gates of the chunk's rows; rows past its end have β = 0 and g = 0.
    if tid < 64 {
        let ok = tid < len;
        let gi = ((bos + select(ok, tid, 0)) * hv + h);
        store(sgl[tid], select(ok, load(g[gi]), 0.0));
        store(sb[tid], select(ok, load(beta[gi]), 0.0));
    }
    barrier();
    if tid < 64 {
        let mut acc = 0.0f32;
        for j in 0..64 {
            if j <= tid {
                acc += load(sgl[j]);
            }
        }
        store(sgc[tid], acc);
    }
    barrier();
    let glast = load(sgc[63]);
    // K·Kᵀ (pass 0) and Q·Kᵀ (pass 1), 16 columns of Dk at a time; simdgroup sg owns
    // rows sg·16.. of the 64×64 product, one accumulator per 16-column block.
    for pass in 0..2 {
        matrix_fill(acc0, 0.0);
        matrix_fill(acc1, 0.0);
        matrix_fill(acc2, 0.0);
        matrix_fill(acc3, 0.0);
        for kb in range(0, dk, 16) {
            for e in range(tid, 1024, 128) {
                let r = e / 16;
                let ok = r < len;
                let ki = ((bos + select(ok, r, 0)) * hk + kh) * dk + kb + e % 16;
                let kv = select(ok, load(k[ki]).cast::<f32>(), 0.0);
                let qv = select(ok, load(q[ki]).cast::<f32>(), 0.0);
                store(sx[e], select(pass == 0, kv, qv).cast::<P>());
                store(sy[e], kv.cast::<P>());
            }
            barrier();
            matrix_load(fa, sx[sg * 256], 16);
            matrix_load_t(fb, sy[0], 16);
            matrix_mma(acc0, fa, fb, acc0);
            matrix_load_t(fb, sy[256], 16);
            matrix_mma(acc1, fa, fb, acc1);
            matrix_load_t(fb, sy[512], 16);
            matrix_mma(acc2, fa, fb, acc2);
            matrix_load_t(fb, sy[768], 16);
            matrix_mma(acc3, fa, fb, acc3);
            barrier();
        }
        matrix_store(acc0, sa[sg * 1024], 64);
        matrix_store(acc1, sa[sg * 1024 + 16], 64);
        matrix_store(acc2, sa[sg * 1024 + 32], 64);
        matrix_store(acc3, sa[sg * 1024 + 48], 64);
        barrier();
        // Gate and mask: strictly lower with β for A, lower with scale for Aqk.
        for e in range(tid, 4096, 128) {
            let i = e / 64;
            let j = e % 64;
            let gate = exp(load(sgc[i]) - load(sgc[j]));
            let keep = select(pass == 0, i > j, i >= j);
            let f = select(pass == 0, load(sb[i]), scale);
            let x = select(keep, load(sa[e]) * gate * f, 0.0);
            if pass == 0 {
                store(sa[e], x);
            } else {
                store(aqk[(c * hv + h) * 4096 + e], x.cast::<P>());
            }
        }
        barrier();
        // (I + A)⁻¹: thread j solves column j top-down, in f32.
        if pass == 0 {
            if tid < 64 {
                let col = stack_array::<f32>(64);
                for i in 0..64 {
                    let mut x = select(i == tid, 1.0, 0.0);
                    if i > tid {
                        for m in range(tid, i, 1) {
                            x -= load(sa[i * 64 + m]) * load(col[m]);
                        }
                    }
                    store(col[i], x);
                    store(sai[i * 64 + tid], x.cast::<P>());
                }
            }
            barrier();
        }
    }
    // w = Ai·(β·e^{gc}·K) and u = Ai·(β·V), 16 columns at a time.
    for kb in range(0, dk + dv, 16) {
        let is_k = kb < dk;
        for e in range(tid, 1024, 128) {
            let r = e / 16;
            let ok = r < len;
            let col = e % 16;
            let row = bos + select(ok, r, 0);
            let ki = (row * hk + kh) * dk + select(is_k, kb, 0) + col;
            let vi = (row * hv + h) * dv + select(is_k, 0, kb - dk) + col;
            let x = select(
                is_k,
                load(k[ki]).cast::<f32>() * exp(load(sgc[r])),
                load(v[vi]).cast::<f32>(),
            );
            store(sx[e], select(ok, x * load(sb[r]), 0.0).cast::<P>());
        }
        barrier();
        matrix_fill(acc0, 0.0);
        for j in 0..4 {
            matrix_load(fa, sai[sg * 1024 + j * 16], 64);
            matrix_load(fb, sx[j * 256], 16);
            matrix_mma(acc0, fa, fb, acc0);
        }
        if is_k {
            matrix_store(acc0, sa[sg * 256], 16);
        } else {
            matrix_store(acc0, u[((c * hv + h) * 64 + sg * 16) * dv + kb - dk], dv);
        }
        barrier();
        if is_k {
            for e in range(tid, 1024, 128) {
                store(
                    w[((c * hv + h) * 64 + e / 16) * dk + kb + e % 16],
                    load(sa[e]).cast::<P>(),
                );
            }
        }
        barrier();
    }
    // qg, kg and the chunk decay.
    for e in range(tid, 64 * dk, 128) {
        let r = e / dk;
        let ok = r < len;
        let ki = ((bos + select(ok, r, 0)) * hk + kh) * dk + e % dk;
        let gr = load(sgc[r]);
        let qv = select(ok, load(q[ki]).cast::<f32>() * exp(gr) * (0.0 - scale), 0.0);
        let kv = select(ok, load(k[ki]).cast::<f32>() * exp(glast - gr), 0.0);
        let o = (c * hv + h) * 64 * dk + e;
        store(qg[o], qv.cast::<P>());
        store(kg[o], kv.cast::<P>());
    }
    if tid == 0 {
        store(decay[c * hv + h], exp(glast));
    }
}

/// Per (16 value rows, value head, sequence): the state recurrence over the chunks.
#[kernel]
pub fn gdn_chunk_state_kernel<T, S, P>(
    w: Tensor<P>,
    u: Tensor<f32>,
    qg: Tensor<P>,
    kg: Tensor<P>,
    aqk: Tensor<P>,
    decay: Tensor<f32>,
    chunks: Tensor<u32>,
    seq_chunks: Tensor<u32>,
    h0: Tensor<S>,
    mut o: Tensor<T>,
    mut state_out: Tensor<S>,
    use_h0: u32,
    #[constexpr] dk: u32,
    #[constexpr] dv: u32,
    #[constexpr] hv: u32,
) {
    let v0 = group_id_x() * 16;
    let h = group_id_y();
    let n = group_id_z();
    let tid = thread_id();
    let sg = simd_id();
    let ss = threadgroup_array::<f32>(16 * dk);
    let ssn = threadgroup_array::<P>(16 * dk);
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
        for e in range(tid, 16 * dk, 128) {
            store(ssn[e], (0.0 - load(ss[e])).cast::<P>());
        }
        barrier();
        // V_new = u − w·Sᵀ: simdgroup sg owns rows sg·16.. of the chunk.
        matrix_load(acc, u[(ch + sg * 16) * dv + v0], dv);
        for kk in range(0, dk, 16) {
            matrix_load(fa, w[(ch + sg * 16) * dk + kk], dk);
            matrix_load_t(fb, ssn[kk], dk);
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
        // o = qg·(−S)ᵀ + Aqk·V_new (qg carries −scale·e^{gc}).
        matrix_fill(acc, 0.0);
        for kk in range(0, dk, 16) {
            matrix_load(fa, qg[(ch + sg * 16) * dk + kk], dk);
            matrix_load_t(fb, ssn[kk], dk);
            matrix_mma(acc, fa, fb, acc);
        }
        for j in 0..4 {
            matrix_load(fa, aqk[(ch + sg * 16) * 64 + j * 16], 64);
            matrix_load(fb, svp[j * 256], 16);
            matrix_mma(acc, fa, fb, acc);
        }
        matrix_store(acc, svn[sg * 256], 16);
        // S ← e^{gc_last}·S + V_newᵀ·kg, 16 columns of Dk per simdgroup step.
        for kd in range(sg * 16, dk, 64) {
            matrix_load(acc, ss[kd], dk);
            for j in 0..4 {
                matrix_load_t(fa, svp[j * 256], 16);
                matrix_load(fb, kg[(ch + j * 16) * dk + kd], dk);
                matrix_mma(acc, fa, fb, acc);
            }
            matrix_store(acc, ss[kd], dk);
        }
        barrier();
        let bos = load(chunks[c * 2]);
        let len = load(chunks[c * 2 + 1]);
        for e in range(tid, 1024, 128) {
            let i = e / 16;
            if i < len {
                store(
                    o[((bos + i) * hv + h) * dv + v0 + e % 16],
                    load(svn[e]).cast::<T>(),
                );
            }
        }
        barrier();
    }
    for e in range(tid, 16 * dk, 128) {
        store(state_out[sbase + e], load(ss[e]).cast::<S>());
    }
}
