//! Cases of `softmax` and `logsumexp` over the last dimension (one kernel file, one
//! cases file): every float dtype and row length, a rejection per invariant, their
//! specialisations and benchmark shapes.

use super::*;
use crate::norm::row_reference as reference;
use DType::{F16, F32, I32, U32};

/// The f64 reference of a row op over rows of `n`.
type RowReference = fn(&[f64], usize) -> Vec<f64>;

/// A two-tensor row op's call on random rows `x` in [-8, 8) of `dt` into a NaN-poisoned
/// `out` of the dtype and shape `out`, checked against `want(x, n)`.
fn unary_run(
    (ctx, rng): (&Context, &mut CaseRng),
    (dt, [rows, n]): (DType, [usize; 2]),
    (f, want): (UnaryFn, RowReference),
    out: (DType, &[usize]),
) -> Prepared {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -8.0, 8.0)?;
    let out = ctx.full_nan(out.0, out.1).map_err(err)?;
    let (c, o) = (ctx.clone(), out.clone());
    Ok(RowRun {
        launch: Box::new(move || f(&c, &x, &o).map_err(err)),
        outputs: vec![(out, want(&xv, n))],
    })
}

fn softmax_prepare(ctx: &Context, rng: &mut CaseRng, dt: DType, shape: [usize; 2]) -> Prepared {
    let ops = (softmax as UnaryFn, reference::softmax as RowReference);
    unary_run((ctx, rng), (dt, shape), ops, (dt, &shape))
}

pub(crate) fn softmax_cases() -> Vec<Case> {
    let mut v = row_cases("softmax", &SHAPES, softmax_prepare);
    let ints = [(I32, &[2, 10][..]), (I32, &[2, 10])];
    v.extend(unary_rejections(
        "softmax",
        softmax,
        &[
            (
                "out shape",
                "`out` must have shape [2, 10]",
                [(F32, &[2, 10]), (F32, &[20])],
            ),
            (
                "out dtype",
                "`out` must be f16",
                [(F16, &[2, 10]), (F32, &[2, 10])],
            ),
            ("integer dtype", "`x` must be one of f32, f16, bf16", ints),
            (
                "empty row",
                "must not be empty",
                [(F32, &[2, 0]), (F32, &[2, 0])],
            ),
        ],
    ));
    v.push(rejection(
        "softmax",
        "in place",
        "`out` aliases `x`",
        |ctx| {
            let x = zeros(ctx, F32, &[2, 10])?;
            let (out, untouched) = (x.clone(), x.clone());
            let c = ctx.clone();
            Ok((untouched, Box::new(move || softmax(&c, &x, &out))))
        },
    ));
    v
}

pub(crate) fn softmax_benches() -> Vec<BenchCase> {
    // Beside a short row: vocabulary-sized rows (sampling) and attention-score rows.
    let shapes = [(8, 1024, true), (32, 128256, false), (8192, 4096, false)];
    let bytes = |dt: DType, rows, n| 2 * rows * n * dt.size_bytes();
    row_benches(
        ("softmax", "softmax_kernel"),
        bytes,
        &shapes,
        softmax_prepare,
    )
}

pub(crate) fn softmax_kernels() -> Vec<KernelUse> {
    uses(&softmax_kernel::DEF)
}

fn lse_prepare(ctx: &Context, rng: &mut CaseRng, dt: DType, shape: [usize; 2]) -> Prepared {
    let ops = (logsumexp as UnaryFn, reference::logsumexp as RowReference);
    unary_run((ctx, rng), (dt, shape), ops, (F32, &shape[..1]))
}

pub(crate) fn lse_cases() -> Vec<Case> {
    let mut v = row_cases("logsumexp", &SHAPES, lse_prepare);
    let ints = [(U32, &[2, 10][..]), (F32, &[2])];
    v.extend(unary_rejections(
        "logsumexp",
        logsumexp,
        &[
            (
                "out not f32",
                "`out` must be f32",
                [(F16, &[2, 10]), (F16, &[2])],
            ),
            (
                "out shape",
                "`out` must have shape [2, 3]",
                [(F16, &[2, 3, 10]), (F32, &[6])],
            ),
            ("integer dtype", "`x` must be one of f32, f16, bf16", ints),
            (
                "scalar x",
                "at least one dimension",
                [(F32, &[]), (F32, &[1])],
            ),
        ],
    ));
    v
}

pub(crate) fn lse_benches() -> Vec<BenchCase> {
    let shapes = [(8, 1024, true), (32, 128256, false)];
    let bytes = |dt: DType, rows, n| rows * n * dt.size_bytes();
    row_benches(
        ("logsumexp", "logsumexp_kernel"),
        bytes,
        &shapes,
        lse_prepare,
    )
}

pub(crate) fn logsumexp_kernels() -> Vec<KernelUse> {
    uses(&logsumexp_kernel::DEF)
}
