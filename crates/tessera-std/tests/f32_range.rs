//! f32 data anywhere in f32's range gives f32-accurate results where the math stays in
//! range: norms of rows near 1e18..3e38 (whose f32 sum of squares overflows) and tiny
//! rows, and attention whose values lie near 1e38 (whose weighted sum Σ p·v, before the
//! divide, would overflow). References are written here in f64 from the definitions.

use tessera_runtime::{Context, DType, Tensor};
use tessera_std::attention::{
    sdpa_decode, sdpa_decode_split, sdpa_prefill, DecodeOptions, DecodeWorkspace,
};
use tessera_std::norm::{
    gated_mixer_norm, layer_norm, rms_norm, rms_norm_pipe, rms_norm_residual, rms_norm_small,
    rms_norm_tpg4, rms_norm_vec, rms_norm_wide,
};
use tessera_std::testing::{upload, CaseRng};

/// Row `r` of `rows` holds values uniform in ±1 times `magnitude(r)`.
fn rows_at(rng: &mut CaseRng, rows: usize, n: usize, magnitude: &[f64]) -> Vec<f64> {
    (0..rows * n)
        .map(|i| rng.uniform(-1.0, 1.0) * magnitude[(i / n) % magnitude.len()])
        .collect()
}

/// `x / sqrt(mean(x²) + eps) · w`, the mean taken in f64 after scaling by the row's
/// largest |x| (so the reference itself cannot overflow).
fn rms_f64(x: &[f64], w: &[f64], n: usize, eps: f64) -> Vec<f64> {
    x.chunks(n)
        .flat_map(|row| {
            let m = row.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            let ms = if m == 0.0 {
                0.0
            } else {
                row.iter().map(|v| (v / m) * (v / m)).sum::<f64>() / n as f64 * m * m
            };
            let inv = 1.0 / (ms + eps).sqrt();
            row.iter()
                .zip(w)
                .map(move |(v, wi)| v * inv * wi)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.is_finite() && (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: [{i}] = {g}, want {w}"
        );
    }
}

const MAGNITUDES: [f64; 6] = [1.0, 1e18, 1e30, 3e38, 1e-20, 2e19];

#[test]
fn every_rms_norm_layout_is_exact_for_rows_across_f32s_range() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0x5ca1e);
    type Norm = fn(&Context, &Tensor, &Tensor, &Tensor, f32) -> Result<(), tessera_std::OpError>;
    let layouts: [(&str, Norm, usize); 7] = [
        ("rms_norm", rms_norm, 40),
        ("rms_norm_tpg4", rms_norm_tpg4, 256),
        ("rms_norm_small", rms_norm_small, 128),
        ("rms_norm_wide", rms_norm_wide, 100),
        ("rms_norm_vec", rms_norm_vec, 512),
        ("rms_norm_vec rows", rms_norm_vec, 64),
        ("rms_norm_pipe", rms_norm_pipe, 512),
    ];
    let rows = 12;
    for (name, norm, n) in layouts {
        let (xt, x) = upload(
            &ctx,
            DType::F32,
            &rows_at(&mut rng, rows, n, &MAGNITUDES),
            &[rows, n],
        )
        .unwrap();
        let w: Vec<f64> = (0..n).map(|_| rng.uniform(0.5, 1.5)).collect();
        let (wt, w) = upload(&ctx, DType::F32, &w, &[n]).unwrap();
        let out = ctx.zeros(DType::F32, &[rows, n]).unwrap();
        norm(&ctx, &xt, &wt, &out, 1e-6).unwrap();
        let want = rms_f64(&x, &w, n, 1e-6);
        assert_close(name, &out.to_f64_vec().unwrap(), &want, 1e-5);
    }
}

#[test]
fn residual_gated_and_layer_norms_are_exact_for_huge_rows() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0x5ca1f);
    let (rows, n) = (12, 128);
    let xs = rows_at(&mut rng, rows, n, &MAGNITUDES);
    let (xt, x) = upload(&ctx, DType::F32, &xs, &[rows, n]).unwrap();
    let w: Vec<f64> = (0..n).map(|_| rng.uniform(0.5, 1.5)).collect();
    let (wt, w) = upload(&ctx, DType::F32, &w, &[n]).unwrap();
    // Residual: a zero residual, so the sum is x.
    let zero = ctx.zeros(DType::F32, &[rows, n]).unwrap();
    let sum = ctx.zeros(DType::F32, &[rows, n]).unwrap();
    let out = ctx.zeros(DType::F32, &[rows, n]).unwrap();
    rms_norm_residual(&ctx, &xt, &zero, &wt, &sum, &out, 1e-6).unwrap();
    assert_close(
        "rms_norm_residual",
        &out.to_f64_vec().unwrap(),
        &rms_f64(&x, &w, n, 1e-6),
        1e-5,
    );
    // Gated: rms_norm(y, w) · silu(z).
    let zs: Vec<f64> = (0..rows * n).map(|_| rng.uniform(-3.0, 3.0)).collect();
    let (zt, z) = upload(&ctx, DType::F32, &zs, &[rows, n]).unwrap();
    gated_mixer_norm(&ctx, &xt, &zt, &wt, &out, 1e-6).unwrap();
    let want: Vec<f64> = rms_f64(&x, &w, n, 1e-6)
        .iter()
        .zip(&z)
        .map(|(v, zi)| v * zi / (1.0 + (-zi).exp()))
        .collect();
    assert_close("gated_mixer_norm", &out.to_f64_vec().unwrap(), &want, 1e-5);
    // LayerNorm, with rows offset by a large mean too.
    let shifted: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(i, v)| v * 0.5 + MAGNITUDES[(i / n) % MAGNITUDES.len()] * 0.4)
        .collect();
    let (st, s) = upload(&ctx, DType::F32, &shifted, &[rows, n]).unwrap();
    let b: Vec<f64> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let (bt, b) = upload(&ctx, DType::F32, &b, &[n]).unwrap();
    layer_norm(&ctx, &st, &wt, &bt, &out, 1e-6).unwrap();
    let want: Vec<f64> = s
        .chunks(n)
        .flat_map(|row| {
            let m = row.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            let mean = row.iter().map(|v| v / m).sum::<f64>() / n as f64 * m;
            let var = row.iter().map(|v| ((v - mean) / m).powi(2)).sum::<f64>() / n as f64 * m * m;
            let inv = 1.0 / (var + 1e-6).sqrt();
            row.iter()
                .enumerate()
                .map(|(i, v)| (v - mean) * inv * w[i] + b[i])
                .collect::<Vec<_>>()
        })
        .collect();
    assert_close("layer_norm", &out.to_f64_vec().unwrap(), &want, 1e-4);
}

/// `Σ_j softmax_j(scale·q·k_j)·v_j` per query head, GQA; the convex combination taken
/// with the softmax normalised first (no overflow in f64 either way).
fn attend_f64(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    hq: usize,
    hkv: usize,
    n: usize,
    d: usize,
) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = Vec::new();
    for h in 0..hq {
        let kvh = h / (hq / hkv);
        let qv = &q[h * d..(h + 1) * d];
        let s: Vec<f64> = (0..n)
            .map(|j| {
                scale
                    * (0..d)
                        .map(|i| qv[i] * k[(kvh * n + j) * d + i])
                        .sum::<f64>()
            })
            .collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let den: f64 = s.iter().map(|x| (x - m).exp()).sum();
        for i in 0..d {
            out.push(
                (0..n)
                    .map(|j| (s[j] - m).exp() / den * v[(kvh * n + j) * d + i])
                    .sum(),
            );
        }
    }
    out
}

#[test]
fn attention_over_values_near_f32s_limit_does_not_overflow() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0xa77e);
    let (hq, hkv, n, d) = (4, 2, 300, 64);
    for dtype in [DType::F32, DType::BF16] {
        // Small logits (near-uniform weights) and values of the same sign near 3e38: the
        // unnormalised sum reaches n·3e38.
        let q: Vec<f64> = (0..hq * d).map(|_| rng.uniform(-0.1, 0.1)).collect();
        let k: Vec<f64> = (0..hkv * n * d).map(|_| rng.uniform(-0.1, 0.1)).collect();
        let v: Vec<f64> = (0..hkv * n * d)
            .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 } * rng.uniform(2.0e38, 3.0e38))
            .collect();
        let (qt, q) = upload(&ctx, dtype, &q, &[hq, d]).unwrap();
        let (kt, k) = upload(&ctx, dtype, &k, &[hkv, n, d]).unwrap();
        let (vt, v) = upload(&ctx, dtype, &v, &[hkv, n, d]).unwrap();
        let want = attend_f64(&q, &k, &v, hq, hkv, n, d);
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-2 };
        let rel = |got: Vec<f64>, what: &str| {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.is_finite() && (g - w).abs() <= tol * w.abs(),
                    "{what} {dtype}: [{i}] = {g}, want {w}"
                );
            }
        };
        let out = ctx.zeros(dtype, &[hq, d]).unwrap();
        let ws = DecodeWorkspace::for_cache(&ctx, 1, hq, d, n).unwrap();
        sdpa_decode(&ctx, &qt, &kt, &vt, &out, None, &ws).unwrap();
        rel(out.to_f64_vec().unwrap(), "sdpa_decode");
        for splits in [2, 5] {
            sdpa_decode_split(
                &ctx,
                &qt,
                &kt,
                &vt,
                &out,
                n,
                splits,
                &DecodeOptions::default(),
                &ws,
            )
            .unwrap();
            rel(out.to_f64_vec().unwrap(), "sdpa_decode_split");
        }
        if dtype == DType::F32 {
            // Prefill of one query row seeing every key: the same numbers, token-major.
            let tm = |x: &[f64]| -> Vec<f64> {
                (0..n)
                    .flat_map(|j| (0..hkv).flat_map(move |h| (0..d).map(move |i| (h, j, i))))
                    .map(|(h, j, i)| x[(h * n + j) * d + i])
                    .collect()
            };
            let (kp, _) = upload(&ctx, dtype, &tm(&k), &[n, hkv, d]).unwrap();
            let (vp, _) = upload(&ctx, dtype, &tm(&v), &[n, hkv, d]).unwrap();
            let (qp, _) = upload(&ctx, dtype, &q, &[1, hq, d]).unwrap();
            let outp = ctx.zeros(dtype, &[1, hq, d]).unwrap();
            sdpa_prefill(&ctx, &qp, &kp, &vp, &outp, true, None).unwrap();
            rel(outp.to_f64_vec().unwrap(), "sdpa_prefill");
        }
    }
}

/// qk_norm_rope's per-head RMSNorm on heads from 1e-20 to 3e38, at position 0 (where the
/// rotation is the identity, so the reference is the per-head RMSNorm alone), with few
/// tokens (a head per threadgroup) and many (eight heads per threadgroup).
#[test]
fn qk_norm_rope_normalises_heads_across_f32s_range() {
    use tessera_std::rope::{qk_norm_rope, RopeConfig, RopeLayout, RopeScaling, RopeTable};
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0x9e4d);
    let (hq, hk, d) = (4, 2, 64);
    let table = RopeTable::new(
        &ctx,
        RopeConfig {
            layout: RopeLayout::NeoX,
            theta: 10000.0,
            rot_dim: d,
            scaling: RopeScaling::None,
        },
    )
    .unwrap();
    for tokens in [2, 64] {
        let q = rows_at(&mut rng, tokens * hq, d, &MAGNITUDES);
        let k = rows_at(&mut rng, tokens * hk, d, &MAGNITUDES[1..]);
        let w: Vec<f64> = (0..d).map(|_| rng.uniform(0.5, 1.5)).collect();
        let (qt, q) = upload(&ctx, DType::F32, &q, &[tokens, hq, d]).unwrap();
        let (kt, k) = upload(&ctx, DType::F32, &k, &[tokens, hk, d]).unwrap();
        let (wt, w) = upload(&ctx, DType::F32, &w, &[d]).unwrap();
        let pos = ctx.tensor(&vec![0u32; tokens], &[tokens]).unwrap();
        let qo = ctx.zeros(DType::F32, &[tokens, hq, d]).unwrap();
        let ko = ctx.zeros(DType::F32, &[tokens, hk, d]).unwrap();
        qk_norm_rope(&ctx, &qt, &kt, &wt, &wt, &pos, &table, &qo, &ko, 1e-6).unwrap();
        let what = format!("qk_norm_rope tokens={tokens}");
        let q_want = rms_f64(&q, &w, d, 1e-6);
        let k_want = rms_f64(&k, &w, d, 1e-6);
        assert_close(&what, &qo.to_f64_vec().unwrap(), &q_want, 1e-5);
        assert_close(&what, &ko.to_f64_vec().unwrap(), &k_want, 1e-5);
    }
}
