//! An f32 Gated DeltaNet prefill is f32-accurate and takes any value an f32 holds: values
//! and an initial state past f16's 65504 give the f64 recurrence's outputs and final state,
//! never inf or NaN, and ordinary values match it to f32 precision (f16 staging gave 1e-3).

use tessera_runtime::{Context, DType, Tensor};
use tessera_std::gdn::reference::{recurrent, GdnInputs, GdnShape};
use tessera_std::gdn::{gdn_chunked_prefill, GdnPrefillWorkspace, PrefillArgs, PrefillShape};
use tessera_std::testing::{upload, CaseRng};

fn uniform(rng: &mut CaseRng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}

/// Rows of unit L2 norm, as models feed q and k.
fn unit_rows(rng: &mut CaseRng, rows: usize, d: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * d);
    for _ in 0..rows {
        let r = uniform(rng, d, -1.0, 1.0);
        let norm = r.iter().map(|x| x * x).sum::<f64>().sqrt();
        out.extend(r.iter().map(|x| x / norm));
    }
    out
}

/// `got` within `rel` of `want`, relative to the largest reference magnitude.
fn close(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.is_finite() && (g - w).abs() <= rel * scale,
            "{what}: element {i} is {g}, want {w} (largest {scale})"
        );
    }
}

/// Runs an f32 prefill of sequences `lens` with values `v` and an initial state of
/// magnitude up to `magnitude`, and checks it against the f64 recurrence.
fn prefill_matches_the_recurrence(lens: &[usize], dk: usize, magnitude: f64, rel: f64) {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0x06df32 + lens.len() as u64);
    let shape = GdnShape {
        hk: 2,
        hv: 4,
        dk,
        dv: 32,
    };
    let mut cu = vec![0];
    for l in lens {
        cu.push(cu[cu.len() - 1] + l);
    }
    let (t, n) = (cu[cu.len() - 1], lens.len());
    let up = |data: &[f64], dims: &[usize]| -> (Tensor, Vec<f64>) {
        upload(&ctx, DType::F32, data, dims).unwrap()
    };
    let (q, qh) = up(&unit_rows(&mut rng, t * shape.hk, dk), &[t, shape.hk, dk]);
    let (k, kh) = up(&unit_rows(&mut rng, t * shape.hk, dk), &[t, shape.hk, dk]);
    let vv = uniform(&mut rng, t * shape.hv * shape.dv, -magnitude, magnitude);
    let (v, vh) = up(&vv, &[t, shape.hv, shape.dv]);
    let (g, gh) = up(&uniform(&mut rng, t * shape.hv, -0.4, 0.0), &[t, shape.hv]);
    let (beta, bh) = up(&uniform(&mut rng, t * shape.hv, 0.05, 1.0), &[t, shape.hv]);
    let st = [n, shape.hv, shape.dv, dk];
    let h0v = uniform(&mut rng, n * shape.state_len(), -magnitude, magnitude);
    let (h0, h0h) = up(&h0v, &st);
    let o = ctx.full_nan(DType::F32, &[t, shape.hv, shape.dv]).unwrap();
    let fin = ctx.full_nan(DType::F32, &st).unwrap();
    let scale = 1.0 / (dk as f32).sqrt();
    let args = PrefillArgs {
        q: &q,
        k: &k,
        v: &v,
        g: &g,
        beta: &beta,
        h0: Some(&h0),
        o: &o,
        final_state: &fin,
    };
    let ws = GdnPrefillWorkspace::new(
        &ctx,
        &PrefillShape {
            dtype: DType::F32,
            hv: shape.hv,
            dk,
            dv: shape.dv,
            cu_seqlens: &cu,
        },
    )
    .unwrap();
    gdn_chunked_prefill(&ctx, &args, &ws, scale).unwrap();
    let (want_o, want_fin) = recurrent(&GdnInputs {
        q: &qh,
        k: &kh,
        v: &vh,
        g: &gh,
        beta: &bh,
        h0: Some(&h0h),
        cu_seqlens: &cu,
        shape,
        scale: scale as f64,
    });
    let what = format!("lens {lens:?} Dk {dk} magnitude {magnitude}");
    close(
        &format!("{what}: o"),
        &o.to_f64_vec().unwrap(),
        &want_o,
        rel,
    );
    close(
        &format!("{what}: final state"),
        &fin.to_f64_vec().unwrap(),
        &want_fin,
        rel,
    );
}

#[test]
fn values_past_f16_range_give_the_f32_answer() {
    prefill_matches_the_recurrence(&[1, 70, 5], 64, 3.0e5, 2e-5);
    prefill_matches_the_recurrence(&[130], 256, 1.0e9, 2e-5);
}

#[test]
fn ordinary_values_are_f32_accurate() {
    prefill_matches_the_recurrence(&[1], 128, 1.0, 1e-6);
    prefill_matches_the_recurrence(&[3, 0, 64], 128, 1.0, 1e-5);
}
