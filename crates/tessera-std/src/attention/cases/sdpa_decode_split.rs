//! Cases of `sdpa_decode_split`: split-KV decode against the reference at several slice
//! counts, a rejection per invariant, and the partial and combine specialisations.

use super::*;

#[allow(clippy::too_many_arguments)]
fn split_case(
    dt: DType,
    hq: usize,
    hkv: usize,
    stride: usize,
    len: usize,
    d: usize,
    splits: u32,
    window: usize,
    n_sink: usize,
) -> Case {
    let name = format!(
        "hq={hq} hkv={hkv} len={len}/{stride} d={d} splits={splits} window={window} sinks={n_sink}"
    );
    correctness("sdpa_decode_split", dt, name, move |ctx, rng| {
        let t = qkv(ctx, rng, dt, &[hq, d], &[hkv, stride, d])?;
        let vis = Visibility {
            window,
            n_sink,
            logit: n_sink > 0,
        };
        visible_vs_reference(ctx, rng, &t, &[(0, len)], [hq, hkv, stride, d], vis, |o| {
            let ws = workspace(ctx, &t.q, &t.k, Some(splits))?;
            sdpa_decode_split(ctx, &t.q, &t.k, &t.v, &t.out, len, splits, o, &ws)
        })
    })
}

pub(crate) fn split_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(split_case(dt, 8, 2, 300, 290, 128, 3, 0, 0));
        v.push(split_case(dt, 2, 1, 200, 200, 64, 5, 40, 3));
        // More splits than one combine step folds (128 per thread slice), most of them
        // empty, with sinks.
        v.push(split_case(dt, 4, 2, 700, 650, 128, 300, 0, 2));
    }
    // More chunks than keys: empty chunks must combine to nothing.
    v.push(split_case(DType::F32, 4, 4, 30, 20, 256, 8, 0, 0));
    v.extend(decode_rejections!("sdpa_decode_split", |c, q, k, v, o| {
        let ws = workspace(c, q, k, Some(2))?;
        sdpa_decode_split(c, q, k, v, o, 8, 2, &DecodeOptions::default(), &ws)
    }));
    v.push(rejection(
        "sdpa_decode_split",
        "zero splits",
        "`splits` must be in 1..=1024, got 0",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let ws = workspace(&c, &q, &k, None)?;
                    sdpa_decode_split(&c, &q, &k, &v, &out, 8, 0, &DecodeOptions::default(), &ws)
                }),
            ))
        },
    ));
    v.push(rejection(
        "sdpa_decode_split",
        "too many splits",
        "`splits` must be in 1..=1024, got 5000",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let ws = workspace(&c, &q, &k, None)?;
                    sdpa_decode_split(
                        &c,
                        &q,
                        &k,
                        &v,
                        &out,
                        8,
                        5000,
                        &DecodeOptions::default(),
                        &ws,
                    )
                }),
            ))
        },
    ));
    v.push(rejection(
        "sdpa_decode_split",
        "workspace too small",
        "the workspace holds 4 partial outputs",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let ws = DecodeWorkspace::new(ctx, 1, 4, 64, 1).map_err(err)?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    sdpa_decode_split(&c, &q, &k, &v, &out, 8, 4, &DecodeOptions::default(), &ws)
                }),
            ))
        },
    ));
    v
}

pub(crate) fn split_uses() -> Vec<KernelUse> {
    let mut v = decode_kernel_uses(true);
    v.extend(mma_uses());
    v.extend(combine_uses());
    v
}
