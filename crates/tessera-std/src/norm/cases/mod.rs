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
    accuracy, compare, err, kernel_use, merge, random_tensor, rejection, rejection_of, replaced,
    zeros, zeros_of, CaseRng, Spec,
};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::KernelDef;
use tessera_runtime::{Context, DType, Tensor};
use DType::{F16, F32, U32};

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

/// How an RMSNorm rejection spoils the good call (random f32 x [2, 128] and w [128], a
/// NaN-poisoned out, eps [`EPS`]): another `w`, another `out`, another eps, `out` being
/// `x`, or zero tensors `[x, w, out]` of its own.
#[derive(Clone, Copy)]
enum Spoil {
    W(Spec),
    Out(Spec),
    Eps(f32),
    OutIsX,
    Zeros([Spec; 3]),
}

/// The spoiled call's `(x, w, out, eps)`.
fn spoiled(ctx: &Context, rng: &mut CaseRng, spoil: Spoil) -> Result<RmsCall, String> {
    if let Spoil::Zeros(specs) = spoil {
        let [x, w, out] = zeros_of(ctx, specs)?;
        return Ok((x, w, out, EPS));
    }
    let (x, w, out) = good(ctx, rng, 2, 128)?;
    Ok(match spoil {
        Spoil::W((dt, shape)) => (x, zeros(ctx, dt, shape)?, out, EPS),
        Spoil::Out((dt, shape)) => (x, w, ctx.full_nan(dt, shape).map_err(err)?, EPS),
        Spoil::Eps(eps) => (x, w, out, eps),
        Spoil::OutIsX => (x.clone(), w, x, EPS),
        Spoil::Zeros(_) => return Err("zero tensors are made above".into()),
    })
}

/// An RMSNorm call's `(x, w, out, eps)`.
type RmsCall = (Tensor, Tensor, Tensor, f32);

/// A rejection of `f` called with the `(x, w, out, eps)` that `inputs` makes.
fn rms_reject(
    (op, f): (&'static str, RmsFn),
    what: &str,
    reason: &'static str,
    inputs: impl Fn(&Context, &mut CaseRng) -> Result<RmsCall, String> + Send + Sync + 'static,
) -> Case {
    rejection_of(op, what, reason, move |ctx, rng| {
        let (x, w, out, eps) = inputs(ctx, rng)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((untouched, Box::new(move || f(&c, &x, &w, &out, eps))))
    })
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

/// Zero u32 tensors of the good call's shapes.
const INTEGER: [Spec; 3] = [(U32, &[2, 128]), (U32, &[128]), (U32, &[2, 128])];
/// An input with no rows.
const NO_ROWS: [Spec; 3] = [(F32, &[0, 128]), (F32, &[128]), (F32, &[0, 128])];
/// A 0-d input.
const SCALAR: [Spec; 3] = [(F32, &[]), (F32, &[1]), (F32, &[])];

/// Rejections every RMSNorm entry point shares.
pub(super) fn common_rejections(op: &'static str, f: RmsFn) -> Vec<Case> {
    use Spoil::*;
    let table = [
        (
            "weight length != n",
            "`w` must have shape [128]",
            W((F32, &[64])),
        ),
        (
            "out shape != x shape",
            "`out` must have shape [2, 128]",
            Out((F32, &[3, 128])),
        ),
        (
            "weight dtype != x dtype",
            "`w` must be f32",
            W((F16, &[128])),
        ),
        (
            "integer dtype",
            "`x` must be one of f32, f16, bf16",
            Zeros(INTEGER),
        ),
        ("eps is NaN", "`eps` must be finite", Eps(f32::NAN)),
        ("negative eps", "`eps` must be finite and >= 0", Eps(-1e-5)),
        ("out aliases x", "`out` aliases `x`", OutIsX),
        ("no rows", "must not be empty", Zeros(NO_ROWS)),
        ("scalar input", "at least one dimension", Zeros(SCALAR)),
    ];
    let case = |(what, reason, spoil)| {
        rms_reject((op, f), what, reason, move |ctx, rng| {
            spoiled(ctx, rng, spoil)
        })
    };
    table.into_iter().map(case).collect()
}

pub(super) fn length_rejection(op: &'static str, f: RmsFn, n: usize, reason: &'static str) -> Case {
    rms_reject(
        (op, f),
        &format!("n = {n} unsupported"),
        reason,
        move |ctx, rng| {
            let (x, w, out) = good(ctx, rng, 2, n)?;
            Ok((x, w, out, EPS))
        },
    )
}

fn specs(def: &'static KernelDef, ns: &[u32]) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        if ns.is_empty() {
            v.push(kernel_use(def, t, &[]));
        }
        for &n in ns {
            v.push(kernel_use(def, t, &[n]));
        }
    }
    v
}

/// The bench of an RMSNorm entry point `f` at `[rows, n]`, with `tag` appended to the shape
/// name (a layout variant of one shape).
pub(super) fn rms_bench(
    (op, kernel): (&'static str, &'static str),
    f: RmsFn,
    dtype: DType,
    [rows, n]: [usize; 2],
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
                v.push(kernel_use(def, t, &[n, epl, vec]));
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
    FLOAT_DTYPES.map(|t| kernel_use(def, t, &[])).into()
}

/// A row op's call made ready: inputs uploaded, outputs poisoned with NaN, the launch, and
/// each output with its f64 reference (the output a bench checks last).
struct RowRun {
    launch: Box<dyn FnMut() -> Result<(), String>>,
    outputs: Vec<(Tensor, Vec<f64>)>,
}

/// A prepared row op's call, or why it could not be prepared.
type Prepared = Result<RowRun, String>;

/// Prepares a row op's call over `[rows, n]` in a dtype.
type Prepare = fn(&Context, &mut CaseRng, DType, [usize; 2]) -> Prepared;

/// A correctness case: one launch, every output compared with its reference.
fn case(op: &'static str, dt: DType, rows: usize, n: usize, prepare: Prepare) -> Case {
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("rows={rows} n={n}"),
        run: Box::new(move |ctx, rng| {
            let mut run = prepare(ctx, rng, dt, [rows, n])?;
            (run.launch)()?;
            let mut total = crate::registry::Outcome::default();
            for (out, want) in &run.outputs {
                let o = compare(&out.to_f64_vec().map_err(err)?, want, accuracy(op, dt)?)?;
                total = merge(total, o);
            }
            Ok(total)
        }),
    }
}

/// The correctness cases of a row op: every float dtype at each of `shapes`.
fn row_cases(op: &'static str, shapes: &[(usize, usize)], prepare: Prepare) -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for &(rows, n) in shapes {
            v.push(case(op, dt, rows, n, prepare));
        }
    }
    v
}

/// The benches of a row op in every float dtype at each `(rows, n, quick)`, moving
/// `bytes(dtype, rows, n)` bytes; the last output of the prepared call is the one checked
/// after timing.
fn row_benches(
    (op, kernel): (&'static str, &'static str),
    bytes: fn(DType, usize, usize) -> usize,
    shapes: &[(usize, usize, bool)],
    prepare: Prepare,
) -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for &(rows, n, quick) in shapes {
            v.push(BenchCase {
                op,
                kernel,
                dtype: dt,
                shape: format!("rows={rows} n={n}"),
                bytes: bytes(dt, rows, n) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    prepared_bench(prepare(ctx, rng, dt, [rows, n])?)
                }),
            });
        }
    }
    v
}

/// A prepared call as a bench: its launch, and its last output with that output's reference.
fn prepared_bench(mut run: RowRun) -> Result<PreparedBench, String> {
    let (output, reference) = run.outputs.pop().ok_or("the call has no output")?;
    Ok(PreparedBench {
        launch: run.launch,
        output,
        reference,
    })
}

/// A two-tensor row op (`softmax`, `logsumexp`): `f(ctx, x, out)`.
type UnaryFn = fn(&Context, &Tensor, &Tensor) -> Result<(), OpError>;

/// A rejection listed in a table: what is wrong, the reason the op must give, and the specs
/// of the tensors it is called with.
type Bad<const N: usize> = (&'static str, &'static str, [Spec; N]);

/// The rejections of a two-tensor row op, each called with zero tensors of its `[x, out]`.
fn unary_rejections(op: &'static str, f: UnaryFn, table: &[Bad<2>]) -> Vec<Case> {
    let case = |&(what, reason, specs): &Bad<2>| {
        rejection(op, what, reason, move |ctx| {
            let [x, out] = zeros_of(ctx, specs)?;
            let c = ctx.clone();
            Ok((out.clone(), Box::new(move || f(&c, &x, &out))))
        })
    };
    table.iter().map(case).collect()
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
                v.push(kernel_use(
                    &rms_norm_rows_kernel::DEF,
                    t,
                    &[n, epl, vec, lg],
                ));
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
mod rms_norm_quant;
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
pub(super) use rms_norm_quant::{
    norm_quant_benches, norm_quant_cases, norm_quant_kernels, residual_quant_benches,
    residual_quant_cases, residual_quant_kernels,
};
pub(super) use rms_norm_residual::{residual_benches, residual_cases, residual_kernels};
pub(super) use softmax::{
    logsumexp_kernels, lse_benches, lse_cases, softmax_benches, softmax_cases, softmax_kernels,
};
