//! What the quantized GEMMs of prefill share whatever the weight format: where a
//! threadgroup's output tile lies (threadgroups in bands of column tiles), the x tiles'
//! asynchronous copies ahead of the products, where a thread's 8-weight chunk of the
//! swizzled B tile lies (the masked store of an edge tile is
//! `matmul::pipelined::store_acc_tiles`). `affine_qgemm_kernel` and `quant_gemm_kernel` are
//! built from them.

use crate::matmul::pipelined::fetch_tile;
use tessera_macros::func;

/// The first row and column of the threadgroup's `bm × bn` output tile: threadgroups in
/// bands of `band` column tiles, each band walked row tile by row tile, so the groups
/// resident at once share a few column tiles' weights (which stay in L2) rather than
/// sweeping every column of N between two uses of one.
#[func]
pub fn qgemm_tile_origin(m: u32, n: u32, bm: u32, bn: u32, band: u32) -> (u32, u32) {
    let col_tiles = (n + bn - 1) / bn;
    let row_tiles = (m + bm - 1) / bm;
    let id = group_id_y() * col_tiles + group_id_x();
    let first = id / (band * row_tiles) * band;
    let width = min(band, col_tiles - first);
    let in_band = id - first * row_tiles;
    (in_band / width * bm, (first + in_band % width) * bn)
}

/// Starts the copies of the x tile `t` (rows `row0 … row0 + bm`, K values `64t …`) into
/// A buffer `t % stages` of `sa` over the threadgroup's `threads` threads, if there is
/// such a tile, and commits them (an empty commit past the last tile keeps the count of
/// outstanding groups what `wait_copies` expects).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn qgemm_fetch_x<T>(
    mut sa: Mem<T>,
    x: Mem<T>,
    t: u32,
    stages: u32,
    row0: u32,
    bm: u32,
    m: u32,
    k: u32,
    threads: u32,
) {
    if t < (k + 63) / 64 {
        fetch_tile(
            sa,
            (t % stages) * bm * 64,
            x,
            row0,
            bm,
            m,
            k,
            t * 64,
            thread_id(),
            threads,
        );
    }
    commit_copies();
}

/// Chunk `e` (eight weights) of the B tile of K step `t` for the tile at column `col0`:
/// `(n, k, at)`, the weights' first output column and input, and the chunk's offset in
/// the 128-byte-swizzled tile. Laid out `[16·nb, 64]` (`kn` false: eight consecutive
/// inputs of column `n`, as `matrix_mma_tiles_async` reads it) or `[64, 16·nb]` in blocks
/// of 64 columns (`kn` true: input `k` of columns `n … n + 8`, for
/// `matrix_mma_tiles_kn_async`).
#[func]
pub fn qgemm_chunk(e: u32, t: u32, col0: u32, nb: u32, kn: bool) -> (u32, u32, u32) {
    let per_row = select(kn, 2 * nb, 8u32);
    let r = e / per_row;
    let c = e % per_row;
    let n = select(kn, col0 + 8 * c, col0 + r);
    let k = select(kn, t * 64 + r, t * 64 + 8 * c);
    let at = (c / 8) * 4096 + r * 64 + (((c % 8) ^ (r & 7)) << 3);
    (n, k, at)
}
