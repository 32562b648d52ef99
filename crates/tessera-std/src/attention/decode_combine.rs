//! The split-KV combine kernel: merges the `splits` partial (max, sum, output) states of
//! each (query row, head) in parallel across the threads of one threadgroup.
//!
//! A threadgroup of [`COMBINE_THREADS`] threads serves one (head, row). First every
//! thread takes a strided share of the splits for the global max (one `group_max`), then
//! the same share for the weights `exp(m_s − m)` (kept in threadgroup memory) and the
//! denominator (one `group_sum`). Then thread `(slice, vec)` sums the 16-byte vector `vec`
//! of `part_o[s]`, weighted, over the splits `s ≡ slice (mod slices)`, four splits per
//! step with their loads issued together, so a walk of `splits/slices` loads costs about
//! a quarter as many memory round trips; the slices' sums meet in threadgroup memory.

use super::softmax::part_weight;
use tessera_macros::kernel;

/// The most splits the combine's weight array holds (the plan's `MAX_SPLITS`).
pub const COMBINE_MAX_SPLITS: u32 = 1024;

/// Threads of a combine threadgroup.
pub const COMBINE_THREADS: u32 = 256;

/// Slices of the split walk per output vector of 4 elements: as many as fill
/// [`COMBINE_THREADS`].
pub fn combine_slices(head_dim: u32) -> u32 {
    (COMBINE_THREADS / (head_dim / 4).max(1)).max(1)
}

/// Combines `splits` partial states per (query row, head) into the output: one
/// threadgroup per (head = grid x, row = grid y) of [`COMBINE_THREADS`] threads.
/// `sinks` is read only when `has_sink_logit != 0`; a row with no visible key gets zeros.
#[kernel]
pub fn sdpa_decode_combine_kernel<T>(
    part_o: Tensor<f32>,
    part_ml: Tensor<f32>,
    sinks: Tensor<T>,
    mut out: Tensor<T>,
    n_q_heads: u32,
    splits: u32,
    has_sink_logit: u32,
    #[constexpr] head_dim: u32,
    #[constexpr] slices: u32,
) {
    let h = group_id_x();
    let row = group_id_y();
    let t = thread_id();
    let threads = 256; // COMBINE_THREADS
    let base = (row * n_q_heads + h) * splits;
    let mut mp = neg_infinity();
    for s in range(t, splits, threads) {
        mp = max(mp, load(part_ml[(base + s) * 2]));
    }
    let m = group_max(mp);
    let use_sink = has_sink_logit != 0;
    let sink = select(
        use_sink,
        load(sinks[select(use_sink, h, 0)]).cast::<f32>(),
        neg_infinity(),
    );
    let mt = max(m, sink);
    let wts = threadgroup_array::<f32>(1024);
    let mut dp = 0.0f32;
    for s in range(t, splits, threads) {
        let w = part_weight(load(part_ml[(base + s) * 2]), mt);
        store(wts[s], w);
        dp += load(part_ml[(base + s) * 2 + 1]) * w;
    }
    let den = group_sum(dp) + select(use_sink, exp(sink - mt), 0.0f32);
    barrier();
    let nv = head_dim / 4;
    let vec = t % nv;
    let sl = t / nv;
    let acc = stack_array::<f32>(4);
    let xs = stack_array::<f32>(16);
    for e in 0..4 {
        store(acc[e], 0.0f32);
    }
    if sl < slices {
        for s0 in range(sl, splits, slices * 4) {
            for u in 0..4 {
                let s = min(s0 + u * slices, splits - 1);
                for e in 0..4 {
                    store(
                        xs[u * 4 + e],
                        load(part_o[(base + s) * head_dim + vec * 4 + e]),
                    );
                }
            }
            for u in 0..4 {
                let s = s0 + u * slices;
                let w = select(s < splits, load(wts[min(s, splits - 1)]), 0.0f32);
                for e in 0..4 {
                    store(acc[e], load(acc[e]) + load(xs[u * 4 + e]) * w);
                }
            }
        }
    }
    let sh = threadgroup_array::<f32>(head_dim * slices);
    if sl < slices {
        for e in 0..4 {
            store(sh[sl * head_dim + vec * 4 + e], load(acc[e]));
        }
    }
    barrier();
    for d in range(t, head_dim, threads) {
        let mut a = 0.0f32;
        for i in 0..slices {
            a += load(sh[i * head_dim + d]);
        }
        let res = select(den > 0.0f32, a / den, 0.0f32);
        store(out[(row * n_q_heads + h) * head_dim + d], res.cast::<T>());
    }
}
