//! Cases of `rms_norm_residual`: the residual sum and the normalised row over every
//! float dtype, a rejection per invariant, its specialisations and benchmark shapes.

use super::*;
use crate::norm::row_reference as reference;
use DType::F16;

/// Shapes of the residual RMSNorm only: row walks longer than the resident grid on a small
/// device, one row of the widest layout.
const RESIDUAL_SHAPES: [(usize, usize); 2] = [(37, 4096), (1, 8192)];

/// The residual RMSNorm's call with the pipelined grid at `groups` threadgroups (`None`:
/// the device's resident count); outputs `sum`, then `out`.
fn residual_run(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    [rows, n]: [usize; 2],
    groups: Option<u32>,
) -> Result<RowRun, String> {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
    let (r, rv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
    let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
    let sum = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let (c, s, o) = (ctx.clone(), sum.clone(), out.clone());
    let (ws, wo) = reference::rms_norm_residual(&xv, &rv, &wv, n, EPS as f64);
    Ok(RowRun {
        launch: Box::new(move || {
            rms_norm_residual_on(&c, &x, &r, &w, &s, &o, EPS, groups).map_err(err)
        }),
        outputs: vec![(sum, ws), (out, wo)],
    })
}

fn residual_prepare(ctx: &Context, rng: &mut CaseRng, dt: DType, shape: [usize; 2]) -> Prepared {
    residual_run(ctx, rng, dt, shape, None)
}

pub(crate) fn residual_kernels() -> Vec<KernelUse> {
    let mut v = uses(&rms_norm_residual_kernel::DEF);
    v.extend(row_layout_uses(
        &rms_norm_residual_pipe_kernel::DEF,
        &[4096, 8192],
    ));
    v
}

/// f16 x [2, 64] with residual, weight, sum and out: what each rejection changes one thing of.
const RESIDUAL_GOOD: [Spec; 5] = [
    (F16, &[2, 64]),
    (F16, &[2, 64]),
    (F16, &[64]),
    (F16, &[2, 64]),
    (F16, &[2, 64]),
];

/// Makes one of `[x, residual, w, sum, out]` another of them.
type Alias = fn([Tensor; 5]) -> [Tensor; 5];

/// A rejection of `rms_norm_residual` over zero tensors of `specs`, after `alias` (if any)
/// has made one of them another; the call must leave the tensor at `watched` untouched.
fn residual_rejection(
    (what, reason, specs): Bad<5>,
    alias: Option<Alias>,
    watched: usize,
    eps: f32,
) -> Case {
    rejection("rms_norm_residual", what, reason, move |ctx| {
        let tensors = zeros_of(ctx, specs)?;
        let [x, r, w, sum, out] = alias.map_or(tensors.clone(), |a| a(tensors));
        let untouched = [&x, &r, &w, &sum, &out][watched].clone();
        let c = ctx.clone();
        let call = move || rms_norm_residual(&c, &x, &r, &w, &sum, &out, eps);
        Ok((untouched, Box::new(call)))
    })
}

pub(crate) fn residual_cases() -> Vec<Case> {
    let shapes: Vec<_> = SHAPES.into_iter().chain(RESIDUAL_SHAPES).collect();
    let mut v = row_cases("rms_norm_residual", &shapes, residual_prepare);
    let u32s = RESIDUAL_GOOD.map(|(_, shape)| (DType::U32, shape));
    let sum_is_x: Alias = |[x, r, w, _, out]| [x.clone(), r, w, x, out];
    let out_is_residual: Alias = |[x, r, w, sum, _]| [x, r.clone(), w, sum, r];
    let residual_is_x: Alias = |[x, _, w, sum, out]| [x.clone(), x, w, sum, out];
    let table: [(Bad<5>, Option<Alias>, usize, f32); 8] = [
        (
            (
                "residual shape != x shape",
                "`residual` must have shape [2, 64]",
                replaced(RESIDUAL_GOOD, 1, (F16, &[3, 64])),
            ),
            None,
            4,
            EPS,
        ),
        (
            ("sum aliases x", "`sum` aliases an input", RESIDUAL_GOOD),
            Some(sum_is_x),
            4,
            EPS,
        ),
        (
            (
                "residual dtype",
                "`residual` must be f16",
                replaced(RESIDUAL_GOOD, 1, (DType::F32, &[2, 64])),
            ),
            None,
            4,
            EPS,
        ),
        (
            (
                "sum shape",
                "`sum` must have shape [2, 64]",
                replaced(RESIDUAL_GOOD, 3, (F16, &[64])),
            ),
            None,
            4,
            EPS,
        ),
        (
            (
                "weight length != n",
                "`w` must have shape [64]",
                replaced(RESIDUAL_GOOD, 2, (F16, &[32])),
            ),
            None,
            4,
            EPS,
        ),
        (
            (
                "out aliases residual",
                "`out` aliases `residual`",
                RESIDUAL_GOOD,
            ),
            Some(out_is_residual),
            1,
            EPS,
        ),
        (
            ("eps is NaN", "`eps` must be finite", RESIDUAL_GOOD),
            None,
            4,
            f32::NAN,
        ),
        (
            ("integer dtype", "`x` must be one of f32, f16, bf16", u32s),
            Some(residual_is_x),
            4,
            EPS,
        ),
    ];
    for (bad, alias, watched, eps) in table {
        v.push(residual_rejection(bad, alias, watched, eps));
    }
    v
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
            prepared_bench(residual_run(ctx, rng, dt, [rows, n], Some(rows as u32))?)
        }),
    }
}

pub(crate) fn residual_benches() -> Vec<BenchCase> {
    let mut v: Vec<BenchCase> = FLOAT_DTYPES.map(residual_one_row_bench).into();
    let shapes = [(16, 4096, true), (4096, 4096, false), (1, 8192, false)];
    let bytes = |dt: DType, rows, n| 4 * rows * n * dt.size_bytes();
    let names = ("rms_norm_residual", "rms_norm_residual_kernel");
    v.extend(row_benches(names, bytes, &shapes, residual_prepare));
    v
}
