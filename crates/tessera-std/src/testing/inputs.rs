//! Seeded random inputs: values drawn in f64, rounded to the tensor's dtype, uploaded; the
//! rounded values are what the reference sees.

use super::fixtures::err;
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera_ir::literal::{bf16_from_f64, f16_from_f64};
use tessera_runtime::{Context, DType, Tensor};

/// A case's random source, with the seed that reproduces it.
pub struct CaseRng {
    pub seed: u64,
    rng: StdRng,
}

impl CaseRng {
    pub fn new(seed: u64) -> CaseRng {
        CaseRng {
            seed,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.rng.random_range(lo..hi)
    }

    /// Uniform integer in `[lo, hi)`.
    pub fn int(&mut self, lo: u32, hi: u32) -> u32 {
        self.rng.random_range(lo..hi)
    }
}

/// Uploads f64 values as a tensor of `dtype`, returning the values as stored (rounded).
pub fn upload(
    ctx: &Context,
    dtype: DType,
    values: &[f64],
    shape: &[usize],
) -> Result<(Tensor, Vec<f64>), String> {
    let err =
        |e: tessera_runtime::RuntimeError| format!("cannot create a {dtype} tensor {shape:?}: {e}");
    match dtype {
        DType::F32 => {
            let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
            let stored = v.iter().map(|&x| x as f64).collect();
            Ok((ctx.tensor(&v, shape).map_err(err)?, stored))
        }
        DType::F16 => {
            let v: Vec<f16> = values.iter().map(|&x| f16_from_f64(x)).collect();
            let stored = v.iter().map(|x| x.to_f64()).collect();
            Ok((ctx.tensor(&v, shape).map_err(err)?, stored))
        }
        DType::BF16 => {
            let v: Vec<bf16> = values.iter().map(|&x| bf16_from_f64(x)).collect();
            let stored = v.iter().map(|x| x.to_f64()).collect();
            Ok((ctx.tensor(&v, shape).map_err(err)?, stored))
        }
        DType::U32 => {
            let v: Vec<u32> = values.iter().map(|&x| x as u32).collect();
            let stored = v.iter().map(|&x| x as f64).collect();
            Ok((ctx.tensor(&v, shape).map_err(err)?, stored))
        }
        DType::I32 => {
            let v: Vec<i32> = values.iter().map(|&x| x as i32).collect();
            let stored = v.iter().map(|&x| x as f64).collect();
            Ok((ctx.tensor(&v, shape).map_err(err)?, stored))
        }
        DType::U8 => {
            let v: Vec<u8> = values.iter().map(|&x| x as u8).collect();
            let stored = v.iter().map(|&x| x as f64).collect();
            Ok((ctx.tensor(&v, shape).map_err(err)?, stored))
        }
        DType::I8 => {
            let v: Vec<i8> = values.iter().map(|&x| x as i8).collect();
            let stored = v.iter().map(|&x| x as f64).collect();
            Ok((ctx.tensor(&v, shape).map_err(err)?, stored))
        }
        other => Err(format!("random inputs of dtype {other} are not supported")),
    }
}

/// A tensor of `dtype` and `shape` with values uniform in `[lo, hi)`, and those values as stored.
pub fn random_tensor(
    ctx: &Context,
    rng: &mut CaseRng,
    dtype: DType,
    shape: &[usize],
    lo: f64,
    hi: f64,
) -> Result<(Tensor, Vec<f64>), String> {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n).map(|_| rng.uniform(lo, hi)).collect();
    upload(ctx, dtype, &values, shape)
}

/// Random q (of `q_shape`), k and v (of `kv_shape`) in `[-1, 1)` with their stored values,
/// and a NaN-poisoned output like q: the inputs of an attention call.
pub struct Qkv {
    pub q: Tensor,
    pub k: Tensor,
    pub v: Tensor,
    pub out: Tensor,
    pub qv: Vec<f64>,
    pub kv: Vec<f64>,
    pub vv: Vec<f64>,
}

/// Makes a [`Qkv`] of `dt`.
pub fn qkv(
    ctx: &Context,
    rng: &mut CaseRng,
    dt: DType,
    q_shape: &[usize],
    kv_shape: &[usize],
) -> Result<Qkv, String> {
    let (q, qv) = random_tensor(ctx, rng, dt, q_shape, -1.0, 1.0)?;
    let (k, kv) = random_tensor(ctx, rng, dt, kv_shape, -1.0, 1.0)?;
    let (v, vv) = random_tensor(ctx, rng, dt, kv_shape, -1.0, 1.0)?;
    let out = ctx.full_nan(dt, q_shape).map_err(err)?;
    Ok(Qkv {
        q,
        k,
        v,
        out,
        qv,
        kv,
        vv,
    })
}
