//! Cases of `sdpa_multi_query`: several query rows over one shared cache, with window,
//! sinks and splits; a rejection per invariant; multi-query shapes.

use super::*;

/// Multi-query attention over `[n_query, base_kv, kv_stride, hq, hkv, d]` with the
/// visibility `vis` (a window, sinks with their logits) and optionally a forced split count.
fn mq_case(
    dt: DType,
    [nq, base, stride, hq, hkv, d]: [usize; 6],
    causal: bool,
    vis: Visibility,
    splits: Option<u32>,
) -> Case {
    let forced = splits.map(|s| format!(" splits={s}")).unwrap_or_default();
    correctness(
        "sdpa_multi_query",
        dt,
        format!(
            "n_query={nq} base={base} stride={stride} hq={hq} hkv={hkv} d={d} causal={causal} \
             window={} sinks={}{forced}",
            vis.window, vis.n_sink
        ),
        move |ctx, rng| {
            let t = qkv(ctx, rng, dt, &[nq, hq, d], &[hkv, stride, d])?;
            let rows: Vec<(usize, usize)> = (0..nq)
                .map(|r| (0, if causal { base + r + 1 } else { base + nq }))
                .collect();
            visible_vs_reference(ctx, rng, &t, &rows, [hq, hkv, stride, d], vis, |o| {
                let o = DecodeOptions { splits, ..*o };
                let ws = workspace(ctx, &t.q, &t.k, splits)?;
                sdpa_multi_query(ctx, &t.q, &t.k, &t.v, &t.out, base, causal, &o, &ws)
            })
        },
    )
}

/// bf16 q `q`, k and v `kv`, out of q's shape: a multi-query call's tensors.
const fn mq_specs(q: &'static [usize], kv: &'static [usize]) -> [Spec; 4] {
    [(BF16, q), (BF16, kv), (BF16, kv), (BF16, q)]
}

/// The good multi-query call: 2 query rows of 4 heads over a cache [2, 16, 128].
const MQ_GOOD: [Spec; 4] = mq_specs(&[2, 4, 128], &[2, 16, 128]);

/// A causal multi-query call at `base` on zero tensors of `specs` with `splits` forced
/// where given, which must be refused.
fn mq_rejection(
    (what, reason): (&str, &'static str),
    specs: [Spec; 4],
    base: usize,
    splits: Option<u32>,
) -> Case {
    rejection_over(
        "sdpa_multi_query",
        (what, reason),
        specs,
        move |c, [q, k, v, out]| {
            let o = DecodeOptions {
                splits,
                ..DecodeOptions::default()
            };
            sdpa_multi_query(
                c,
                q,
                k,
                v,
                out,
                base,
                true,
                &o,
                &workspace(c, q, k, splits)?,
            )
        },
    )
}

pub(crate) fn mq_cases() -> Vec<Case> {
    let mut v = Vec::new();
    let plain = Visibility::default();
    for dt in FLOAT_DTYPES {
        v.push(mq_case(dt, [5, 20, 32, 4, 2, 128], true, plain, None));
        v.push(mq_case(dt, [3, 9, 12, 2, 1, 256], false, plain, None));
        v.push(mq_case(dt, [4, 0, 6, 2, 2, 128], false, plain, None));
        // A sliding window with sinks and sink logits, per query row.
        let windowed = Visibility {
            window: 40,
            n_sink: 3,
            logit: true,
        };
        v.push(mq_case(dt, [6, 90, 100, 8, 2, 128], true, windowed, None));
    }
    // Query rows packed into one threadgroup's fragment rows (2-byte caches, no window):
    // whole groups and a partial last one, rows whose visible keys end inside a block or
    // a block apart (head_dim 256 walks 16-key blocks), 1 to 8 heads per group, full and
    // causal, and forced splits that leave some rows no key in some chunks.
    for dt in [F16, BF16] {
        v.push(mq_case(dt, [7, 45, 64, 8, 2, 128], true, plain, None));
        v.push(mq_case(dt, [20, 3, 40, 4, 4, 64], true, plain, None));
        v.push(mq_case(dt, [9, 30, 48, 4, 1, 256], true, plain, None));
        v.push(mq_case(dt, [6, 50, 60, 16, 8, 128], false, plain, None));
        v.push(mq_case(dt, [11, 97, 128, 8, 1, 128], true, plain, Some(9)));
        v.push(mq_case(dt, [16, 0, 16, 2, 2, 64], true, plain, Some(4)));
    }
    let table = [
        (
            "block past the cache depth",
            "base_kv + n_query = 17 exceeds the cache depth kv_stride = 16",
            mq_specs(&[5, 4, 128], &[2, 16, 128]),
            12,
        ),
        (
            "q heads not a multiple of kv heads",
            "must be a multiple of n_kv_heads = 3",
            mq_specs(&[2, 4, 128], &[3, 16, 128]),
            0,
        ),
        (
            "head_dim unsupported",
            "head_dim 100 is not supported",
            mq_specs(&[2, 4, 100], &[2, 16, 100]),
            0,
        ),
        (
            "k head_dim != q head_dim",
            "k's head_dim is 64 but q says 128",
            mq_specs(&[2, 4, 128], &[2, 16, 64]),
            0,
        ),
        (
            "q is 2-D",
            "`q` must be 3-D",
            mq_specs(&[4, 128], &[2, 16, 128]),
            0,
        ),
        (
            "v shape != k shape",
            "`v` must have shape [2, 16, 128]",
            replaced(MQ_GOOD, 2, (BF16, &[2, 8, 128])),
            0,
        ),
        (
            "v dtype",
            "`v` must be bf16",
            replaced(MQ_GOOD, 2, (F16, &[2, 16, 128])),
            0,
        ),
    ];
    for (what, reason, specs, base) in table {
        v.push(mq_rejection((what, reason), specs, base, None));
    }
    v.extend(sink_logit_rejections(
        "sdpa_multi_query",
        MQ_GOOD,
        (F16, "`sink_logits` must be bf16"),
        |c, [q, k, v, s, out]| {
            let o = DecodeOptions {
                sink_logits: Some(s),
                ..DecodeOptions::default()
            };
            sdpa_multi_query(c, q, k, v, out, 0, true, &o, &workspace(c, q, k, None)?)
        },
    ));
    let reason = "`splits` must be in 1..=1024, got 0";
    v.push(mq_rejection(("zero splits", reason), MQ_GOOD, 0, Some(0)));
    v.push(small_workspace_rejection(
        (
            "sdpa_multi_query",
            "workspace for fewer query rows",
            "the workspace holds 8 partial outputs, this call needs 32",
        ),
        mq_specs(&[4, 4, 128], &[2, 16, 128]),
        [1, 4, 128, 2],
        Some(2),
        |c, [q, k, v, out], o, ws| sdpa_multi_query(c, q, k, v, out, 0, true, o, ws),
    ));
    v
}

pub(crate) fn mq_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (dt, nq, base, hq, hkv, d, quick) in [
        (F16, 4, 60, 4, 2, 128, true),
        (BF16, 8, 4096, 32, 8, 128, false),
        (BF16, 16, 32768, 32, 8, 128, false),
        (F16, 8, 8192, 16, 4, 256, false),
    ] {
        let es = dt.size_bytes();
        let stride = base + nq;
        v.push(BenchCase {
            op: "sdpa_multi_query",
            kernel: if dt != DType::F32 && MMA_HEAD_DIMS.contains(&(d as u32)) {
                "sdpa_decode_mma_kernel"
            } else {
                "sdpa_decode_kernel"
            },
            dtype: dt,
            shape: format!("n_query={nq} base={base} hq={hq} hkv={hkv} d={d} causal"),
            bytes: ((2 * hkv * stride * d + 2 * nq * hq * d) * es) as u64,
            flops: (4 * nq * hq * stride * d) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let rows: Vec<(usize, usize)> = (0..nq).map(|r| (0, base + r + 1)).collect();
                let shapes = (dt, &[nq, hq, d][..], &[hkv, stride, d][..]);
                let reference = (&rows[..], [hq, hkv, stride, d], nq);
                decode_bench_prepare((ctx, rng), shapes, reference, move |c, t, o, ws| {
                    sdpa_multi_query(c, &t.q, &t.k, &t.v, &t.out, base, true, o, ws)
                })
            }),
        });
    }
    v
}
