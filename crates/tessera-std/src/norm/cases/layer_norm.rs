//! Cases of `layer_norm`: every float dtype and row length, a rejection per invariant,
//! its specialisations and benchmark shapes.

use super::*;
use crate::norm::row_reference as reference;
use DType::BF16;

fn ln_prepare(ctx: &Context, rng: &mut CaseRng, dt: DType, [rows, n]: [usize; 2]) -> Prepared {
    let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], 1.0, 3.0)?;
    let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
    let (b, bv) = random_tensor(ctx, rng, dt, &[n], -0.5, 0.5)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let (c, o) = (ctx.clone(), out.clone());
    Ok(RowRun {
        launch: Box::new(move || layer_norm(&c, &x, &w, &b, &o, EPS).map_err(err)),
        outputs: vec![(out, reference::layer_norm(&xv, &wv, &bv, n, EPS as f64))],
    })
}

/// bf16 x [2, 64] with weight, bias and out: what each rejection changes one thing of.
const LN_GOOD: [Spec; 4] = [
    (BF16, &[2, 64]),
    (BF16, &[64]),
    (BF16, &[64]),
    (BF16, &[2, 64]),
];

pub(crate) fn ln_cases() -> Vec<Case> {
    let mut v = row_cases("layer_norm", &SHAPES, ln_prepare);
    let empty = [
        (BF16, &[0, 64][..]),
        LN_GOOD[1],
        LN_GOOD[2],
        (BF16, &[0, 64]),
    ];
    let table = [
        (
            "bias length != n",
            "`b` must have shape [64]",
            replaced(LN_GOOD, 2, (BF16, &[63])),
            EPS,
        ),
        (
            "bias dtype",
            "`b` must be bf16",
            replaced(LN_GOOD, 2, (DType::F32, &[64])),
            EPS,
        ),
        (
            "weight length != n",
            "`w` must have shape [64]",
            replaced(LN_GOOD, 1, (BF16, &[65])),
            EPS,
        ),
        (
            "out shape",
            "`out` must have shape [2, 64]",
            replaced(LN_GOOD, 3, (BF16, &[128])),
            EPS,
        ),
        (
            "negative eps",
            "`eps` must be finite and >= 0",
            LN_GOOD,
            -1.0,
        ),
        ("empty x", "must not be empty", empty, EPS),
    ];
    for (what, reason, specs, eps) in table {
        v.push(rejection("layer_norm", what, reason, move |ctx| {
            let [x, w, b, out] = zeros_of(ctx, specs)?;
            let c = ctx.clone();
            let untouched = out.clone();
            let call = move || layer_norm(&c, &x, &w, &b, &out, eps);
            Ok((untouched, Box::new(call)))
        }));
    }
    v.push(ln_alias_rejection());
    v
}

/// `out` is `x`: refused, and `x` left as it was.
fn ln_alias_rejection() -> Case {
    rejection("layer_norm", "out aliases x", "`out` aliases `x`", |ctx| {
        let [x, w, b] = zeros_of(ctx, [(BF16, &[1, 64]), LN_GOOD[1], LN_GOOD[2]])?;
        let (out, untouched) = (x.clone(), x.clone());
        let c = ctx.clone();
        let call = move || layer_norm(&c, &x, &w, &b, &out, EPS);
        Ok((untouched, Box::new(call)))
    })
}

pub(crate) fn ln_benches() -> Vec<BenchCase> {
    let shapes = [(16, 1024, true), (4096, 4096, false)];
    let bytes = |dt: DType, rows, n| 2 * rows * n * dt.size_bytes();
    row_benches(
        ("layer_norm", "layer_norm_kernel"),
        bytes,
        &shapes,
        ln_prepare,
    )
}

pub(crate) fn layer_norm_kernels() -> Vec<KernelUse> {
    uses(&layer_norm_kernel::DEF)
}
