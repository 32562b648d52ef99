//! Skinny GEMM on matrix fragments for 2 ≤ M ≤ 16 rows, f16/bf16, `K % 8 == 0`:
//! `y[M, N] = x[M, K]·wᵀ` with `w` `[N, K]`. The x rows are one MMA A operand (rows past
//! M zero), sixteen weight rows the B operand, f32 accumulators. A threadgroup of four
//! simdgroups owns 16 output columns and splits K in chunks of 64: simdgroup `s` takes
//! chunks `s, s + 4, …`, each lane loading four 16-byte runs of w (16 rows × 128 bytes a
//! chunk, coalesced) and of x into the simdgroup's own padded threadgroup tiles, then
//! four multiply-accumulates; the four partial 16×16 sums meet in threadgroup memory at
//! the end. Every weight byte is read once; the arithmetic is on tensor cores, so M = 16
//! costs what M = 2 does.

use tessera_macros::kernel;

/// Output columns per threadgroup: one B operand's width.
pub const GEMV_MMA_COLUMNS: u32 = 16;

/// `y[r, col] = Σ_k x[r, k]·w[col, k]` for `r < m`, `col < n`; `kvecs = K / 8`.
/// Grid `[ceil(N / 16), 1, 1]`, 128 threads.
#[kernel]
pub fn gemv_mma_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut y: Tensor<T>,
    m: u32,
    n: u32,
    kvecs: u32,
) {
    // Per simdgroup: a 16 × 72 tile of w and one of x (rows of 64 elements plus 8, so
    // the eight rows `ldmatrix` reads at once start 16 bytes apart in the banks).
    let ws = threadgroup_array::<T>(4608);
    let xs = threadgroup_array::<T>(4608);
    let sums = threadgroup_array::<f32>(1024);
    let fx = matrix_a::<T>();
    let fw = matrix_b::<T>();
    let acc = matrix_acc();
    let lane = simd_lane();
    let sg = simd_id();
    let col0 = group_id_x() * 16;
    let base = sg * 1152;
    matrix_fill(acc, 0.0);
    let chunks = (kvecs + 7) / 8;
    for c in range(sg, chunks, 4) {
        // 16 rows × 8 runs of 8: lane takes runs lane, lane + 32, …; a run past K, or an
        // x row past m, stages zeros; a weight row past n repeats the last one.
        for u in 0..4 {
            let e = u * 32 + lane;
            let r = e / 8;
            let kv = c * 8 + e % 8;
            let inside = kv < kvecs;
            let kc = min(kv, kvecs - 1);
            let wb = (min(col0 + r, n - 1) * kvecs + kc) * 8;
            let xok = inside && r < m;
            let xb = (min(r, m - 1) * kvecs + kc) * 8;
            let sb = base + r * 72 + (e % 8) * 8;
            for i in 0..8 {
                store(ws[sb + i], select(inside, load(w[wb + i]), 0.0));
                store(xs[sb + i], select(xok, load(x[xb + i]), 0.0));
            }
        }
        simd_barrier();
        for kk in 0..4 {
            matrix_load(fx, xs[base + kk * 16], 72);
            matrix_load_t(fw, ws[base + kk * 16], 72);
            matrix_mma(acc, fx, fw, acc);
        }
        simd_barrier();
    }
    matrix_store(acc, sums[sg * 256], 16);
    barrier();
    // Thread t sums element t and t + 128 of the four partial tiles.
    for e in range(thread_id(), 256, 128) {
        let r = e / 16;
        let cc = e % 16;
        let total = load(sums[e]) + load(sums[256 + e]) + load(sums[512 + e]) + load(sums[768 + e]);
        if r < m && col0 + cc < n {
            store(y[r * n + col0 + cc], total.cast::<T>());
        }
    }
}
