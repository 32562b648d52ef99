//! The pipelined GEMM, `c[M, N] = a[M, K]·b[N, K]ᵀ` (the linear layer, `bt` 1) or
//! `a·b[K, N]` (`bt` 0), f16/bf16 with f32 accumulation, on whole tiles: a threadgroup of `wg` warpgroups owns a `64·wg × 16·nb`
//! output tile; K advances 64 at a time through `stages` threadgroup buffers filled by
//! asynchronous copies in the 128-byte-swizzled layout, `stages − 1` tiles ahead of the
//! product, and each step is one `matrix_mma_tiles_async` (warpgroup MMA from shared memory
//! on sm_90a, `mma.sync` from the same tiles elsewhere) that runs while the threads issue
//! the next tile's copies. K must be a multiple of 8 (16-byte copies), and N too when
//! `b` is `[K, N]` (its tile is `[64, 16·nb]` in 64-column blocks); M, N and K need not be multiples of the tile (the copies zero-fill past the
//! edges and the edge tiles store through a masked path).

use tessera_macros::{func, kernel};

/// Index of element `(r, c)` of a 128-byte-swizzled tile of 64 columns (see
/// `tessera_ir::swizzled_128b`).
#[func]
pub fn swizzled(r: u32, c: u32) -> u32 {
    r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7)
}

/// Starts the copies of rows `row0 … row0 + rows` (those below `limit`), columns `kt …
/// kt + 64` (those below `k`), of the row-major `[·, k]` matrix `src` into the swizzled tile
/// at `at` of `dst`, 16 bytes a copy, spread over the threadgroup's `threads` threads.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn fetch_tile<T>(
    mut dst: Mem<T>,
    at: u32,
    src: Mem<T>,
    row0: u32,
    rows: u32,
    limit: u32,
    k: u32,
    kt: u32,
    tid: u32,
    threads: u32,
) {
    for e in range(tid, rows * 8, threads) {
        let r = e / 8;
        let col = (e % 8) * 8;
        let ok = row0 + r < limit && kt + col < k;
        let from = select(ok, (row0 + r) * k + kt + col, 0);
        copy_async_or_zero(dst[at + swizzled(r, col)], src[from], 8, ok);
    }
}

/// Starts the copies of rows `kt … kt + 64` of K (those below `k`), columns `col0 … col0 +
/// cols` (those below `n`), of the row-major `[k, n]` matrix `src` into the `[64, cols]`
/// tile at `at` of `dst`: 64-column blocks 4096 elements apart, each swizzled with its rows
/// along K, 16 bytes a copy over the threadgroup's `threads` threads.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn fetch_tile_kn<T>(
    mut dst: Mem<T>,
    at: u32,
    src: Mem<T>,
    col0: u32,
    cols: u32,
    n: u32,
    k: u32,
    kt: u32,
    tid: u32,
    threads: u32,
) {
    let chunks = cols / 8;
    for e in range(tid, 64 * chunks, threads) {
        let r = e / chunks;
        let col = (e % chunks) * 8;
        let ok = kt + r < k && col0 + col < n;
        let from = select(ok, (kt + r) * n + col0 + col, 0);
        copy_async_or_zero(
            dst[at + (col / 64) * 4096 + swizzled(r, col % 64)],
            src[from],
            8,
            ok,
        );
    }
}

/// Stores the calling simdgroup's accumulators `acc` — rows `row0 + 16·simd_id() …` (16
/// of them), columns `col0 … col0 + 16·acc.len()` of the row-major `[·, n]` output `out`,
/// one tile a fragment — keeping to the rows below `rows` and the columns below `n`. When
/// the threadgroup's whole `bm`-row tile is inside, straight from the fragments; else
/// (after a barrier, so every simdgroup has finished with `scratch`) each tile is rounded
/// into the simdgroup's own 256 elements of `scratch` and its lanes store what is inside.
/// A threadgroup collective: every thread calls it, with the same `row0`, `bm` and `col0`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn store_acc_tiles<T>(
    acc: [MatrixAcc],
    mut out: Mem<T>,
    mut scratch: Mem<T>,
    row0: u32,
    bm: u32,
    col0: u32,
    rows: u32,
    n: u32,
) {
    let s = simd_id();
    let r0 = row0 + 16 * s;
    if row0 + bm <= rows && col0 + 16 * acc.len() <= n {
        for j in 0..acc.len() {
            matrix_store(acc[j], out[r0 * n + col0 + 16 * j], n);
        }
    } else {
        barrier();
        let lane = simd_lane();
        for j in 0..acc.len() {
            matrix_store(acc[j], scratch[s * 256], 16);
            simd_barrier();
            for e in range(lane, 256, 32) {
                let r = r0 + e / 16;
                let col = col0 + 16 * j + e % 16;
                if r < rows && col < n {
                    store(out[r * n + col], load(scratch[s * 256 + e]));
                }
            }
            simd_barrier();
        }
    }
}

/// `c = a·bᵀ` (`bt` 1) or `a·b` (`bt` 0) on tiles; grid `[ceil(N / 16nb), ceil(M / 64wg),
/// 1]`, `128·wg` threads.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn matmul_pipelined_kernel<T>(
    a: Tensor<T>,
    b: Tensor<T>,
    mut c: Tensor<T>,
    m: u32,
    n: u32,
    k: u32,
    #[constexpr] wg: u32,
    #[constexpr] nb: u32,
    #[constexpr] stages: u32,
    #[constexpr] bt: u32,
) {
    let bm = 64 * wg;
    let bn = 16 * nb;
    let threads = 128 * wg;
    let sa = threadgroup_array::<T>(stages * 64 * wg * 64);
    let sb = threadgroup_array::<T>(stages * 16 * nb * 64);
    let acc = [matrix_acc(); nb];
    for j in 0..nb {
        matrix_fill(acc[j], 0.0);
    }
    let row0 = group_id_y() * bm;
    let col0 = group_id_x() * bn;
    let tid = thread_id();
    let tiles = (k + 63) / 64;
    for s in 0..stages - 1 {
        if s < tiles {
            fetch_tile(sa, s * bm * 64, a, row0, bm, m, k, s * 64, tid, threads);
            if bt == 1 {
                fetch_tile(sb, s * bn * 64, b, col0, bn, n, k, s * 64, tid, threads);
            } else {
                fetch_tile_kn(sb, s * bn * 64, b, col0, bn, n, k, s * 64, tid, threads);
            }
        }
        commit_copies();
    }
    for t in 0..tiles {
        wait_copies(stages - 2);
        barrier();
        // The product of tile t runs while the copies of tile t + stages − 1 are issued
        // into the buffers tile t − 1 used (every product on them ended before the barrier).
        let cur = t % stages;
        if bt == 1 {
            matrix_mma_tiles_async(acc, sa[cur * bm * 64], sb[cur * bn * 64]);
        } else {
            matrix_mma_tiles_kn_async(acc, sa[cur * bm * 64], sb[cur * bn * 64]);
        }
        let next = t + stages - 1;
        if next < tiles {
            let st = next % stages;
            fetch_tile(sa, st * bm * 64, a, row0, bm, m, k, next * 64, tid, threads);
            if bt == 1 {
                fetch_tile(sb, st * bn * 64, b, col0, bn, n, k, next * 64, tid, threads);
            } else {
                fetch_tile_kn(sb, st * bn * 64, b, col0, bn, n, k, next * 64, tid, threads);
            }
        }
        commit_copies();
        matrix_mma_wait(acc, 0);
    }
    // Edge tiles go through the first A buffer, free once every product has finished.
    store_acc_tiles(acc, c, sa, row0, bm, col0, m, n);
}
