//! Cases of `topk`: every float dtype over one-element, odd, k = n, k = 1024 and 256k
//! rows; rows of few distinct values (ties at the threshold go to the lowest indices);
//! rows holding NaN, ±∞ and ±0; rejections; benches over Qwen's 151,936 and a 256k
//! vocabulary at batch 1, 32 and 256.

use super::*;
use crate::reduce::topk::{topk, topk_kernel, OP};

/// (rows, n, k).
const SHAPES: [(usize, usize, usize); 8] = [
    (3, 1, 1),
    (4, 40, 7),
    (2, 1000, 1000),
    (3, 5000, 1024),
    (2, 4099, 1),
    (1, 262_144, 50),
    (2, 151_936, 1024),
    (5, 33, 32),
];

/// Runs topk on `xv` (`[rows, n]`, uploaded as `dtype`) and compares values and indices
/// with the reference exactly.
fn run_exact(
    ctx: &Context,
    dtype: DType,
    (rows, n, k): (usize, usize, usize),
    xv: &[f64],
) -> Result<Outcome, String> {
    let (x, xv) = upload(ctx, dtype, xv, &[rows, n])?;
    let values = ctx.full_nan(dtype, &[rows, k]).map_err(err)?;
    let indices = ctx.full_nan(DType::I32, &[rows, k]).map_err(err)?;
    topk(ctx, &x, k, &values, &indices).map_err(err)?;
    let (want_v, want_i) = reference::topk(&xv, n, k);
    let got_i = indices.to_f64_vec().map_err(err)?;
    if got_i != want_i {
        let at = got_i
            .iter()
            .zip(&want_i)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!(
            "indices[{at}] (row {}, rank {}) is {}, the reference {}",
            at / k,
            at % k,
            got_i.get(at).copied().unwrap_or(f64::NAN),
            want_i.get(at).copied().unwrap_or(f64::NAN)
        ));
    }
    let got_v = values.to_f64_vec().map_err(err)?;
    for (i, (g, w)) in got_v.iter().zip(&want_v).enumerate() {
        if !(g == w || g.is_nan() && w.is_nan()) {
            return Err(format!("values[{i}] is {g}, the reference {w}"));
        }
    }
    Ok(Outcome {
        checked: got_v.len() + got_i.len(),
        ..Outcome::default()
    })
}

fn correctness(dtype: DType, shape: (usize, usize, usize)) -> Case {
    let (rows, n, k) = shape;
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("rows={rows} n={n} k={k}"),
        run: Box::new(move |ctx, rng| {
            let xv: Vec<f64> = (0..rows * n).map(|_| rng.uniform(-4.0, 4.0)).collect();
            run_exact(ctx, dtype, shape, &xv)
        }),
    }
}

/// Rows of a few distinct values, so the k-th largest is shared by many elements and the
/// lowest-indexed of them must be taken.
fn ties(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "rows of five distinct values".to_string(),
        run: Box::new(move |ctx, rng| {
            let (rows, n, k) = (3, 3000, 700);
            let xv: Vec<f64> = (0..rows * n)
                .map(|_| f64::from(rng.int(0, 5)) - 2.0)
                .collect();
            run_exact(ctx, dtype, (rows, n, k), &xv)
        }),
    }
}

/// NaNs (first, in index order), +∞, −∞, −0 beside +0, and an all −∞ row.
fn non_finite(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "rows with NaN, ±inf, ±0".to_string(),
        run: Box::new(move |ctx, rng| {
            let (rows, n, k) = (4, 300, 20);
            let mut xv: Vec<f64> = (0..rows * n).map(|_| rng.uniform(-4.0, 4.0)).collect();
            xv[250] = f64::NAN;
            xv[17] = f64::NAN;
            xv[40] = f64::INFINITY;
            xv[n + 3] = f64::NEG_INFINITY;
            xv[n + 9] = f64::INFINITY;
            for i in 0..n {
                xv[2 * n + i] = f64::NEG_INFINITY;
                xv[3 * n + i] = if i % 3 == 0 { -0.0 } else { -1.0 };
            }
            xv[3 * n + 100] = 0.0;
            run_exact(ctx, dtype, (rows, n, k), &xv)
        }),
    }
}

/// A good call's tensors with `values` and `indices` of the given dtype and shape.
fn bad_outputs(
    ctx: &Context,
    k: usize,
    values: (DType, &[usize]),
    indices: (DType, &[usize]),
) -> Result<(Tensor, Refused), String> {
    let x = zeros(ctx, DType::F32, &[2, 10])?;
    let v = ctx.full_nan(values.0, values.1).map_err(err)?;
    let i = ctx.full_nan(indices.0, indices.1).map_err(err)?;
    let (c, untouched) = (ctx.clone(), i.clone());
    Ok((untouched, Box::new(move || topk(&c, &x, k, &v, &i))))
}

pub(crate) fn topk_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for shape in SHAPES {
            v.push(correctness(dtype, shape));
        }
        v.push(ties(dtype));
        v.push(non_finite(dtype));
    }
    let f32s = DType::F32;
    v.push(rejection(
        OP,
        "k = 0",
        "k = 0 must be in 1..=10",
        move |ctx| bad_outputs(ctx, 0, (f32s, &[2, 1]), (DType::I32, &[2, 1])),
    ));
    v.push(rejection(
        OP,
        "k > n",
        "k = 11 must be in 1..=10",
        move |ctx| bad_outputs(ctx, 11, (f32s, &[2, 11]), (DType::I32, &[2, 11])),
    ));
    v.push(rejection(
        OP,
        "indices f32",
        "`indices` must be i32",
        move |ctx| bad_outputs(ctx, 3, (f32s, &[2, 3]), (DType::F32, &[2, 3])),
    ));
    v.push(rejection(
        OP,
        "values bf16 for f32 x",
        "`values` must be f32",
        move |ctx| bad_outputs(ctx, 3, (DType::BF16, &[2, 3]), (DType::I32, &[2, 3])),
    ));
    v.push(rejection(
        OP,
        "indices of another k",
        "`indices` must have shape [2, 3]",
        move |ctx| bad_outputs(ctx, 3, (f32s, &[2, 3]), (DType::I32, &[2, 4])),
    ));
    v.push(rejection(
        OP,
        "k > 1024",
        "must be in 1..=1024",
        move |ctx| {
            let x = zeros(ctx, DType::BF16, &[1, 2000])?;
            let vals = ctx.full_nan(DType::BF16, &[1, 1025]).map_err(err)?;
            let idx = ctx.full_nan(DType::I32, &[1, 1025]).map_err(err)?;
            let (c, untouched) = (ctx.clone(), vals.clone());
            Ok((
                untouched,
                Box::new(move || topk(&c, &x, 1025, &vals, &idx)) as Refused,
            ))
        },
    ));
    v
}

/// Every (dtype, pad) the cases and benches launch.
pub(crate) fn topk_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for pad in [2u32, 8, 32, 64, 1024] {
            v.push(kernel_use(
                &topk_kernel::DEF,
                dtype,
                &[pad, pad.trailing_zeros()],
            ));
        }
    }
    v
}

/// (batch, vocab, k, quick): a quick small row, then Qwen's 151,936 and a 256k vocabulary
/// at batch 1, 32 and 256, k = 50 (sampling) and 1024 (the largest).
const BENCH_ROWS: [(usize, usize, usize, bool); 8] = [
    (4, 1000, 50, true),
    (1, 151_936, 50, false),
    (32, 151_936, 50, false),
    (256, 151_936, 50, false),
    (1, 262_144, 50, false),
    (32, 262_144, 50, false),
    (256, 262_144, 50, false),
    (32, 151_936, 1024, false),
];

/// The bytes are the logits read once and the values and indices written (the radix
/// passes re-read the row, mostly from L2).
pub(crate) fn topk_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (rows, n, k, quick) in BENCH_ROWS {
            v.push(BenchCase {
                op: OP,
                kernel: "topk_kernel",
                dtype,
                shape: format!("batch={rows} vocab={n} k={k}"),
                bytes: (rows * n * dtype.size_bytes() + rows * k * (dtype.size_bytes() + 4)) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, n], -4.0, 4.0)?;
                    let values = ctx.full_nan(dtype, &[rows, k]).map_err(err)?;
                    let indices = ctx.full_nan(DType::I32, &[rows, k]).map_err(err)?;
                    let (c, i) = (ctx.clone(), indices.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || topk(&c, &x, k, &values, &i).map_err(err)),
                        output: indices,
                        reference: reference::topk(&xv, n, k).1,
                    })
                }),
            });
        }
    }
    v
}
