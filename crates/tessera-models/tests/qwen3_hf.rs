//! The Qwen3 decoder against Hugging Face transformers on a tiny random model (2 layers,
//! hidden 64, 4 q / 2 kv heads of 64, vocab 256, bf16 weights; `tests/fixtures/tiny-qwen3`,
//! made with its goldens by `scripts/models/make_tiny_qwen3.py`, which runs transformers
//! in f32 over those weights). Loaded as f32, three prompts of 5, 11 and 17 tokens
//! prefilled as one batch (in chunks of 16 packed tokens, so prompts span passes) give
//! transformers' logits at every position within [`TOLERANCE`], and decoded greedily as
//! one batch give its 32 tokens each. Run natively in bf16 (the GEMM, matrix-fragment
//! attention and bf16 activations) the logits stay within [`BF16_TOLERANCE`]. The
//! backend is `Context::new()`'s (the CPU without a GPU; `TESSERA_BACKEND` picks another).
//! On CUDA the decode steps after the first are replayed from a recorded device graph
//! (unless `TESSERA_NO_GRAPHS` is set), which the f32 test also checks.

use std::path::PathBuf;
use tessera_models::engine::NO_GRAPHS_ENV;
use tessera_models::verify::{check, Goldens};
use tessera_models::Qwen3;
use tessera_runtime::{BackendKind, Context, DType};

/// Largest allowed |logit − transformers'|. Both run f32 with f32 accumulation; they
/// differ in summation order and in exp/rsqrt rounding. The logits are O(1–10), so this
/// is about 1e-4 relative.
const TOLERANCE: f64 = 1e-3;

/// Largest allowed |logit − transformers' f32 logit| with bf16 activations and cache:
/// each rounds to 2⁻⁹ relative.
const BF16_TOLERANCE: f64 = 0.25;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-qwen3")
}

#[test]
fn tiny_qwen3_matches_transformers_logits_and_greedy_tokens() {
    let ctx = Context::new().expect("a backend");
    let model = Qwen3::load_as(&ctx, &fixture(), Some(DType::F32)).expect("the fixture loads");
    assert_eq!(model.layers.len(), 2);
    assert!(model.tied());
    let goldens = Goldens::load(&fixture().join("goldens.safetensors")).expect("goldens");
    assert_eq!(goldens.prompts.len(), 3);
    assert!(goldens.greedy.iter().all(|g| g.len() == 32));
    let cmp = check(&ctx, &model, &goldens).expect("the model runs");
    println!(
        "{}: max |logit error| {:.3e} at (prompt, position, token) {:?}",
        ctx.kind(),
        cmp.max_logit_error,
        cmp.worst_at
    );
    assert!(
        cmp.max_logit_error <= TOLERANCE,
        "max logit error {} at {:?} is above {TOLERANCE}",
        cmp.max_logit_error,
        cmp.worst_at
    );
    for (p, (got, want)) in cmp.greedy.iter().zip(&goldens.greedy).enumerate() {
        assert_eq!(
            got, want,
            "prompt {p}: greedy tokens differ from step {:?}",
            cmp.first_mismatch[p]
        );
    }
    assert!(cmp.passes(TOLERANCE));
    // 31 decode steps: the first at the batch's shape eager, the other 30 replayed where
    // the backend has graphs and they are not turned off.
    let graphs = ctx.kind() == BackendKind::Cuda
        && std::env::var(NO_GRAPHS_ENV).map_or(true, |v| v.is_empty() || v == "0");
    assert_eq!(cmp.graph_steps, if graphs { 30 } else { 0 });
}

#[test]
fn tiny_qwen3_in_bf16_stays_close_to_transformers() {
    let ctx = Context::new().expect("a backend");
    let model = Qwen3::load(&ctx, &fixture()).expect("the fixture loads");
    assert_eq!(model.dtype, DType::BF16);
    let goldens = Goldens::load(&fixture().join("goldens.safetensors")).expect("goldens");
    let cmp = check(&ctx, &model, &goldens).expect("the model runs");
    let agree: usize = cmp.first_mismatch.iter().map(|m| m.unwrap_or(32)).sum();
    println!(
        "{} bf16: max |logit error| {:.3e}, {agree}/96 greedy tokens before the first difference",
        ctx.kind(),
        cmp.max_logit_error
    );
    assert!(
        cmp.max_logit_error <= BF16_TOLERANCE,
        "{}",
        cmp.max_logit_error
    );
}
