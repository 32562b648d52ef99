//! Building a [`Qwen3`] from a Hugging Face folder: the config checked, then every
//! weight looked up by its transformers name with the shape the config implies.

use super::{Layer, Qwen3};
use crate::config::Qwen3Config;
use crate::error::ModelError;
use crate::weights::{Checkpoint, LoadAs};
use std::path::Path;
use tessera_runtime::{Context, DType};
use tessera_std::attention::plan::DECODE_HEAD_DIMS;
use tessera_std::attention::prefill::PREFILL_HEAD_DIMS;
use tessera_std::rope::{RopeConfig, RopeLayout, RopeScaling, RopeTable};

impl Qwen3 {
    /// Loads `dir/config.json` and its safetensors weights onto `ctx`, in their own dtype.
    pub fn load(ctx: &Context, dir: &Path) -> Result<Qwen3, ModelError> {
        Qwen3::load_as(ctx, dir, None)
    }

    /// [`Qwen3::load`] with the weights (and so the activations and cache) converted to
    /// `dtype` (bf16, f16 or f32) when given.
    pub fn load_as(ctx: &Context, dir: &Path, dtype: Option<DType>) -> Result<Qwen3, ModelError> {
        let config = Qwen3Config::load(dir)?;
        let ckpt = Checkpoint::open(dir)?;
        Qwen3::from_checkpoint(ctx, config, &ckpt, dtype)
    }

    /// Builds the model from a checked config and an open checkpoint, its weights held
    /// as `dtype` (default: the checkpoint's).
    pub fn from_checkpoint(
        ctx: &Context,
        config: Qwen3Config,
        ckpt: &Checkpoint,
        dtype: Option<DType>,
    ) -> Result<Qwen3, ModelError> {
        let d = config.head_dim;
        let supported = |dims: &[u32]| dims.iter().any(|&x| x as usize == d);
        if !supported(&PREFILL_HEAD_DIMS) || !supported(&DECODE_HEAD_DIMS) {
            return Err(ModelError::config(format!(
                "head_dim = {d} is not supported by the attention ops (prefill takes {PREFILL_HEAD_DIMS:?}, decode {DECODE_HEAD_DIMS:?})"
            )));
        }
        let embed_name = "model.embed_tokens.weight";
        let stored = ckpt.dtype(embed_name)?;
        let device = dtype.unwrap_or(stored);
        if !matches!(device, DType::F32 | DType::F16 | DType::BF16) {
            return Err(ModelError::weights(format!(
                "weights cannot be held as {device}; bf16, f16 or f32"
            )));
        }
        let load = LoadAs { stored, device };
        let (h, v) = (config.hidden_size, config.vocab_size);
        let w = |name: &str, shape: &[usize]| ckpt.tensor(ctx, name, load, shape);
        let embed_tokens = w(embed_name, &[v, h])?;
        let lm_head = if config.tie_word_embeddings {
            None
        } else {
            Some(w("lm_head.weight", &[v, h])?)
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| load_layer(ctx, &config, ckpt, load, i))
            .collect::<Result<Vec<_>, _>>()?;
        let rope = RopeTable::new(
            ctx,
            RopeConfig {
                layout: RopeLayout::NeoX,
                theta: config.rope_theta,
                rot_dim: d,
                scaling: RopeScaling::None,
            },
        )?;
        Ok(Qwen3 {
            norm: w("model.norm.weight", &[h])?,
            embed_tokens,
            lm_head,
            layers,
            rope,
            dtype: device,
            config,
        })
    }
}

fn load_layer(
    ctx: &Context,
    c: &Qwen3Config,
    ckpt: &Checkpoint,
    load: LoadAs,
    i: usize,
) -> Result<Layer, ModelError> {
    let p = format!("model.layers.{i}");
    let (h, d, inter) = (c.hidden_size, c.head_dim, c.intermediate_size);
    let (q_out, kv_out) = (c.num_attention_heads * d, c.num_key_value_heads * d);
    let w = |name: &str, shape: &[usize]| ckpt.tensor(ctx, &format!("{p}.{name}"), load, shape);
    let (gate, up) = (
        format!("{p}.mlp.gate_proj.weight"),
        format!("{p}.mlp.up_proj.weight"),
    );
    Ok(Layer {
        input_norm: w("input_layernorm.weight", &[h])?,
        post_attention_norm: w("post_attention_layernorm.weight", &[h])?,
        q_proj: w("self_attn.q_proj.weight", &[q_out, h])?,
        k_proj: w("self_attn.k_proj.weight", &[kv_out, h])?,
        v_proj: w("self_attn.v_proj.weight", &[kv_out, h])?,
        o_proj: w("self_attn.o_proj.weight", &[h, q_out])?,
        q_norm: w("self_attn.q_norm.weight", &[d])?,
        k_norm: w("self_attn.k_norm.weight", &[d])?,
        gate_up: ckpt.stacked(ctx, &[(&gate, inter), (&up, inter)], load, h)?,
        down_proj: w("mlp.down_proj.weight", &[h, inter])?,
    })
}
