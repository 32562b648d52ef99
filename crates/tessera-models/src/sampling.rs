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

/// The sampling op's per-row parameters on the device, for up to `rows` rows a call.
pub struct SamplerState {
    temperature: Tensor,
    top_k: Tensor,
    top_p: Tensor,
    min_p: Tensor,
    seed: Tensor,
    offset: Tensor,
    settings: Sampling,
}

impl SamplerState {
    /// Uploads `s` for calls of up to `rows` rows.
    pub fn new(ctx: &Context, s: &Sampling, rows: usize) -> Result<SamplerState, ModelError> {
        s.check()?;
        Ok(SamplerState {
            temperature: ctx.tensor(&vec![s.temperature; rows], &[rows])?,
            top_k: ctx.tensor(&vec![s.top_k as i32; rows], &[rows])?,
            top_p: ctx.tensor(&vec![s.top_p; rows], &[rows])?,
            min_p: ctx.tensor(&vec![s.min_p; rows], &[rows])?,
            seed: ctx.zeros(DType::U32, &[rows, 2])?,
            offset: ctx.zeros(DType::U32, &[rows])?,
            settings: *s,
        })
    }

    /// One token per row of `logits [n, vocab]` into `tokens` i32 `[n]`; row r belongs to
    /// sequence `rows[r].0`, drawing its `rows[r].1`-th token. Each sequence's Philox
    /// key is the seed with the sequence in its high word, its counter the draw.
    pub fn choose(
        &self,
        ctx: &Context,
        logits: &Tensor,
        tokens: &Tensor,
        rows: &[(usize, u32)],
    ) -> Result<(), ModelError> {
        if self.settings.is_greedy() {
            argmax(ctx, logits, tokens)?;
            return Ok(());
        }
        let n = rows.len();
        let seed = self.settings.seed;
        let keys: Vec<u32> = rows
            .iter()
            .flat_map(|&(seq, _)| [seed as u32, ((seed >> 32) as u32) ^ seq as u32])
            .collect();
        let draws: Vec<u32> = rows.iter().map(|&(_, step)| step).collect();
        let (seed_rows, offset) = (self.seed.view(&[n, 2])?, self.offset.view(&[n])?);
        seed_rows.write(&keys)?;
        offset.write(&draws)?;
        let params = SamplingParams {
            temperature: &self.temperature.view(&[n])?,
            top_k: &self.top_k.view(&[n])?,
            top_p: &self.top_p.view(&[n])?,
            min_p: &self.min_p.view(&[n])?,
            seed: &seed_rows,
            offset: &offset,
        };
        sample(ctx, logits, &params, tokens)?;
        Ok(())
    }
}
