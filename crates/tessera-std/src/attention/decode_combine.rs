//! The split-KV combine kernel: merges the `splits` partial (max, sum, output) states of
//! each (query row, head) in parallel across the threads of one threadgroup, instead of
//! one thread per output element walking every split serially.
//!
//! A threadgroup of `head_dim · slices` threads serves one (head, row). First every
//! thread takes a strided share of the splits for the global max (one `group_max`), then
//! the same share for the weights `exp(m_s − m)` (kept in threadgroup memory) and the
//! denominator (one `group_sum`). Then thread `(slice, d)` sums `part_o[s, d]·w_s` over the
//! splits `s ≡ slice (mod slices)`: `slices` independent coalesced walks of `splits/slices`
//! loads each, whose partial sums meet in threadgroup memory.

use super::softmax::part_weight;
use tessera_macros::kernel;

/// The most splits the combine's weight array holds (the plan's `MAX_SPLITS`).
pub const COMBINE_MAX_SPLITS: u32 = 1024;

/// Slices of the split walk per output element: about 512 threads per threadgroup.
pub fn combine_slices(head_dim: u32) -> u32 {
    (512 / head_dim.max(1)).max(1)
}

/// Combines `splits` partial states per (query row, head) into the output: one
/// threadgroup per (head = grid x, row = grid y) of `head_dim · slices` threads.
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
    let base = (row * n_q_heads + h) * splits;
    let mut mp = neg_infinity();
    for s in range(t, splits, head_dim * slices) {
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
    for s in range(t, splits, head_dim * slices) {
        let w = part_weight(load(part_ml[(base + s) * 2]), mt);
        store(wts[s], w);
        dp += load(part_ml[(base + s) * 2 + 1]) * w;
    }
    let den = group_sum(dp) + select(use_sink, exp(sink - mt), 0.0f32);
    barrier();
    let d = t % head_dim;
    let sl = t / head_dim;
    let mut acc = 0.0f32;
    for s in range(sl, splits, slices) {
        acc += load(part_o[(base + s) * head_dim + d]) * load(wts[s]);
    }
    let sh = threadgroup_array::<f32>(head_dim * slices);
    store(sh[t], acc);
    barrier();
    if sl == 0 {
        let mut a = 0.0f32;
        for i in 0..slices {
            a += load(sh[i * head_dim + d]);
        }
        let res = select(den > 0.0f32, a / den, 0.0f32);
        store(out[(row * n_q_heads + h) * head_dim + d], res.cast::<T>());
    }
}
