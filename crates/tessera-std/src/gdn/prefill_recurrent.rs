//! The f32 Gated DeltaNet prefill: the decode step's recurrence walked token by token on
//! CUDA cores, with each state row held in f32 registers for the whole sequence. The
//! chunked kernels stage their products in f16/bf16 fragments, which holds f16 accuracy
//! and overflows past 65504; f32 activations come here instead, so an f32 prefill is as
//! accurate as the f32 decode step, and takes any value an f32 can hold.
//!
//! Geometry is the decode step's for an f32 state: a simdgroup owns one state row `(seq,
//! h, dv)`, each lane `Dk / 32` consecutive elements; a threadgroup holds
//! [`DECODE_ROWS`] rows. The walk is sequential in the tokens, so long prompts take longer
//! than the chunked path; the sequences, heads and rows run in parallel.
//!
//! After a chunked prefill the same kernel redoes, in f32, the (sequence, value head)
//! pairs whose chunks the chunked kernels flagged (a non-finite output: a NaN or ∞ in the
//! data, or a value past the f16 staging's range), and leaves the others as they are.

use super::prefill_workspace::GdnPrefillWorkspace;
use super::validate::DECODE_ROWS;
use crate::error::{runtime, OpError};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// Per state row `(seq, h, r)`, for each token of sequence `seq` (`cu_seqlens[seq] ≤ t <
/// cu_seqlens[seq + 1]`): `S ← e^{g}·S; v_new = β·(v − S k); S ← S + v_new kᵀ; o = scale·S
/// q`, from `h0` (or zero when `use_h0 == 0`); the final state goes to `state_out`. With
/// `every == 0` only the pairs `(seq, h)` with a chunk `c` of the sequence
/// (`seq_chunks[seq] ≤ c < seq_chunks[seq + 1]`) flagged in `redo [NC, Hv]` are walked and
/// written. Grid `[N·Hv, ceil(Dv / DECODE_ROWS), 1]`, `32·DECODE_ROWS` threads; rows past
/// `Dv` compute on row 0 and store nothing.
#[kernel]
pub fn gdn_recurrent_prefill_kernel<T, S>(
    q: Tensor<T>,
    k: Tensor<T>,
    v: Tensor<T>,
    g: Tensor<f32>,
    beta: Tensor<f32>,
    cu_seqlens: Tensor<u32>,
    seq_chunks: Tensor<u32>,
    redo: Tensor<u32>,
    h0: Tensor<S>,
    mut o: Tensor<T>,
    mut state_out: Tensor<S>,
    use_h0: u32,
    every: u32,
    scale: f32,
    #[constexpr] dk: u32,
    #[constexpr] dv: u32,
    #[constexpr] hv: u32,
    #[constexpr] hk: u32,
) {
    let npt = dk / 32;
    let n = group_id_x();
    let row = group_id_y() * simd_groups() + simd_id();
    let lane = simd_lane();
    let inside = row < dv;
    let r = select(inside, row, 0);
    let seq = n / hv;
    let h = n - seq * hv;
    let kh = h / (hv / hk);
    let sbase = (n * dv + r) * dk + lane * npt;
    let with_h0 = use_h0 != 0;
    let ss = stack_array::<f32>(npt);
    let ks = stack_array::<f32>(npt);
    for i in 0..npt {
        let s0 = load(h0[select(with_h0, sbase + i, 0)]).cast::<f32>();
        store(ss[i], select(with_h0, s0, 0.0f32));
    }
    // The bounds are the same for every lane; the broadcast says so, which lets the walk
    // hold simdgroup collectives.
    let t0 = simd_broadcast(load(cu_seqlens[seq]), 0);
    // Whether this pair is walked: always, or when one of its chunks is flagged.
    let c0 = load(seq_chunks[seq]);
    let c1 = select(every != 0, c0, load(seq_chunks[seq + 1]));
    let mut flagged = 0u32;
    for c in range(c0 + lane, c1, 32) {
        flagged = max(flagged, load(redo[c * hv + h]));
    }
    let walk = every != 0 || simd_max(flagged) != 0;
    let t1 = select(walk, simd_broadcast(load(cu_seqlens[seq + 1]), 0), t0);
    for t in range(t0, t1, 1) {
        let kbase = (t * hk + kh) * dk + lane * npt;
        let gh = t * hv + h;
        let decay = exp(load(g[gh]));
        let bt = load(beta[gh]);
        let mut kv = 0.0f32;
        for i in 0..npt {
            let kk = load(k[kbase + i]).cast::<f32>();
            let s = load(ss[i]) * decay;
            store(ks[i], kk);
            store(ss[i], s);
            kv += s * kk;
        }
        for s in 0..5 {
            kv += simd_shuffle_xor(kv, 16 >> s);
        }
        let vn = bt * (load(v[gh * dv + r]).cast::<f32>() - kv);
        let mut acc = 0.0f32;
        for i in 0..npt {
            let s = load(ss[i]) + vn * load(ks[i]);
            store(ss[i], s);
            acc += s * load(q[kbase + i]).cast::<f32>();
        }
        for s in 0..5 {
            acc += simd_shuffle_xor(acc, 16 >> s);
        }
        if inside && lane == 0 {
            store(o[gh * dv + r], (acc * scale).cast::<T>());
        }
    }
    if inside && walk {
        for i in 0..npt {
            store(state_out[sbase + i], load(ss[i]).cast::<S>());
        }
    }
}

/// The head sizes of a validated prefill: (Hk, Hv, Dk, Dv).
pub(crate) struct Heads {
    pub hk: u32,
    pub hv: u32,
    pub dk: u32,
    pub dv: u32,
}

/// Which (sequence, value head) pairs a recurrent walk covers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pairs {
    /// Every pair: the f32 prefill.
    All,
    /// The pairs the chunked kernels flagged in the workspace.
    Flagged,
}

/// Runs the recurrence over the `n` sequences `ws` is planned for (its boundaries, and the
/// chunk flags for [`Pairs::Flagged`]), for a validated prefill; `h0` is a zero dummy when
/// `use_h0` is false.
#[allow(clippy::too_many_arguments)]
pub(crate) fn recurrent_prefill(
    op: &'static str,
    ctx: &Context,
    a: &super::PrefillArgs,
    h0: &Tensor,
    use_h0: bool,
    ws: &GdnPrefillWorkspace,
    pairs: Pairs,
    n: u32,
    heads: Heads,
    scale: f32,
) -> Result<(), OpError> {
    let args = gdn_recurrent_prefill_kernel::Args {
        q: a.q,
        k: a.k,
        v: a.v,
        g: a.g,
        beta: a.beta,
        cu_seqlens: &ws.cu,
        seq_chunks: &ws.seq_chunks,
        redo: &ws.redo,
        h0,
        o: a.o,
        state_out: a.final_state,
        use_h0: use_h0 as u32,
        every: u32::from(pairs == Pairs::All),
        scale,
    };
    let consts = gdn_recurrent_prefill_kernel::Consts {
        dk: heads.dk,
        dv: heads.dv,
        hv: heads.hv,
        hk: heads.hk,
    };
    gdn_recurrent_prefill_kernel::launch(ctx, args, consts)
        .grid([n * heads.hv, heads.dv.div_ceil(DECODE_ROWS), 1])
        .group_size(32 * DECODE_ROWS)
        .run()
        .map_err(runtime(op))
}
