//! Cases of `affine_qgemm`: f16 and bf16 × every bits × group size at M = 17, 33 and 130
//! with N not a multiple of any tile, a K whose last 64-value tile holds one unit, N over
//! more than one band of column tiles, M past 256 (CUDA's 128-row tiles), on quantized
//! weights and on random words; rows of x holding NaN or inf; the kernel at every tile shape; benches at M = 4096 on
//! Llama-3 projections (K × N = 4096 × 4096 and 4096 × 14336), 4 and 8 bits, group 64,
//! and the 64 × 128 tiles at 4096³.

use super::*;
use crate::matmul::tiled::MATMUL_DTYPES;
use crate::quant::qgemm::{affine_qgemm, affine_qgemm_kernel, affine_qgemm_tiles, QGEMM_SHAPES};
use crate::quant::qgemm_formats_cases::{check_non_finite_rows, non_finite_x};
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{accuracy, compare, kernel_use, rejection, zeros};

const OP: &str = "affine_qgemm";

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
            affine_qgemm(ctx, &x, &q.packed, &q.scales, &q.biases, &y, bits, group).map_err(err)?;
            let want = reference::qgemm(
                &xv,
                &q.host.packed,
                &q.host.scales,
                &q.host.biases,
                (m, n, k),
                bits,
                group as usize,
                dtype,
            );
            compare(&y.to_f64_vec().map_err(err)?, &want, accuracy(OP, dtype)?)
        }),
    }
}

/// A NaN in one row of x and an infinity in another: those rows of y are non-finite (the
/// NaN propagates; inf meets weights of both signs or zero), and every other row matches
/// the reference on the finite rows alone.
fn non_finite_rows(dtype: DType) -> Case {
    let ((m, n, k), (bits, group)) = ((40, 72, 128), (4, 64));
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("NaN and inf rows bits={bits} group_size={group} M={m} N={n} K={k}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = non_finite_x(ctx, rng, dtype, (m, k))?;
            let q = quantized(ctx, rng, dtype, (n, k), (bits, group))?;
            let y = poisoned(ctx, dtype, &[m, n])?;
            affine_qgemm(ctx, &x, &q.packed, &q.scales, &q.biases, &y, bits, group).map_err(err)?;
            let reference = |xv: &[f64]| {
                reference::qgemm(
                    xv,
                    &q.host.packed,
                    &q.host.scales,
                    &q.host.biases,
                    (m, n, k),
                    bits,
                    group as usize,
                    dtype,
                )
            };
            check_non_finite_rows(
                &y.to_f64_vec().map_err(err)?,
                xv,
                (m, n, k),
                reference,
                accuracy(OP, dtype)?,
            )
        }),
    }
}

pub(crate) fn qgemm_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in MATMUL_DTYPES {
        v.push(non_finite_rows(dtype));
        for (i, format) in formats().enumerate() {
            let k = 2 * format.1 as usize;
            let m = [17, 33, 130][i % 3];
            v.push(correct(dtype, (m, 72, k), format, i % 2 == 1));
        }
        // Three units: the last 64-value tile holds one unit, the other dequantizes to zeros.
        v.push(correct(dtype, (33, 20, 96), (4, 32), false));
        // Wide N: a full band of column tiles and a partial one (CUDA's 128 columns) or
        // two full and a partial (64 columns).
        v.push(correct(dtype, (130, 2056, 64), (8, 64), false));
        // Past 256 rows: on CUDA the 128-row tiles.
        v.push(correct(dtype, (300, 136, 384), (4, 128), true));
    }
    v.push(rejection(
        OP,
        "scales of another row count",
        "`scales` must have shape [4, 2]",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[20, 128])?;
            let packed = zeros(ctx, DType::U32, &[4, 16])?;
            let (s, b) = (
                zeros(ctx, DType::F16, &[3, 2])?,
                zeros(ctx, DType::F16, &[4, 2])?,
            );
            let y = zeros(ctx, DType::F16, &[20, 4])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || affine_qgemm(&c, &x, &packed, &s, &b, &o, 4, 64))
                    as crate::testing::Refused,
            ))
        },
    ));
    v.push(rejection(
        OP,
        "y of the wrong shape",
        "`y` must have shape [40, 4]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[40, 64])?;
            let packed = zeros(ctx, DType::U32, &[4, 12])?;
            let (s, b) = (
                zeros(ctx, DType::BF16, &[4, 2])?,
                zeros(ctx, DType::BF16, &[4, 2])?,
            );
            let y = zeros(ctx, DType::BF16, &[4, 40])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || affine_qgemm(&c, &x, &packed, &s, &b, &o, 6, 32))
                    as crate::testing::Refused,
            ))
        },
    ));
    v
}

pub(crate) fn qgemm_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in MATMUL_DTYPES {
        for bits in crate::quant::format::AFFINE_BITS {
            for (wg, nb, stages) in QGEMM_SHAPES {
                v.push(kernel_use(
                    &affine_qgemm_kernel::DEF,
                    dt,
                    &[wg, nb, stages, bits],
                ));
            }
        }
    }
    v
}

pub(crate) fn qgemm_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for bits in [4u32, 8] {
        v.push(bench(bits, (256, 256, 256), true, None));
        v.push(bench(bits, (4096, 4096, 4096), false, None));
        v.push(bench(bits, (4096, 14336, 4096), false, None));
    }
    // The 64 × 128 tiles (M ≤ 256's) beside the choice at M = 4096.
    v.push(bench(4, (4096, 4096, 4096), false, Some((1, 8, 4))));
    v
}

/// `bits`-bit, group-64 bf16 weights at `(m, n, k)`, on the tile shape `qgemm_shape`
/// picks or on `tiles`.
fn bench(
    bits: u32,
    (m, n, k): (usize, usize, usize),
    quick: bool,
    tiles: Option<(u32, u32, u32)>,
) -> BenchCase {
    let dtype = DType::BF16;
    let group = 64;
    let weights = n * k * bits as usize / 8 + 2 * (n * k / group) * dtype.size_bytes();
    let tile_name = match tiles {
        Some((wg, nb, stages)) => format!(" tiles={}x{}x{stages}", 64 * wg, 16 * nb),
        None => String::new(),
    };
    BenchCase {
        op: OP,
        kernel: "affine_qgemm_kernel",
        dtype,
        shape: format!("bits={bits} group_size={group} M={m} N={n} K={k}{tile_name}"),
        bytes: (weights + (m * k + m * n) * dtype.size_bytes()) as u64,
        flops: (2 * m * n * k) as u64,
        quick,
        prepare: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
            let q = random_quantized(ctx, rng, dtype, (n, k), (bits, group as u32))?;
            let y = poisoned(ctx, dtype, &[m, n])?;
            // The f64 reference of the large shapes takes minutes; the cases check the
            // kernel at smaller ones.
            let reference = if m * n * k <= 1 << 31 {
                reference::qgemm(
                    &xv,
                    &q.host.packed,
                    &q.host.scales,
                    &q.host.biases,
                    (m, n, k),
                    bits,
                    group,
                    dtype,
                )
            } else {
                Vec::new()
            };
            let (c, o) = (ctx.clone(), y.clone());
            Ok(PreparedBench {
                launch: Box::new(move || {
                    affine_qgemm_tiles(
                        &c,
                        &x,
                        &q.packed,
                        &q.scales,
                        &q.biases,
                        &o,
                        bits,
                        group as u32,
                        tiles,
                    )
                    .map_err(err)
                }),
                output: y,
                reference,
            })
        }),
    }
}
