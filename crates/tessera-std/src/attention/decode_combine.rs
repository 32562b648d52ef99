//! The split-KV combine kernel: merges the `splits` partial (max, sum, output) states of
//! each (query row, head) into the output, in one memory round trip for up to 128 splits.
//!
//! A threadgroup serves 32 output columns of one (head, row) with 8 threads per slice of
//! the splits, [`combine_slices`] slices. Thread `(slice, vec)` walks the splits
//! `s ≡ slice (mod slices)` for the 16-byte vector `vec` of those columns, four splits per
//! step with all their loads (max, sum and output vector) issued together, and folds them
//! into its own running (max, sum, output): no global max is needed before the outputs
//! are read. The four slices of a simdgroup that share a vector then merge through
//! shuffles, the simdgroups through threadgroup memory, and 32 threads divide and write
//! the columns.

use super::softmax::{merge_factors, normalise_output, part_weight, sink_weight};
use tessera_macros::kernel;

/// Output columns one combine threadgroup writes.
pub const COMBINE_COLUMNS: u32 = 32;

/// Slices of the split walk for `splits` splits: a power of two from 4 (one simdgroup)
/// to 32 (eight), so a thread walks at most four splits per step up to 128 splits and a
/// small combine launches no idle simdgroups. The threadgroup has 8 threads per slice.
pub fn combine_slices(splits: u32) -> u32 {
    splits.next_power_of_two().clamp(4, 32)
}

/// Every slice count [`combine_slices`] gives.
pub const COMBINE_SLICES: [u32; 4] = [4, 8, 16, 32];

/// Combines `splits` partial states per (query row, head) into the output: one
/// threadgroup of `8 · slices` threads (`slices` from [`combine_slices`]) per (head ·
/// head_dim / 32 + column block = grid x, row = grid y). `sinks` is read only when
/// `has_sink_logit != 0`; a row with no visible key gets zeros.
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
    let cblocks = head_dim / 32;
    let h = group_id_x() / cblocks;
    let c0 = (group_id_x() % cblocks) * 32;
    let row = group_id_y();
    let t = thread_id();
    let lane = simd_lane();
    let sg = simd_id();
    let vec = t % 8;
    let slice = t / 8;
    let sgs = slices / 4;
    let base = (row * n_q_heads + h) * splits;
    let use_sink = has_sink_logit != 0;
    let sink = select(
        use_sink,
        load(sinks[select(use_sink, h, 0)]).cast::<f32>(),
        neg_infinity(),
    );

    // This thread's splits, folded into (mt, lt, acc) four at a time.
    let ml = stack_array::<f32>(8);
    let xs = stack_array::<f32>(16);
    let acc = stack_array::<f32>(4);
    for e in 0..4 {
        store(acc[e], 0.0f32);
    }
    let mut mt = neg_infinity();
    let mut lt = 0.0f32;
    for s0 in range(slice, splits, slices * 4) {
        for u in 0..4 {
            let s = min(s0 + u * slices, splits - 1);
            for e in 0..2 {
                store(ml[u * 2 + e], load(part_ml[(base + s) * 2 + e]));
            }
            for e in 0..4 {
                store(
                    xs[u * 4 + e],
                    load(part_o[(base + s) * head_dim + c0 + vec * 4 + e]),
                );
            }
        }
        let mut mx = mt;
        for u in 0..4 {
            let ms = select(s0 + u * slices < splits, load(ml[u * 2]), neg_infinity());
            mx = max(mx, ms);
        }
        let keep = part_weight(mt, mx);
        lt *= keep;
        for e in 0..4 {
            store(acc[e], load(acc[e]) * keep);
        }
        for u in 0..4 {
            let w = select(
                s0 + u * slices < splits,
                part_weight(load(ml[u * 2]), mx),
                0.0f32,
            );
            lt += load(ml[u * 2 + 1]) * w;
            for e in 0..4 {
                store(acc[e], load(acc[e]) + load(xs[u * 4 + e]) * w);
            }
        }
        mt = mx;
    }

    // The simdgroup's four slices of each vector (lanes 8 and 16 apart).
    for st in 0..2 {
        let d = 8 << st;
        let mo = simd_shuffle_xor(mt, d);
        let lo = simd_shuffle_xor(lt, d);
        let (mx, a, b) = merge_factors(mt, mo);
        lt = lt * a + lo * b;
        for e in 0..4 {
            let xo = simd_shuffle_xor(load(acc[e]), d);
            store(acc[e], load(acc[e]) * a + xo * b);
        }
        mt = mx;
    }
    let sm = threadgroup_array::<f32>(64);
    let sl = threadgroup_array::<f32>(64);
    let so = threadgroup_array::<f32>(256);
    if lane < 8 {
        store(sm[sg * 8 + lane], mt);
        store(sl[sg * 8 + lane], lt);
        for e in 0..4 {
            store(so[sg * 32 + lane * 4 + e], load(acc[e]));
        }
    }
    barrier();
    // Column `t` over the simdgroups, with the sink's share of the denominator.
    if t < 32 {
        let v = t / 4;
        let mut m = sink;
        for w in 0..sgs {
            m = max(m, load(sm[w * 8 + v]));
        }
        let mut den = select(use_sink, sink_weight(sink, m), 0.0f32);
        let mut num = 0.0f32;
        for w in 0..sgs {
            let wt = part_weight(load(sm[w * 8 + v]), m);
            den += load(sl[w * 8 + v]) * wt;
            num += load(so[w * 32 + t]) * wt;
        }
        let res = normalise_output(num, den);
        store(
            out[(row * n_q_heads + h) * head_dim + c0 + t],
            res.cast::<T>(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{combine_slices, COMBINE_SLICES};

    #[test]
    fn slices_cover_the_splits_between_one_and_eight_simdgroups() {
        for splits in 1..=1024u32 {
            let s = combine_slices(splits);
            assert!(COMBINE_SLICES.contains(&s), "{splits}: {s}");
            assert!(
                s >= splits.min(32) && s < 2 * splits.max(4),
                "{splits}: {s}"
            );
        }
        assert_eq!(combine_slices(2), 4);
        assert_eq!(combine_slices(66), 32);
    }
}
