//! The engine's own promises on the tiny fixture: decode steps allocate nothing, a
//! prefill cut into smaller chunks gives the same logits, sampling is reproducible from
//! its seed and top-k = 1 sampling is greedy, f16 weights (the GEMM and matrix-fragment
//! attention path) stay close to transformers' f32 logits, and random weights follow the
//! config and the seed.

use std::path::PathBuf;
use tessera_models::verify::Goldens;
use tessera_models::{Engine, EngineLimits, Qwen3, Sampling};
use tessera_runtime::{Context, DType};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-qwen3")
}

fn goldens() -> Goldens {
    Goldens::load(&fixture().join("goldens.safetensors")).unwrap()
}

#[test]
fn decode_steps_allocate_nothing() {
    let ctx = Context::cpu();
    let model = Qwen3::load(&ctx, &fixture()).unwrap();
    let mut engine = Engine::new(&ctx, &model, EngineLimits::for_prompts(&model, 2, 32)).unwrap();
    let prompts = [vec![3, 1, 4], vec![1, 5, 9, 2, 6]];
    let count = |engine: &mut Engine, new: usize| {
        let before = ctx.allocations();
        engine.generate(&prompts, new, &Sampling::greedy()).unwrap();
        ctx.allocations() - before
    };
    // Whatever a request sets up, eight more decode steps add nothing to it.
    assert_eq!(count(&mut engine, 2), count(&mut engine, 10));
}

#[test]
fn smaller_prefill_chunks_give_the_same_logits() {
    let ctx = Context::cpu();
    let model = Qwen3::load_as(&ctx, &fixture(), Some(DType::F32)).unwrap();
    let g = goldens();
    let whole = EngineLimits::for_prompts(&model, 3, 32);
    let chunked = EngineLimits {
        chunk_tokens: 3,
        page_size: 4,
        ..whole
    };
    let a = Engine::new(&ctx, &model, whole)
        .unwrap()
        .prefill_logits(&g.prompts)
        .unwrap();
    let b = Engine::new(&ctx, &model, chunked)
        .unwrap()
        .prefill_logits(&g.prompts)
        .unwrap();
    for (x, y) in a.iter().zip(&b) {
        let worst = x
            .iter()
            .zip(y)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0f32, f32::max);
        assert!(worst <= 1e-4, "chunks of 3 changed a logit by {worst}");
    }
}

#[test]
fn sampling_is_reproducible_and_top_k_one_is_greedy() {
    let ctx = Context::cpu();
    let model = Qwen3::load_as(&ctx, &fixture(), Some(DType::F32)).unwrap();
    let g = goldens();
    let mut engine = Engine::new(&ctx, &model, EngineLimits::for_prompts(&model, 3, 32)).unwrap();
    let warm = Sampling {
        temperature: 1.0,
        seed: 7,
        ..Sampling::greedy()
    };
    let first = engine.generate(&g.prompts, 8, &warm).unwrap().tokens;
    let again = engine.generate(&g.prompts, 8, &warm).unwrap().tokens;
    assert_eq!(first, again);
    let one = Sampling { top_k: 1, ..warm };
    let tokens = engine.generate(&g.prompts, 8, &one).unwrap().tokens;
    for (t, want) in tokens.iter().zip(&g.greedy) {
        assert_eq!(t[..], want[..8]);
    }
}

#[test]
fn f16_weights_stay_close_to_the_f32_reference() {
    let ctx = Context::cpu();
    let model = Qwen3::load_as(&ctx, &fixture(), Some(DType::F16)).unwrap();
    let g = goldens();
    let mut engine = Engine::new(&ctx, &model, EngineLimits::for_prompts(&model, 3, 48)).unwrap();
    // 33 prompt tokens in one pass: the projections run on the tiled GEMM.
    assert!(engine.limits().chunk_tokens >= 33);
    let logits = engine.prefill_logits(&g.prompts).unwrap();
    let worst = logits
        .iter()
        .zip(&g.logits)
        .flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs()))
        .fold(
            0.0f32,
            |m, e| if e.is_nan() { f32::INFINITY } else { m.max(e) },
        );
    println!("f16: max |logit error| {worst:.3e}");
    assert!(worst <= 0.08, "{worst}");
}

#[test]
fn random_weights_follow_the_config_and_the_seed() {
    let ctx = Context::cpu();
    let mut config = tessera_models::Qwen3Config::load(&fixture()).unwrap();
    config.num_hidden_layers = 1;
    config.tie_word_embeddings = false;
    let prompts = [vec![7, 8, 9]];
    let run = |seed: u64| {
        let model = Qwen3::random(&ctx, config.clone(), DType::BF16, seed).unwrap();
        assert_eq!(model.layers.len(), 1);
        assert!(!model.tied());
        assert_eq!(model.lm_head().shape(), &[256, 64]);
        let mut engine =
            Engine::new(&ctx, &model, EngineLimits::for_prompts(&model, 1, 8)).unwrap();
        engine.prefill_logits(&prompts).unwrap().remove(0)
    };
    let (a, b, c) = (run(1), run(1), run(2));
    assert!(a.iter().all(|x| x.is_finite()));
    assert_eq!(a, b);
    assert_ne!(a, c);
}
