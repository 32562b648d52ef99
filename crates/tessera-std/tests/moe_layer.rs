//! A whole MoE layer from the family's ops, as an engine chains them: `moe_route` (softmax,
//! renormalised), `moe_permute`, `moe_gemv_silu_mul` over packed gate/up experts,
//! `moe_gemv` for the down projection (x a row per pair) on the same plan, and
//! `moe_combine` with a shared expert's output; compared with the layer computed in f64
//! from the math (intermediates rounded to the dtype where the ops store them).

use tessera_runtime::{Context, DType};
use tessera_std::moe::reference;
use tessera_std::moe::{
    moe_combine, moe_gemv, moe_gemv_silu_mul, moe_permute, moe_route, MoeCheck, MoePlan,
    RouteConfig,
};
use tessera_std::testing::{accuracy, compare, random_tensor, CaseRng};

fn rounded(dtype: DType, v: &[f64]) -> Vec<f64> {
    match dtype {
        DType::BF16 => v
            .iter()
            .map(|&x| half::bf16::from_f64(x).to_f64())
            .collect(),
        DType::F16 => v.iter().map(|&x| half::f16::from_f64(x).to_f64()).collect(),
        _ => v.iter().map(|&x| x as f32 as f64).collect(),
    }
}

fn layer(dtype: DType, seed: u64) -> Result<(), String> {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(seed);
    let (tokens, experts, top_k, hidden, width) = (5, 16, 4, 64, 24);
    let e = |x: tessera_runtime::RuntimeError| x.to_string();
    let o = |x: tessera_std::OpError| x.to_string();
    let (logits, lv) = random_tensor(&ctx, &mut rng, DType::F32, &[tokens, experts], -3.0, 3.0)?;
    let (x, xv) = random_tensor(&ctx, &mut rng, dtype, &[tokens, hidden], -1.0, 1.0)?;
    let (gate_up, gv) = random_tensor(
        &ctx,
        &mut rng,
        dtype,
        &[experts, 2 * width, hidden],
        -0.3,
        0.3,
    )?;
    let (down, dv) = random_tensor(&ctx, &mut rng, dtype, &[experts, hidden, width], -0.3, 0.3)?;
    let (shared, sv) = random_tensor(&ctx, &mut rng, dtype, &[tokens, hidden], -1.0, 1.0)?;

    let cfg = RouteConfig::softmax(top_k, true);
    let ids = ctx.zeros(DType::I32, &[tokens, top_k]).map_err(e)?;
    let weights = ctx.zeros(DType::F32, &[tokens, top_k]).map_err(e)?;
    moe_route(&ctx, &logits, None, &cfg, &ids, &weights).map_err(o)?;
    let plan = MoePlan::new(&ctx, experts, tokens * top_k).map_err(o)?;
    let check = MoeCheck::new(&ctx).map_err(o)?;
    moe_permute(&ctx, &ids, &plan, &check).map_err(o)?;
    let h = ctx.full_nan(dtype, &[tokens, top_k, width]).map_err(e)?;
    moe_gemv_silu_mul(&ctx, &x, &gate_up, &plan, &h).map_err(o)?;
    let y = ctx.full_nan(dtype, &[tokens, top_k, hidden]).map_err(e)?;
    moe_gemv(&ctx, &h, &down, &plan, &y).map_err(o)?;
    let out = ctx.full_nan(dtype, &[tokens, hidden]).map_err(e)?;
    moe_combine(&ctx, &y, &weights, Some(&shared), &out).map_err(o)?;

    let (want_ids, want_w) = reference::route(&lv, None, experts, &cfg);
    if ids.to_f64_vec().map_err(e)? != want_ids {
        return Err("the router chose other experts than the reference".into());
    }
    let hv = rounded(
        dtype,
        &reference::gemv(
            &xv,
            &gv,
            &want_ids,
            (tokens, top_k, width, hidden),
            false,
            true,
        ),
    );
    let yv = rounded(
        dtype,
        &reference::gemv(
            &hv,
            &dv,
            &want_ids,
            (tokens, top_k, hidden, width),
            true,
            false,
        ),
    );
    let want = reference::combine(&yv, &want_w, Some(&sv), (tokens, top_k, hidden));
    compare(
        &out.to_f64_vec().map_err(e)?,
        &want,
        accuracy("moe_combine", dtype)?,
    )
    .map(|_| ())
}

#[test]
fn route_permute_gemvs_and_combine_make_the_layer() {
    for (dtype, seed) in [(DType::F32, 11), (DType::BF16, 12), (DType::F16, 13)] {
        if let Err(msg) = layer(dtype, seed) {
            panic!("{dtype}: {msg}");
        }
    }
}
