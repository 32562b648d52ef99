//! A NaN in q or k reaches exactly the attention outputs it touches: the query head whose
//! q holds it, or every query head (and row) that sees the key holding it. Every other
//! output stays finite and matches the f64 reference, and a row that sees no key still
//! gets zeros. Every float dtype, decode (single pass, split-KV, batched), multi-query and
//! prefill.

use tessera_runtime::{Context, DType, Tensor};
use tessera_std::attention::reference;
use tessera_std::attention::{
    sdpa_decode, sdpa_decode_batched, sdpa_decode_split, sdpa_multi_query, sdpa_prefill,
    DecodeOptions, DecodeWorkspace,
};
use tessera_std::testing::{upload, CaseRng};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-4,
        DType::F16 => 1e-2,
        _ => 5e-2,
    }
}

/// Uniform values in [-1, 1) with NaN at `nan_at`, uploaded as `dtype`.
fn tensor_with_nan(
    ctx: &Context,
    rng: &mut CaseRng,
    dtype: DType,
    shape: &[usize],
    nan_at: Option<usize>,
) -> (Tensor, Vec<f64>) {
    let n: usize = shape.iter().product();
    let mut values: Vec<f64> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
    if let Some(i) = nan_at {
        values[i] = f64::NAN;
    }
    upload(ctx, dtype, &values, shape).unwrap()
}

/// The f64 reference with the default options (scale 1/√d, no window, no sinks) for
/// `rows` of (cache, length) and heads `[hq, hkv, kv_stride, head_dim]`.
fn plain_reference(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    rows: &[(usize, usize)],
    [hq, hkv, stride, d]: [usize; 4],
) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    reference::decode(q, k, v, rows, hq, hkv, stride, d, scale, 0, 0, None)
}

/// Output vectors of `d` elements: vector `i` must be all NaN where `nan(i)`, else finite
/// and within tolerance of the reference.
fn expect(
    what: &str,
    got: &[f64],
    want: &[f64],
    d: usize,
    dtype: DType,
    nan: impl Fn(usize) -> bool,
) {
    assert_eq!(got.len(), want.len(), "{what}");
    let tol = tolerance(dtype);
    for (i, (g, w)) in got.chunks(d).zip(want.chunks(d)).enumerate() {
        if nan(i) {
            assert!(
                g.iter().all(|x| x.is_nan()),
                "{what} {dtype:?}: vector {i} should be NaN, is {:?}",
                &g[..4]
            );
        } else {
            for (e, (x, y)) in g.iter().zip(w).enumerate() {
                assert!(
                    x.is_finite() && (x - y).abs() <= tol,
                    "{what} {dtype:?}: vector {i} element {e} is {x}, want {y}"
                );
            }
        }
    }
}

#[test]
fn decode_nan_in_q_or_k_reaches_exactly_the_heads_it_touches() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0xa0a17);
    let (hq, hkv, n) = (8, 2, 100);
    let gqa = hq / hkv;
    for dtype in DTYPES {
        for d in [64, 128] {
            // (where the NaN is: q element, k element) and the heads it must reach.
            let poisons = [
                (Some(5 * d + 10), None, 5..6),
                (None, Some((n + 37) * d), gqa..2 * gqa),
            ];
            for (q_nan, k_nan, heads) in poisons {
                for splits in [None, Some(1), Some(3)] {
                    let (q, qh) = tensor_with_nan(&ctx, &mut rng, dtype, &[hq, d], q_nan);
                    let (k, kh) = tensor_with_nan(&ctx, &mut rng, dtype, &[hkv, n, d], k_nan);
                    let (v, vh) = tensor_with_nan(&ctx, &mut rng, dtype, &[hkv, n, d], None);
                    let out = ctx.zeros(dtype, &[hq, d]).unwrap();
                    let ws = DecodeWorkspace::for_cache(&ctx, 1, hq, d, n).unwrap();
                    match splits {
                        None => sdpa_decode(&ctx, &q, &k, &v, &out, None, &ws).unwrap(),
                        Some(s) => sdpa_decode_split(
                            &ctx,
                            &q,
                            &k,
                            &v,
                            &out,
                            n,
                            s,
                            &DecodeOptions::default(),
                            &ws,
                        )
                        .unwrap(),
                    }
                    let want = plain_reference(&qh, &kh, &vh, &[(0, n)], [hq, hkv, n, d]);
                    let what = format!(
                        "sdpa_decode d={d} splits={splits:?} nan in q {q_nan:?} k {k_nan:?}"
                    );
                    expect(&what, &out.to_f64_vec().unwrap(), &want, d, dtype, |h| {
                        heads.contains(&h)
                    });
                }
            }
        }
    }
}

#[test]
fn batched_decode_keeps_empty_rows_zero_beside_a_nan_row() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0xa0a18);
    let (b, hq, hkv, stride, d) = (3, 4, 2, 48, 64);
    let lens = [0u32, 48, 20];
    for dtype in DTYPES {
        // Row 1 head 2's query holds the NaN.
        let (q, qh) = tensor_with_nan(&ctx, &mut rng, dtype, &[b, hq, d], Some((hq + 2) * d + 7));
        let (k, kh) = tensor_with_nan(&ctx, &mut rng, dtype, &[b, hkv, stride, d], None);
        let (v, vh) = tensor_with_nan(&ctx, &mut rng, dtype, &[b, hkv, stride, d], None);
        let kv_lens = ctx.tensor(&lens, &[b]).unwrap();
        let out = ctx.zeros(dtype, &[b, hq, d]).unwrap();
        let ws = DecodeWorkspace::new(&ctx, b, hq, d, 4).unwrap();
        for splits in [Some(1), Some(4)] {
            let opts = DecodeOptions {
                splits,
                ..DecodeOptions::default()
            };
            sdpa_decode_batched(&ctx, &q, &k, &v, &kv_lens, &out, &opts, &ws).unwrap();
            let rows: Vec<(usize, usize)> = lens
                .iter()
                .enumerate()
                .map(|(r, &l)| (r, l as usize))
                .collect();
            let want = plain_reference(&qh, &kh, &vh, &rows, [hq, hkv, stride, d]);
            let got = out.to_f64_vec().unwrap();
            assert!(
                got[..hq * d].iter().all(|&x| x == 0.0),
                "{dtype:?}: the empty row is not zero"
            );
            expect(
                &format!("sdpa_decode_batched splits={splits:?}"),
                &got,
                &want,
                d,
                dtype,
                |i| i == hq + 2,
            );
        }
    }
}

#[test]
fn multi_query_nan_in_a_key_reaches_the_rows_that_see_it() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0xa0a19);
    let (nq, base, stride, hq, hkv, d) = (4, 30, 40, 4, 2, 64);
    for dtype in DTYPES {
        // KV head 1, position 32: causal rows r see base + r + 1 keys, so rows 2 and 3.
        let k_nan = Some((stride + 32) * d + 3);
        let (q, qh) = tensor_with_nan(&ctx, &mut rng, dtype, &[nq, hq, d], None);
        let (k, kh) = tensor_with_nan(&ctx, &mut rng, dtype, &[hkv, stride, d], k_nan);
        let (v, vh) = tensor_with_nan(&ctx, &mut rng, dtype, &[hkv, stride, d], None);
        let out = ctx.zeros(dtype, &[nq, hq, d]).unwrap();
        let ws = DecodeWorkspace::for_cache(&ctx, nq, hq, d, stride).unwrap();
        sdpa_multi_query(
            &ctx,
            &q,
            &k,
            &v,
            &out,
            base,
            true,
            &DecodeOptions::default(),
            &ws,
        )
        .unwrap();
        let rows: Vec<(usize, usize)> = (0..nq).map(|r| (0, base + r + 1)).collect();
        let want = plain_reference(&qh, &kh, &vh, &rows, [hq, hkv, stride, d]);
        expect(
            "sdpa_multi_query",
            &out.to_f64_vec().unwrap(),
            &want,
            d,
            dtype,
            |i| {
                let (r, h) = (i / hq, i % hq);
                r >= 2 && h >= 2
            },
        );
    }
}

#[test]
fn prefill_nan_in_q_or_k_reaches_exactly_the_rows_and_heads_it_touches() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0xa0a1a);
    let (nq, nkv, hq, hkv) = (40, 40, 4, 2);
    for dtype in DTYPES {
        for d in [64, 128] {
            for causal in [true, false] {
                // q of row 9, head 3; or k of key 17, KV head 0 (query heads 0 and 1).
                let poisons: [(Option<usize>, Option<usize>); 2] = [
                    (Some((9 * hq + 3) * d + 1), None),
                    (None, Some((17 * hkv) * d + 5)),
                ];
                for (q_nan, k_nan) in poisons {
                    let (q, qh) = tensor_with_nan(&ctx, &mut rng, dtype, &[nq, hq, d], q_nan);
                    let (k, kh) = tensor_with_nan(&ctx, &mut rng, dtype, &[nkv, hkv, d], k_nan);
                    let (v, vh) = tensor_with_nan(&ctx, &mut rng, dtype, &[nkv, hkv, d], None);
                    let out = ctx.zeros(dtype, &[nq, hq, d]).unwrap();
                    sdpa_prefill(&ctx, &q, &k, &v, &out, causal, None).unwrap();
                    let want = reference::prefill(
                        &qh,
                        &kh,
                        &vh,
                        nq,
                        nkv,
                        hq,
                        hkv,
                        d,
                        1.0 / (d as f64).sqrt(),
                        causal,
                    );
                    let what = format!(
                        "sdpa_prefill d={d} causal={causal} nan in q {q_nan:?} k {k_nan:?}"
                    );
                    expect(&what, &out.to_f64_vec().unwrap(), &want, d, dtype, |i| {
                        let (r, h) = (i / hq, i % hq);
                        if q_nan.is_some() {
                            r == 9 && h == 3
                        } else {
                            h < 2 && (!causal || r >= 17)
                        }
                    });
                }
            }
        }
    }
}

/// An infinite or NaN value in one key's v reaches only the rows that see that key, in
/// that column: on the fragment path the key also sits in the V tiles of rows that mask it
/// (causality inside their last blocks, the padding past `n_kv`, which repeats the last
/// key), where its 0 weight must not make them NaN. Head sizes of one and two column parts,
/// queries at the end of a longer cache, the last key and one inside the diagonal tiles.
#[test]
fn prefill_non_finite_v_reaches_only_the_rows_that_see_its_key() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0xa0a1b);
    let (nq, hq, hkv) = (40, 4, 2);
    for dtype in DTYPES {
        for d in [64, 192, 256] {
            for (nkv, causal) in [(40, true), (53, true), (53, false)] {
                for (key, poison) in [
                    (20, f64::INFINITY),
                    (nkv - 1, f64::NEG_INFINITY),
                    (nkv - 5, f64::NAN),
                ] {
                    let at = (key * hkv) * d + 5;
                    let (q, qh) = tensor_with_nan(&ctx, &mut rng, dtype, &[nq, hq, d], None);
                    let (k, kh) = tensor_with_nan(&ctx, &mut rng, dtype, &[nkv, hkv, d], None);
                    let mut values: Vec<f64> =
                        (0..nkv * hkv * d).map(|_| rng.uniform(-1.0, 1.0)).collect();
                    values[at] = poison;
                    let (v, vh) = upload(&ctx, dtype, &values, &[nkv, hkv, d]).unwrap();
                    let out = ctx.zeros(dtype, &[nq, hq, d]).unwrap();
                    sdpa_prefill(&ctx, &q, &k, &v, &out, causal, None).unwrap();
                    let scale = 1.0 / (d as f64).sqrt();
                    let want =
                        reference::prefill(&qh, &kh, &vh, nq, nkv, hq, hkv, d, scale, causal);
                    let got = out.to_f64_vec().unwrap();
                    let what = format!("{dtype:?} d={d} n_kv={nkv} causal={causal} v[{key}]");
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        let (r, h, e) = (i / (hq * d), (i / d) % hq, i % d);
                        let sees = h < 2 && e == 5 && (!causal || r + nkv - nq >= key);
                        assert_eq!(!w.is_finite(), sees, "{what}: the reference at {i}");
                        if sees {
                            assert!(!g.is_finite(), "{what}: out[{r}, {h}, {e}] is {g}");
                        } else {
                            assert!(
                                g.is_finite() && (g - w).abs() <= tolerance(dtype),
                                "{what}: out[{r}, {h}, {e}] is {g}, want {w}"
                            );
                        }
                    }
                }
            }
        }
    }
}
