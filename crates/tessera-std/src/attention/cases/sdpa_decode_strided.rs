//! Cases of `sdpa_decode_strided`: a strided cache with a sliding window, attention
//! sinks and a learned sink logit, and a rejection per invariant.

use super::*;

#[allow(clippy::too_many_arguments)]
fn strided_case(
    dt: DType,
    hq: usize,
    hkv: usize,
    stride: usize,
    len: usize,
    d: usize,
    window: usize,
    n_sink: usize,
    logit: bool,
) -> Case {
    let name = format!(
        "hq={hq} hkv={hkv} len={len}/{stride} d={d} window={window} sinks={n_sink}{}",
        if logit { " +sink_logit" } else { "" }
    );
    correctness("sdpa_decode_strided", dt, name, move |ctx, rng| {
        let t = qkv(ctx, rng, dt, &[hq, d], &[hkv, stride, d])?;
        let vis = Visibility {
            window,
            n_sink,
            logit,
        };
        visible_vs_reference(ctx, rng, &t, &[(0, len)], [hq, hkv, stride, d], vis, |o| {
            let ws = workspace(ctx, &t.q, &t.k, o.splits)?;
            sdpa_decode_strided(ctx, &t.q, &t.k, &t.v, &t.out, len, o, &ws)
        })
    })
}

pub(crate) fn strided_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(strided_case(dt, 4, 2, 64, 50, 64, 0, 0, false));
        v.push(strided_case(dt, 4, 1, 80, 77, 128, 16, 4, false));
        v.push(strided_case(dt, 2, 2, 40, 33, 256, 8, 0, true));
        v.push(strided_case(dt, 2, 1, 24, 19, 512, 7, 2, true));
    }
    v.push(strided_case(DType::F32, 8, 2, 96, 90, 128, 0, 3, true));
    v.extend(decode_rejections!(
        "sdpa_decode_strided",
        |c, q, k, v, o| {
            let ws = workspace(c, q, k, None)?;
            sdpa_decode_strided(c, q, k, v, o, 4, &DecodeOptions::default(), &ws)
        }
    ));
    v.push(rejection(
        "sdpa_decode_strided",
        "kv_len above kv_stride",
        "kv_len = 9 must be in 1..=8",
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
                    sdpa_decode_strided(&c, &q, &k, &v, &out, 9, &DecodeOptions::default(), &ws)
                }),
            ))
        },
    ));
    v.push(rejection(
        "sdpa_decode_strided",
        "kv_len zero",
        "kv_len = 0 must be in 1..=8",
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
                    sdpa_decode_strided(&c, &q, &k, &v, &out, 0, &DecodeOptions::default(), &ws)
                }),
            ))
        },
    ));
    v.push(rejection(
        "sdpa_decode_strided",
        "sink logits shape",
        "`sink_logits` must have shape [4]",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let s = zeros(ctx, DType::F32, &[2])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let o = DecodeOptions {
                        sink_logits: Some(&s),
                        ..DecodeOptions::default()
                    };
                    let ws = workspace(&c, &q, &k, None)?;
                    sdpa_decode_strided(&c, &q, &k, &v, &out, 8, &o, &ws)
                }),
            ))
        },
    ));
    v.push(rejection(
        "sdpa_decode_strided",
        "sink logits dtype",
        "`sink_logits` must be f32",
        |ctx| {
            let q = zeros(ctx, DType::F32, &[4, 64])?;
            let k = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let v = zeros(ctx, DType::F32, &[2, 8, 64])?;
            let s = zeros(ctx, DType::BF16, &[4])?;
            let out = zeros(ctx, DType::F32, &[4, 64])?;
            let c = ctx.clone();
            Ok((
                out.clone(),
                Box::new(move || {
                    let o = DecodeOptions {
                        sink_logits: Some(&s),
                        ..DecodeOptions::default()
                    };
                    let ws = workspace(&c, &q, &k, None)?;
                    sdpa_decode_strided(&c, &q, &k, &v, &out, 8, &o, &ws)
                }),
            ))
        },
    ));
    v
}
