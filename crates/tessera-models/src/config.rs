//! A Qwen3 dense decoder's `config.json`, read the way Hugging Face writes it (transformers
//! 4.x with a top-level `rope_theta`, 5.x with `rope_parameters`), checked field by field:
//! a missing, mistyped or out-of-range field, or a feature this runner does not implement
//! (attention biases, sliding windows, scaled RoPE, another activation or architecture),
//! is an error naming it.

use crate::error::ModelError;
use serde_json::{Map, Value};
use std::path::Path;

/// The fields of a Qwen3 config the decoder uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Qwen3Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub tie_word_embeddings: bool,
    pub max_position_embeddings: usize,
}

/// The model types this runner implements; others are named in the refusal.
const QWEN3: &str = "qwen3";

impl Qwen3Config {
    /// Reads and checks `dir/config.json`.
    pub fn load(dir: &Path) -> Result<Qwen3Config, ModelError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|source| ModelError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Qwen3Config::parse(&text)
    }

    /// Parses and checks the text of a `config.json`.
    pub fn parse(text: &str) -> Result<Qwen3Config, ModelError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| ModelError::config(format!("not valid JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(ModelError::config("the top level must be a JSON object"));
        };
        Fields(&map).qwen3()
    }
}

/// The config's top-level object, with typed getters that name the field on failure.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn qwen3(&self) -> Result<Qwen3Config, ModelError> {
        let model_type = self.string("model_type")?;
        if model_type != QWEN3 {
            return Err(ModelError::config(format!(
                "model_type \"{model_type}\" is not supported; this runner implements \"{QWEN3}\" (the dense decoder)"
            )));
        }
        self.refuse_unsupported()?;
        let hidden_size = self.positive("hidden_size")?;
        let num_attention_heads = self.positive("num_attention_heads")?;
        let num_key_value_heads = self
            .optional_positive("num_key_value_heads")?
            .unwrap_or(num_attention_heads);
        if !num_attention_heads.is_multiple_of(num_key_value_heads) {
            return Err(ModelError::config(format!(
                "num_attention_heads = {num_attention_heads} must be a multiple of num_key_value_heads = {num_key_value_heads}"
            )));
        }
        let head_dim = match self.optional_positive("head_dim")? {
            Some(d) => d,
            None if hidden_size.is_multiple_of(num_attention_heads) => {
                hidden_size / num_attention_heads
            }
            None => {
                return Err(ModelError::config(format!(
                    "no head_dim, and hidden_size = {hidden_size} is not a multiple of num_attention_heads = {num_attention_heads}"
                )))
            }
        };
        let rms_norm_eps = self.number("rms_norm_eps")?;
        if !(rms_norm_eps > 0.0 && rms_norm_eps < 1.0) {
            return Err(ModelError::config(format!(
                "rms_norm_eps = {rms_norm_eps} must be in (0, 1)"
            )));
        }
        let rope_theta = self.rope_theta()?;
        Ok(Qwen3Config {
            vocab_size: self.positive("vocab_size")?,
            hidden_size,
            intermediate_size: self.positive("intermediate_size")?,
            num_hidden_layers: self.positive("num_hidden_layers")?,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            rms_norm_eps,
            rope_theta,
            // Qwen3's own default (transformers' Qwen3Config) is untied.
            tie_word_embeddings: self.optional_bool("tie_word_embeddings")?.unwrap_or(false),
            max_position_embeddings: self
                .optional_positive("max_position_embeddings")?
                .unwrap_or(usize::MAX),
        })
    }

    /// Refuses what a Qwen3 config may ask for that the decoder does not implement.
    fn refuse_unsupported(&self) -> Result<(), ModelError> {
        if let Some(act) = self.0.get("hidden_act") {
            if act.as_str() != Some("silu") {
                return Err(ModelError::config(format!(
                    "hidden_act = {act} is not supported; the MLP is SwiGLU (\"silu\")"
                )));
            }
        }
        if self.optional_bool("attention_bias")? == Some(true) {
            return Err(ModelError::config(
                "attention_bias = true is not supported (the q/k/v/o projections have no bias here)",
            ));
        }
        if self.optional_bool("use_sliding_window")? == Some(true) {
            return Err(ModelError::config(
                "use_sliding_window = true is not supported (every layer attends its whole context)",
            ));
        }
        // transformers 4.x: `rope_scaling`; 5.x: `rope_parameters.rope_type`.
        let scaling = self
            .0
            .get("rope_scaling")
            .filter(|v| !v.is_null())
            .or_else(|| {
                self.0
                    .get("rope_parameters")
                    .and_then(|p| p.get("rope_type"))
                    .filter(|t| t.as_str() != Some("default"))
            });
        if let Some(s) = scaling {
            return Err(ModelError::config(format!(
                "scaled RoPE ({s}) is not supported; only the default (unscaled) rotation"
            )));
        }
        Ok(())
    }

    /// `rope_theta` at the top level (transformers 4.x) or in `rope_parameters` (5.x).
    fn rope_theta(&self) -> Result<f64, ModelError> {
        let theta = match (self.0.get("rope_theta"), self.0.get("rope_parameters")) {
            (Some(v), _) => v.as_f64().ok_or_else(|| {
                ModelError::config(format!("rope_theta must be a number, got {v}"))
            })?,
            (None, Some(p)) => p.get("rope_theta").and_then(Value::as_f64).ok_or_else(|| {
                ModelError::config(format!(
                    "rope_parameters must hold a numeric rope_theta, got {p}"
                ))
            })?,
            (None, None) => {
                return Err(ModelError::config(
                    "no rope_theta (neither at the top level nor in rope_parameters)",
                ))
            }
        };
        if !(theta.is_finite() && theta > 1.0) {
            return Err(ModelError::config(format!(
                "rope_theta = {theta} must be finite and above 1"
            )));
        }
        Ok(theta)
    }

    fn string(&self, key: &str) -> Result<String, ModelError> {
        match self.0.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(ModelError::config(format!(
                "{key} must be a string, got {v}"
            ))),
            None => Err(ModelError::config(format!("missing field {key}"))),
        }
    }

    fn number(&self, key: &str) -> Result<f64, ModelError> {
        match self.0.get(key) {
            Some(v) => v
                .as_f64()
                .ok_or_else(|| ModelError::config(format!("{key} must be a number, got {v}"))),
            None => Err(ModelError::config(format!("missing field {key}"))),
        }
    }

    fn positive(&self, key: &str) -> Result<usize, ModelError> {
        self.optional_positive(key)?
            .ok_or_else(|| ModelError::config(format!("missing field {key}")))
    }

    /// A positive integer, or `None` when the field is absent or null.
    fn optional_positive(&self, key: &str) -> Result<Option<usize>, ModelError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 && n <= u32::MAX as u64 => Ok(Some(n as usize)),
                _ => Err(ModelError::config(format!(
                    "{key} must be a positive integer below 2^32, got {v}"
                ))),
            },
        }
    }

    fn optional_bool(&self, key: &str) -> Result<Option<bool>, ModelError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(ModelError::config(format!(
                "{key} must be true or false, got {v}"
            ))),
        }
    }
}
