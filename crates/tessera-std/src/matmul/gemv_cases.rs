//! Registered cases of the dense GEMV: every float dtype over M = 1, 3, 16 (and the other
//! row tiles), N not a multiple of the four columns a threadgroup takes, K of every run
//! width down to one element; hand-written rejections the declared ones cannot express;
//! the specialisations; bench shapes of Llama-3-8B and -70B projections at M = 1 and 16.
//! The fused gate/up SiLU·mul GEMV over the same row tiles and run widths, against an
//! f64 product of the two halves, with Llama-3-8B's merged gate_up as its bench.

use super::gemv::{gemv, gemv_kernel, gemv_silu_mul, row_tile, run_width, GEMV_TILES};
use super::gemv_mma::gemv_mma_kernel;
use super::reference;
use super::tiled::MATMUL_DTYPES;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{accuracy, compare, err, kernel_use, random_tensor, rejection, zeros};
use crate::validate::FLOAT_DTYPES;
use tessera_runtime::DType;

const OP: &str = "gemv";

fn correct(dt: DType, (m, n, k): (usize, usize, usize)) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("M={m} N={n} K={k}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dt, &[m, k], -1.0, 1.0)?;
            let (w, wv) = random_tensor(ctx, rng, dt, &[n, k], -1.0, 1.0)?;
            let y = ctx.full_nan(dt, &[m, n]).map_err(err)?;
            gemv(ctx, &x, &w, &y).map_err(err)?;
            let want = reference::matmul(&xv, &wv, (m, n, k), true);
            compare(&y.to_f64_vec().map_err(err)?, &want, accuracy(OP, dt)?)
        }),
    }
}

pub(super) fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for dims in [
            (1, 1, 1),
            (1, 37, 512),
            (3, 6, 100),
            (16, 9, 264),
            (2, 5, 8),
            (5, 130, 77),
            (8, 4, 4096),
            (16, 1, 3),
            (3, 5, 1000),
            (2, 3, 2056),
            (4, 37, 392),
            (16, 48, 1288),
        ] {
            v.push(correct(dt, dims));
        }
    }
    v.push(rejection(OP, "x rank 3", "non-empty matrix", |ctx| {
        let (x, w) = (
            zeros(ctx, DType::F16, &[1, 2, 8])?,
            zeros(ctx, DType::F16, &[4, 8])?,
        );
        let y = zeros(ctx, DType::F16, &[2, 4])?;
        let (c, o) = (ctx.clone(), y.clone());
        Ok((
            y,
            Box::new(move || gemv(&c, &x, &w, &o)) as crate::testing::Refused,
        ))
    }));
    v.push(rejection(OP, "empty K", "non-empty matrix", |ctx| {
        let (x, w) = (
            zeros(ctx, DType::F32, &[2, 0])?,
            zeros(ctx, DType::F32, &[4, 0])?,
        );
        let y = zeros(ctx, DType::F32, &[2, 4])?;
        let (c, o) = (ctx.clone(), y.clone());
        Ok((
            y,
            Box::new(move || gemv(&c, &x, &w, &o)) as crate::testing::Refused,
        ))
    }));
    v
}

pub(super) fn kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let mut w = run_width(dt, 1 << 20);
        while w >= 1 {
            for tile in GEMV_TILES {
                v.push(kernel_use(&gemv_kernel::DEF, dt, &[tile, w, 0]));
            }
            w /= 2;
        }
    }
    for dt in MATMUL_DTYPES {
        v.push(kernel_use(&gemv_mma_kernel::DEF, dt, &[]));
    }
    v
}

/// (M, N, K, quick): Llama-3-8B's up (4096→14336) and down (14336→4096) projections and
/// Llama-3-70B's up projection (8192→28672, 448 MiB of bf16), at one and sixteen tokens;
/// the dense and the quantized GEMVs are benched on the same shapes.
pub(crate) const GEMV_BENCH_SHAPES: [(usize, usize, usize, bool); 8] = [
    (1, 256, 512, true),
    (16, 256, 512, true),
    (1, 14336, 4096, false),
    (16, 14336, 4096, false),
    (1, 4096, 14336, false),
    (16, 4096, 14336, false),
    (1, 28672, 8192, false),
    (16, 28672, 8192, false),
];

pub(super) fn benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (m, n, k, quick) in GEMV_BENCH_SHAPES {
        let dt = DType::BF16;
        v.push(BenchCase {
            op: OP,
            kernel: if m == 1 {
                "gemv_kernel"
            } else {
                "gemv_mma_kernel"
            },
            dtype: dt,
            shape: format!("M={m} N={n} K={k} tile={}", row_tile(m)),
            bytes: ((m * k + n * k + m * n) * dt.size_bytes()) as u64,
            flops: (2 * m * n * k) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let (x, xv) = random_tensor(ctx, rng, dt, &[m, k], -1.0, 1.0)?;
                let (w, wv) = random_tensor(ctx, rng, dt, &[n, k], -1.0, 1.0)?;
                let y = ctx.full_nan(dt, &[m, n]).map_err(err)?;
                let (c, o) = (ctx.clone(), y.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || gemv(&c, &x, &w, &o).map_err(err)),
                    output: y,
                    reference: reference::matmul(&xv, &wv, (m, n, k), true),
                })
            }),
        });
    }
    v
}

// ── gemv_silu_mul ────────────────────────────────────────────────────────────────────

const SILU_OP: &str = "gemv_silu_mul";

/// `silu(x·gateᵀ)·(x·upᵀ)` in f64 from `w` `[2·i, k]`, gate rows first.
fn silu_mul_reference(xv: &[f64], wv: &[f64], (m, i, k): (usize, usize, usize)) -> Vec<f64> {
    let gate = reference::matmul(xv, &wv[..i * k], (m, i, k), true);
    let up = reference::matmul(xv, &wv[i * k..], (m, i, k), true);
    gate.iter()
        .zip(&up)
        .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
        .collect()
}

fn silu_correct(dt: DType, (m, i, k): (usize, usize, usize)) -> Case {
    Case {
        op: SILU_OP,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("M={m} I={i} K={k}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dt, &[m, k], -1.0, 1.0)?;
            let (w, wv) = random_tensor(ctx, rng, dt, &[2 * i, k], -0.2, 0.2)?;
            let y = ctx.full_nan(dt, &[m, i]).map_err(err)?;
            gemv_silu_mul(ctx, &x, &w, &y).map_err(err)?;
            let want = silu_mul_reference(&xv, &wv, (m, i, k));
            compare(&y.to_f64_vec().map_err(err)?, &want, accuracy(SILU_OP, dt)?)
        }),
    }
}

pub(super) fn silu_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for dims in [
            (1, 1, 1),
            (1, 37, 512),
            (3, 6, 100),
            (16, 9, 264),
            (2, 130, 77),
            (8, 4, 4096),
            (5, 33, 1000),
        ] {
            v.push(silu_correct(dt, dims));
        }
    }
    v.push(rejection(
        SILU_OP,
        "odd weight rows",
        "`w_gate_up` must be [2·I, K = 8]",
        |ctx| {
            let (x, w) = (
                zeros(ctx, DType::F16, &[2, 8])?,
                zeros(ctx, DType::F16, &[7, 8])?,
            );
            let y = zeros(ctx, DType::F16, &[2, 3])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || gemv_silu_mul(&c, &x, &w, &o)) as crate::testing::Refused,
            ))
        },
    ));
    v
}

pub(super) fn silu_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let mut w = run_width(dt, 1 << 20);
        while w >= 1 {
            for tile in GEMV_TILES {
                v.push(kernel_use(&gemv_kernel::DEF, dt, &[tile, w, 1]));
            }
            w /= 2;
        }
    }
    v
}

/// Llama-3-8B's merged gate_up (4096 → 2·14336) at 1 and 16 tokens, and a quick one.
pub(super) fn silu_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (m, i, k, quick) in [
        (1, 256, 512, true),
        (1, 14336, 4096, false),
        (16, 14336, 4096, false),
    ] {
        let dt = DType::BF16;
        v.push(BenchCase {
            op: SILU_OP,
            kernel: "gemv_kernel",
            dtype: dt,
            shape: format!("M={m} I={i} K={k} tile={}", row_tile(m)),
            bytes: ((m * k + 2 * i * k + m * i) * dt.size_bytes()) as u64,
            flops: (4 * m * i * k) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let (x, xv) = random_tensor(ctx, rng, dt, &[m, k], -1.0, 1.0)?;
                let (w, wv) = random_tensor(ctx, rng, dt, &[2 * i, k], -0.05, 0.05)?;
                let y = ctx.full_nan(dt, &[m, i]).map_err(err)?;
                let (c, o) = (ctx.clone(), y.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || gemv_silu_mul(&c, &x, &w, &o).map_err(err)),
                    output: y,
                    reference: silu_mul_reference(&xv, &wv, (m, i, k)),
                })
            }),
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_and_run_widths() {
        let tiles: Vec<u32> = [1, 2, 3, 5, 9, 16].map(row_tile).to_vec();
        assert_eq!(tiles, vec![1, 2, 4, 8, 16, 16]);
        assert_eq!(run_width(DType::BF16, 14336), 8);
        assert_eq!(run_width(DType::F32, 4096), 4);
        assert_eq!(run_width(DType::F16, 100), 4);
        assert_eq!(run_width(DType::F16, 77), 1);
    }
}
