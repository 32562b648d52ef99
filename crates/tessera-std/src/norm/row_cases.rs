//! Registered cases of the residual RMSNorm, LayerNorm, softmax and logsumexp: correctness
//! over every float dtype at several row lengths, a rejection per invariant, the kernels
//! to compile and the benchmark shapes.

use super::cases::row_layout_uses;
use super::layer_norm::{layer_norm, layer_norm_kernel};
use super::rms_norm_residual::{rms_norm_residual, rms_norm_residual_kernel, rms_norm_residual_on};
use super::rms_norm_residual_pipe::rms_norm_residual_pipe_kernel;
use super::row_reference as reference;
use super::softmax::{logsumexp, logsumexp_kernel, softmax, softmax_kernel};
use crate::error::OpError;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{compare, expect_rejection, random_tensor, tolerance, CaseRng};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{KernelDef, Specialization};
use tessera_runtime::{Context, DType, Tensor};

const EPS: f32 = 1e-5;
const SHAPES: [(usize, usize); 4] = [(3, 4096), (5, 100), (2, 5120), (7, 33)];

/// Shapes of the residual RMSNorm only: row walks longer than the resident grid on a small
/// device, one row of the widest layout.
const RESIDUAL_SHAPES: [(usize, usize); 2] = [(37, 4096), (1, 8192)];

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn uses(def: &'static KernelDef) -> Vec<KernelUse> {
    FLOAT_DTYPES
        .iter()
        .map(|&t| KernelUse {
            def,
            spec: Specialization::new(vec![t], vec![]),
        })
        .collect()
}

/// Each output a case produced, with its reference.
type Outputs = Result<Vec<(Vec<f64>, Vec<f64>)>, String>;

/// Runs a case body and compares every output it returns with its reference.
type Body = fn(&Context, &mut CaseRng, DType, usize, usize) -> Outputs;

fn case(op: &'static str, dt: DType, rows: usize, n: usize, body: Body) -> Case {
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("rows={rows} n={n}"),
        run: Box::new(move |ctx, rng| {
            let mut total = crate::registry::Outcome::default();
            for (got, want) in body(ctx, rng, dt, rows, n)? {
                let o = compare(&got, &want, tolerance(dt))?;
                total.checked += o.checked;
                total.max_abs_err = total.max_abs_err.max(o.max_abs_err);
                total.max_rel_err = total.max_rel_err.max(o.max_rel_err);
            }
            Ok(total)
        }),
    }
}

type Refused = Box<dyn FnOnce() -> Result<(), OpError>>;
type BadCall = fn(&Context) -> Result<(Tensor, Refused), String>;

fn reject(op: &'static str, what: &str, reason: &'static str, f: BadCall) -> Case {
    Case {
        op,
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, _rng| {
            let (out, call) = f(ctx)?;
            expect_rejection(&out, reason, call)
        }),
    }
}

fn z(ctx: &Context, dt: DType, shape: &[usize]) -> Result<Tensor, String> {
    ctx.zeros(dt, shape).map_err(err)
}

#[allow(clippy::too_many_arguments)]
fn bench(
    op: &'static str,
    kernel: &'static str,
    dt: DType,
    rows: usize,
    n: usize,
    bytes_per_elem: usize,
    quick: bool,
    body: fn(&Context, &mut CaseRng, DType, usize, usize) -> Result<PreparedBench, String>,
) -> BenchCase {
    BenchCase {
        op,
        kernel,
        dtype: dt,
        shape: format!("rows={rows} n={n}"),
        bytes: (rows * n * bytes_per_elem) as u64,
        flops: 0,
        quick,
        prepare: Box::new(move |ctx, rng| body(ctx, rng, dt, rows, n)),
    }
}

// ── rms_norm_residual ───────────────────────────────────────────────────────

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
    let x = z(ctx, DType::F16, &[2, 64])?;
    let r = z(ctx, DType::F16, r_shape)?;
    let w = z(ctx, DType::F16, &[64])?;
    let out = z(ctx, DType::F16, &[2, 64])?;
    let sum = if alias_sum {
        x.clone()
    } else {
        z(ctx, DType::F16, &[2, 64])?
    };
    let c = ctx.clone();
    Ok((
        out.clone(),
        Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
    ))
}

pub(super) fn residual_kernels() -> Vec<KernelUse> {
    let mut v = uses(&rms_norm_residual_kernel::DEF);
    v.extend(row_layout_uses(
        &rms_norm_residual_pipe_kernel::DEF,
        &[4096, 8192],
    ));
    v
}

pub(super) fn residual_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (rows, n) in SHAPES.into_iter().chain(RESIDUAL_SHAPES) {
            v.push(case("rms_norm_residual", dt, rows, n, residual_body));
        }
    }
    v.push(reject(
        "rms_norm_residual",
        "residual shape != x shape",
        "`residual` must have shape [2, 64]",
        |ctx| residual_bad(ctx, &[3, 64], false),
    ));
    v.push(reject(
        "rms_norm_residual",
        "sum aliases x",
        "`sum` aliases an input",
        |ctx| residual_bad(ctx, &[2, 64], true),
    ));
    v.push(reject(
        "rms_norm_residual",
        "residual dtype",
        "`residual` must be f16",
        |ctx| {
            let x = z(ctx, DType::F16, &[2, 64])?;
            let r = z(ctx, DType::F32, &[2, 64])?;
            let w = z(ctx, DType::F16, &[64])?;
            let (sum, out) = (z(ctx, DType::F16, &[2, 64])?, z(ctx, DType::F16, &[2, 64])?);
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v.push(reject(
        "rms_norm_residual",
        "sum shape",
        "`sum` must have shape [2, 64]",
        |ctx| {
            let x = z(ctx, DType::F16, &[2, 64])?;
            let r = z(ctx, DType::F16, &[2, 64])?;
            let w = z(ctx, DType::F16, &[64])?;
            let (sum, out) = (z(ctx, DType::F16, &[64])?, z(ctx, DType::F16, &[2, 64])?);
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v.push(reject(
        "rms_norm_residual",
        "weight length != n",
        "`w` must have shape [64]",
        |ctx| {
            let x = z(ctx, DType::F16, &[2, 64])?;
            let r = z(ctx, DType::F16, &[2, 64])?;
            let w = z(ctx, DType::F16, &[32])?;
            let (sum, out) = (z(ctx, DType::F16, &[2, 64])?, z(ctx, DType::F16, &[2, 64])?);
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v.push(reject(
        "rms_norm_residual",
        "out aliases residual",
        "`out` aliases `residual`",
        |ctx| {
            let x = z(ctx, DType::F16, &[2, 64])?;
            let r = z(ctx, DType::F16, &[2, 64])?;
            let w = z(ctx, DType::F16, &[64])?;
            let sum = z(ctx, DType::F16, &[2, 64])?;
            let out = r.clone();
            let c = ctx.clone();
            Ok((
                r.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, EPS)),
            ))
        },
    ));
    v.push(reject(
        "rms_norm_residual",
        "eps is NaN",
        "`eps` must be finite",
        |ctx| {
            let x = z(ctx, DType::F16, &[2, 64])?;
            let r = z(ctx, DType::F16, &[2, 64])?;
            let w = z(ctx, DType::F16, &[64])?;
            let (sum, out) = (z(ctx, DType::F16, &[2, 64])?, z(ctx, DType::F16, &[2, 64])?);
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, f32::NAN)),
            ))
        },
    ));
    v.push(reject(
        "rms_norm_residual",
        "integer dtype",
        "`x` must be one of f32, f16, bf16",
        |ctx| {
            let x = z(ctx, DType::U32, &[2, 64])?;
            let w = z(ctx, DType::U32, &[64])?;
            let (r, sum, out) = (
                x.clone(),
                z(ctx, DType::U32, &[2, 64])?,
                z(ctx, DType::U32, &[2, 64])?,
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

pub(super) fn residual_benches() -> Vec<BenchCase> {
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

// ── layer_norm ──────────────────────────────────────────────────────────────

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
    let x = z(ctx, DType::BF16, &[2, 64])?;
    let w = z(ctx, DType::BF16, &[64])?;
    let b = z(ctx, b_dt, &[b_n])?;
    let out = z(ctx, DType::BF16, &[2, 64])?;
    let c = ctx.clone();
    Ok((
        out.clone(),
        Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
    ))
}

pub(super) fn ln_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (rows, n) in SHAPES {
            v.push(case("layer_norm", dt, rows, n, ln_body));
        }
    }
    v.push(reject(
        "layer_norm",
        "bias length != n",
        "`b` must have shape [64]",
        |ctx| ln_bad(ctx, DType::BF16, 63),
    ));
    v.push(reject(
        "layer_norm",
        "bias dtype",
        "`b` must be bf16",
        |ctx| ln_bad(ctx, DType::F32, 64),
    ));
    v.push(reject(
        "layer_norm",
        "weight length != n",
        "`w` must have shape [64]",
        |ctx| {
            let x = z(ctx, DType::BF16, &[2, 64])?;
            let w = z(ctx, DType::BF16, &[65])?;
            let b = z(ctx, DType::BF16, &[64])?;
            let out = z(ctx, DType::BF16, &[2, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
            ))
        },
    ));
    v.push(reject(
        "layer_norm",
        "out shape",
        "`out` must have shape [2, 64]",
        |ctx| {
            let x = z(ctx, DType::BF16, &[2, 64])?;
            let w = z(ctx, DType::BF16, &[64])?;
            let b = z(ctx, DType::BF16, &[64])?;
            let out = z(ctx, DType::BF16, &[128])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
            ))
        },
    ));
    v.push(reject(
        "layer_norm",
        "negative eps",
        "`eps` must be finite and >= 0",
        |ctx| {
            let x = z(ctx, DType::BF16, &[2, 64])?;
            let w = z(ctx, DType::BF16, &[64])?;
            let b = z(ctx, DType::BF16, &[64])?;
            let out = z(ctx, DType::BF16, &[2, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, -1.0)),
            ))
        },
    ));
    v.push(reject(
        "layer_norm",
        "out aliases x",
        "`out` aliases `x`",
        |ctx| {
            let x = z(ctx, DType::BF16, &[1, 64])?;
            let w = z(ctx, DType::BF16, &[64])?;
            let b = z(ctx, DType::BF16, &[64])?;
            let out = x.clone();
            let c = ctx.clone();
            Ok((
                x.clone(),
                Box::new(move || layer_norm(&c, &x, &w, &b, &out, EPS)),
            ))
        },
    ));
    v.push(reject(
        "layer_norm",
        "empty x",
        "must not be empty",
        |ctx| {
            let x = z(ctx, DType::BF16, &[0, 64])?;
            let w = z(ctx, DType::BF16, &[64])?;
            let b = z(ctx, DType::BF16, &[64])?;
            let out = z(ctx, DType::BF16, &[0, 64])?;
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

pub(super) fn ln_benches() -> Vec<BenchCase> {
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

// ── softmax and logsumexp ───────────────────────────────────────────────────

fn softmax_body(ctx: &Context, rng: &mut CaseRng, dt: DType, rows: usize, n: usize) -> Outputs {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -8.0, 8.0)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    softmax(ctx, &x, &out).map_err(err)?;
    Ok(vec![(
        out.to_f64_vec().map_err(err)?,
        reference::softmax(&xv, n),
    )])
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

pub(super) fn softmax_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (rows, n) in SHAPES {
            v.push(case("softmax", dt, rows, n, softmax_body));
        }
    }
    v.push(reject(
        "softmax",
        "out shape",
        "`out` must have shape [2, 10]",
        |ctx| {
            let x = z(ctx, DType::F32, &[2, 10])?;
            let out = z(ctx, DType::F32, &[20])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || softmax(&c, &x, &out))))
        },
    ));
    v.push(reject("softmax", "out dtype", "`out` must be f16", |ctx| {
        let x = z(ctx, DType::F16, &[2, 10])?;
        let out = z(ctx, DType::F32, &[2, 10])?;
        let c = ctx.clone();
        Ok((out.clone(), Box::new(move || softmax(&c, &x, &out))))
    }));
    v.push(reject("softmax", "in place", "`out` aliases `x`", |ctx| {
        let x = z(ctx, DType::F32, &[2, 10])?;
        let out = x.clone();
        let c = ctx.clone();
        Ok((x.clone(), Box::new(move || softmax(&c, &x, &out))))
    }));
    v.push(reject(
        "softmax",
        "integer dtype",
        "`x` must be one of f32, f16, bf16",
        |ctx| {
            let x = z(ctx, DType::I32, &[2, 10])?;
            let out = z(ctx, DType::I32, &[2, 10])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || softmax(&c, &x, &out))))
        },
    ));
    v.push(reject("softmax", "empty row", "must not be empty", |ctx| {
        let x = z(ctx, DType::F32, &[2, 0])?;
        let out = z(ctx, DType::F32, &[2, 0])?;
        let c = ctx.clone();
        Ok((out.clone(), Box::new(move || softmax(&c, &x, &out))))
    }));
    v
}

pub(super) fn lse_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (rows, n) in SHAPES {
            v.push(case("logsumexp", dt, rows, n, lse_body));
        }
    }
    v.push(reject(
        "logsumexp",
        "out not f32",
        "`out` must be f32",
        |ctx| {
            let x = z(ctx, DType::F16, &[2, 10])?;
            let out = z(ctx, DType::F16, &[2])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || logsumexp(&c, &x, &out))))
        },
    ));
    v.push(reject(
        "logsumexp",
        "out shape",
        "`out` must have shape [2, 3]",
        |ctx| {
            let x = z(ctx, DType::F16, &[2, 3, 10])?;
            let out = z(ctx, DType::F32, &[6])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || logsumexp(&c, &x, &out))))
        },
    ));
    v.push(reject(
        "logsumexp",
        "integer dtype",
        "`x` must be one of f32, f16, bf16",
        |ctx| {
            let x = z(ctx, DType::U32, &[2, 10])?;
            let out = z(ctx, DType::F32, &[2])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || logsumexp(&c, &x, &out))))
        },
    ));
    v.push(reject(
        "logsumexp",
        "scalar x",
        "at least one dimension",
        |ctx| {
            let x = z(ctx, DType::F32, &[])?;
            let out = z(ctx, DType::F32, &[1])?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || logsumexp(&c, &x, &out))))
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

pub(super) fn softmax_benches() -> Vec<BenchCase> {
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

pub(super) fn lse_benches() -> Vec<BenchCase> {
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

pub(super) fn layer_norm_kernels() -> Vec<KernelUse> {
    uses(&layer_norm_kernel::DEF)
}

pub(super) fn softmax_kernels() -> Vec<KernelUse> {
    uses(&softmax_kernel::DEF)
}

pub(super) fn logsumexp_kernels() -> Vec<KernelUse> {
    uses(&logsumexp_kernel::DEF)
}
