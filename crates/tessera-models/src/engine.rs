//! The engine: a model, its paged cache, the activations and every per-pass input
//! allocated once, and the scheduling of a request — the prompts prefilled together in
//! chunks of at most `chunk_tokens` packed tokens (a long prompt spans chunks, its later
//! chunks attending to the pages its earlier ones wrote), then one decode pass a step for
//! the whole batch, the sampled tokens feeding the next step's embedding on the device.
//! The host writes only token bookkeeping into the preallocated inputs: ids, positions,
//! offsets, lengths and block-table rows.
//!
//! On a backend with device graphs (CUDA) the decode step — the forward pass, the head
//! and the choice of the next tokens — is recorded once per batch size, after one eager
//! step at that size has compiled its kernels and checked its tables, and replayed every
//! later step: the host writes the step's inputs into the same buffers, replays, and
//! reads the chosen tokens back. The ops' device verdicts, which a replay cannot act on,
//! are taken every [`VERDICT_EVERY`] replayed steps and after the last, so a bad table
//! or id still fails the request.

use crate::cache::{CacheShape, PagedCache};
use crate::error::ModelError;
use crate::linear::{linear, max_rows, GEMV_ROWS};
use crate::qwen3::{Activations, Pass, Qwen3, Workspaces};
use crate::sampling::{SamplerState, Sampling};
use std::time::Instant;
use tessera_runtime::{Context, DType, Recorded, RuntimeError, Tensor};
use tessera_std::elementwise::embedding;

/// What an engine is sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineLimits {
    /// Sequences decoded together.
    pub max_batch: usize,
    /// Tokens one sequence may hold: prompt plus generated.
    pub max_context: usize,
    /// Packed tokens one prefill pass carries at most.
    pub chunk_tokens: usize,
    /// Tokens a cache page holds.
    pub page_size: usize,
}

/// Prefill chunks of f16 / bf16 models: enough tokens for the GEMM to fill a GPU.
const HALF_CHUNK: usize = 512;

impl EngineLimits {
    /// Limits for `max_batch` sequences of up to `max_context` tokens, with the largest
    /// prefill chunk the model's dtype allows (f32: the GEMV's 16 rows, the library having
    /// no f32 GEMM) up to 512 tokens, and pages of 16 tokens.
    pub fn for_prompts(model: &Qwen3, max_batch: usize, max_context: usize) -> EngineLimits {
        EngineLimits {
            max_batch,
            max_context,
            chunk_tokens: max_rows(model.dtype).min(HALF_CHUNK),
            page_size: 16,
        }
    }
}

/// Replayed decode steps between two looks at the ops' device verdicts (and after the
/// last step of a request): each look reads three words back.
pub const VERDICT_EVERY: usize = 8;

/// The environment variable that, set to anything but `0` or empty, makes new engines
/// decode eagerly, with no device graphs (for comparison; [`Engine::set_graphs`]).
pub const NO_GRAPHS_ENV: &str = "TESSERA_NO_GRAPHS";

/// What a recorded decode step depends on besides the fixed buffers: the batch size
/// and whether it samples or takes the argmax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StepShape {
    batch: usize,
    greedy: bool,
}

/// What a request produced, and how long its two phases took.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// Each prompt's generated ids.
    pub tokens: Vec<Vec<u32>>,
    /// Prompt tokens prefilled, and the seconds from the first pass to the first tokens.
    pub prefill_tokens: usize,
    pub prefill_secs: f64,
    /// Tokens made by decode passes (all but each sequence's first), and their seconds.
    pub decode_tokens: usize,
    pub decode_secs: f64,
    /// Decode steps replayed from a recorded device graph (0 when eager).
    pub graph_steps: usize,
}

/// A pass's counts once its inputs are written: what its views and launches need.
#[derive(Clone, Copy, Debug)]
struct Staged {
    tokens: usize,
    seqs: usize,
    max_q: usize,
    decode: bool,
    /// The ids are in `ids` (written from the host), else in `tokens` (the last choice).
    host_ids: bool,
}

/// A sequence's share of a pass: its tokens `start .. start + count`.
#[derive(Clone, Copy, Debug)]
struct Piece {
    seq: usize,
    start: usize,
    count: usize,
}

/// The per-pass inputs and the head's outputs, allocated once.
struct Inputs {
    ids: Tensor,
    positions: Tensor,
    cu_seqlens: Tensor,
    lens_before: Tensor,
    lens_after: Tensor,
    block_table: Tensor,
    /// What was last written to the leading elements of `cu_seqlens` and `block_table`:
    /// a decode step's offsets never change and its table only when a sequence takes a
    /// page, so most steps upload neither.
    last_cu: Vec<i32>,
    last_table: Vec<i32>,
    /// The packed rows whose logits a prefill pass needs (each finished prompt's last).
    rows: Tensor,
    /// Those rows' hidden states, their logits and the chosen tokens.
    last: Tensor,
    logits: Tensor,
    tokens: Tensor,
}

/// A model ready to serve requests of up to its limits.
pub struct Engine<'a> {
    ctx: &'a Context,
    model: &'a Qwen3,
    limits: EngineLimits,
    cache: PagedCache,
    act: Activations,
    ws: Workspaces,
    io: Inputs,
    sampler: SamplerState,
    /// Recorded decode steps, one per shape met.
    graphs: Vec<(StepShape, Recorded)>,
    /// Shapes whose decode step ran eagerly once (compiling its kernels): recorded next.
    warmed: Vec<StepShape>,
    /// Decode steps are recorded and replayed: on unless turned off, until the backend
    /// turns out to have no graphs.
    use_graphs: bool,
}

impl<'a> Engine<'a> {
    /// Allocates the cache, the activations and the pass inputs for `limits`.
    pub fn new(
        ctx: &'a Context,
        model: &'a Qwen3,
        limits: EngineLimits,
    ) -> Result<Engine<'a>, ModelError> {
        let EngineLimits {
            max_batch,
            max_context,
            chunk_tokens,
            page_size,
        } = limits;
        if max_batch == 0 || max_context == 0 || chunk_tokens == 0 || page_size == 0 {
            return Err(ModelError::request(format!(
                "every limit must be positive: {limits:?}"
            )));
        }
        let rows = max_rows(model.dtype);
        if max_batch > rows || chunk_tokens > rows {
            return Err(ModelError::request(format!(
                "{} weights take at most {GEMV_ROWS} rows a projection (the library has no {} GEMM): max_batch {max_batch} and chunk_tokens {chunk_tokens} must be ≤ {rows}",
                model.dtype, model.dtype
            )));
        }
        let c = &model.config;
        let max_pages = max_context.div_ceil(page_size);
        let cache = PagedCache::new(
            ctx,
            CacheShape {
                layers: c.num_hidden_layers,
                n_kv_heads: c.num_key_value_heads,
                head_dim: c.head_dim,
                dtype: model.dtype,
                page_size,
                blocks: max_batch * max_pages,
                max_batch,
                max_pages,
            },
        )?;
        let max_tokens = chunk_tokens.max(max_batch);
        let act = Activations::new(ctx, model, max_tokens)?;
        let ws = Workspaces::new(ctx, model, &cache, max_batch)?;
        let i32s = |n: usize| ctx.zeros(DType::I32, &[n]);
        let io = Inputs {
            ids: i32s(max_tokens)?,
            positions: ctx.zeros(DType::U32, &[max_tokens])?,
            cu_seqlens: i32s(max_batch + 1)?,
            lens_before: i32s(max_batch)?,
            lens_after: i32s(max_batch)?,
            block_table: i32s(max_batch * max_pages)?,
            last_cu: Vec::new(),
            last_table: Vec::new(),
            rows: i32s(max_batch)?,
            last: ctx.scratch(model.dtype, &[max_batch * c.hidden_size])?,
            logits: ctx.scratch(model.dtype, &[max_batch * c.vocab_size])?,
            tokens: i32s(max_batch)?,
        };
        let no_graphs = std::env::var(NO_GRAPHS_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
        Ok(Engine {
            ctx,
            model,
            limits,
            cache,
            act,
            ws,
            io,
            sampler: SamplerState::new(ctx, max_batch)?,
            graphs: Vec::new(),
            warmed: Vec::new(),
            use_graphs: !no_graphs,
        })
    }

    pub fn limits(&self) -> EngineLimits {
        self.limits
    }

    /// Records decode steps into device graphs and replays them (`true`, the default
    /// unless [`NO_GRAPHS_ENV`] is set), or runs every step eagerly (`false`). Backends
    /// without graphs always run eagerly.
    pub fn set_graphs(&mut self, on: bool) {
        self.use_graphs = on;
        if !on {
            self.graphs.clear();
            self.warmed.clear();
        }
    }

    /// Refuses prompts the engine cannot take, before any work: none, more than
    /// `max_batch`, an empty one, an id outside the vocabulary, or one that with `extra`
    /// more tokens would pass `max_context`.
    fn check_prompts(&self, prompts: &[Vec<u32>], extra: usize) -> Result<(), ModelError> {
        let max_batch = self.limits.max_batch;
        if prompts.is_empty() || prompts.len() > max_batch {
            return Err(ModelError::request(format!(
                "{} prompts; the engine takes 1..={max_batch}",
                prompts.len()
            )));
        }
        let vocab = self.model.config.vocab_size;
        for (i, p) in prompts.iter().enumerate() {
            if p.is_empty() {
                return Err(ModelError::request(format!("prompt {i} is empty")));
            }
            if let Some(&id) = p.iter().find(|&&id| id as usize >= vocab) {
                return Err(ModelError::request(format!(
                    "prompt {i} holds token {id}, outside the vocabulary (0..{vocab})"
                )));
            }
            if p.len() + extra > self.cache.max_context() {
                return Err(ModelError::request(format!(
                    "prompt {i} has {} tokens; with {extra} more it would pass the engine's context of {} tokens",
                    p.len(),
                    self.cache.max_context()
                )));
            }
        }
        Ok(())
    }

    /// The prompts cut into passes of at most `chunk_tokens` packed tokens, in order.
    fn prefill_passes(&self, prompts: &[Vec<u32>]) -> Vec<Vec<Piece>> {
        let chunk = self.limits.chunk_tokens;
        let (mut passes, mut pass, mut room) = (Vec::new(), Vec::new(), chunk);
        for (seq, p) in prompts.iter().enumerate() {
            let mut start = 0;
            while start < p.len() {
                let count = (p.len() - start).min(room);
                pass.push(Piece { seq, start, count });
                start += count;
                room -= count;
                if room == 0 {
                    passes.push(std::mem::take(&mut pass));
                    room = chunk;
                }
            }
        }
        if !pass.is_empty() {
            passes.push(pass);
        }
        passes
    }

    /// Writes a pass's bookkeeping into the inputs, grows the cache for it and runs the
    /// model; `ids` are the host's token ids, or `None` for the ids already in `tokens`
    /// (the previous step's choices). Returns the normalised hidden state `[tokens, H]`.
    fn run_pass(&mut self, pieces: &[Piece], ids: Option<&[i32]>) -> Result<Tensor, ModelError> {
        let staged = self.stage_pass(pieces, ids)?;
        self.forward_staged(&staged)
    }

    /// Grows the cache for a pass and writes its bookkeeping into the inputs (only what
    /// changed, for the offsets and the table): every upload of the pass, none of its
    /// launches.
    fn stage_pass(&mut self, pieces: &[Piece], ids: Option<&[i32]>) -> Result<Staged, ModelError> {
        let seqs = pieces.len();
        let tokens: usize = pieces.iter().map(|p| p.count).sum();
        let width = self.cache.max_pages();
        let mut positions = Vec::with_capacity(tokens);
        let mut cu = vec![0i32];
        let (mut before, mut after) = (Vec::with_capacity(seqs), Vec::with_capacity(seqs));
        let mut table = vec![0i32; seqs * width];
        for (b, p) in pieces.iter().enumerate() {
            debug_assert_eq!(self.cache.len(p.seq), p.start);
            self.cache.grow(p.seq, p.start + p.count)?;
            positions.extend((p.start..p.start + p.count).map(|i| i as u32));
            cu.push(cu[b] + p.count as i32);
            before.push(p.start as i32);
            after.push((p.start + p.count) as i32);
            self.cache
                .table_row(p.seq, &mut table[b * width..(b + 1) * width]);
        }
        let io = &mut self.io;
        write_if_changed(&io.cu_seqlens.view(&[seqs + 1])?, cu, &mut io.last_cu)?;
        let table_t = io.block_table.view(&[seqs, width])?;
        write_if_changed(&table_t, table, &mut io.last_table)?;
        io.positions.view(&[tokens])?.write(&positions)?;
        io.lens_before.view(&[seqs])?.write(&before)?;
        io.lens_after.view(&[seqs])?.write(&after)?;
        if let Some(ids) = ids {
            io.ids.view(&[tokens])?.write(ids)?;
        }
        Ok(Staged {
            tokens,
            seqs,
            max_q: pieces.iter().map(|p| p.count).max().unwrap_or(0),
            decode: pieces.iter().all(|p| p.count == 1),
            host_ids: ids.is_some(),
        })
    }

    /// The forward pass over the inputs [`Engine::stage_pass`] wrote: only launches (on
    /// views of the fixed buffers), so a decode pass may be recorded.
    fn forward_staged(&self, s: &Staged) -> Result<Tensor, ModelError> {
        let Staged {
            tokens,
            seqs,
            max_q,
            decode,
            host_ids,
        } = *s;
        let io = &self.io;
        let width = self.cache.max_pages();
        let cu_t = io.cu_seqlens.view(&[seqs + 1])?;
        let table_t = io.block_table.view(&[seqs, width])?;
        let positions_t = io.positions.view(&[tokens])?;
        let before_t = io.lens_before.view(&[seqs])?;
        let after_t = io.lens_after.view(&[seqs])?;
        let ids_t = if host_ids {
            io.ids.view(&[tokens])?
        } else {
            io.tokens.view(&[tokens])?
        };
        let pass = Pass {
            tokens,
            seqs,
            max_q,
            decode,
            ids: &ids_t,
            positions: &positions_t,
            cu_seqlens: &cu_t,
            lens_before: &before_t,
            lens_after: &after_t,
            block_table: &table_t,
        };
        self.model
            .forward(self.ctx, &pass, &self.cache, &self.act, &self.ws)
    }

    /// Prefills `prompts` from an empty cache and returns the logits at every position
    /// of each, `[len · vocab]` row-major: the check against a reference implementation.
    pub fn prefill_logits(&mut self, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.check_prompts(prompts, 0)?;
        self.cache.clear();
        let vocab = self.model.config.vocab_size;
        let all = self
            .ctx
            .scratch(self.model.dtype, &[self.limits.chunk_tokens * vocab])?;
        let mut out: Vec<Vec<f32>> = prompts
            .iter()
            .map(|p| Vec::with_capacity(p.len() * vocab))
            .collect();
        for pieces in self.prefill_passes(prompts) {
            let ids = pass_ids(prompts, &pieces);
            let normed = self.run_pass(&pieces, Some(&ids))?;
            let logits = all.view(&[ids.len(), vocab])?;
            linear(self.ctx, &normed, self.model.lm_head(), &logits)?;
            let host = logits.to_f64_vec()?;
            let mut row = 0;
            for p in &pieces {
                let part = &host[row * vocab..(row + p.count) * vocab];
                out[p.seq].extend(part.iter().map(|&x| x as f32));
                row += p.count;
            }
        }
        Ok(out)
    }

    /// Generates `max_new` tokens for each prompt (the first from the prefill, the rest
    /// one decode pass a step for the whole batch), chosen as `sampling` says.
    pub fn generate(
        &mut self,
        prompts: &[Vec<u32>],
        max_new: usize,
        sampling: &Sampling,
    ) -> Result<Generation, ModelError> {
        if max_new == 0 {
            return Err(ModelError::request("max_new must be at least 1"));
        }
        self.check_prompts(prompts, max_new)?;
        self.sampler.set(sampling)?;
        self.cache.clear();
        let batch = prompts.len();
        let mut out = vec![Vec::with_capacity(max_new); batch];
        let start = Instant::now();
        for pieces in self.prefill_passes(prompts) {
            let ids = pass_ids(prompts, &pieces);
            let normed = self.run_pass(&pieces, Some(&ids))?;
            self.first_tokens(prompts, &pieces, &normed, &mut out)?;
        }
        self.ctx.synchronize()?;
        let prefill_secs = start.elapsed().as_secs_f64();
        // The decode passes read their ids from `tokens`, the first ones put there now.
        let first: Vec<i32> = out.iter().map(|t| t[0] as i32).collect();
        self.io.tokens.view(&[batch])?.write(&first)?;
        let start = Instant::now();
        let mut graph_steps = 0;
        for step in 1..max_new {
            let replayed = self.decode_step(batch, step)?;
            if replayed {
                graph_steps += 1;
            }
            let vocab = self.model.config.vocab_size;
            let tokens = self.io.tokens.view(&[batch])?.to_vec::<i32>()?;
            for (seq, &t) in tokens.iter().enumerate() {
                match checked_token(t, vocab) {
                    Ok(t) => out[seq].push(t),
                    // A replay's bad input shows as a bad token: name the cause if known.
                    Err(e) if replayed => return Err(self.take_verdicts().err().unwrap_or(e)),
                    Err(e) => return Err(e),
                }
            }
            if replayed && (graph_steps % VERDICT_EVERY == 0 || step + 1 == max_new) {
                self.take_verdicts()?;
            }
        }
        self.ctx.synchronize()?;
        Ok(Generation {
            tokens: out,
            prefill_tokens: prompts.iter().map(Vec::len).sum(),
            prefill_secs,
            decode_tokens: batch * (max_new - 1),
            decode_secs: start.elapsed().as_secs_f64(),
            graph_steps,
        })
    }

    /// One decode step of the `batch` sequences, drawing their `step`-th tokens into
    /// `tokens`: its inputs written, then its launches replayed from the step's graph,
    /// recorded now (a shape's second step), or run eagerly (its first step, or with no
    /// graphs). True if a graph ran it.
    fn decode_step(&mut self, batch: usize, step: usize) -> Result<bool, ModelError> {
        let pieces: Vec<Piece> = (0..batch)
            .map(|seq| Piece {
                seq,
                start: self.cache.len(seq),
                count: 1,
            })
            .collect();
        let staged = self.stage_pass(&pieces, None)?;
        let rows: Vec<(usize, u32)> = (0..batch).map(|s| (s, step as u32)).collect();
        self.sampler.stage(&rows)?;
        let shape = StepShape {
            batch,
            greedy: self.sampler.is_greedy(),
        };
        if !self.use_graphs {
            self.decode_launches(&staged)?;
            return Ok(false);
        }
        if let Some((_, graph)) = self.graphs.iter().find(|(s, _)| *s == shape) {
            graph.replay()?;
            return Ok(true);
        }
        if !self.warmed.contains(&shape) {
            // Eagerly first: kernels compile outside the recording, and the step's
            // tables and ids are refused by the ops themselves if bad.
            self.decode_launches(&staged)?;
            self.warmed.push(shape);
            return Ok(false);
        }
        let mut failure = None;
        let recorded = self.ctx.record(|| {
            self.decode_launches(&staged).map_err(|e| {
                let message = e.to_string();
                failure = Some(e);
                RuntimeError::Backend {
                    backend: self.ctx.kind(),
                    message,
                }
            })
        });
        let recorded = match (recorded, failure) {
            (_, Some(e)) => return Err(e),
            (r, None) => r?,
        };
        match recorded {
            Some(graph) => {
                // Recording ran nothing: this step is the graph's first replay.
                graph.replay()?;
                self.graphs.push((shape, graph));
                Ok(true)
            }
            None => {
                self.use_graphs = false;
                self.decode_launches(&staged)?;
                Ok(false)
            }
        }
    }

    /// A decode step's launches over the staged inputs: the forward pass, the head and
    /// the choice of each sequence's next token into `tokens` (what a graph records).
    fn decode_launches(&self, staged: &Staged) -> Result<(), ModelError> {
        let normed = self.forward_staged(staged)?;
        let (batch, vocab) = (staged.seqs, self.model.config.vocab_size);
        let logits = self.io.logits.view(&[batch, vocab])?;
        linear(self.ctx, &normed, self.model.lm_head(), &logits)?;
        let tokens = self.io.tokens.view(&[batch])?;
        self.sampler.launch(self.ctx, &logits, &tokens)
    }

    /// The ops' device verdicts since the last look (a replay cannot refuse a bad table
    /// or id, it leaves the finding on the device): the first, as an error.
    fn take_verdicts(&self) -> Result<(), ModelError> {
        self.ws.decode.take_error()?;
        self.ws.slots.take_error()?;
        self.ws.embedding.take_error()?;
        Ok(())
    }

    /// After a prefill pass, the first token of each prompt that ended in it: its last
    /// row gathered (the embedding op over the pass's hidden rows), the head, the choice.
    fn first_tokens(
        &mut self,
        prompts: &[Vec<u32>],
        pieces: &[Piece],
        normed: &Tensor,
        out: &mut [Vec<u32>],
    ) -> Result<(), ModelError> {
        let mut rows = Vec::new();
        let mut seqs = Vec::new();
        let mut end = 0;
        for p in pieces {
            end += p.count;
            if p.start + p.count == prompts[p.seq].len() {
                rows.push(end as i32 - 1);
                seqs.push((p.seq, 0u32));
            }
        }
        if rows.is_empty() {
            return Ok(());
        }
        let (n, c) = (rows.len(), &self.model.config);
        let (hidden, vocab) = (c.hidden_size, c.vocab_size);
        let rows_t = self.io.rows.view(&[n])?;
        rows_t.write(&rows)?;
        let last = self.io.last.view(&[n, hidden])?;
        embedding(self.ctx, &rows_t, normed, &last, &self.ws.embedding)?;
        let logits = self.io.logits.view(&[n, vocab])?;
        linear(self.ctx, &last, self.model.lm_head(), &logits)?;
        let tokens = self.io.tokens.view(&[n])?;
        self.sampler.choose(self.ctx, &logits, &tokens, &seqs)?;
        for (&(seq, _), &t) in seqs.iter().zip(&tokens.to_vec::<i32>()?) {
            out[seq].push(checked_token(t, vocab)?);
        }
        Ok(())
    }
}

/// Writes `data` into `t` unless `last` (what was written there before) holds it already.
fn write_if_changed(t: &Tensor, data: Vec<i32>, last: &mut Vec<i32>) -> Result<(), ModelError> {
    if *last != data {
        t.write(&data)?;
        *last = data;
    }
    Ok(())
}

/// The host ids of a pass's pieces, packed.
fn pass_ids(prompts: &[Vec<u32>], pieces: &[Piece]) -> Vec<i32> {
    pieces
        .iter()
        .flat_map(|p| {
            prompts[p.seq][p.start..p.start + p.count]
                .iter()
                .map(|&t| t as i32)
        })
        .collect()
}

/// A chosen token as an id: the ops give −1 for a row of logits holding NaN.
fn checked_token(t: i32, vocab: usize) -> Result<u32, ModelError> {
    if t < 0 || t as usize >= vocab {
        return Err(ModelError::request(format!(
            "the sampler returned {t}: the logits held NaN (or the parameters were refused)"
        )));
    }
    Ok(t as u32)
}
