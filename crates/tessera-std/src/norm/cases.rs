//! Registered cases of the norm family: correctness over every float dtype and several
//! shapes, a rejection for every invariant of every op, the specialisations to compile,
//! and the benchmark shapes.

use super::gated_mixer_norm::{gated_mixer_norm, gated_mixer_norm_kernel};
use super::reference;
use super::rms_norm::{
    rms_norm, rms_norm_small, rms_norm_small_kernel, rms_norm_tpg4, rms_norm_tpg4_kernel,
    rms_norm_wide, rms_norm_wide_kernel,
};
use super::rms_norm_vec::{
    rms_norm_rows_kernel, rms_norm_vec, rms_norm_vec_kernel, vec_layout, VecLayout,
};
use crate::error::OpError;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{compare, expect_rejection, random_tensor, tolerance, CaseRng};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{KernelDef, Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

pub(super) type RmsFn = fn(&Context, &Tensor, &Tensor, &Tensor, f32) -> Result<(), OpError>;

pub(super) const EPS: f32 = 1e-5;

pub(super) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

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
                tolerance(dtype),
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

// ── rms_norm (dispatching) ──────────────────────────────────────────────────

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

pub(super) fn rms_norm_cases() -> Vec<Case> {
    let shapes = [(4, 4096), (16, 64), (2, 3000), (3, 640)];
    variant_cases("rms_norm", rms_norm, &shapes, any_shape, &[])
}

pub(super) fn rms_norm_kernels() -> Vec<KernelUse> {
    let mut v = vec_specs(&[64, 128, 640, 4096, 8192]);
    v.extend(specs(&rms_norm_small_kernel::DEF, &[640]));
    v.extend(specs(&rms_norm_wide_kernel::DEF, &[]));
    v
}

pub(super) fn rms_norm_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        v.push(rms_bench(
            "rms_norm",
            "rms_norm_vec_kernel",
            rms_norm,
            t,
            64,
            4096,
            true,
        ));
        v.push(rms_bench(
            "rms_norm",
            "rms_norm_rows_kernel",
            rms_norm,
            t,
            256,
            128,
            true,
        ));
        v.push(rms_bench(
            "rms_norm",
            "rms_norm_vec_kernel",
            rms_norm,
            t,
            1,
            4096,
            false,
        ));
        v.push(rms_bench(
            "rms_norm",
            "rms_norm_vec_kernel",
            rms_norm,
            t,
            8192,
            4096,
            false,
        ));
        v.push(rms_bench(
            "rms_norm",
            "rms_norm_rows_kernel",
            rms_norm,
            t,
            32768,
            128,
            false,
        ));
        v.push(rms_bench(
            "rms_norm",
            "rms_norm_vec_kernel",
            rms_norm,
            t,
            4096,
            8192,
            false,
        ));
    }
    v
}

// ── explicit variants ───────────────────────────────────────────────────────

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

pub(super) fn vec_cases() -> Vec<Case> {
    // One row per threadgroup (one and two accesses per thread), several rows per
    // threadgroup with a partial last threadgroup.
    let shapes = [(3, 4096), (2, 8192), (2, 256), (13, 128), (9, 64), (5, 32)];
    let lengths = [(3000, "is not a layout of 16-byte accesses")];
    let fits = |t: DType, n: usize| vec_layout(t, n as u32).is_some();
    variant_cases("rms_norm_vec", rms_norm_vec, &shapes, fits, &lengths)
}

pub(super) fn tpg4_cases() -> Vec<Case> {
    let lengths = [(192, "must be a multiple of 128"), (8192, "at most 4096")];
    let shapes = [(3, 128), (5, 1024), (2, 4096)];
    variant_cases("rms_norm_tpg4", rms_norm_tpg4, &shapes, any_shape, &lengths)
}

pub(super) fn small_cases() -> Vec<Case> {
    let lengths = [(96, "must be a multiple of 64"), (4096, "at most 2048")];
    let shapes = [(7, 64), (3, 256)];
    variant_cases(
        "rms_norm_small",
        rms_norm_small,
        &shapes,
        any_shape,
        &lengths,
    )
}

pub(super) fn wide_cases() -> Vec<Case> {
    let shapes = [(3, 100), (2, 5376), (1, 33)];
    variant_cases("rms_norm_wide", rms_norm_wide, &shapes, any_shape, &[])
}

// ── gated_mixer_norm ────────────────────────────────────────────────────────

fn gated_case(dtype: DType, rows: usize, n: usize) -> Case {
    Case {
        op: "gated_mixer_norm",
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("rows={rows} n={n}"),
        run: Box::new(move |ctx, rng| {
            let (y, yv) = random_tensor(ctx, rng, DType::F32, &[rows, n], -3.0, 3.0)?;
            let (z, zv) = random_tensor(ctx, rng, dtype, &[rows, n], -4.0, 4.0)?;
            let (w, wv) = random_tensor(ctx, rng, dtype, &[n], 0.5, 1.5)?;
            let out = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
            gated_mixer_norm(ctx, &y, &z, &w, &out, EPS).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            let want = reference::gated_mixer_norm(&yv, &zv, &wv, n, EPS as f64);
            compare(&got, &want, tolerance(dtype))
        }),
    }
}

type GatedInputs = fn(&Context) -> Result<[Tensor; 4], String>;

fn gated_reject(what: &str, reason: &'static str, inputs: GatedInputs) -> Case {
    Case {
        op: "gated_mixer_norm",
        kind: CaseKind::Rejection,
        dtype: None,
        name: what.to_string(),
        run: Box::new(move |ctx, _rng| {
            let [y, z, w, out] = inputs(ctx)?;
            expect_rejection(&out, reason, || {
                gated_mixer_norm(ctx, &y, &z, &w, &out, EPS)
            })
        }),
    }
}

fn gated_inputs(
    ctx: &Context,
    ydt: DType,
    zdt: DType,
    n: usize,
    zrows: usize,
    wn: usize,
) -> Result<[Tensor; 4], String> {
    Ok([
        ctx.zeros(ydt, &[2, n]).map_err(err)?,
        ctx.zeros(zdt, &[zrows, n]).map_err(err)?,
        ctx.zeros(zdt, &[wn]).map_err(err)?,
        ctx.full_nan(zdt, &[2, n]).map_err(err)?,
    ])
}

pub(super) fn gated_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for (rows, n) in [(3, 128), (2, 4096), (4, 512)] {
            v.push(gated_case(t, rows, n));
        }
    }
    v.push(gated_reject("y not f32", "`y` must be f32", |ctx| {
        gated_inputs(ctx, DType::F16, DType::F16, 128, 2, 128)
    }));
    v.push(gated_reject(
        "z shape != y shape",
        "`z` must have shape [2, 128]",
        |ctx| gated_inputs(ctx, DType::F32, DType::F16, 128, 3, 128),
    ));
    v.push(gated_reject(
        "weight length != n",
        "`w` must have shape [128]",
        |ctx| gated_inputs(ctx, DType::F32, DType::BF16, 128, 2, 256),
    ));
    v.push(gated_reject(
        "n not a multiple of 128",
        "must be a multiple of 128",
        |ctx| gated_inputs(ctx, DType::F32, DType::F16, 192, 2, 192),
    ));
    v.push(gated_reject("n above 4096", "at most 4096", |ctx| {
        gated_inputs(ctx, DType::F32, DType::F16, 8192, 2, 8192)
    }));
    v.push(gated_reject(
        "out dtype != z dtype",
        "`out` must be f16",
        |ctx| {
            let [y, z, w, _] = gated_inputs(ctx, DType::F32, DType::F16, 128, 2, 128)?;
            Ok([y, z, w, ctx.full_nan(DType::F32, &[2, 128]).map_err(err)?])
        },
    ));
    v.push(gated_reject("out aliases z", "`out` aliases `z`", |ctx| {
        let [y, z, w, _] = gated_inputs(ctx, DType::F32, DType::F16, 128, 2, 128)?;
        Ok([y, z.clone(), w, z])
    }));
    v
}

pub(super) fn gated_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        for (rows, n, quick) in [(64, 128, true), (32768, 128, false), (8192, 4096, false)] {
            v.push(BenchCase {
                op: "gated_mixer_norm",
                kernel: "gated_mixer_norm_kernel",
                dtype: t,
                shape: format!("rows={rows} n={n}"),
                bytes: (rows * n * (4 + 2 * t.size_bytes()) + n * t.size_bytes()) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (y, yv) = random_tensor(ctx, rng, DType::F32, &[rows, n], -3.0, 3.0)?;
                    let (z, zv) = random_tensor(ctx, rng, t, &[rows, n], -4.0, 4.0)?;
                    let (w, wv) = random_tensor(ctx, rng, t, &[n], 0.5, 1.5)?;
                    let out = ctx.full_nan(t, &[rows, n]).map_err(err)?;
                    let (c, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            gated_mixer_norm(&c, &y, &z, &w, &o, EPS).map_err(err)
                        }),
                        output: out,
                        reference: reference::gated_mixer_norm(&yv, &zv, &wv, n, EPS as f64),
                    })
                }),
            });
        }
    }
    v
}

pub(super) fn none_benches() -> Vec<BenchCase> {
    Vec::new()
}

pub(super) fn rms_norm_vec_kernels() -> Vec<KernelUse> {
    vec_specs(&[32, 64, 128, 256, 4096, 8192])
}

pub(super) fn rms_norm_tpg4_kernels() -> Vec<KernelUse> {
    specs(&rms_norm_tpg4_kernel::DEF, &[128, 1024, 4096])
}

pub(super) fn rms_norm_small_kernels() -> Vec<KernelUse> {
    specs(&rms_norm_small_kernel::DEF, &[64, 256])
}

pub(super) fn rms_norm_wide_kernels() -> Vec<KernelUse> {
    specs(&rms_norm_wide_kernel::DEF, &[])
}

pub(super) fn gated_mixer_norm_kernels() -> Vec<KernelUse> {
    specs(&gated_mixer_norm_kernel::DEF, &[128, 512, 4096])
}
