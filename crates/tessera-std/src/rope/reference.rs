//! f64 references for RoPE, written from the definition: the pair `(a, b)` of dims
//! rotated by angle `pos · f_i` is `(a cos − b sin, a sin + b cos)`, scaled by mscale.

use super::table::{RopeConfig, RopeLayout, RopeScaling};
use std::f64::consts::PI;

/// Inverse frequency of pair `i`, from the configuration (independently of the table).
fn inv_freq(cfg: &RopeConfig, i: usize) -> (f64, f64) {
    let d = cfg.rot_dim as f64;
    let f = 1.0 / cfg.theta.powf(2.0 * i as f64 / d);
    match cfg.scaling {
        RopeScaling::None => (f, 1.0),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor: lo,
            high_freq_factor: hi,
            original_max_position: orig,
        } => {
            let wavelen = 2.0 * PI / f;
            let g = if wavelen < orig / hi {
                f
            } else if wavelen > orig / lo {
                f / factor
            } else {
                let s = (orig / wavelen - lo) / (hi - lo);
                f * ((1.0 - s) / factor + s)
            };
            (g, 1.0)
        }
        RopeScaling::Yarn {
            factor,
            original_max_position: orig,
            beta_fast,
            beta_slow,
        } => {
            // The correction range is clamped to dims `[0, rot_dim − 1]`, the ramp evaluated
            // at pair index `i` (the YaRN paper's `find_correction_range` / `linear_ramp`).
            let corr = |b: f64| d * (orig / (b * 2.0 * PI)).ln() / (2.0 * cfg.theta.ln());
            let lo = corr(beta_fast).floor().max(0.0);
            let hi = corr(beta_slow).ceil().min(d - 1.0);
            let t = ((i as f64 - lo) / (if hi == lo { 0.001 } else { hi - lo })).clamp(0.0, 1.0);
            // t = 0: extrapolate (keep f), t = 1: interpolate (f / factor).
            (f * (1.0 - t) + f / factor * t, 0.1 * factor.ln() + 1.0)
        }
    }
}

/// RoPE of `x [tokens, heads, d]` at `positions`.
pub fn rope(x: &[f64], positions: &[u32], heads: usize, d: usize, cfg: &RopeConfig) -> Vec<f64> {
    let mut out = x.to_vec();
    let half = cfg.rot_dim / 2;
    for (t, &pos) in positions.iter().enumerate() {
        for h in 0..heads {
            let base = (t * heads + h) * d;
            for i in 0..half {
                let (a, b) = match cfg.layout {
                    RopeLayout::Interleaved => (2 * i, 2 * i + 1),
                    RopeLayout::NeoX => (i, i + half),
                };
                let (f, m) = inv_freq(cfg, i);
                let (s, c) = (pos as f64 * f).sin_cos();
                let (xa, xb) = (x[base + a], x[base + b]);
                out[base + a] = (xa * c - xb * s) * m;
                out[base + b] = (xa * s + xb * c) * m;
            }
        }
    }
    out
}

/// Per-head RMSNorm with weight `w [d]`, then RoPE.
pub fn norm_rope(
    x: &[f64],
    w: &[f64],
    positions: &[u32],
    heads: usize,
    d: usize,
    eps: f64,
    cfg: &RopeConfig,
) -> Vec<f64> {
    let normed: Vec<f64> = x
        .chunks(d)
        .flat_map(|head| {
            let inv = 1.0 / (head.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
            head.iter().zip(w).map(move |(v, wi)| v * inv * wi)
        })
        .collect();
    rope(&normed, positions, heads, d, cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(layout: RopeLayout) -> RopeConfig {
        RopeConfig {
            layout,
            theta: 10000.0,
            rot_dim: 4,
            scaling: RopeScaling::None,
        }
    }

    #[test]
    fn position_zero_is_the_identity() {
        let x = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(rope(&x, &[0], 1, 4, &cfg(RopeLayout::NeoX)), x.to_vec());
    }

    #[test]
    fn rotation_keeps_pair_norms() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let y = rope(&x, &[7], 1, 4, &cfg(RopeLayout::Interleaved));
        assert!((y[0] * y[0] + y[1] * y[1] - 5.0).abs() < 1e-12);
        assert!((y[2] * y[2] + y[3] * y[3] - 25.0).abs() < 1e-12);
    }
}
