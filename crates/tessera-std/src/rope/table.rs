//! RoPE frequency tables: the per-pair inverse frequencies `theta^(-2i/rot_dim)`, scaled
//! for long context the Llama-3 way (wavelength bands) or the YaRN way (a ramp over pair
//! indices plus an attention factor), computed once in f64 and kept on the device.

use crate::error::{runtime, OpError};
use std::f64::consts::PI;
use tessera_runtime::{Context, Tensor};

/// Which elements rotate together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeLayout {
    /// Pairs `(2i, 2i+1)` (GPT-J, the original paper).
    Interleaved,
    /// Pairs `(i, i + rot_dim/2)` (GPT-NeoX, Llama and Qwen in HF layout).
    NeoX,
}

/// Long-context frequency scaling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    None,
    /// Llama-3.1: wavelengths above `original_max_position / low_freq_factor` are divided
    /// by `factor`, those below `original_max_position / high_freq_factor` kept, the band
    /// between interpolated.
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position: f64,
    },
    /// YaRN: pairs that turn fewer than `beta_slow` times over the original context are
    /// interpolated (divided by `factor`), more than `beta_fast` kept, a linear ramp between;
    /// cos and sin are scaled by `0.1·ln(factor) + 1`.
    Yarn {
        factor: f64,
        original_max_position: f64,
        beta_fast: f64,
        beta_slow: f64,
    },
}

/// A RoPE configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeConfig {
    pub layout: RopeLayout,
    /// Base: 10000 (Llama-2), 500000 (Llama-3), 1000000 (Qwen3).
    pub theta: f64,
    /// Rotated dims (even, at most head_dim); the rest pass through.
    pub rot_dim: usize,
    pub scaling: RopeScaling,
}

/// The per-pair inverse frequencies and the cos/sin scale of a configuration.
pub fn frequencies(cfg: &RopeConfig) -> (Vec<f64>, f64) {
    let half = cfg.rot_dim / 2;
    let d = cfg.rot_dim as f64;
    let base: Vec<f64> = (0..half)
        .map(|i| cfg.theta.powf(-((2 * i) as f64) / d))
        .collect();
    match cfg.scaling {
        RopeScaling::None => (base, 1.0),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position,
        } => {
            let low_wavelen = original_max_position / low_freq_factor;
            let high_wavelen = original_max_position / high_freq_factor;
            let f = base
                .iter()
                .map(|&inv| {
                    let wavelen = 2.0 * PI / inv;
                    if wavelen < high_wavelen {
                        inv
                    } else if wavelen > low_wavelen {
                        inv / factor
                    } else {
                        let smooth = (original_max_position / wavelen - low_freq_factor)
                            / (high_freq_factor - low_freq_factor);
                        (1.0 - smooth) * inv / factor + smooth * inv
                    }
                })
                .collect();
            (f, 1.0)
        }
        RopeScaling::Yarn {
            factor,
            original_max_position,
            beta_fast,
            beta_slow,
        } => {
            // The pair index that turns `turns` times over the original context.
            let dim_of = |turns: f64| {
                d * (original_max_position / (turns * 2.0 * PI)).ln() / (2.0 * cfg.theta.ln())
            };
            // The correction range is clamped to `[0, rot_dim − 1]` (dims, not pairs), as in
            // the YaRN paper's code; the ramp then runs over the `rot_dim / 2` pair indices.
            let low = dim_of(beta_fast).floor().max(0.0);
            let high = dim_of(beta_slow).ceil().min(d - 1.0);
            let span = if high == low { 0.001 } else { high - low };
            let f = base
                .iter()
                .enumerate()
                .map(|(i, &inv)| {
                    let ramp = ((i as f64 - low) / span).clamp(0.0, 1.0);
                    let keep = 1.0 - ramp;
                    inv / factor * (1.0 - keep) + inv * keep
                })
                .collect();
            (f, 0.1 * factor.ln() + 1.0)
        }
    }
}

/// A configuration's frequencies on the device, made once per model.
pub struct RopeTable {
    pub config: RopeConfig,
    /// f32 `[rot_dim / 2, 2]`: each frequency as an unevaluated sum `hi + lo` of two f32,
    /// so the kernels form `position · frequency` to ~2⁻⁴⁸ relative instead of the 2⁻²⁴
    /// of one f32 (at position 10⁵ one f32 is off by up to ~6e-3 rad).
    pub inv_freq: Tensor,
    /// cos/sin scale (YaRN's attention factor, else 1).
    pub mscale: f32,
}

impl RopeTable {
    /// Validates the configuration and uploads its frequencies.
    pub fn new(ctx: &Context, config: RopeConfig) -> Result<RopeTable, OpError> {
        const OP: &str = "RopeTable";
        if config.rot_dim == 0 || !config.rot_dim.is_multiple_of(2) {
            return Err(OpError::invalid(
                OP,
                format!("rot_dim = {} must be even and positive", config.rot_dim),
            ));
        }
        if !(config.theta.is_finite() && config.theta > 1.0) {
            return Err(OpError::invalid(
                OP,
                format!("theta = {} must be finite and above 1", config.theta),
            ));
        }
        let factor_ok = match config.scaling {
            RopeScaling::None => true,
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position,
            } => {
                factor >= 1.0
                    && high_freq_factor > low_freq_factor
                    && low_freq_factor > 0.0
                    && original_max_position > 0.0
            }
            RopeScaling::Yarn {
                factor,
                original_max_position,
                beta_fast,
                beta_slow,
            } => factor >= 1.0 && original_max_position > 0.0 && beta_fast > beta_slow,
        };
        if !factor_ok {
            return Err(OpError::invalid(
                OP,
                format!(
                    "scaling {:?} is out of range: factor >= 1, high_freq_factor > \
                     low_freq_factor > 0, beta_fast > beta_slow, positive original context",
                    config.scaling
                ),
            ));
        }
        let (f, mscale) = frequencies(&config);
        let split: Vec<f32> = f
            .iter()
            .flat_map(|&x| {
                let hi = x as f32;
                [hi, (x - f64::from(hi)) as f32]
            })
            .collect();
        Ok(RopeTable {
            config,
            inv_freq: ctx.tensor(&split, &[f.len(), 2]).map_err(runtime(OP))?,
            mscale: mscale as f32,
        })
    }
}
