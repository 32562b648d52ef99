//! Registered cases of the MoE family, one file per op, around what they share here:
//! routings like a router's (distinct experts per token) or with repeats, the plan built
//! from them, and exact comparisons of integer outputs.

mod combine;
mod gemm;
mod gemv;
mod permute;
mod qgemm;
mod qgemv;
mod route;

pub(super) use combine::{combine_benches, combine_cases, combine_kernels};
pub(super) use gemm::{
    gemm_benches, gemm_cases, gemm_kernels, gemm_silu_mul_benches, gemm_silu_mul_cases,
};
pub(super) use gemv::{
    gemv_benches, gemv_cases, gemv_kernels, gemv_silu_mul_benches, gemv_silu_mul_cases,
};
pub(super) use permute::{permute_benches, permute_cases, permute_kernels};
pub(super) use qgemm::{
    qgemm_benches, qgemm_cases, qgemm_kernels, qgemm_silu_mul_benches, qgemm_silu_mul_cases,
};
pub(super) use qgemv::{
    qgemv_benches, qgemv_cases, qgemv_kernels, qgemv_silu_mul_benches, qgemv_silu_mul_cases,
};
pub(super) use route::{route_benches, route_cases, route_kernels};

use super::reference;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{err, random_tensor, rejection, upload, zeros, CaseRng, Refused};
use crate::validate::FLOAT_DTYPES;
use tessera_runtime::{Context, DType, Tensor};

/// Qwen3-30B-A3B's MoE: 128 experts, top-8, hidden 2048, expert width 768.
pub(super) const QWEN3_MOE: (usize, usize, usize, usize) = (128, 8, 2048, 768);
/// The decode batches benched: 1, 16 and 64 tokens.
pub(super) const BENCH_TOKENS: [usize; 3] = [1, 16, 64];

/// `tokens × top_k` expert ids: distinct within a token (as a router gives) when
/// `distinct`, else drawn with repeats.
pub(super) fn routing(
    rng: &mut CaseRng,
    tokens: usize,
    top_k: usize,
    experts: usize,
    distinct: bool,
) -> Vec<f64> {
    let mut ids = Vec::with_capacity(tokens * top_k);
    for _ in 0..tokens {
        let mut row: Vec<f64> = Vec::with_capacity(top_k);
        while row.len() < top_k {
            let e = rng.int(0, experts as u32) as f64;
            if !distinct || !row.contains(&e) {
                row.push(e);
            }
        }
        ids.extend(row);
    }
    ids
}

/// The ids as an i32 tensor `[tokens, top_k]`.
pub(super) fn ids_tensor(
    ctx: &Context,
    ids: &[f64],
    tokens: usize,
    top_k: usize,
) -> Result<Tensor, String> {
    Ok(upload(ctx, DType::I32, ids, &[tokens, top_k])?.0)
}

/// `got` equals `want` element for element (integers).
pub(super) fn exact(what: &str, got: &Tensor, want: &[f64]) -> Result<Outcome, String> {
    let got = got.to_f64_vec().map_err(err)?;
    if got.len() != want.len() {
        return Err(format!(
            "`{what}` has {} elements, expected {}",
            got.len(),
            want.len()
        ));
    }
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        return Err(format!(
            "`{what}`[{i}] is {}, expected {} (all: {got:?})",
            got[i], want[i]
        ));
    }
    Ok(Outcome {
        checked: got.len(),
        ..Outcome::default()
    })
}
