//! A Qwen3 with random weights at any config's widths, made in memory: for measuring
//! speed at a real model's sizes without its checkpoint. The matrices are uniform with
//! standard deviation 0.02 (transformers' default initialisation), the norms one.

use super::Qwen3;
use crate::config::Qwen3Config;
use crate::error::ModelError;
use crate::weights::Checkpoint;
use half::{bf16, f16};
use tessera_runtime::{Context, DType};

/// Every weight a Qwen3 checkpoint holds, with its shape.
fn weight_shapes(c: &Qwen3Config) -> Vec<(String, Vec<usize>)> {
    let (h, d, inter, v) = (c.hidden_size, c.head_dim, c.intermediate_size, c.vocab_size);
    let (q, kv) = (c.num_attention_heads * d, c.num_key_value_heads * d);
    let mut w = vec![
        ("model.embed_tokens.weight".to_string(), vec![v, h]),
        ("model.norm.weight".to_string(), vec![h]),
    ];
    if !c.tie_word_embeddings {
        w.push(("lm_head.weight".to_string(), vec![v, h]));
    }
    for i in 0..c.num_hidden_layers {
        let p = format!("model.layers.{i}");
        for (name, shape) in [
            ("input_layernorm.weight", vec![h]),
            ("post_attention_layernorm.weight", vec![h]),
            ("self_attn.q_proj.weight", vec![q, h]),
            ("self_attn.k_proj.weight", vec![kv, h]),
            ("self_attn.v_proj.weight", vec![kv, h]),
            ("self_attn.o_proj.weight", vec![h, q]),
            ("self_attn.q_norm.weight", vec![d]),
            ("self_attn.k_norm.weight", vec![d]),
            ("mlp.gate_proj.weight", vec![inter, h]),
            ("mlp.up_proj.weight", vec![inter, h]),
            ("mlp.down_proj.weight", vec![h, inter]),
        ] {
            w.push((format!("{p}.{name}"), shape));
        }
    }
    w
}

/// SplitMix64: a fast, well-mixed stream of 64-bit words from a seed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-a, a)`.
    fn uniform(&mut self, a: f32) -> f32 {
        let unit = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        (2.0 * unit - 1.0) * a
    }
}

/// `n` values from `value`, as little-endian bytes of `dtype`.
fn encode(n: usize, dtype: DType, mut value: impl FnMut() -> f32) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size_bytes());
    for _ in 0..n {
        let x = value();
        match dtype {
            DType::BF16 => out.extend_from_slice(&bf16::from_f32(x).to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f32(x).to_le_bytes()),
            _ => out.extend_from_slice(&x.to_le_bytes()),
        }
    }
    out
}

impl Qwen3 {
    /// A model of `config`'s widths with random `dtype` weights drawn from `seed`.
    pub fn random(
        ctx: &Context,
        config: Qwen3Config,
        dtype: DType,
        seed: u64,
    ) -> Result<Qwen3, ModelError> {
        // Uniform on [-a, a) has standard deviation a/√3.
        let a = 0.02 * 3f32.sqrt();
        let mut rng = SplitMix(seed);
        let tensors = weight_shapes(&config)
            .into_iter()
            .map(|(name, shape)| {
                let n = shape.iter().product();
                let bytes = if shape.len() == 1 {
                    encode(n, dtype, || 1.0)
                } else {
                    encode(n, dtype, || rng.uniform(a))
                };
                (name, dtype, shape, bytes)
            })
            .collect();
        let ckpt = Checkpoint::in_memory("<random weights>", tensors)?;
        Qwen3::from_checkpoint(ctx, config, &ckpt, None)
    }
}
