//! Cases of `row_reduce`: every reduction and float dtype over row lengths that take the
//! 16-byte and the element-wise path, one row and split long rows; rows holding NaN, ±∞
//! and values whose f32 running sum overflows; rejections; benches at 64 MiB and more.

use super::*;
use crate::reduce::row_reduce::{
    row_reduce, row_reduce_combine_kernel, row_reduce_kernel, Reduction, RowSplitWorkspace, OP,
    RUNS_IN_FLIGHT,
};

/// Row shapes: one element, odd, 16-byte runs (one and four a thread, a threadgroup's
/// last round of four part-empty at 1000 in f32 and at 8200), a long row split over
/// threadgroups, and a 3-D x.
const SHAPES: [&[usize]; 8] = [
    &[3, 1],
    &[5, 7],
    &[4, 1000],
    &[6, 4096],
    &[3, 8200],
    &[1, 262_144],
    &[3, 40_001],
    &[2, 3, 96],
];

/// Runs `reduction` on `xv` uploaded as `dtype` of `shape` and checks it against the
/// reference: max and min exactly, sums and means within the declared f32 tolerance of
/// the row's Σ|x| (the scale of an f32 sum's rounding, whatever the cancellation).
fn run_checked(
    ctx: &Context,
    dtype: DType,
    shape: &[usize],
    xv: &[f64],
    reduction: &str,
) -> Result<Outcome, String> {
    let (x, xv) = upload(ctx, dtype, xv, shape)?;
    let n = *shape.last().ok_or("no shape")?;
    let r = Reduction::from_name(reduction).ok_or("reduction")?;
    let out_shape = crate::reduce::per_row_shape(shape);
    let out = ctx.full_nan(DType::F32, &out_shape).map_err(err)?;
    let ws = RowSplitWorkspace::new(ctx, shape).map_err(err)?;
    row_reduce(ctx, &x, r, &ws, &out).map_err(err)?;
    let got = out.to_f64_vec().map_err(err)?;
    let want = reference::row_reduce(&xv, n, reduction);
    let tol = accuracy(OP, DType::F32)?;
    let mut outcome = Outcome::default();
    for (row, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let scale = match reduction {
            "sum" => xv[row * n..(row + 1) * n]
                .iter()
                .map(|v| v.abs())
                .sum::<f64>(),
            "mean" => {
                xv[row * n..(row + 1) * n]
                    .iter()
                    .map(|v| v.abs())
                    .sum::<f64>()
                    / n as f64
            }
            _ => 0.0,
        };
        let same =
            (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol.atol + tol.rtol * scale;
        let exact_for_extremes =
            matches!(reduction, "max" | "min") && !(g == w || g.is_nan() && w.is_nan());
        if !same || exact_for_extremes {
            return Err(format!(
                "row {row}: {reduction} is {g}, the reference {w} (Σ|x| scale {scale})"
            ));
        }
        outcome.checked += 1;
        outcome.max_abs_err = outcome
            .max_abs_err
            .max(if g == w { 0.0 } else { (g - w).abs() });
    }
    Ok(outcome)
}

fn correctness(dtype: DType, shape: &'static [usize], reduction: &'static str) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{reduction} x={shape:?}"),
        run: Box::new(move |ctx, rng| {
            let len: usize = shape.iter().product();
            let xv: Vec<f64> = (0..len).map(|_| rng.uniform(-4.0, 4.0)).collect();
            run_checked(ctx, dtype, shape, &xv, reduction)
        }),
    }
}

/// Rows holding a NaN, +∞, −∞, both infinities, and (f32, bf16) ±3e38 pairs whose f32
/// running sum overflows although the row sums to a small finite value.
fn non_finite(dtype: DType, reduction: &'static str) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{reduction} rows with NaN, ±inf, overflowing partial sums"),
        run: Box::new(move |ctx, rng| {
            let (rows, n) = (6, 300);
            let mut xv: Vec<f64> = (0..rows * n).map(|_| rng.uniform(-4.0, 4.0)).collect();
            xv[17] = f64::NAN;
            xv[n + 250] = f64::INFINITY;
            xv[2 * n + 3] = f64::NEG_INFINITY;
            xv[3 * n + 5] = f64::INFINITY;
            xv[3 * n + 200] = f64::NEG_INFINITY;
            if dtype != DType::F16 {
                for i in 0..n / 2 {
                    xv[4 * n + i] = 3e38;
                    xv[4 * n + n / 2 + i] = -3e38;
                }
                xv[4 * n] = 1.0;
            }
            run_checked(ctx, dtype, &[rows, n], &xv, reduction)
        }),
    }
}

pub(crate) fn row_reduce_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for reduction in Reduction::NAMES {
            for shape in SHAPES {
                v.push(correctness(dtype, shape, reduction));
            }
            v.push(non_finite(dtype, reduction));
        }
    }
    v.push(rejection(OP, "out bf16", "`out` must be f32", |ctx| {
        let x = zeros(ctx, DType::BF16, &[2, 10])?;
        let out = ctx.full_nan(DType::BF16, &[2]).map_err(err)?;
        let ws = RowSplitWorkspace::new(ctx, &[2, 10]).map_err(err)?;
        let (c, o) = (ctx.clone(), out.clone());
        Ok((
            out,
            Box::new(move || row_reduce(&c, &x, Reduction::Sum, &ws, &o)) as Refused,
        ))
    }));
    v.push(rejection(
        OP,
        "out of another row count",
        "`out` must have shape [2]",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 10])?;
            let out = ctx.full_nan(DType::F32, &[3]).map_err(err)?;
            let ws = RowSplitWorkspace::new(ctx, &[2, 10]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || row_reduce(&c, &x, Reduction::Max, &ws, &o)) as Refused,
            ))
        },
    ));
    v.push(rejection(OP, "empty row", "must not be empty", |ctx| {
        let x = zeros(ctx, DType::F32, &[2, 0])?;
        let out = ctx.full_nan(DType::F32, &[2]).map_err(err)?;
        let ws = RowSplitWorkspace::new(ctx, &[2, 1]).map_err(err)?;
        let (c, o) = (ctx.clone(), out.clone());
        Ok((
            out,
            Box::new(move || row_reduce(&c, &x, Reduction::Sum, &ws, &o)) as Refused,
        ))
    }));
    v.push(rejection(
        OP,
        "workspace made for short rows",
        "make it with RowSplitWorkspace::new",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[1, 1 << 16])?;
            let out = ctx.full_nan(DType::F32, &[1]).map_err(err)?;
            let ws = RowSplitWorkspace::new(ctx, &[1, 100]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || row_reduce(&c, &x, Reduction::Sum, &ws, &o)) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn row_reduce_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        let wide = (16 / dtype.size_bytes()) as u32;
        for op in 0..4 {
            for vec in [1, wide] {
                for per in [1, RUNS_IN_FLIGHT] {
                    v.push(kernel_use(&row_reduce_kernel::DEF, dtype, &[op, vec, per]));
                }
            }
        }
    }
    for op in 0..4 {
        v.push(KernelUse {
            def: &row_reduce_combine_kernel::DEF,
            spec: tessera_ir::Specialization::new(vec![], vec![tessera_ir::Literal::U32(op)]),
        });
    }
    v
}

/// (rows, n, quick): a quick small shape; 64–128 MiB of many rows, of a few long rows
/// (split over threadgroups) and of one row.
const BENCH_SHAPES: [(usize, usize, bool); 5] = [
    (8, 1000, true),
    (4096, 8192, false),
    (32_768, 1024, false),
    (8, 1 << 22, false),
    (1, 1 << 25, false),
];

/// Sums and maxima of rows in [0, 1) (sums far from 0, so the f32 result is compared
/// relative to a large value); the bytes are x read and out written.
pub(crate) fn row_reduce_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (rows, n, quick) in BENCH_SHAPES {
            if dtype == DType::F32 && n == 1 << 25 {
                continue;
            }
            for reduction in ["sum", "max"] {
                v.push(BenchCase {
                    op: OP,
                    kernel: "row_reduce_kernel",
                    dtype,
                    shape: format!("reduction={reduction} rows={rows} n={n}"),
                    bytes: (rows * n * dtype.size_bytes() + 4 * rows) as u64,
                    flops: 0,
                    quick,
                    prepare: Box::new(move |ctx, rng| {
                        let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, n], 0.0, 1.0)?;
                        let out = ctx.full_nan(DType::F32, &[rows]).map_err(err)?;
                        let ws = RowSplitWorkspace::new(ctx, &[rows, n]).map_err(err)?;
                        let r = Reduction::from_name(reduction).ok_or("reduction")?;
                        let (c, o) = (ctx.clone(), out.clone());
                        Ok(PreparedBench {
                            launch: Box::new(move || row_reduce(&c, &x, r, &ws, &o).map_err(err)),
                            output: out,
                            reference: reference::row_reduce(&xv, n, reduction),
                        })
                    }),
                });
            }
        }
    }
    v
}
