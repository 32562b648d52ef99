//! Cases of `gated_mixer_norm`: every float dtype, a rejection per invariant, its
//! specialisations and benchmark shapes.

use super::*;

fn gated_prepare(ctx: &Context, rng: &mut CaseRng, dt: DType, [rows, n]: [usize; 2]) -> Prepared {
    let (y, yv) = random_tensor(ctx, rng, DType::F32, &[rows, n], -3.0, 3.0)?;
    let (z, zv) = random_tensor(ctx, rng, dt, &[rows, n], -4.0, 4.0)?;
    let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
    let out = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
    let (c, o) = (ctx.clone(), out.clone());
    Ok(RowRun {
        launch: Box::new(move || gated_mixer_norm(&c, &y, &z, &w, &o, EPS).map_err(err)),
        outputs: vec![(
            out,
            reference::gated_mixer_norm(&yv, &zv, &wv, n, EPS as f64),
        )],
    })
}

type GatedInputs = fn(&Context) -> Result<[Tensor; 4], String>;

fn gated_reject(what: &str, reason: &'static str, inputs: GatedInputs) -> Case {
    rejection("gated_mixer_norm", what, reason, move |ctx| {
        let [y, z, w, out] = inputs(ctx)?;
        let (c, untouched) = (ctx.clone(), out.clone());
        Ok((
            untouched,
            Box::new(move || gated_mixer_norm(&c, &y, &z, &w, &out, EPS)),
        ))
    })
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

pub(crate) fn gated_cases() -> Vec<Case> {
    let mut v = row_cases(
        "gated_mixer_norm",
        &[(3, 128), (2, 4096), (4, 512)],
        gated_prepare,
    );
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

pub(crate) fn gated_benches() -> Vec<BenchCase> {
    let shapes = [(64, 128, true), (32768, 128, false), (8192, 4096, false)];
    let bytes = |t: DType, rows, n| rows * n * (4 + 2 * t.size_bytes()) + n * t.size_bytes();
    let names = ("gated_mixer_norm", "gated_mixer_norm_kernel");
    row_benches(names, bytes, &shapes, gated_prepare)
}

pub(crate) fn gated_mixer_norm_kernels() -> Vec<KernelUse> {
    specs(&gated_mixer_norm_kernel::DEF, &[128, 512, 4096])
}
