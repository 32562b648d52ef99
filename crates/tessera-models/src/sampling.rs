//! How the next token is chosen: greedy (the `argmax` op) or drawn by the `sample` op
//! (temperature, top-k, top-p, min-p, a Philox stream per sequence keyed by the seed and
//! the sequence, counted by the step), with its per-row parameters kept on the device.

use crate::error::ModelError;
use tessera_runtime::{Context, DType, Tensor};
use tessera_std::sampling::{argmax, sample, SamplingParams};

/// A request's sampling settings, the same for every sequence of a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// 0 is greedy.
    pub temperature: f32,
    /// 0 disables.
    pub top_k: u32,
    /// 1 disables.
    pub top_p: f32,
    /// 0 disables.
    pub min_p: f32,
    pub seed: u64,
}

impl Sampling {
    pub fn greedy() -> Sampling {
        Sampling {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: 0,
        }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// Refuses settings the `sample` op would refuse, before any work.
    pub fn check(&self) -> Result<(), ModelError> {
        let ok = self.temperature.is_finite()
            && self.temperature >= 0.0
            && self.top_p > 0.0
            && self.top_p <= 1.0
            && (0.0..=1.0).contains(&self.min_p)
            && self.top_k <= i32::MAX as u32;
        if ok {
            Ok(())
        } else {
            Err(ModelError::request(format!(
                "sampling settings out of range: {self:?} (temperature ≥ 0 and finite, top_p in (0, 1], min_p in [0, 1])"
            )))
        }
    }
}

/// The sampling op's per-row parameters on the device, for up to `rows` rows a call,
/// allocated once with the engine: a request writes its settings into them, a call its
/// rows' Philox keys and counters, so a launch recorded in a graph reads each replay's.
pub struct SamplerState {
    temperature: Tensor,
    top_k: Tensor,
    top_p: Tensor,
    min_p: Tensor,
    seed: Tensor,
    offset: Tensor,
    settings: Sampling,
    /// The keys last written to `seed`'s leading rows (they change only with the rows'
    /// sequences or the seed, not with the step).
    last_keys: Vec<u32>,
}

impl SamplerState {
    /// Parameters for calls of up to `rows` rows, greedy until [`SamplerState::set`].
    pub fn new(ctx: &Context, rows: usize) -> Result<SamplerState, ModelError> {
        Ok(SamplerState {
            temperature: ctx.zeros(DType::F32, &[rows])?,
            top_k: ctx.zeros(DType::I32, &[rows])?,
            top_p: ctx.zeros(DType::F32, &[rows])?,
            min_p: ctx.zeros(DType::F32, &[rows])?,
            seed: ctx.zeros(DType::U32, &[rows, 2])?,
            offset: ctx.zeros(DType::U32, &[rows])?,
            settings: Sampling::greedy(),
            last_keys: Vec::new(),
        })
    }

    /// Checks `s` and writes it into every row (nothing is written for greedy settings,
    /// which launch `argmax`).
    pub fn set(&mut self, s: &Sampling) -> Result<(), ModelError> {
        s.check()?;
        if !s.is_greedy() {
            let rows = self.offset.len();
            self.temperature.write(&vec![s.temperature; rows])?;
            self.top_k.write(&vec![s.top_k as i32; rows])?;
            self.top_p.write(&vec![s.top_p; rows])?;
            self.min_p.write(&vec![s.min_p; rows])?;
        }
        self.last_keys.clear();
        self.settings = *s;
        Ok(())
    }

    pub fn is_greedy(&self) -> bool {
        self.settings.is_greedy()
    }

    /// One token per row of `logits [n, vocab]` into `tokens` i32 `[n]`; row r belongs to
    /// sequence `rows[r].0`, drawing its `rows[r].1`-th token. Each sequence's Philox
    /// key is the seed with the sequence in its high word, its counter the draw.
    pub fn choose(
        &mut self,
        ctx: &Context,
        logits: &Tensor,
        tokens: &Tensor,
        rows: &[(usize, u32)],
    ) -> Result<(), ModelError> {
        self.stage(rows)?;
        self.launch(ctx, logits, tokens)
    }

    /// Writes the keys and counters of `rows` (as [`SamplerState::choose`] takes them)
    /// for the next launch: the host's part of a call, done before a graph replays it.
    pub fn stage(&mut self, rows: &[(usize, u32)]) -> Result<(), ModelError> {
        if self.settings.is_greedy() {
            return Ok(());
        }
        let n = rows.len();
        let seed = self.settings.seed;
        let keys: Vec<u32> = rows
            .iter()
            .flat_map(|&(seq, _)| [seed as u32, ((seed >> 32) as u32) ^ seq as u32])
            .collect();
        if keys != self.last_keys {
            self.seed.view(&[n, 2])?.write(&keys)?;
            self.last_keys = keys;
        }
        let draws: Vec<u32> = rows.iter().map(|&(_, step)| step).collect();
        self.offset.view(&[n])?.write(&draws)?;
        Ok(())
    }

    /// The device's part of a call over `logits [n, vocab]`, reading the rows
    /// [`SamplerState::stage`] wrote: only launches, so it may be recorded.
    pub fn launch(
        &self,
        ctx: &Context,
        logits: &Tensor,
        tokens: &Tensor,
    ) -> Result<(), ModelError> {
        if self.settings.is_greedy() {
            argmax(ctx, logits, tokens)?;
            return Ok(());
        }
        let n = logits.shape().first().copied().unwrap_or(0);
        let params = SamplingParams {
            temperature: &self.temperature.view(&[n])?,
            top_k: &self.top_k.view(&[n])?,
            top_p: &self.top_p.view(&[n])?,
            min_p: &self.min_p.view(&[n])?,
            seed: &self.seed.view(&[n, 2])?,
            offset: &self.offset.view(&[n])?,
        };
        sample(ctx, logits, &params, tokens)?;
        Ok(())
    }
}
