//! Cases of the fused per-head q/k RMSNorm + RoPE: every float dtype and scaling, a
//! rejection per invariant, bench shapes.

use super::*;

fn qk_case(
    dt: DType,
    name: &'static str,
    c: RopeConfig,
    d: usize,
    tokens: usize,
    hq: usize,
    hk: usize,
) -> Case {
    Case {
        op: "qk_norm_rope",
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("{name} tokens={tokens} hq={hq} hk={hk} d={d}"),
        run: Box::new(move |ctx, rng| {
            let table = RopeTable::new(ctx, c).map_err(err)?;
            let (q, qv) = random_tensor(ctx, rng, dt, &[tokens, hq, d], -2.0, 2.0)?;
            let (k, kv) = random_tensor(ctx, rng, dt, &[tokens, hk, d], -2.0, 2.0)?;
            let (qw, qwv) = random_tensor(ctx, rng, dt, &[d], 0.5, 1.5)?;
            let (kw, kwv) = random_tensor(ctx, rng, dt, &[d], 0.5, 1.5)?;
            let (pos, pv) = positions(ctx, rng, tokens)?;
            let qo = ctx.full_nan(dt, &[tokens, hq, d]).map_err(err)?;
            let ko = ctx.full_nan(dt, &[tokens, hk, d]).map_err(err)?;
            qk_norm_rope(ctx, &q, &k, &qw, &kw, &pos, &table, &qo, &ko, EPS).map_err(err)?;
            let mut got = qo.to_f64_vec().map_err(err)?;
            got.extend(ko.to_f64_vec().map_err(err)?);
            let mut want = reference::norm_rope(&qv, &qwv, &pv, hq, d, EPS as f64, &c);
            want.extend(reference::norm_rope(&kv, &kwv, &pv, hk, d, EPS as f64, &c));
            compare(&got, &want, accuracy("qk_norm_rope", dt)?)
        }),
    }
}

/// A qk_norm_rope call with q `[2, 4, dq]`, k `[2, 2, dk]`, weights `[dw]`.
fn qk_bad(
    ctx: &Context,
    dq: usize,
    dk: usize,
    dw: usize,
    eps: f32,
) -> Result<(Tensor, Refused), String> {
    let q = zeros(ctx, DType::BF16, &[2, 4, dq])?;
    let k = zeros(ctx, DType::BF16, &[2, 2, dk])?;
    let qw = zeros(ctx, DType::BF16, &[dw])?;
    let kw = zeros(ctx, DType::BF16, &[dw])?;
    let p = zeros(ctx, DType::U32, &[2])?;
    let qo = zeros(ctx, DType::BF16, &[2, 4, dq])?;
    let ko = zeros(ctx, DType::BF16, &[2, 2, dk])?;
    let table =
        RopeTable::new(ctx, cfg(RopeLayout::NeoX, 10000.0, 32, RopeScaling::None)).map_err(err)?;
    let cx = ctx.clone();
    Ok((
        qo.clone(),
        Box::new(move || qk_norm_rope(&cx, &q, &k, &qw, &kw, &p, &table, &qo, &ko, eps)),
    ))
}

pub(crate) fn qk_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(qk_case(
            dt,
            "neox",
            cfg(RopeLayout::NeoX, 1000000.0, 128, RopeScaling::None),
            128,
            3,
            4,
            2,
        ));
        v.push(qk_case(
            dt,
            "interleaved partial",
            cfg(RopeLayout::Interleaved, 10000.0, 32, RopeScaling::None),
            64,
            2,
            2,
            1,
        ));
        // A prompt's token count: heads in groups of 8, the last group partial.
        v.push(qk_case(
            dt,
            "neox prompt",
            cfg(RopeLayout::NeoX, 1000000.0, 128, RopeScaling::None),
            128,
            66,
            12,
            3,
        ));
        v.push(qk_case(
            dt,
            "yarn",
            cfg(RopeLayout::NeoX, 1000000.0, 256, yarn()),
            256,
            2,
            2,
            2,
        ));
    }
    v.push(rejection(
        "qk_norm_rope",
        "head_dim not a multiple of 32",
        "head_dim 48 must be a multiple of 32",
        |ctx| qk_bad(ctx, 48, 48, 48, EPS),
    ));
    v.push(rejection(
        "qk_norm_rope",
        "k head_dim != q head_dim",
        "`k` must share tokens and head_dim with `q`",
        |ctx| qk_bad(ctx, 64, 32, 64, EPS),
    ));
    v.push(rejection(
        "qk_norm_rope",
        "norm weight length",
        "`the norm weight` must have shape [64]",
        |ctx| qk_bad(ctx, 64, 64, 32, EPS),
    ));
    v.push(rejection(
        "qk_norm_rope",
        "eps is NaN",
        "`eps` must be finite",
        |ctx| qk_bad(ctx, 64, 64, 64, f32::NAN),
    ));
    v.push(rejection(
        "qk_norm_rope",
        "q_out aliases k_out",
        "must be separate",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[2, 2, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 2, 64])?;
            let w = zeros(ctx, DType::F32, &[64])?;
            let p = zeros(ctx, DType::U32, &[2])?;
            let o = zeros(ctx, DType::F32, &[2, 2, 64])?;
            let table = RopeTable::new(ctx, neox64()).map_err(err)?;
            let (cx, o2) = (ctx.clone(), o.clone());
            Ok((
                o.clone(),
                Box::new(move || qk_norm_rope(&cx, &q, &k, &w, &w, &p, &table, &o, &o2, EPS)),
            ))
        },
    ));
    v.push(rejection(
        "qk_norm_rope",
        "k dtype",
        "`k` must be f32",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[2, 2, 64])?;
            let k = zeros(ctx, DType::F16, &[2, 2, 64])?;
            let w = zeros(ctx, DType::F32, &[64])?;
            let p = zeros(ctx, DType::U32, &[2])?;
            let (qo, ko) = (
                zeros(ctx, DType::F32, &[2, 2, 64])?,
                zeros(ctx, DType::F16, &[2, 2, 64])?,
            );
            let table = RopeTable::new(ctx, neox64()).map_err(err)?;
            let cx = ctx.clone();
            Ok((
                qo.clone(),
                Box::new(move || qk_norm_rope(&cx, &q, &k, &w, &w, &p, &table, &qo, &ko, EPS)),
            ))
        },
    ));
    v
}

pub(crate) fn qk_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        // Qwen3: 32 q heads, 8 kv heads (here the q half), head_dim 128.
        for (tokens, quick) in [(4usize, true), (4096, false)] {
            let (h, d) = (32, 128);
            let c = cfg(RopeLayout::NeoX, 1000000.0, 128, RopeScaling::None);
            v.push(BenchCase {
                op: "qk_norm_rope",
                kernel: "norm_rope_kernel",
                dtype: dt,
                shape: format!("tokens={tokens} hq={h} hk=8 d={d}"),
                bytes: (2 * tokens * (h + 8) * d * dt.size_bytes()) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let table = RopeTable::new(ctx, c).map_err(err)?;
                    let (q, qv) = random_tensor(ctx, rng, dt, &[tokens, h, d], -2.0, 2.0)?;
                    let (k, _) = random_tensor(ctx, rng, dt, &[tokens, 8, d], -2.0, 2.0)?;
                    let (qw, qwv) = random_tensor(ctx, rng, dt, &[d], 0.5, 1.5)?;
                    let (kw, _) = random_tensor(ctx, rng, dt, &[d], 0.5, 1.5)?;
                    let (pos, pv) = bench_positions(ctx, rng, tokens)?;
                    let qo = ctx.full_nan(dt, &[tokens, h, d]).map_err(err)?;
                    let ko = ctx.full_nan(dt, &[tokens, 8, d]).map_err(err)?;
                    let (cx, o) = (ctx.clone(), qo.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            qk_norm_rope(&cx, &q, &k, &qw, &kw, &pos, &table, &o, &ko, EPS)
                                .map_err(err)
                        }),
                        output: qo,
                        reference: reference::norm_rope(&qv, &qwv, &pv, h, d, EPS as f64, &c),
                    })
                }),
            });
        }
    }
    v
}
