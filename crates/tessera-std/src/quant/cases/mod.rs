//! Registered cases of the affine family, one file per op, around what they share here:
//! weights quantized on the host by the reference (the layout the device must read) and
//! the formats every op is checked over.

mod dequantize;
mod qgemm;
mod qgemv;
mod quantize;

pub(super) use dequantize::{dequantize_benches, dequantize_cases, dequantize_kernels};
pub(super) use qgemm::{qgemm_benches, qgemm_cases, qgemm_kernels};
pub(super) use qgemv::{qgemv_benches, qgemv_cases, qgemv_kernels};
pub(super) use quantize::{quantize_benches, quantize_cases, quantize_kernels};

use super::format::{AFFINE_BITS, AFFINE_GROUP_SIZES};
use super::reference;
use crate::testing::{err, random_tensor, upload, CaseRng};
use tessera_runtime::{Context, DType, Tensor};

/// Every (bits, group_size) MLX defines.
fn formats() -> impl Iterator<Item = (u32, u32)> {
    AFFINE_BITS
        .into_iter()
        .flat_map(|b| AFFINE_GROUP_SIZES.into_iter().map(move |g| (b, g)))
}

/// `w` `[n, k]` of `dtype` quantized on the host and uploaded, as an MLX checkpoint holds
/// it: (packed, scales, biases) on the device and their values.
struct Quantized {
    packed: Tensor,
    scales: Tensor,
    biases: Tensor,
    host: reference::Quantized,
}

fn quantized(
    ctx: &Context,
    rng: &mut CaseRng,
    dtype: DType,
    (n, k): (usize, usize),
    (bits, group): (u32, u32),
) -> Result<Quantized, String> {
    let (_, wv) = random_tensor(ctx, rng, dtype, &[n, k], -1.0, 1.0)?;
    let host = reference::quantize(&wv, bits, group as usize, dtype);
    let words = k * bits as usize / 32;
    let groups = k / group as usize;
    let (packed, _) = upload(ctx, DType::U32, &host.packed, &[n, words])?;
    let (scales, _) = upload(ctx, dtype, &host.scales, &[n, groups])?;
    let (biases, _) = upload(ctx, dtype, &host.biases, &[n, groups])?;
    Ok(Quantized {
        packed,
        scales,
        biases,
        host,
    })
}

/// Random words (every code appears), scales of either sign and biases: a quantized
/// matrix no quantizer wrote, which the readers must take all the same.
fn random_quantized(
    ctx: &Context,
    rng: &mut CaseRng,
    dtype: DType,
    (n, k): (usize, usize),
    (bits, group): (u32, u32),
) -> Result<Quantized, String> {
    let words = k * bits as usize / 32;
    let groups = k / group as usize;
    let packed_v: Vec<f64> = (0..n * words)
        .map(|_| rng.uniform(0.0, 4294967296.0).floor().min(4294967295.0))
        .collect();
    let (packed, _) = upload(ctx, DType::U32, &packed_v, &[n, words])?;
    let limit = 1.0 / f64::from((1u32 << bits) - 1);
    let (scales, sv) = random_tensor(ctx, rng, dtype, &[n, groups], -limit, limit)?;
    let (biases, bv) = random_tensor(ctx, rng, dtype, &[n, groups], -0.5, 0.5)?;
    Ok(Quantized {
        packed,
        scales,
        biases,
        host: reference::Quantized {
            packed: packed_v,
            scales: sv,
            biases: bv,
        },
    })
}

/// A NaN-poisoned tensor (u32 outputs: zeros, u32 having no NaN).
fn poisoned(ctx: &Context, dtype: DType, shape: &[usize]) -> Result<Tensor, String> {
    if dtype == DType::U32 {
        let v = vec![0xDEAD_BEEFu32; shape.iter().product()];
        ctx.tensor(&v, shape).map_err(err)
    } else {
        ctx.full_nan(dtype, shape).map_err(err)
    }
}
