//! Cases of `affine_qgemv`: every dtype × bits × group size at M = 1, 3 and 16, N not a
//! multiple of the columns a threadgroup takes, long rows whose K is split over simdgroups,
//! on quantized weights and on random words; the kernels for every row tile and width;
//! benches of Llama-3 projections at 4 and 8 bits, group 64, M = 1 and 16.

use super::*;
use crate::matmul::gemv::{row_tile, GEMV_TILES};
use crate::matmul::gemv_cases::GEMV_BENCH_SHAPES;
use crate::quant::qgemv::{affine_qgemv, affine_qgemv_kernel, qgemv_columns};
use crate::quant::qgemv_mma::affine_qgemv_mma_kernel;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{accuracy, compare, kernel_use, rejection, zeros};
use crate::validate::FLOAT_DTYPES;

const OP: &str = "affine_qgemv";

fn correct(
    dtype: DType,
    (m, n, k): (usize, usize, usize),
    (bits, group): (u32, u32),
    random_words: bool,
) -> Case {
    let source = if random_words {
        "random words"
    } else {
        "quantized"
    };
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{source} bits={bits} group_size={group} M={m} N={n} K={k}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
            let q = if random_words {
                random_quantized(ctx, rng, dtype, (n, k), (bits, group))?
            } else {
                quantized(ctx, rng, dtype, (n, k), (bits, group))?
            };
            let y = poisoned(ctx, dtype, &[m, n])?;
            affine_qgemv(ctx, &x, &q.packed, &q.scales, &q.biases, &y, bits, group).map_err(err)?;
            let want = reference::qgemv(
                &xv,
                &q.host.packed,
                &q.host.scales,
                &q.host.biases,
                (m, n, k),
                bits,
                group as usize,
            );
            compare(&y.to_f64_vec().map_err(err)?, &want, accuracy(OP, dtype)?)
        }),
    }
}

pub(crate) fn qgemv_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (i, format) in formats().enumerate() {
            let k = 2 * format.1 as usize;
            let m = [1, 3, 16][i % 3];
            v.push(correct(dtype, (m, 7, k), format, false));
            v.push(correct(dtype, (m.min(2), 5, k), format, true));
        }
        v.push(correct(dtype, (5, 9, 1024), (4, 64), false));
        v.push(correct(dtype, (8, 4, 1152), (3, 128), true));
        // 99 units: a row that ends in the second unit of a lane's last step.
        v.push(correct(dtype, (2, 6, 3168), (5, 32), false));
        // Long rows over few columns: K shared by two and by four simdgroups, with a unit
        // count no step divides.
        v.push(correct(dtype, (1, 10, 8224), (4, 32), false));
        v.push(correct(dtype, (3, 6, 17408), (8, 128), true));
    }
    v.push(rejection(
        OP,
        "scales of another row count",
        "`scales` must have shape [4, 2]",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 128])?;
            let packed = zeros(ctx, DType::U32, &[4, 16])?;
            let (s, b) = (
                zeros(ctx, DType::F16, &[3, 2])?,
                zeros(ctx, DType::F16, &[4, 2])?,
            );
            let y = zeros(ctx, DType::F16, &[2, 4])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || affine_qgemv(&c, &x, &packed, &s, &b, &o, 4, 64))
                    as crate::testing::Refused,
            ))
        },
    ));
    v.push(rejection(
        OP,
        "y of the wrong shape",
        "`y` must have shape [2, 4]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 64])?;
            let packed = zeros(ctx, DType::U32, &[4, 12])?;
            let (s, b) = (
                zeros(ctx, DType::BF16, &[4, 2])?,
                zeros(ctx, DType::BF16, &[4, 2])?,
            );
            let y = zeros(ctx, DType::BF16, &[4, 2])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || affine_qgemv(&c, &x, &packed, &s, &b, &o, 6, 32))
                    as crate::testing::Refused,
            ))
        },
    ));
    v
}

pub(crate) fn qgemv_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for bits in crate::quant::format::AFFINE_BITS {
            for tile in GEMV_TILES {
                v.push(kernel_use(
                    &affine_qgemv_kernel::DEF,
                    dt,
                    &[tile, bits, qgemv_columns(tile)],
                ));
            }
        }
    }
    for bits in crate::quant::format::AFFINE_BITS {
        v.push(kernel_use(
            &affine_qgemv_mma_kernel::DEF,
            DType::BF16,
            &[bits],
        ));
    }
    v
}

pub(crate) fn qgemv_benches() -> Vec<BenchCase> {
    let dtype = DType::BF16;
    let group = 64;
    let mut v = Vec::new();
    for bits in [4u32, 8] {
        for (m, n, k, quick) in GEMV_BENCH_SHAPES {
            let weights = n * k * bits as usize / 8 + 2 * (n * k / group) * dtype.size_bytes();
            v.push(BenchCase {
                op: OP,
                kernel: if m == 1 {
                    "affine_qgemv_kernel"
                } else {
                    "affine_qgemv_mma_kernel"
                },
                dtype,
                shape: format!(
                    "bits={bits} group_size={group} M={m} N={n} K={k} tile={}",
                    row_tile(m)
                ),
                bytes: (weights + (m * k + m * n) * dtype.size_bytes()) as u64,
                flops: (2 * m * n * k) as u64,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
                    let q = random_quantized(ctx, rng, dtype, (n, k), (bits, group as u32))?;
                    let y = poisoned(ctx, dtype, &[m, n])?;
                    let reference = reference::qgemv(
                        &xv,
                        &q.host.packed,
                        &q.host.scales,
                        &q.host.biases,
                        (m, n, k),
                        bits,
                        group,
                    );
                    let (c, o) = (ctx.clone(), y.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            affine_qgemv(
                                &c,
                                &x,
                                &q.packed,
                                &q.scales,
                                &q.biases,
                                &o,
                                bits,
                                group as u32,
                            )
                            .map_err(err)
                        }),
                        output: y,
                        reference,
                    })
                }),
            });
        }
    }
    v
}
