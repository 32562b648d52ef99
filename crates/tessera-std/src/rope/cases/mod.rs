//! Registered RoPE cases, one file per op, around the fixtures they share here: the
//! frequency-table configurations (both layouts, partial rotation, Llama-3 and YaRN), the
//! tolerance of a rotation, positions, and the kernels to compile.

use super::kernels::{norm_rope_kernel, rope_kernel};
use super::ops::{qk_norm_rope, rope};
use super::reference;
use super::table::{RopeConfig, RopeLayout, RopeScaling, RopeTable};
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{accuracy, compare, err, random_tensor, rejection, zeros, CaseRng, Refused};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

const EPS: f32 = 1e-6;

fn llama3() -> RopeScaling {
    RopeScaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position: 8192.0,
    }
}

fn yarn() -> RopeScaling {
    RopeScaling::Yarn {
        factor: 4.0,
        original_max_position: 32768.0,
        beta_fast: 32.0,
        beta_slow: 1.0,
    }
}

fn cfg(layout: RopeLayout, theta: f64, rot_dim: usize, scaling: RopeScaling) -> RopeConfig {
    RopeConfig {
        layout,
        theta,
        rot_dim,
        scaling,
    }
}

/// The configurations the cases cover: (name, config, head_dim).
fn configs() -> Vec<(&'static str, RopeConfig, usize)> {
    vec![
        (
            "neox",
            cfg(RopeLayout::NeoX, 10000.0, 64, RopeScaling::None),
            64,
        ),
        (
            "interleaved",
            cfg(RopeLayout::Interleaved, 10000.0, 128, RopeScaling::None),
            128,
        ),
        (
            "neox partial 32/96",
            cfg(RopeLayout::NeoX, 10000.0, 32, RopeScaling::None),
            96,
        ),
        (
            "llama3 scaled",
            cfg(RopeLayout::NeoX, 500000.0, 128, llama3()),
            128,
        ),
        ("yarn", cfg(RopeLayout::NeoX, 1000000.0, 128, yarn()), 128),
        (
            "yarn interleaved",
            cfg(RopeLayout::Interleaved, 10000.0, 64, yarn()),
            64,
        ),
    ]
}

/// Positions across a long context for correctness: a few small, most anywhere below
/// 2²⁰, so an angle formed from one rounded f32 product (off by up to ~0.06 rad there)
/// fails.
fn positions(
    ctx: &Context,
    rng: &mut CaseRng,
    tokens: usize,
) -> Result<(Tensor, Vec<u32>), String> {
    let p: Vec<u32> = (0..tokens)
        .map(|t| {
            if t % 4 == 0 {
                rng.int(0, 300)
            } else {
                rng.int(0, 1 << 20)
            }
        })
        .collect();
    Ok((ctx.tensor(&p, &[tokens]).map_err(err)?, p))
}

/// Positions as a model's step sees them, for benchmarks: consecutive tokens from a
/// random start in a 32k context.
fn bench_positions(
    ctx: &Context,
    rng: &mut CaseRng,
    tokens: usize,
) -> Result<(Tensor, Vec<u32>), String> {
    let start = rng.int(0, 1 << 15);
    let p: Vec<u32> = (0..tokens as u32).map(|t| start + t).collect();
    Ok((ctx.tensor(&p, &[tokens]).map_err(err)?, p))
}

fn neox64() -> RopeConfig {
    cfg(RopeLayout::NeoX, 10000.0, 64, RopeScaling::None)
}

pub(super) fn rope_uses() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for (d, rot, neox) in [
            (64, 64, 1),
            (128, 128, 1),
            (128, 128, 0),
            (96, 32, 1),
            (256, 256, 1),
        ] {
            for hpg in [1, 8] {
                let consts = vec![
                    Literal::U32(d),
                    Literal::U32(rot),
                    Literal::U32(neox),
                    Literal::U32(hpg),
                ];
                v.push(KernelUse {
                    def: &rope_kernel::DEF,
                    spec: Specialization::new(vec![dt], consts.clone()),
                });
                if d % 32 == 0 {
                    v.push(KernelUse {
                        def: &norm_rope_kernel::DEF,
                        spec: Specialization::new(vec![dt], consts),
                    });
                }
            }
        }
    }
    v
}

mod qk_norm_rope;
mod rope;

pub(super) use qk_norm_rope::{qk_benches, qk_cases};
pub(super) use rope::{rope_benches, rope_cases};
