//! Cases of `layer_norm`: every float dtype and row length, a rejection per invariant,
//! its specialisations and benchmark shapes.

use super::*;
use crate::norm::row_reference as reference;

fn ln_body(ctx: &Context, rng: &mut CaseRng, dt: DType, rows: usize, n: usize) -> Outputs {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], 1.0, 3.0)?;
    let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
    let (b, bv) = random_tensor(ctx, rng, dt, &[n], -0.5, 0.5)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    layer_norm(ctx, &x, &w, &b, &out, EPS).map_err(err)?;
    Ok(vec![(
        out.to_f64_vec().map_err(err)?,
        reference::layer_norm(&xv, &wv, &bv, n, EPS as f64),
    )])
}

fn ln_bad(ctx: &Context, b_dt: DType, b_n: usize) -> Result<(Tensor, Refused), String> {
    let x = zeros(ctx, DType::BF16, &[2, 64])?;
    let w = zeros(ctx, DType::BF16, &[64])?;
    let b = zeros(ctx, b_dt, &[b_n])?;
    let out = zeros(ctx, DType::BF16, &[2, 64])?;
    let c = ctx.clone();
    Ok((
        out.clone(),
        Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
    ))
}

pub(crate) fn ln_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (rows, n) in SHAPES {
            v.push(case("layer_norm", dt, rows, n, ln_body));
        }
    }
    v.push(rejection(
        "layer_norm",
        "bias length != n",
        "`b` must have shape [64]",
        |ctx| ln_bad(ctx, DType::BF16, 63),
    ));
    v.push(rejection(
        "layer_norm",
        "bias dtype",
        "`b` must be bf16",
        |ctx| ln_bad(ctx, DType::F32, 64),
    ));
    v.push(rejection(
        "layer_norm",
        "weight length != n",
        "`w` must have shape [64]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 64])?;
            let w = zeros(ctx, DType::BF16, &[65])?;
            let b = zeros(ctx, DType::BF16, &[64])?;
            let out = zeros(ctx, DType::BF16, &[2, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
            ))
        },
    ));
    v.push(rejection(
        "layer_norm",
        "out shape",
        "`out` must have shape [2, 64]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 64])?;
            let w = zeros(ctx, DType::BF16, &[64])?;
            let b = zeros(ctx, DType::BF16, &[64])?;
            let out = zeros(ctx, DType::BF16, &[128])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
            ))
        },
    ));
    v.push(rejection(
        "layer_norm",
        "negative eps",
        "`eps` must be finite and >= 0",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 64])?;
            let w = zeros(ctx, DType::BF16, &[64])?;
            let b = zeros(ctx, DType::BF16, &[64])?;
            let out = zeros(ctx, DType::BF16, &[2, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, -1.0)),
            ))
        },
    ));
    v.push(rejection(
        "layer_norm",
        "out aliases x",
        "`out` aliases `x`",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[1, 64])?;
            let w = zeros(ctx, DType::BF16, &[64])?;
            let b = zeros(ctx, DType::BF16, &[64])?;
            let out = x.clone();
            let c = ctx.clone();
            Ok((
                x.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
            ))
        },
    ));
    v.push(rejection(
        "layer_norm",
        "empty x",
        "must not be empty",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[0, 64])?;
            let w = zeros(ctx, DType::BF16, &[64])?;
            let b = zeros(ctx, DType::BF16, &[64])?;
            let out = zeros(ctx, DType::BF16, &[0, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
            ))
        },
    ));
    v
}

fn ln_bench_body(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    rows: usize,
    n: usize,
) -> Result<PreparedBench, String> {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], 1.0, 3.0)?;
    let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
    let (b, bv) = random_tensor(ctx, rng, dt, &[n], -0.5, 0.5)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let (c, o) = (ctx.clone(), out.clone());
    Ok(PreparedBench {
        launch: Box::new(move || layer_norm(&c, &x, &w, &b, &o, EPS).map_err(err)),
        output: out,
        reference: reference::layer_norm(&xv, &wv, &bv, n, EPS as f64),
    })
}

pub(crate) fn ln_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let es = dt.size_bytes();
        v.push(bench(
            "layer_norm",
            "layer_norm_kernel",
            dt,
            16,
            1024,
            2 * es,
            true,
            ln_bench_body,
        ));
        v.push(bench(
            "layer_norm",
            "layer_norm_kernel",
            dt,
            4096,
            4096,
            2 * es,
            false,
            ln_bench_body,
        ));
    }
    v
}

pub(crate) fn layer_norm_kernels() -> Vec<KernelUse> {
    uses(&layer_norm_kernel::DEF)
}
