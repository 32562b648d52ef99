//! Bad model folders and requests are refused with errors that say what is wrong: a
//! malformed or unsupported config, a missing, mis-shaped or mistyped tensor, a file that
//! is not safetensors, and requests the engine cannot take. Each case starts from the
//! good tiny fixture and breaks one thing.

use safetensors::tensor::{serialize, Dtype, SafeTensors, TensorView};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tessera_models::{Engine, EngineLimits, ModelError, Qwen3, Qwen3Config, Sampling};
use tessera_runtime::{Context, DType};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-qwen3")
}

fn fixture_config() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture().join("config.json")).unwrap()).unwrap()
}

/// A fresh folder for one case, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

fn scratch_dir(case: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("tessera-models-{}-{case}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A tensor's dtype, shape and bytes.
type Raw = (Dtype, Vec<usize>, Vec<u8>);

/// A folder with `config` and the fixture's weights, each tensor passed through `edit`
/// (name, dtype, shape, bytes) → kept (possibly changed) or dropped.
fn folder_with(
    case: &str,
    config: &Value,
    edit: impl Fn(&str, Dtype, Vec<usize>, Vec<u8>) -> Option<Raw>,
) -> Scratch {
    let dir = scratch_dir(case);
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let bytes = std::fs::read(fixture().join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let kept: Vec<(String, Raw)> = st
        .tensors()
        .into_iter()
        .filter_map(|(name, t)| {
            edit(&name, t.dtype(), t.shape().to_vec(), t.data().to_vec()).map(|e| (name, e))
        })
        .collect();
    let views: Vec<(String, TensorView)> = kept
        .iter()
        .map(|(n, (d, s, b))| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    std::fs::write(
        dir.join("model.safetensors"),
        serialize(views, None).unwrap(),
    )
    .unwrap();
    dir
}

fn load_error(dir: &Path) -> ModelError {
    match Qwen3::load(&Context::cpu(), dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e,
    }
}

/// Asserts `e` is the `kind` of error and its text holds every one of `needles`.
fn assert_says(e: &ModelError, kind: &str, needles: &[&str]) {
    let text = e.to_string();
    let is_kind = matches!(
        (kind, e),
        ("config", ModelError::Config(_))
            | ("weights", ModelError::Weights(_))
            | ("request", ModelError::Request(_))
            | ("io", ModelError::Io { .. })
    );
    assert!(is_kind, "expected a {kind} error, got: {text}");
    for n in needles {
        assert!(text.contains(n), "`{text}` does not say `{n}`");
    }
}

#[test]
fn malformed_configs_are_refused_naming_the_field() {
    let parse = |edit: &dyn Fn(&mut Value)| {
        let mut c = fixture_config();
        edit(&mut c);
        Qwen3Config::parse(&c.to_string()).expect_err("a bad config parsed")
    };
    let e = Qwen3Config::parse("{\"model_type\": \"qwen3\",").unwrap_err();
    assert_says(&e, "config", &["not valid JSON"]);
    let e = parse(&|c| {
        c.as_object_mut().unwrap().remove("hidden_size");
    });
    assert_says(&e, "config", &["missing field hidden_size"]);
    let e = parse(&|c| c["num_hidden_layers"] = Value::from("two"));
    assert_says(&e, "config", &["num_hidden_layers", "positive integer"]);
    let e = parse(&|c| c["num_key_value_heads"] = Value::from(3));
    assert_says(&e, "config", &["multiple of num_key_value_heads = 3"]);
    let e = parse(&|c| c["model_type"] = Value::from("qwen3_next"));
    assert_says(&e, "config", &["qwen3_next", "not supported"]);
    let e = parse(&|c| c["attention_bias"] = Value::from(true));
    assert_says(&e, "config", &["attention_bias"]);
    let e = parse(&|c| c["rope_parameters"]["rope_type"] = Value::from("yarn"));
    assert_says(&e, "config", &["scaled RoPE"]);
    let e = parse(&|c| {
        c.as_object_mut().unwrap().remove("rope_parameters");
    });
    assert_says(&e, "config", &["no rope_theta"]);
    // transformers 4.x keeps rope_theta at the top level.
    let mut c = fixture_config();
    c.as_object_mut().unwrap().remove("rope_parameters");
    c["rope_theta"] = Value::from(10000.0);
    assert_eq!(
        Qwen3Config::parse(&c.to_string()).unwrap().rope_theta,
        10000.0
    );
}

#[test]
fn a_head_dim_the_attention_ops_lack_is_refused_at_load() {
    let mut c = fixture_config();
    c["head_dim"] = Value::from(32);
    let dir = folder_with("head-dim", &c, |_, d, s, b| Some((d, s, b)));
    assert_says(
        &load_error(&dir),
        "config",
        &["head_dim = 32 is not supported"],
    );
}

#[test]
fn missing_misshapen_and_mistyped_tensors_are_refused_naming_them() {
    let c = fixture_config();
    let k_norm = "model.layers.1.self_attn.k_norm.weight";
    let dir = folder_with("missing", &c, |n, d, s, b| {
        (n != k_norm).then_some((d, s, b))
    });
    assert_says(&load_error(&dir), "weights", &["missing tensor", k_norm]);

    let q = "model.layers.0.self_attn.q_proj.weight";
    let dir = folder_with("shape", &c, |n, d, s, b| {
        if n == q {
            // One output row short.
            Some((d, vec![255, 64], b[..b.len() / 256 * 255].to_vec()))
        } else {
            Some((d, s, b))
        }
    });
    assert_says(&load_error(&dir), "weights", &[q, "[255, 64]", "[256, 64]"]);

    let down = "model.layers.1.mlp.down_proj.weight";
    let dir = folder_with("dtype", &c, |n, d, s, b| {
        Some(if n == down {
            (Dtype::I16, s, b)
        } else {
            (d, s, b)
        })
    });
    assert_says(
        &load_error(&dir),
        "weights",
        &[down, "I16", "BF16, F16 or F32"],
    );

    // An f16 tensor in a bf16 checkpoint.
    let dir = folder_with("mixed", &c, |n, d, s, b| {
        Some(if n == down {
            (Dtype::F16, s, b)
        } else {
            (d, s, b)
        })
    });
    assert_says(&load_error(&dir), "weights", &[down, "mixed dtypes"]);

    // Untied embeddings need lm_head.weight, which the tied fixture does not hold.
    let mut untied = fixture_config();
    untied["tie_word_embeddings"] = Value::from(false);
    let dir = folder_with("untied", &untied, |_, d, s, b| Some((d, s, b)));
    assert_says(
        &load_error(&dir),
        "weights",
        &["missing tensor `lm_head.weight`"],
    );
}

#[test]
fn unreadable_folders_are_refused() {
    let dir = scratch_dir("not-safetensors");
    std::fs::write(dir.join("config.json"), fixture_config().to_string()).unwrap();
    std::fs::write(dir.join("model.safetensors"), b"not a safetensors file").unwrap();
    assert_says(
        &load_error(&dir),
        "weights",
        &["not a valid safetensors file"],
    );
    let empty = scratch_dir("empty");
    assert_says(&load_error(&empty), "io", &["config.json"]);
}

#[test]
fn requests_the_engine_cannot_take_are_refused_before_any_work() {
    let ctx = Context::cpu();
    let model = Qwen3::load_as(&ctx, &fixture(), Some(DType::F32)).unwrap();
    // f32 projections run on the GEMV (16 rows): no larger batch.
    let too_wide = EngineLimits::for_prompts(&model, 17, 64);
    let e = Engine::new(&ctx, &model, too_wide)
        .err()
        .expect("17 rows of f32");
    assert_says(&e, "request", &["at most 16 rows"]);
    let mut engine = Engine::new(&ctx, &model, EngineLimits::for_prompts(&model, 2, 32)).unwrap();
    let greedy = Sampling::greedy();
    let e = engine.generate(&[vec![1, 256]], 4, &greedy).unwrap_err();
    assert_says(&e, "request", &["token 256", "outside the vocabulary"]);
    let e = engine
        .generate(&[vec![1], vec![2], vec![3]], 4, &greedy)
        .unwrap_err();
    assert_says(&e, "request", &["3 prompts", "1..=2"]);
    let e = engine.generate(&[vec![]], 4, &greedy).unwrap_err();
    assert_says(&e, "request", &["prompt 0 is empty"]);
    let e = engine.generate(&[vec![1; 30]], 4, &greedy).unwrap_err();
    assert_says(&e, "request", &["30 tokens", "context of 32"]);
    let bad = Sampling {
        top_p: 0.0,
        ..Sampling::greedy()
    };
    assert_says(
        &engine.generate(&[vec![1]], 4, &bad).unwrap_err(),
        "request",
        &["top_p"],
    );
    // The refusals left the engine usable.
    assert_eq!(
        engine.generate(&[vec![1, 2]], 2, &greedy).unwrap().tokens[0].len(),
        2
    );
}
