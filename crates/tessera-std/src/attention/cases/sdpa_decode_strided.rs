//! Cases of `sdpa_decode_strided`: a strided cache with a sliding window, attention
//! sinks and a learned sink logit, and a rejection per invariant.

use super::*;

/// Decode of `len` keys of a cache `stride` deep (`[hq, hkv, stride, len, d]`) with the
/// visibility `vis`.
fn strided_case(dt: DType, [hq, hkv, stride, len, d]: [usize; 5], vis: Visibility) -> Case {
    let name = format!(
        "hq={hq} hkv={hkv} len={len}/{stride} d={d} window={} sinks={}{}",
        vis.window,
        vis.n_sink,
        if vis.logit { " +sink_logit" } else { "" }
    );
    let shape = [hq, hkv, stride, len, d];
    visible_case(
        ("sdpa_decode_strided", dt, name),
        shape,
        vis,
        move |c, t, o| {
            let ws = workspace(c, &t.q, &t.k, None)?;
            sdpa_decode_strided(c, &t.q, &t.k, &t.v, &t.out, len, o, &ws)
        },
    )
}

pub(crate) fn strided_cases() -> Vec<Case> {
    let vis = |window, n_sink, logit| Visibility {
        window,
        n_sink,
        logit,
    };
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(strided_case(dt, [4, 2, 64, 50, 64], vis(0, 0, false)));
        v.push(strided_case(dt, [4, 1, 80, 77, 128], vis(16, 4, false)));
        v.push(strided_case(dt, [2, 2, 40, 33, 256], vis(8, 0, true)));
        v.push(strided_case(dt, [2, 1, 24, 19, 512], vis(7, 2, true)));
    }
    v.push(strided_case(F32, [8, 2, 96, 90, 128], vis(0, 3, true)));
    v.extend(decode_rejections("sdpa_decode_strided", |c, q, k, v, o| {
        sdpa_decode_strided(
            c,
            q,
            k,
            v,
            o,
            4,
            &DecodeOptions::default(),
            &workspace(c, q, k, None)?,
        )
    }));
    for (len, what, reason) in [
        (9, "kv_len above kv_stride", "kv_len = 9 must be in 1..=8"),
        (0, "kv_len zero", "kv_len = 0 must be in 1..=8"),
    ] {
        v.push(rejection_over(
            "sdpa_decode_strided",
            (what, reason),
            DECODE_GOOD,
            move |c, [q, k, v, out]| {
                let ws = workspace(c, q, k, None)?;
                sdpa_decode_strided(c, q, k, v, out, len, &DecodeOptions::default(), &ws)
            },
        ));
    }
    v.extend(sink_logit_rejections(
        "sdpa_decode_strided",
        DECODE_GOOD,
        (BF16, "`sink_logits` must be f32"),
        |c, [q, k, v, s, out]| {
            let o = DecodeOptions {
                sink_logits: Some(s),
                ..DecodeOptions::default()
            };
            sdpa_decode_strided(c, q, k, v, out, 8, &o, &workspace(c, q, k, None)?)
        },
    ));
    v
}
