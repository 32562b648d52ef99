//! The Qwen3 decoder against Hugging Face transformers on a tiny random model (2 layers,
//! hidden 64, 4 q / 2 kv heads of 64, vocab 256, f32; `tests/fixtures/tiny-qwen3`, made
//! with its goldens by `scripts/models/make_tiny_qwen3.py`): three prompts of 5, 11 and 17
//! tokens prefilled as one batch (in chunks of 16 packed tokens, so prompts span passes)
//! give transformers' logits at every position within [`TOLERANCE`], and decoded greedily
//! as one batch give its 32 tokens each. The backend is `Context::new()`'s (the CPU
//! without a GPU; `TESSERA_BACKEND` picks another).

use std::path::PathBuf;
use tessera_models::verify::{check, Goldens};
use tessera_models::Qwen3;
use tessera_runtime::Context;

/// Largest allowed |logit − transformers'|. Both run f32 with f32 accumulation; they
/// differ in summation order and in exp/rsqrt rounding. The logits are O(1–10), so this
/// is about 1e-4 relative.
const TOLERANCE: f64 = 1e-3;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-qwen3")
}

#[test]
fn tiny_qwen3_matches_transformers_logits_and_greedy_tokens() {
    let ctx = Context::new().expect("a backend");
    let model = Qwen3::load(&ctx, &fixture()).expect("the fixture loads");
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
}
