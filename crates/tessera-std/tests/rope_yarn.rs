//! YaRN frequency scaling against an f64 implementation written from the YaRN paper's code
//! (`find_correction_range` clamps the correction range to dims `[0, dim − 1]`, the ramp runs
//! over the `dim / 2` pair indices), at configurations where clamping to `dim / 2 − 1`
//! instead gives different frequencies.

use std::f64::consts::PI;
use tessera_runtime::{Context, DType};
use tessera_std::rope::reference;
use tessera_std::rope::table::frequencies;
use tessera_std::rope::{rope, RopeConfig, RopeLayout, RopeScaling, RopeTable};
use tessera_std::testing::CaseRng;

/// The dim whose pair turns `turns` times over the original context.
fn correction_dim(turns: f64, dim: f64, base: f64, orig: f64) -> f64 {
    dim * (orig / (turns * 2.0 * PI)).ln() / (2.0 * base.ln())
}

/// YaRN inverse frequencies and the cos/sin scale, from the paper's formulas.
fn yarn_inv_freq(
    dim: usize,
    base: f64,
    factor: f64,
    orig: f64,
    beta_fast: f64,
    beta_slow: f64,
) -> (Vec<f64>, f64) {
    let dimf = dim as f64;
    let low = correction_dim(beta_fast, dimf, base, orig).floor().max(0.0);
    let mut high = correction_dim(beta_slow, dimf, base, orig)
        .ceil()
        .min(dimf - 1.0);
    if low == high {
        high += 0.001;
    }
    let inv: Vec<f64> = (0..dim / 2)
        .map(|i| {
            let extrapolation = 1.0 / base.powf((2 * i) as f64 / dimf);
            let interpolation = extrapolation / factor;
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            let keep = 1.0 - ramp;
            interpolation * (1.0 - keep) + extrapolation * keep
        })
        .collect();
    (inv, 0.1 * factor.ln() + 1.0)
}

/// The configurations of the defect report: (theta, original context, rot_dim).
const CONFIGS: [(f64, f64, usize); 4] = [
    (10000.0, 131072.0, 128),
    (500.0, 8192.0, 64),
    (10000.0, 131072.0, 64),
    (1000000.0, 32768.0, 128),
];

fn yarn_config(theta: f64, orig: f64, rot_dim: usize, layout: RopeLayout) -> RopeConfig {
    RopeConfig {
        layout,
        theta,
        rot_dim,
        scaling: RopeScaling::Yarn {
            factor: 4.0,
            original_max_position: orig,
            beta_fast: 32.0,
            beta_slow: 1.0,
        },
    }
}

#[test]
fn the_table_matches_the_papers_ramp() {
    for (theta, orig, rot_dim) in CONFIGS {
        let cfg = yarn_config(theta, orig, rot_dim, RopeLayout::NeoX);
        let (want, want_scale) = yarn_inv_freq(rot_dim, theta, 4.0, orig, 32.0, 1.0);
        let (got, scale) = frequencies(&cfg);
        assert_eq!(got.len(), want.len());
        assert!((scale - want_scale).abs() < 1e-12);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs(),
                "theta {theta}, original {orig}, rot_dim {rot_dim}: pair {i} has {g}, want {w}"
            );
        }
    }
}

/// Rotates `x [tokens, heads, d]` (NeoX layout) with the given frequencies.
fn rotate(x: &[f64], positions: &[u32], heads: usize, d: usize, inv: &[f64], m: f64) -> Vec<f64> {
    let half = inv.len();
    let mut out = x.to_vec();
    for (t, &pos) in positions.iter().enumerate() {
        for h in 0..heads {
            let base = (t * heads + h) * d;
            for (i, &f) in inv.iter().enumerate() {
                let (s, c) = (pos as f64 * f).sin_cos();
                let (a, b) = (x[base + i], x[base + i + half]);
                out[base + i] = (a * c - b * s) * m;
                out[base + i + half] = (a * s + b * c) * m;
            }
        }
    }
    out
}

#[test]
fn the_reference_and_the_cpu_kernel_match_the_papers_ramp() {
    let ctx = Context::cpu();
    let mut rng = CaseRng::new(0x5eed_0a11);
    let (tokens, heads) = (5, 2);
    for (theta, orig, rot_dim) in CONFIGS {
        let d = rot_dim;
        let cfg = yarn_config(theta, orig, rot_dim, RopeLayout::NeoX);
        let (inv, m) = yarn_inv_freq(rot_dim, theta, 4.0, orig, 32.0, 1.0);
        let x: Vec<f64> = (0..tokens * heads * d)
            .map(|_| rng.uniform(-1.0, 1.0))
            .collect();
        let positions: Vec<u32> = (0..tokens).map(|_| rng.int(0, 8192)).collect();
        let want = rotate(&x, &positions, heads, d, &inv, m);

        let reference = reference::rope(&x, &positions, heads, d, &cfg);
        for (i, (r, w)) in reference.iter().zip(&want).enumerate() {
            assert!(
                (r - w).abs() < 1e-9,
                "reference, theta {theta}: element {i} is {r}, want {w}"
            );
        }

        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let xt = ctx.tensor(&x32, &[tokens, heads, d]).unwrap();
        let pt = ctx.tensor(&positions, &[tokens]).unwrap();
        let out = ctx.zeros(DType::F32, &[tokens, heads, d]).unwrap();
        let table = RopeTable::new(&ctx, cfg).unwrap();
        rope(&ctx, &xt, &pt, &table, &out).unwrap();
        let got = out.to_f64_vec().unwrap();
        // Angles up to 8192 rad in f32 carry ~5e-4 absolute phase error at the fastest pairs.
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() < 2e-3,
                "cpu kernel, theta {theta}: element {i} is {g}, want {w}"
            );
        }
    }
}
