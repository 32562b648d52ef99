//! The Qwen3 dense decoder: its weights on the device ([`Qwen3::load`]) and its forward
//! pass over a packed batch of tokens ([`forward`]).

pub mod forward;
mod load;
mod random;

pub use forward::{Activations, Pass, Workspaces};

use crate::config::Qwen3Config;
use tessera_runtime::{DType, Tensor};
use tessera_std::rope::RopeTable;

/// One decoder layer's weights, in Hugging Face's `[out, in]` layout.
pub struct Layer {
    pub input_norm: Tensor,
    pub post_attention_norm: Tensor,
    pub q_proj: Tensor,
    pub k_proj: Tensor,
    pub v_proj: Tensor,
    pub o_proj: Tensor,
    /// Per-head RMSNorm weights `[head_dim]` of q and k.
    pub q_norm: Tensor,
    pub k_norm: Tensor,
    /// `gate_proj` and `up_proj` stacked `[2·intermediate, hidden]` (gate first), so one
    /// fused GEMV (or GEMM + packed SiLU·mul) makes the MLP's activation.
    pub gate_up: Tensor,
    pub down_proj: Tensor,
}

/// A Qwen3 dense decoder on one context.
pub struct Qwen3 {
    pub config: Qwen3Config,
    /// The weights' dtype, which is also the activations' and the KV cache's.
    pub dtype: DType,
    pub embed_tokens: Tensor,
    /// `None` when the embeddings are tied (the head is `embed_tokens`).
    lm_head: Option<Tensor>,
    pub layers: Vec<Layer>,
    pub norm: Tensor,
    pub rope: RopeTable,
}

impl Qwen3 {
    /// The output projection `[vocab, hidden]`.
    pub fn lm_head(&self) -> &Tensor {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }

    /// True when the output projection is the embedding table.
    pub fn tied(&self) -> bool {
        self.lm_head.is_none()
    }
}
