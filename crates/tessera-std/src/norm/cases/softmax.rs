//! Cases of `softmax` and `logsumexp` over the last dimension (one kernel file, one
//! cases file): every float dtype and row length, a rejection per invariant, their
//! specialisations and benchmark shapes.

use super::*;
use crate::norm::row_reference as reference;

fn softmax_body(ctx: &Context, rng: &mut CaseRng, dt: DType, rows: usize, n: usize) -> Outputs {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -8.0, 8.0)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    softmax(ctx, &x, &out).map_err(err)?;
    Ok(vec![(
        out.to_f64_vec().map_err(err)?,
        reference::softmax(&xv, n),
    )])
}

pub(crate) fn softmax_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (rows, n) in SHAPES {
            v.push(case("softmax", dt, rows, n, softmax_body));
        }
    }
    v.push(rejection(
        "softmax",
        "out shape",
        "`out` must have shape [2, 10]",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 10])?;
            let out = zeros(ctx, DType::F32, &[20])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || softmax(&c, &x, &out))))
        },
    ));
    v.push(rejection(
        "softmax",
        "out dtype",
        "`out` must be f16",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 10])?;
            let out = zeros(ctx, DType::F32, &[2, 10])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || softmax(&c, &x, &out))))
        },
    ));
    v.push(rejection(
        "softmax",
        "in place",
        "`out` aliases `x`",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 10])?;
            let out = x.clone();
            let c = ctx.clone();
            Ok((x.clone(), Box::new(move || softmax(&c, &x, &out))))
        },
    ));
    v.push(rejection(
        "softmax",
        "integer dtype",
        "`x` must be one of f32, f16, bf16",
        |ctx| {
            let x = zeros(ctx, DType::I32, &[2, 10])?;
            let out = zeros(ctx, DType::I32, &[2, 10])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || softmax(&c, &x, &out))))
        },
    ));
    v.push(rejection(
        "softmax",
        "empty row",
        "must not be empty",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 0])?;
            let out = zeros(ctx, DType::F32, &[2, 0])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || softmax(&c, &x, &out))))
        },
    ));
    v
}

fn softmax_bench_body(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    rows: usize,
    n: usize,
) -> Result<PreparedBench, String> {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -8.0, 8.0)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let (c, o) = (ctx.clone(), out.clone());
    Ok(PreparedBench {
        launch: Box::new(move || softmax(&c, &x, &o).map_err(err)),
        output: out,
        reference: reference::softmax(&xv, n),
    })
}

pub(crate) fn softmax_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let es = dt.size_bytes();
        v.push(bench(
            "softmax",
            "softmax_kernel",
            dt,
            8,
            1024,
            2 * es,
            true,
            softmax_bench_body,
        ));
        // Vocabulary-sized rows (sampling) and attention-score rows.
        v.push(bench(
            "softmax",
            "softmax_kernel",
            dt,
            32,
            128256,
            2 * es,
            false,
            softmax_bench_body,
        ));
        v.push(bench(
            "softmax",
            "softmax_kernel",
            dt,
            8192,
            4096,
            2 * es,
            false,
            softmax_bench_body,
        ));
    }
    v
}

pub(crate) fn softmax_kernels() -> Vec<KernelUse> {
    uses(&softmax_kernel::DEF)
}

fn lse_body(ctx: &Context, rng: &mut CaseRng, dt: DType, rows: usize, n: usize) -> Outputs {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -8.0, 8.0)?;
    let out = ctx.full_nan(DType::F32, &[rows]).map_err(err)?;
    logsumexp(ctx, &x, &out).map_err(err)?;
    Ok(vec![(
        out.to_f64_vec().map_err(err)?,
        reference::logsumexp(&xv, n),
    )])
}

pub(crate) fn lse_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (rows, n) in SHAPES {
            v.push(case("logsumexp", dt, rows, n, lse_body));
        }
    }
    v.push(rejection(
        "logsumexp",
        "out not f32",
        "`out` must be f32",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 10])?;
            let out = zeros(ctx, DType::F16, &[2])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || logsumexp(&c, &x, &out))))
        },
    ));
    v.push(rejection(
        "logsumexp",
        "out shape",
        "`out` must have shape [2, 3]",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 3, 10])?;
            let out = zeros(ctx, DType::F32, &[6])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || logsumexp(&c, &x, &out))))
        },
    ));
    v.push(rejection(
        "logsumexp",
        "integer dtype",
        "`x` must be one of f32, f16, bf16",
        |ctx| {
            let x = zeros(ctx, DType::U32, &[2, 10])?;
            let out = zeros(ctx, DType::F32, &[2])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || logsumexp(&c, &x, &out))))
        },
    ));
    v.push(rejection(
        "logsumexp",
        "scalar x",
        "at least one dimension",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[])?;
            let out = zeros(ctx, DType::F32, &[1])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || logsumexp(&c, &x, &out))))
        },
    ));
    v
}

fn lse_bench_body(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    rows: usize,
    n: usize,
) -> Result<PreparedBench, String> {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -8.0, 8.0)?;
    let out = ctx.full_nan(DType::F32, &[rows]).map_err(err)?;
    let (c, o) = (ctx.clone(), out.clone());
    Ok(PreparedBench {
        launch: Box::new(move || logsumexp(&c, &x, &o).map_err(err)),
        output: out,
        reference: reference::logsumexp(&xv, n),
    })
}

pub(crate) fn lse_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let es = dt.size_bytes();
        v.push(bench(
            "logsumexp",
            "logsumexp_kernel",
            dt,
            8,
            1024,
            es,
            true,
            lse_bench_body,
        ));
        v.push(bench(
            "logsumexp",
            "logsumexp_kernel",
            dt,
            32,
            128256,
            es,
            false,
            lse_bench_body,
        ));
    }
    v
}

pub(crate) fn logsumexp_kernels() -> Vec<KernelUse> {
    uses(&logsumexp_kernel::DEF)
}
