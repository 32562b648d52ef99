//! Cases of `sdpa_decode_split`: split-KV decode against the reference at several slice
//! counts, a rejection per invariant, and the partial and combine specialisations.

use super::*;

/// Split-KV decode of `[hq, hkv, stride, len, d]` in `splits` chunks, with a window and
/// sinks (and their logits where there are sinks).
fn split_case(
    dt: DType,
    [hq, hkv, stride, len, d]: [usize; 5],
    splits: u32,
    (window, n_sink): (usize, usize),
) -> Case {
    let name = format!(
        "hq={hq} hkv={hkv} len={len}/{stride} d={d} splits={splits} window={window} sinks={n_sink}"
    );
    let vis = Visibility {
        window,
        n_sink,
        logit: n_sink > 0,
    };
    visible_case(
        ("sdpa_decode_split", dt, name),
        [hq, hkv, stride, len, d],
        vis,
        move |c, t, o| {
            let ws = workspace(c, &t.q, &t.k, Some(splits))?;
            sdpa_decode_split(c, &t.q, &t.k, &t.v, &t.out, len, splits, o, &ws)
        },
    )
}

pub(crate) fn split_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        v.push(split_case(dt, [8, 2, 300, 290, 128], 3, (0, 0)));
        v.push(split_case(dt, [2, 1, 200, 200, 64], 5, (40, 3)));
        // More splits than one combine step folds (128 per thread slice), most of them
        // empty, with sinks.
        v.push(split_case(dt, [4, 2, 700, 650, 128], 300, (0, 2)));
    }
    // More chunks than keys: empty chunks must combine to nothing.
    v.push(split_case(F32, [4, 4, 30, 20, 256], 8, (0, 0)));
    v.extend(decode_rejections("sdpa_decode_split", |c, q, k, v, o| {
        sdpa_decode_split(
            c,
            q,
            k,
            v,
            o,
            8,
            2,
            &DecodeOptions::default(),
            &workspace(c, q, k, None)?,
        )
    }));
    for (splits, what, reason) in [
        (0, "zero splits", "`splits` must be in 1..=1024, got 0"),
        (
            5000,
            "too many splits",
            "`splits` must be in 1..=1024, got 5000",
        ),
    ] {
        v.push(rejection_over(
            "sdpa_decode_split",
            (what, reason),
            DECODE_GOOD,
            move |c, [q, k, v, out]| {
                let ws = workspace(c, q, k, Some(splits))?;
                sdpa_decode_split(c, q, k, v, out, 8, splits, &DecodeOptions::default(), &ws)
            },
        ));
    }
    v.push(small_workspace_rejection(
        (
            "sdpa_decode_split",
            "workspace too small",
            "the workspace holds 4 partial outputs",
        ),
        DECODE_GOOD,
        [1, 4, 64, 1],
        None,
        |c, [q, k, v, out], o, ws| sdpa_decode_split(c, q, k, v, out, 8, 4, o, ws),
    ));
    v
}

pub(crate) fn split_uses() -> Vec<KernelUse> {
    let mut v = decode_kernel_uses(true);
    v.extend(mma_uses());
    v.extend(combine_uses());
    v
}
