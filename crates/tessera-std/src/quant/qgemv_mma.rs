//! `affine_qgemv` for 2 ≤ M ≤ 16 and bf16 on matrix fragments (f16 stays on the CUDA-core
//! kernel: a weight dequantized past f16's range would be infinite in an f16 operand):
//! the x rows are one MMA A operand (rows past M zero), sixteen weight rows dequantized
//! in registers the B operand, f32 accumulators. A threadgroup of four simdgroups owns 16 output columns and splits K in
//! chunks of 256 values: simdgroup `s` takes chunks `s, s + 4, …`. Per chunk a lane first
//! loads the words, scale and bias of four units of 32 values (row `lane / 2`, so all its
//! loads are in flight at once), then per quarter of the chunk dequantizes one unit
//! (`w = scale·q + bias` in f32) into two padded threadgroup tiles, `w` rounded to the
//! input dtype and the remainder `w − hi` rounded again (the pair carries w to about 16
//! bits, where one rounding to bf16 alone misses the tolerance), stages 16 rows × 64
//! values of x beside them and runs eight multiply-accumulates (four per part). The four
//! partial 16×16 sums meet in threadgroup memory at the end.

use super::qgemv::affine_weight;
use tessera_macros::kernel;

/// Output columns per threadgroup: one B operand's width.
pub const QGEMV_MMA_COLUMNS: u32 = 16;

/// `y[r, col] = Σ_k x[r, k]·(scale·q[col, k] + bias)` for `r < m`, `col < n`: `units =
/// K / 32` (a multiple of `units_per_group = group_size / 32`). Grid `[ceil(N / 16), 1,
/// 1]`, 128 threads.
#[kernel]
pub fn affine_qgemv_mma_kernel<T>(
    x: Tensor<T>,
    packed: Tensor<u32>,
    scales: Tensor<T>,
    biases: Tensor<T>,
    mut y: Tensor<T>,
    m: u32,
    n: u32,
    units: u32,
    units_per_group: u32,
    #[constexpr] bits: u32,
) {
    // Per simdgroup: 16 × 72 tiles of w (high and low parts) and of x (rows of 64 values plus 8, so the
    // eight rows `ldmatrix` reads at once start 16 bytes apart in the banks).
    let ws = threadgroup_array::<T>(4608);
    let wl = threadgroup_array::<T>(4608);
    let xs = threadgroup_array::<T>(4608);
    let sums = threadgroup_array::<f32>(1024);
    let fx = matrix_a::<T>();
    let fw = matrix_b::<T>();
    let acc = matrix_acc();
    let words = stack_array::<u32>(4 * bits);
    let sb = stack_array::<f32>(8);
    let lane = simd_lane();
    let sg = simd_id();
    let col0 = group_id_x() * 16;
    let base = sg * 1152;
    let groups = units / units_per_group;
    // This lane's weight row (a row past n repeats the last one) and its half of each
    // quarter's 64 values.
    let r = lane / 2;
    let wrow = min(col0 + r, n - 1);
    let half = lane % 2;
    let kvecs = units * 4;
    matrix_fill(acc, 0.0);
    let chunks = (units + 7) / 8;
    for c in range(sg, chunks, 4) {
        // Quarter q's unit is c·8 + 2q + half; one past the row's end loads the last unit
        // and dequantizes to zeros.
        for q in 0..4 {
            let u = min(c * 8 + 2 * q + half, units - 1);
            let wb = (wrow * units + u) * bits;
            for i in 0..bits {
                store(words[q * bits + i], load(packed[wb + i]));
            }
            let gi = wrow * groups + u / units_per_group;
            store(sb[2 * q], load(scales[gi]).cast::<f32>());
            store(sb[2 * q + 1], load(biases[gi]).cast::<f32>());
        }
        for q in 0..4 {
            let inside = c * 8 + 2 * q + half < units;
            let scale = select(inside, load(sb[2 * q]), 0.0f32);
            let bias = select(inside, load(sb[2 * q + 1]), 0.0f32);
            let wsb = base + r * 72 + half * 32;
            for j in 0..32 {
                let bit = j * bits;
                let at = bit % 32;
                let word = load(words[q * bits + bit / 32]);
                let next = load(words[q * bits + min(bit / 32 + 1, bits - 1)]);
                let wf = affine_weight(word, next, at, bits, scale, bias);
                let hi = wf.cast::<T>();
                store(ws[wsb + j], hi);
                store(wl[wsb + j], (wf - hi.cast::<f32>()).cast::<T>());
            }
            // x: 16 rows × 8 runs of 8 values, four runs per lane; rows past m and runs
            // past K stage zeros.
            for v in 0..4 {
                let e = v * 32 + lane;
                let xr = e / 8;
                let kv = (c * 4 + q) * 8 + e % 8;
                let ok = xr < m && kv < kvecs;
                let xb = (min(xr, m - 1) * kvecs + min(kv, kvecs - 1)) * 8;
                let sx = base + xr * 72 + (e % 8) * 8;
                for i in 0..8 {
                    store(xs[sx + i], select(ok, load(x[xb + i]), 0.0));
                }
            }
            simd_barrier();
            for kk in 0..4 {
                matrix_load(fx, xs[base + kk * 16], 72);
                matrix_load_t(fw, ws[base + kk * 16], 72);
                matrix_mma(acc, fx, fw, acc);
                matrix_load_t(fw, wl[base + kk * 16], 72);
                matrix_mma(acc, fx, fw, acc);
            }
            simd_barrier();
        }
    }
    matrix_store(acc, sums[sg * 256], 16);
    barrier();
    // Thread t sums elements t and t + 128 of the four partial tiles.
    for e in range(thread_id(), 256, 128) {
        let yr = e / 16;
        let cc = e % 16;
        let total = load(sums[e]) + load(sums[256 + e]) + load(sums[512 + e]) + load(sums[768 + e]);
        if yr < m && col0 + cc < n {
            store(y[yr * n + col0 + cc], total.cast::<T>());
        }
    }
}
