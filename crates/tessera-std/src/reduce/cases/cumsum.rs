//! Cases of `cumsum`: every float dtype over one-element, odd, 16-byte-run rows, long rows
//! split over threadgroups and a 3-D x; rows holding NaN, +∞ then −∞; rejections; benches at 64 MiB and more.

use super::*;
use crate::reduce::cumsum::{cumsum, cumsum_kernel, cumsum_part_sums_kernel, OP, RUNS_A_THREAD};
use crate::reduce::RowSplitWorkspace;

/// One element, odd, 16-byte runs (one a thread at 1000, four at 4096 and 8320, the
/// last with a part-empty tile), long rows split over threadgroups (in runs and element
/// by element), 3-D.
const SHAPES: [&[usize]; 8] = [
    &[3, 1],
    &[5, 7],
    &[4, 1000],
    &[3, 4096],
    &[2, 8320],
    &[1, 262_144],
    &[2, 100_003],
    &[2, 3, 96],
];

/// Runs cumsum on `xv` of `shape` in `dtype` and checks each output within the declared
/// tolerance of the reference, relative to Σ_{j ≤ i} |x_j| (the scale of an f32 running
/// sum's rounding, whatever the cancellation); non-finite outputs must match exactly.
fn run_checked(
    ctx: &Context,
    dtype: DType,
    shape: &[usize],
    xv: &[f64],
) -> Result<Outcome, String> {
    let (x, xv) = upload(ctx, dtype, xv, shape)?;
    let n = *shape.last().ok_or("no shape")?;
    let out = ctx.full_nan(dtype, shape).map_err(err)?;
    let ws = RowSplitWorkspace::new(ctx, shape).map_err(err)?;
    cumsum(ctx, &x, &ws, &out).map_err(err)?;
    let got = out.to_f64_vec().map_err(err)?;
    let want = reference::cumsum(&xv, n);
    let tol = accuracy(OP, dtype)?;
    let mut outcome = Outcome::default();
    let mut magnitude = 0.0;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        if i % n == 0 {
            magnitude = 0.0;
        }
        magnitude += xv[i].abs();
        let ok = if w.is_finite() {
            (g - w).abs() <= tol.atol + tol.rtol * magnitude.max(w.abs())
        } else {
            g == w || g.is_nan() && w.is_nan()
        };
        if !ok {
            return Err(format!(
                "out[{i}] (row {}, column {}) is {g}, the reference {w}",
                i / n,
                i % n
            ));
        }
        outcome.checked += 1;
        if w.is_finite() {
            outcome.max_abs_err = outcome.max_abs_err.max((g - w).abs());
        }
    }
    Ok(outcome)
}

fn correctness(dtype: DType, shape: &'static [usize]) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("x={shape:?}"),
        run: Box::new(move |ctx, rng| {
            let len: usize = shape.iter().product();
            let xv: Vec<f64> = (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect();
            run_checked(ctx, dtype, shape, &xv)
        }),
    }
}

/// Row 0: a NaN at 700 (NaN from there on); row 1: +∞ at 10 and −∞ at 2000 (+∞ between,
/// NaN after); row 2 plain, so nothing spreads across rows. Rows of `n` = 3000 (one
/// 16-byte run a thread) or 3072 (four).
fn non_finite(dtype: DType, n: usize) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("rows of {n} with NaN, +inf then -inf"),
        run: Box::new(move |ctx, rng| {
            let mut xv: Vec<f64> = (0..3 * n).map(|_| rng.uniform(-1.0, 1.0)).collect();
            xv[700] = f64::NAN;
            xv[n + 10] = f64::INFINITY;
            xv[n + 2000] = f64::NEG_INFINITY;
            run_checked(ctx, dtype, &[3, n], &xv)
        }),
    }
}

pub(crate) fn cumsum_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for shape in SHAPES {
            v.push(correctness(dtype, shape));
        }
        v.push(non_finite(dtype, 3000));
        v.push(non_finite(dtype, 3072));
    }
    v.push(rejection(
        OP,
        "out f32 for bf16 x",
        "`out` must be bf16",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 10])?;
            let out = ctx.full_nan(DType::F32, &[2, 10]).map_err(err)?;
            let ws = RowSplitWorkspace::new(ctx, &[2, 10]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((out, Box::new(move || cumsum(&c, &x, &ws, &o)) as Refused))
        },
    ));
    v.push(rejection(
        OP,
        "out of another shape",
        "`out` must have shape [2, 10]",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 10])?;
            let out = ctx.full_nan(DType::F32, &[20]).map_err(err)?;
            let ws = RowSplitWorkspace::new(ctx, &[2, 10]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((out, Box::new(move || cumsum(&c, &x, &ws, &o)) as Refused))
        },
    ));
    v.push(rejection(OP, "empty row", "must not be empty", |ctx| {
        let x = zeros(ctx, DType::F16, &[2, 0])?;
        let out = ctx.full_nan(DType::F16, &[2, 0]).map_err(err)?;
        let ws = RowSplitWorkspace::new(ctx, &[2, 10]).map_err(err)?;
        let (c, o) = (ctx.clone(), out.clone());
        Ok((out, Box::new(move || cumsum(&c, &x, &ws, &o)) as Refused))
    }));
    v.push(rejection(
        OP,
        "workspace made for short rows",
        "make it with RowSplitWorkspace::new",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[1, 1 << 16])?;
            let out = ctx.full_nan(DType::F32, &[1, 1 << 16]).map_err(err)?;
            let ws = RowSplitWorkspace::new(ctx, &[1, 100]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((out, Box::new(move || cumsum(&c, &x, &ws, &o)) as Refused))
        },
    ));
    v
}

pub(crate) fn cumsum_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        let wide = (16 / dtype.size_bytes()) as u32;
        for vec in [1, wide, RUNS_A_THREAD * wide] {
            v.push(kernel_use(&cumsum_kernel::DEF, dtype, &[vec]));
            v.push(kernel_use(&cumsum_part_sums_kernel::DEF, dtype, &[vec]));
        }
    }
    v
}

/// (rows, n, quick): a quick shape, then 64–128 MiB of 4096- and 8192-long rows and of
/// eight 4M-long rows (split over threadgroups).
const BENCH_SHAPES: [(usize, usize, bool); 4] = [
    (8, 1000, true),
    (8192, 4096, false),
    (4096, 8192, false),
    (8, 1 << 22, false),
];

/// Rows in [0, 1) (rising sums, compared relative to a large value); the bytes are x read
/// and out written.
pub(crate) fn cumsum_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (rows, n, quick) in BENCH_SHAPES {
            v.push(BenchCase {
                op: OP,
                kernel: "cumsum_kernel",
                dtype,
                shape: format!("rows={rows} n={n}"),
                bytes: (2 * rows * n * dtype.size_bytes()) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, n], 0.0, 1.0)?;
                    let out = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
                    let ws = RowSplitWorkspace::new(ctx, &[rows, n]).map_err(err)?;
                    let (c, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || cumsum(&c, &x, &ws, &o).map_err(err)),
                        output: out,
                        reference: reference::cumsum(&xv, n),
                    })
                }),
            });
        }
    }
    v
}
