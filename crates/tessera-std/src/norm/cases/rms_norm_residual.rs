//! Cases of `rms_norm_residual`: the residual sum and the normalised row over every
//! float dtype, a rejection per invariant, its specialisations and benchmark shapes.

use super::*;
use crate::norm::row_reference as reference;

/// Shapes of the residual RMSNorm only: row walks longer than the resident grid on a small
/// device, one row of the widest layout.
const RESIDUAL_SHAPES: [(usize, usize); 2] = [(37, 4096), (1, 8192)];

fn residual_body(ctx: &Context, rng: &mut CaseRng, dt: DType, rows: usize, n: usize) -> Outputs {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
    let (r, rv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
    let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
    let sum = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    rms_norm_residual(ctx, &x, &r, &w, &sum, &out, EPS).map_err(err)?;
    let (ws, wo) = reference::rms_norm_residual(&xv, &rv, &wv, n, EPS as f64);
    Ok(vec![
        (sum.to_f64_vec().map_err(err)?, ws),
        (out.to_f64_vec().map_err(err)?, wo),
    ])
}

fn residual_bad(
    ctx: &Context,
    r_shape: &[usize],
    alias_sum: bool,
) -> Result<(Tensor, Refused), String> {
    let x = zeros(ctx, DType::F16, &[2, 64])?;
    let r = zeros(ctx, DType::F16, r_shape)?;
    let w = zeros(ctx, DType::F16, &[64])?;
    let out = zeros(ctx, DType::F16, &[2, 64])?;
    let sum = if alias_sum {
        x.clone()
    } else {
        zeros(ctx, DType::F16, &[2, 64])?
    };
    let c = ctx.clone();
    Ok((
        out.clone(),
        Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
    ))
}

pub(crate) fn residual_kernels() -> Vec<KernelUse> {
    let mut v = uses(&rms_norm_residual_kernel::DEF);
    v.extend(row_layout_uses(
        &rms_norm_residual_pipe_kernel::DEF,
        &[4096, 8192],
    ));
    v
}

pub(crate) fn residual_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (rows, n) in SHAPES.into_iter().chain(RESIDUAL_SHAPES) {
            v.push(case("rms_norm_residual", dt, rows, n, residual_body));
        }
    }
    v.push(rejection(
        "rms_norm_residual",
        "residual shape != x shape",
        "`residual` must have shape [2, 64]",
        |ctx| residual_bad(ctx, &[3, 64], false),
    ));
    v.push(rejection(
        "rms_norm_residual",
        "sum aliases x",
        "`sum` aliases an input",
        |ctx| residual_bad(ctx, &[2, 64], true),
    ));
    v.push(rejection(
        "rms_norm_residual",
        "residual dtype",
        "`residual` must be f16",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 64])?;
            let r = zeros(ctx, DType::F32, &[2, 64])?;
            let w = zeros(ctx, DType::F16, &[64])?;
            let (sum, out) = (
                zeros(ctx, DType::F16, &[2, 64])?,
                zeros(ctx, DType::F16, &[2, 64])?,
            );
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v.push(rejection(
        "rms_norm_residual",
        "sum shape",
        "`sum` must have shape [2, 64]",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 64])?;
            let r = zeros(ctx, DType::F16, &[2, 64])?;
            let w = zeros(ctx, DType::F16, &[64])?;
            let (sum, out) = (
                zeros(ctx, DType::F16, &[64])?,
                zeros(ctx, DType::F16, &[2, 64])?,
            );
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v.push(rejection(
        "rms_norm_residual",
        "weight length != n",
        "`w` must have shape [64]",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 64])?;
            let r = zeros(ctx, DType::F16, &[2, 64])?;
            let w = zeros(ctx, DType::F16, &[32])?;
            let (sum, out) = (
                zeros(ctx, DType::F16, &[2, 64])?,
                zeros(ctx, DType::F16, &[2, 64])?,
            );
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v.push(rejection(
        "rms_norm_residual",
        "out aliases residual",
        "`out` aliases `residual`",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 64])?;
            let r = zeros(ctx, DType::F16, &[2, 64])?;
            let w = zeros(ctx, DType::F16, &[64])?;
            let sum = zeros(ctx, DType::F16, &[2, 64])?;
            let out = r.clone();
            let c = ctx.clone();
            Ok((
                r.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v.push(rejection(
        "rms_norm_residual",
        "eps is NaN",
        "`eps` must be finite",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 64])?;
            let r = zeros(ctx, DType::F16, &[2, 64])?;
            let w = zeros(ctx, DType::F16, &[64])?;
            let (sum, out) = (
                zeros(ctx, DType::F16, &[2, 64])?,
                zeros(ctx, DType::F16, &[2, 64])?,
            );
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, f32::NAN)),
            ))
        },
    ));
    v.push(rejection(
        "rms_norm_residual",
        "integer dtype",
        "`x` must be one of f32, f16, bf16",
        |ctx| {
            let x = zeros(ctx, DType::U32, &[2, 64])?;
            let w = zeros(ctx, DType::U32, &[64])?;
            let (r, sum, out) = (
                x.clone(),
                zeros(ctx, DType::U32, &[2, 64])?,
                zeros(ctx, DType::U32, &[2, 64])?,
            );
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v
}

fn residual_bench_body(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    rows: usize,
    n: usize,
) -> Result<PreparedBench, String> {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
    let (r, rv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
    let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
    let sum = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let (c, o) = (ctx.clone(), out.clone());
    Ok(PreparedBench {
        launch: Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &o, EPS).map_err(err)),
        output: out,
        reference: reference::rms_norm_residual(&xv, &rv, &wv, n, EPS as f64).1,
    })
}

/// The 4096×4096 residual bench with the pipelined grid at one row per threadgroup.
fn residual_one_row_bench(dt: DType) -> BenchCase {
    let (rows, n) = (4096, 4096);
    BenchCase {
        op: "rms_norm_residual",
        kernel: "rms_norm_residual_pipe_kernel",
        dtype: dt,
        shape: format!("rows={rows} n={n} one row per group"),
        bytes: (rows * n * 4 * dt.size_bytes()) as u64,
        flops: 0,
        quick: false,
        prepare: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
            let (r, rv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
            let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
            let sum = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
            let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok(PreparedBench {
                launch: Box::new(move || {
                    rms_norm_residual_on(&c, &x, &r, &w, &sum, &o, EPS, Some(rows as u32))
                        .map_err(err)
                }),
                output: out,
                reference: reference::rms_norm_residual(&xv, &rv, &wv, n, EPS as f64).1,
            })
        }),
    }
}

pub(crate) fn residual_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(residual_one_row_bench(dt));
    }
    for dt in FLOAT_DTYPES {
        let es = dt.size_bytes();
        v.push(bench(
            "rms_norm_residual",
            "rms_norm_residual_kernel",
            dt,
            16,
            4096,
            4 * es,
            true,
            residual_bench_body,
        ));
        v.push(bench(
            "rms_norm_residual",
            "rms_norm_residual_kernel",
            dt,
            4096,
            4096,
            4 * es,
            false,
            residual_bench_body,
        ));
        v.push(bench(
            "rms_norm_residual",
            "rms_norm_residual_kernel",
            dt,
            1,
            8192,
            4 * es,
            false,
            residual_bench_body,
        ));
    }
    v
}
