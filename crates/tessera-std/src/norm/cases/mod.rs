//! Registered cases of the norm family, one file per op, around the fixtures they share
//! here: the RMSNorm case, rejections and bench of every row layout, and the row-op case
//! and bench builders (residual RMSNorm, LayerNorm, softmax, logsumexp). Correctness runs
//! over every float dtype and several shapes; every invariant of every op has a rejection.

use super::gated_mixer_norm::{gated_mixer_norm, gated_mixer_norm_kernel};
use super::layer_norm::{layer_norm, layer_norm_kernel};
use super::reference;
use super::rms_norm::{
    rms_norm, rms_norm_small, rms_norm_small_kernel, rms_norm_tpg4, rms_norm_tpg4_kernel,
    rms_norm_wide, rms_norm_wide_kernel,
};
use super::rms_norm_residual::{rms_norm_residual, rms_norm_residual_kernel, rms_norm_residual_on};
use super::rms_norm_residual_pipe::rms_norm_residual_pipe_kernel;
use super::rms_norm_vec::{
    rms_norm_rows_kernel, rms_norm_vec, rms_norm_vec_kernel, vec_layout, VecLayout,
};
use super::softmax::{logsumexp, logsumexp_kernel, softmax, softmax_kernel};
use crate::error::OpError;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{
    accuracy, compare, err, expect_rejection, random_tensor, rejection, zeros, CaseRng, Refused,
};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{KernelDef, Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

pub(super) type RmsFn = fn(&Context, &Tensor, &Tensor, &Tensor, f32) -> Result<(), OpError>;

pub(super) const EPS: f32 = 1e-5;

pub(super) fn rms_case(op: &'static str, f: RmsFn, dtype: DType, rows: usize, n: usize) -> Case {
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("rows={rows} n={n}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, n], -3.0, 3.0)?;
            let (w, wv) = random_tensor(ctx, rng, dtype, &[n], 0.5, 1.5)?;
            let out = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
            f(ctx, &x, &w, &out, EPS).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            compare(
                &got,
                &reference::rms_norm(&xv, &wv, n, EPS as f64),
                accuracy(op, dtype)?,
            )
        }),
    }
}

/// Inputs for a rejection case: (x, w, out, eps), any of them deliberately wrong.
type BadInputs = fn(&Context, &mut CaseRng) -> Result<(Tensor, Tensor, Tensor, f32), String>;

fn rms_reject(
    op: &'static str,
    f: RmsFn,
    what: &str,
    reason: &'static str,
    inputs: BadInputs,
) -> Case {
    Case {
        op,
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, rng| {
            let (x, w, out, eps) = inputs(ctx, rng)?;
            expect_rejection(&out, reason, || f(ctx, &x, &w, &out, eps))
        }),
    }
}

fn good(
    ctx: &Context,
    rng: &mut CaseRng,
    rows: usize,
    n: usize,
) -> Result<(Tensor, Tensor, Tensor), String> {
    let (x, _) = random_tensor(ctx, rng, DType::F32, &[rows, n], -1.0, 1.0)?;
    let (w, _) = random_tensor(ctx, rng, DType::F32, &[n], -1.0, 1.0)?;
    let out = ctx.full_nan(DType::F32, &[rows, n]).map_err(err)?;
    Ok((x, w, out))
}

/// Rejections every RMSNorm entry point shares.
pub(super) fn common_rejections(op: &'static str, f: RmsFn) -> Vec<Case> {
    vec![
        rms_reject(
            op,
            f,
            "weight length != n",
            "`w` must have shape [128]",
            |ctx, rng| {
                let (x, _, out) = good(ctx, rng, 2, 128)?;
                let w = ctx.zeros(DType::F32, &[64]).map_err(err)?;
                Ok((x, w, out, EPS))
            },
        ),
        rms_reject(
            op,
            f,
            "out shape != x shape",
            "`out` must have shape [2, 128]",
            |ctx, rng| {
                let (x, w, _) = good(ctx, rng, 2, 128)?;
                let out = ctx.full_nan(DType::F32, &[3, 128]).map_err(err)?;
                Ok((x, w, out, EPS))
            },
        ),
        rms_reject(
            op,
            f,
            "weight dtype != x dtype",
            "`w` must be f32",
            |ctx, rng| {
                let (x, _, out) = good(ctx, rng, 2, 128)?;
                let w = ctx.zeros(DType::F16, &[128]).map_err(err)?;
                Ok((x, w, out, EPS))
            },
        ),
        rms_reject(
            op,
            f,
            "integer dtype",
            "`x` must be one of f32, f16, bf16",
            |ctx, _rng| {
                let x = ctx.zeros(DType::U32, &[2, 128]).map_err(err)?;
                let w = ctx.zeros(DType::U32, &[128]).map_err(err)?;
                let out = ctx.zeros(DType::U32, &[2, 128]).map_err(err)?;
                Ok((x, w, out, EPS))
            },
        ),
        rms_reject(op, f, "eps is NaN", "`eps` must be finite", |ctx, rng| {
            let (x, w, out) = good(ctx, rng, 2, 128)?;
            Ok((x, w, out, f32::NAN))
        }),
        rms_reject(
            op,
            f,
            "negative eps",
            "`eps` must be finite and >= 0",
            |ctx, rng| {
                let (x, w, out) = good(ctx, rng, 2, 128)?;
                Ok((x, w, out, -1e-5))
            },
        ),
        rms_reject(op, f, "out aliases x", "`out` aliases `x`", |ctx, rng| {
            let (x, w, _) = good(ctx, rng, 2, 128)?;
            Ok((x.clone(), w, x, EPS))
        }),
        rms_reject(op, f, "no rows", "must not be empty", |ctx, _rng| {
            let x = ctx.zeros(DType::F32, &[0, 128]).map_err(err)?;
            let w = ctx.zeros(DType::F32, &[128]).map_err(err)?;
            let out = ctx.zeros(DType::F32, &[0, 128]).map_err(err)?;
            Ok((x, w, out, EPS))
        }),
        rms_reject(
            op,
            f,
            "scalar input",
            "at least one dimension",
            |ctx, _rng| {
                let x = ctx.zeros(DType::F32, &[]).map_err(err)?;
                let w = ctx.zeros(DType::F32, &[1]).map_err(err)?;
                let out = ctx.zeros(DType::F32, &[]).map_err(err)?;
                Ok((x, w, out, EPS))
            },
        ),
    ]
}

pub(super) fn length_rejection(op: &'static str, f: RmsFn, n: usize, reason: &'static str) -> Case {
    Case {
        op,
        kind: CaseKind::Rejection,
        dtype: None,
        name: format!("n = {n} unsupported"),
        run: Box::new(move |ctx, rng| {
            let (x, w, out) = good(ctx, rng, 2, n)?;
            expect_rejection(&out, reason, || f(ctx, &x, &w, &out, EPS))
        }),
    }
}

fn specs(def: &'static KernelDef, ns: &[u32]) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        if ns.is_empty() {
            v.push(KernelUse {
                def,
                spec: Specialization::new(vec![t], vec![]),
            });
        }
        for &n in ns {
            v.push(KernelUse {
                def,
                spec: Specialization::new(vec![t], vec![Literal::U32(n)]),
            });
        }
    }
    v
}

fn rms_bench(
    op: &'static str,
    kernel: &'static str,
    f: RmsFn,
    dtype: DType,
    rows: usize,
    n: usize,
    quick: bool,
) -> BenchCase {
    rms_bench_named(op, kernel, f, dtype, rows, n, quick, "")
}

/// [`rms_bench`] with `tag` appended to the shape name (a layout variant of one shape).
#[allow(clippy::too_many_arguments)]
pub(super) fn rms_bench_named(
    op: &'static str,
    kernel: &'static str,
    f: RmsFn,
    dtype: DType,
    rows: usize,
    n: usize,
    quick: bool,
    tag: &str,
) -> BenchCase {
    BenchCase {
        op,
        kernel,
        dtype,
        shape: format!("rows={rows} n={n}{tag}"),
        bytes: ((2 * rows * n + n) * dtype.size_bytes()) as u64,
        flops: 0,
        quick,
        prepare: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, n], -3.0, 3.0)?;
            let (w, wv) = random_tensor(ctx, rng, dtype, &[n], 0.5, 1.5)?;
            let out = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok(PreparedBench {
                launch: Box::new(move || f(&c, &x, &w, &o, EPS).map_err(err)),
                output: out,
                reference: reference::rms_norm(&xv, &wv, n, EPS as f64),
            })
        }),
    }
}

/// The uses of a one-row-per-threadgroup 16-byte kernel (constexprs `n`, `epl`, `vec` of
/// [`VecLayout::Row`]) for row lengths `ns` in every float dtype, where that layout applies.
pub(super) fn row_layout_uses(def: &'static KernelDef, ns: &[u32]) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for &n in ns {
            if let Some(VecLayout::Row { epl, vec, .. }) = vec_layout(t, n) {
                v.push(KernelUse {
                    def,
                    spec: Specialization::new(
                        vec![t],
                        vec![Literal::U32(n), Literal::U32(epl), Literal::U32(vec)],
                    ),
                });
            }
        }
    }
    v
}

pub(super) fn none_benches() -> Vec<BenchCase> {
    Vec::new()
}

const SHAPES: [(usize, usize); 4] = [(3, 4096), (5, 100), (2, 5120), (7, 33)];

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
                let o = compare(&got, &want, accuracy(op, dt)?)?;
                total.checked += o.checked;
                total.max_abs_err = total.max_abs_err.max(o.max_abs_err);
                total.max_rel_err = total.max_rel_err.max(o.max_rel_err);
            }
            Ok(total)
        }),
    }
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

/// The cases of one RMSNorm entry point: correctness over every float dtype at each of
/// `shapes` the layout accepts (`keep`), the rejections every entry point shares, and one
/// rejection per unsupported row length with the reason it must give.
fn variant_cases(
    op: &'static str,
    f: RmsFn,
    shapes: &[(usize, usize)],
    keep: fn(DType, usize) -> bool,
    lengths: &[(usize, &'static str)],
) -> Vec<Case> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for &(rows, n) in shapes {
            if keep(t, n) {
                v.push(rms_case(op, f, t, rows, n));
            }
        }
    }
    v.extend(common_rejections(op, f));
    for &(n, reason) in lengths {
        v.push(length_rejection(op, f, n, reason));
    }
    v
}

/// Every shape, for layouts that take any row length their rejections allow.
fn any_shape(_: DType, _: usize) -> bool {
    true
}

/// The 16-byte layouts' specialisations for row lengths `ns` in every float dtype.
fn vec_specs(ns: &[u32]) -> Vec<KernelUse> {
    let mut v = row_layout_uses(&rms_norm_vec_kernel::DEF, ns);
    for t in FLOAT_DTYPES {
        for &n in ns {
            if let Some(VecLayout::Rows { epl, vec, lg }) = vec_layout(t, n) {
                v.push(KernelUse {
                    def: &rms_norm_rows_kernel::DEF,
                    spec: Specialization::new(
                        vec![t],
                        vec![
                            Literal::U32(n),
                            Literal::U32(epl),
                            Literal::U32(vec),
                            Literal::U32(lg),
                        ],
                    ),
                });
            }
        }
    }
    v
}

mod gated_mixer_norm;
mod layer_norm;
mod rms_norm;
mod rms_norm_layouts;
mod rms_norm_pipe;
mod rms_norm_residual;
mod softmax;

pub(super) use gated_mixer_norm::{gated_benches, gated_cases, gated_mixer_norm_kernels};
pub(super) use layer_norm::{layer_norm_kernels, ln_benches, ln_cases};
pub(super) use rms_norm::{rms_norm_benches, rms_norm_cases, rms_norm_kernels};
pub(super) use rms_norm_layouts::{
    rms_norm_small_kernels, rms_norm_tpg4_kernels, rms_norm_vec_kernels, rms_norm_wide_kernels,
    small_cases, tpg4_cases, vec_cases, wide_cases,
};
pub(super) use rms_norm_pipe::{pipe_benches, pipe_cases, rms_norm_pipe_kernels};
pub(super) use rms_norm_residual::{residual_benches, residual_cases, residual_kernels};
pub(super) use softmax::{
    logsumexp_kernels, lse_benches, lse_cases, softmax_benches, softmax_cases, softmax_kernels,
};
