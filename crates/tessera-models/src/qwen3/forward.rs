//! The Qwen3 forward pass over one packed batch of tokens (a prefill chunk of several
//! prompts, or a decode step of one token a sequence), every step an op of `tessera-std`:
//! embedding → per layer [RMSNorm → q/k/v projections → per-head q/k RMSNorm + NeoX RoPE →
//! K/V appended to the paged cache → causal GQA attention over the cache → o_proj →
//! residual add + RMSNorm → fused gate/up SiLU·mul → down_proj → residual add + RMSNorm]. The
//! last residual add is fused with the final norm, so the pass ends with the normalised
//! hidden state of every token, ready for the head.

use super::{Layer, Qwen3};
use crate::cache::PagedCache;
use crate::error::ModelError;
use crate::linear::{gate_up_silu, linear};
use tessera_runtime::{Context, Tensor};
use tessera_std::attention::{
    paged_kv_append_ragged, sdpa_decode_paged, sdpa_prefill_paged, DecodeOptions, PageTable,
    PagedKv, PagedPrefillWorkspace, PagedQueries, PagedWorkspace, PreparedPages, SlotCheck,
};
use tessera_std::elementwise::{embedding, EmbeddingCheck};
use tessera_std::norm::{rms_norm, rms_norm_residual};
use tessera_std::rope::qk_norm_rope;

/// The device inputs of one pass over `tokens` tokens of `seqs` sequences, packed
/// sequence by sequence.
pub struct Pass<'a> {
    pub tokens: usize,
    pub seqs: usize,
    /// The most tokens one sequence brings (FlashAttention's `max_seqlen_q`).
    pub max_q: usize,
    /// Every sequence brings exactly one token: the decode attention runs.
    pub decode: bool,
    /// i32 `[tokens]`.
    pub ids: &'a Tensor,
    /// u32 `[tokens]`: each token's position in its sequence.
    pub positions: &'a Tensor,
    /// i32 `[seqs + 1]`: sequence b's tokens are `cu_seqlens[b] .. cu_seqlens[b + 1]`.
    pub cu_seqlens: &'a Tensor,
    /// i32 `[seqs]`: each sequence's length before and after this pass.
    pub lens_before: &'a Tensor,
    pub lens_after: &'a Tensor,
    /// i32 `[seqs, max_pages]`: each sequence's pages in the cache.
    pub block_table: &'a Tensor,
}

/// The activations of a pass, allocated once for the most tokens a pass may carry; each
/// pass works on views of their leading rows.
pub struct Activations {
    max_tokens: usize,
    residual: Tensor,
    residual_next: Tensor,
    normed: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_rot: Tensor,
    k_rot: Tensor,
    attn: Tensor,
    /// o_proj's and down_proj's output.
    proj: Tensor,
    gate_up: Tensor,
    mlp: Tensor,
}

impl Activations {
    pub fn new(ctx: &Context, model: &Qwen3, max_tokens: usize) -> Result<Activations, ModelError> {
        let c = &model.config;
        let n = max_tokens.max(1);
        let z = |width: usize| ctx.scratch(model.dtype, &[n * width]);
        let (h, q, kv) = (
            c.hidden_size,
            c.num_attention_heads * c.head_dim,
            c.num_key_value_heads * c.head_dim,
        );
        Ok(Activations {
            max_tokens: n,
            residual: z(h)?,
            residual_next: z(h)?,
            normed: z(h)?,
            q: z(q)?,
            k: z(kv)?,
            v: z(kv)?,
            q_rot: z(q)?,
            k_rot: z(kv)?,
            attn: z(q)?,
            proj: z(h)?,
            gate_up: z(2 * c.intermediate_size)?,
            mlp: z(c.intermediate_size)?,
        })
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The normalised hidden state the last pass left, `[tokens, hidden]`.
    pub fn normed(&self, tokens: usize, hidden: usize) -> Result<Tensor, ModelError> {
        Ok(self.normed.view(&[tokens, hidden])?)
    }
}

/// The ops' scratch and device-side checks, made once.
pub struct Workspaces {
    pub embedding: EmbeddingCheck,
    pub slots: SlotCheck,
    pub decode: PagedWorkspace,
    pub prefill: PagedPrefillWorkspace,
}

impl Workspaces {
    /// Scratch for passes of up to `max_batch` sequences over `cache`.
    pub fn new(
        ctx: &Context,
        model: &Qwen3,
        cache: &PagedCache,
        max_batch: usize,
    ) -> Result<Workspaces, ModelError> {
        let c = &model.config;
        let entries = max_batch * cache.max_pages();
        Ok(Workspaces {
            embedding: EmbeddingCheck::new(ctx)?,
            slots: SlotCheck::new(ctx)?,
            decode: PagedWorkspace::new(
                ctx,
                max_batch,
                c.num_attention_heads,
                c.head_dim,
                entries,
                cache.max_context(),
            )?,
            prefill: PagedPrefillWorkspace::new(ctx, max_batch, entries)?,
        })
    }
}

/// Leading-row views of the activations for one pass.
struct Views {
    residual: Tensor,
    residual_next: Tensor,
    normed: Tensor,
}

impl Qwen3 {
    /// Runs the decoder over `pass`, appending its keys and values to `cache` (whose
    /// pages the pass's block table names); returns the normalised final hidden state
    /// `[tokens, hidden]` (a view of `act`).
    pub fn forward(
        &self,
        ctx: &Context,
        pass: &Pass,
        cache: &PagedCache,
        act: &Activations,
        ws: &Workspaces,
    ) -> Result<Tensor, ModelError> {
        let (t, h) = (pass.tokens, self.config.hidden_size);
        if t == 0 || t > act.max_tokens {
            return Err(ModelError::request(format!(
                "a pass of {t} tokens; the activations hold 1..={}",
                act.max_tokens
            )));
        }
        let eps = self.config.rms_norm_eps as f32;
        let mut v = Views {
            residual: act.residual.view(&[t, h])?,
            residual_next: act.residual_next.view(&[t, h])?,
            normed: act.normed.view(&[t, h])?,
        };
        embedding(
            ctx,
            pass.ids,
            &self.embed_tokens,
            &v.residual,
            &ws.embedding,
        )?;
        rms_norm(ctx, &v.residual, &self.layers[0].input_norm, &v.normed, eps)?;
        let proj = act.proj.view(&[t, h])?;
        // Decode: every layer reads the same block table through its own pools, so the
        // table is reduced and checked once for the step.
        let pages = if pass.decode {
            let (k_cache, v_cache) = cache.pools(0);
            let kv = PagedKv {
                k_cache,
                v_cache,
                layout: cache.layout(),
                table: PageTable::Blocks {
                    block_table: pass.block_table,
                    seq_lens: pass.lens_after,
                },
            };
            Some(ws.decode.prepare(ctx, &kv, 1, false)?)
        } else {
            None
        };
        for (i, layer) in self.layers.iter().enumerate() {
            let tables = (pass, pages.as_ref());
            self.attention(ctx, i, tables, cache, act, ws, &v.normed, &proj)?;
            self.add_norm(ctx, &proj, &layer.post_attention_norm, &mut v)?;
            let inter = self.config.intermediate_size;
            let gate_up = act.gate_up.view(&[t, 2 * inter])?;
            let mlp = act.mlp.view(&[t, inter])?;
            gate_up_silu(ctx, &v.normed, &layer.gate_up, &gate_up, &mlp)?;
            linear(ctx, &mlp, &layer.down_proj, &proj)?;
            let next = self.layers.get(i + 1).map_or(&self.norm, |l| &l.input_norm);
            self.add_norm(ctx, &proj, next, &mut v)?;
        }
        Ok(v.normed)
    }

    /// `residual += x`, then `normed = rms_norm(residual, w)` (one fused op writing the
    /// new residual into the other buffer, which then becomes the residual).
    fn add_norm(
        &self,
        ctx: &Context,
        x: &Tensor,
        w: &Tensor,
        v: &mut Views,
    ) -> Result<(), ModelError> {
        let eps = self.config.rms_norm_eps as f32;
        rms_norm_residual(ctx, x, &v.residual, w, &v.residual_next, &v.normed, eps)?;
        std::mem::swap(&mut v.residual, &mut v.residual_next);
        Ok(())
    }

    /// Layer `i`'s attention block from the normalised input `x [t, hidden]` into
    /// `out [t, hidden]` (o_proj's output); a decode pass reads the step's prepared table.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        ctx: &Context,
        i: usize,
        (pass, pages): (&Pass, Option<&PreparedPages>),
        cache: &PagedCache,
        act: &Activations,
        ws: &Workspaces,
        x: &Tensor,
        out: &Tensor,
    ) -> Result<(), ModelError> {
        let c = &self.config;
        let layer: &Layer = &self.layers[i];
        let (t, d) = (pass.tokens, c.head_dim);
        let (hq, hk) = (c.num_attention_heads, c.num_key_value_heads);
        let q = act.q.view(&[t, hq * d])?;
        let k = act.k.view(&[t, hk * d])?;
        let v = act.v.view(&[t, hk * d])?;
        linear(ctx, x, &layer.q_proj, &q)?;
        linear(ctx, x, &layer.k_proj, &k)?;
        linear(ctx, x, &layer.v_proj, &v)?;
        let q_rot = act.q_rot.view(&[t, hq, d])?;
        let k_rot = act.k_rot.view(&[t, hk, d])?;
        qk_norm_rope(
            ctx,
            &q.view(&[t, hq, d])?,
            &k.view(&[t, hk, d])?,
            &layer.q_norm,
            &layer.k_norm,
            pass.positions,
            &self.rope,
            &q_rot,
            &k_rot,
            c.rms_norm_eps as f32,
        )?;
        let (k_cache, v_cache) = cache.pools(i);
        paged_kv_append_ragged(
            ctx,
            (&k_rot, &v.view(&[t, hk, d])?),
            (pass.cu_seqlens, pass.block_table, pass.lens_before),
            (k_cache, v_cache),
            cache.layout(),
            None,
            &ws.slots,
        )?;
        let kv = PagedKv {
            k_cache,
            v_cache,
            layout: cache.layout(),
            table: PageTable::Blocks {
                block_table: pass.block_table,
                seq_lens: pass.lens_after,
            },
        };
        let attn = act.attn.view(&[t, hq, d])?;
        if let Some(pages) = pages {
            let kv = PagedKv {
                table: PageTable::Prepared(pages),
                ..kv
            };
            let opts = DecodeOptions::default();
            sdpa_decode_paged(ctx, &q_rot, &kv, &attn, &opts, &ws.decode)?;
        } else {
            let queries = PagedQueries {
                cu_seqlens_q: pass.cu_seqlens,
                max_seqlen_q: pass.max_q,
            };
            sdpa_prefill_paged(ctx, &q_rot, &kv, &queries, &attn, true, None, &ws.prefill)?;
        }
        linear(ctx, &attn.view(&[t, hq * d])?, &layer.o_proj, out)
    }
}
