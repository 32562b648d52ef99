//! A tiled GEMM on simdgroup matrix fragments: `c[M, N] = a[M, K]·b` with `b` either
//! `[K, N]` or `[N, K]` (`y = x·Wᵀ`, the linear-layer layout), f16/bf16 inputs and f32
//! accumulation. A threadgroup of four simdgroups owns a 32×32 output tile; per step of
//! 16 along K it stages the A and B tiles in threadgroup memory (zero-padded at the
//! edges, so any M, N, K works) and each simdgroup multiplies one 16×16 block. The
//! transposed layout is read with transposed fragment loads.

use super::pipelined::matmul_pipelined_kernel;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// The input dtypes fragments take.
pub const MATMUL_DTYPES: [DType; 2] = [DType::F16, DType::BF16];

/// `c = a·b` (`bt = 0`, b `[K, N]`) or `a·bᵀ` (`bt = 1`, b `[N, K]`); grid
/// `[ceil(N / 32), ceil(M / 32), 1]`, 128 threads.
#[kernel]
pub fn matmul_tiled_kernel<T>(
    a: Tensor<T>,
    b: Tensor<T>,
    mut c: Tensor<T>,
    m: u32,
    n: u32,
    k: u32,
    #[constexpr] bt: u32,
) {
    let sa = threadgroup_array::<T>(512);
    let sb = threadgroup_array::<T>(512);
    let sc = threadgroup_array::<f32>(1024);
    let fa = matrix_a::<T>();
    let fb = matrix_b::<T>();
    let acc = matrix_acc();
    let row0 = group_id_y() * 32;
    let col0 = group_id_x() * 32;
    let sr = simd_id() / 2;
    let scol = simd_id() % 2;
    let tid = thread_id();
    matrix_fill(acc, 0.0);
    for k0 in range(0, k, 16) {
        for e in range(tid, 512, 128) {
            // A tile [32 rows][16 k].
            let r = e / 16;
            let kk = e % 16;
            let ok = row0 + r < m && k0 + kk < k;
            let v = load(a[select(ok, (row0 + r) * k + k0 + kk, 0)]);
            store(sa[e], select(ok, v, 0.0));
            // B tile: [16 k][32 n], or [32 n][16 k] when b is [N, K].
            let bk = select(bt == 1, e % 16, e / 32);
            let bn = select(bt == 1, e / 16, e % 32);
            let okb = k0 + bk < k && col0 + bn < n;
            let bi = select(
                bt == 1,
                (col0 + bn) * k + k0 + bk,
                (k0 + bk) * n + col0 + bn,
            );
            let w = load(b[select(okb, bi, 0)]);
            store(sb[e], select(okb, w, 0.0));
        }
        barrier();
        matrix_load(fa, sa[sr * 256], 16);
        if bt == 1 {
            matrix_load_t(fb, sb[scol * 256], 16);
        } else {
            matrix_load(fb, sb[scol * 16], 32);
        }
        matrix_mma(acc, fa, fb, acc);
        barrier();
    }
    matrix_store(acc, sc[sr * 512 + scol * 16], 32);
    barrier();
    for e in range(tid, 1024, 128) {
        let r = e / 32;
        let cc = e % 32;
        if row0 + r < m && col0 + cc < n {
            store(c[(row0 + r) * n + col0 + cc], load(sc[e]).cast::<T>());
        }
    }
}

fn check(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    bt: bool,
) -> Result<[u32; 3], OpError> {
    dtype_in(op, "a", a, &MATMUL_DTYPES)?;
    dtype_is(op, "b", b, a.dtype())?;
    dtype_is(op, "c", c, a.dtype())?;
    let (m, k) = match a.shape() {
        &[m, k] if m > 0 && k > 0 => (m, k),
        s => {
            return Err(OpError::invalid(
                op,
                format!("`a` must be a non-empty matrix [M, K], got shape {s:?}"),
            ))
        }
    };
    let n = match (b.shape(), bt) {
        (&[bk, n], false) if bk == k && n > 0 => n,
        (&[n, bk], true) if bk == k && n > 0 => n,
        (s, _) => {
            let want = if bt { "[N, K = " } else { "[K = " };
            let tail = if bt { "]" } else { ", N]" };
            return Err(OpError::invalid(
                op,
                format!("`b` must be {want}{k}{tail} with N > 0, got shape {s:?}"),
            ));
        }
    };
    shape_is(op, "c", c, &[m, n])?;
    distinct_named(op, "c", c, &[("a", a), ("b", b)])?;
    for (what, len) in [("a", a.len()), ("b", b.len()), ("c", c.len())] {
        fits_u32(op, &format!("the element count of `{what}`"), len)?;
    }
    Ok([m as u32, n as u32, k as u32])
}

fn launch(
    op: &'static str,
    ctx: &Context,
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    bt: bool,
) -> Result<(), OpError> {
    let [m, n, k] = check(op, a, b, c, bt)?;
    // The pipelined kernel copies 16 bytes at a time along K of `a`, and along the
    // contiguous dimension of `b` (K for `[N, K]`, N for `[K, N]`).
    if k % 8 == 0 && (bt || n % 8 == 0) {
        let (wg, nb, stages) = pipelined_shape(ctx, m, n);
        return matmul_pipelined_kernel::launch(
            ctx,
            matmul_pipelined_kernel::Args { a, b, c, m, n, k },
            matmul_pipelined_kernel::Consts {
                wg,
                nb,
                stages,
                bt: bt as u32,
            },
        )
        .grid([n.div_ceil(16 * nb), m.div_ceil(64 * wg), 1])
        .group_size(128 * wg)
        .run()
        .map_err(runtime(op));
    }
    matmul_tiled_kernel::launch(
        ctx,
        matmul_tiled_kernel::Args { a, b, c, m, n, k },
        matmul_tiled_kernel::Consts { bt: bt as u32 },
    )
    .grid([n.div_ceil(32), m.div_ceil(32), 1])
    .group_size(128)
    .run()
    .map_err(runtime(op))
}

/// The pipelined kernel's (warpgroups, accumulators a simdgroup, stages) for an `m × n`
/// output. Where threadgroup memory allows (CUDA): 128 × 256 tiles three buffers deep (144
/// KiB) when they make at least half a wave of threadgroups, else 64 × 128 tiles four deep
/// so more threadgroups fill the GPU (measured on an H100, docs/perf-notes.md). Elsewhere
/// 64 × 64 two deep (32 KiB, what the CPU and Metal give).
pub fn pipelined_shape(ctx: &Context, m: u32, n: u32) -> (u32, u32, u32) {
    let info = ctx.info();
    if info.max_shared_bytes < 144 * 1024 {
        return (1, 4, 2);
    }
    let big = m.div_ceil(128) as u64 * n.div_ceil(256) as u64;
    if 2 * big >= info.compute_units.max(1) as u64 {
        (2, 16, 3)
    } else {
        (1, 8, 4)
    }
}

/// `c[M, N] = a[M, K]·b[K, N]`, f16 or bf16, accumulated in f32.
pub fn matmul(ctx: &Context, a: &Tensor, b: &Tensor, c: &Tensor) -> Result<(), OpError> {
    launch("matmul", ctx, a, b, c, false)
}

/// `c[M, N] = a[M, K]·b[N, K]ᵀ` (a linear layer with weights `[N, K]`), accumulated in f32.
pub fn matmul_bt(ctx: &Context, a: &Tensor, b: &Tensor, c: &Tensor) -> Result<(), OpError> {
    launch("matmul_bt", ctx, a, b, c, true)
}
