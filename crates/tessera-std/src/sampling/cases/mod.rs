//! Registered cases of the sampling family, one file per op, around what they share here:
//! random logits and per-row parameters, and the kernel specialisations.

mod argmax;
mod penalties;
mod sample;
mod sample_split;

pub(super) use argmax::{argmax_benches, argmax_cases, argmax_kernels};
pub(super) use penalties::{penalties_benches, penalties_cases, penalties_kernels};
pub(super) use sample::{sample_benches, sample_cases, sample_kernels};

use super::reference;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{err, random_tensor, rejection, upload, zeros, CaseRng, Refused};
use crate::validate::FLOAT_DTYPES;
use tessera_ir::Specialization;
use tessera_runtime::{Context, DType, Tensor};

/// The vocabularies the cases run: tiny, odd, a round 1000, and Qwen's 151,936.
const VOCABS: [usize; 4] = [1, 257, 1000, 151_936];

/// The bench rows of `argmax` and `sample`, (batch, vocab, quick): a quick small row, then
/// Qwen's 151,936-token vocabulary at batch 1, 32 and 256.
const BENCH_ROWS: [(usize, usize, bool); 4] = [
    (4, 1000, true),
    (1, 151_936, false),
    (32, 151_936, false),
    (256, 151_936, false),
];

/// Random logits `[batch, vocab]` of `dtype` in `[-4, 4)` (bf16 and f16 round many to
/// equal values, so ties are common), with their stored values.
fn logits(
    ctx: &Context,
    rng: &mut CaseRng,
    dtype: DType,
    batch: usize,
    vocab: usize,
) -> Result<(Tensor, Vec<f64>), String> {
    random_tensor(ctx, rng, dtype, &[batch, vocab], -4.0, 4.0)
}

/// One use of `def` for each float dtype.
fn per_float(def: &'static tessera_ir::KernelDef) -> Vec<KernelUse> {
    FLOAT_DTYPES
        .iter()
        .map(|&d| KernelUse {
            def,
            spec: Specialization::new(vec![d], vec![]),
        })
        .collect()
}
