//! The check against reference goldens (`scripts/models/make_tiny_qwen3.py` writes them
//! from Hugging Face transformers): a safetensors file of prompts `prompt.{i}` (i32),
//! the reference logits at every prefill position `logits.{i}` (f32 `[len, vocab]`) and
//! greedy tokens `greedy.{i}` (i32). [`check`] prefills the prompts as one batch, compares
//! every logit, then decodes greedily as one batch and compares every token.

use crate::engine::{Engine, EngineLimits};
use crate::error::ModelError;
use crate::qwen3::Qwen3;
use crate::sampling::Sampling;
use safetensors::tensor::{Dtype as StDtype, SafeTensors};
use std::path::Path;
use tessera_runtime::Context;

/// The reference outputs for a set of prompts.
#[derive(Clone, Debug, PartialEq)]
pub struct Goldens {
    pub prompts: Vec<Vec<u32>>,
    /// `[len · vocab]` per prompt.
    pub logits: Vec<Vec<f32>>,
    pub greedy: Vec<Vec<u32>>,
}

/// How the model compared with the goldens.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The largest |logit − reference| over every position of every prompt (NaN-proof:
    /// a NaN logit makes it infinite).
    pub max_logit_error: f64,
    /// Where it was: (prompt, position, token).
    pub worst_at: (usize, usize, usize),
    /// The greedy tokens generated.
    pub greedy: Vec<Vec<u32>>,
    /// Per prompt, the first step whose token differs from the reference, if any.
    pub first_mismatch: Vec<Option<usize>>,
    /// Decode steps replayed from a recorded device graph (0 where eager).
    pub graph_steps: usize,
}

impl Comparison {
    /// True if every logit is within `tolerance` and every greedy token agrees.
    pub fn passes(&self, tolerance: f64) -> bool {
        self.max_logit_error <= tolerance && self.first_mismatch.iter().all(Option::is_none)
    }
}

impl Goldens {
    /// Reads a goldens file.
    pub fn load(path: &Path) -> Result<Goldens, ModelError> {
        let bytes = std::fs::read(path).map_err(|source| ModelError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let st = SafeTensors::deserialize(&bytes).map_err(|e| {
            ModelError::weights(format!(
                "{}: not a valid safetensors file: {e}",
                path.display()
            ))
        })?;
        let get = |name: &str, dtype: StDtype| {
            let t = st.tensor(name).map_err(|_| {
                ModelError::weights(format!("{}: no tensor `{name}`", path.display()))
            })?;
            if t.dtype() != dtype {
                return Err(ModelError::weights(format!(
                    "{}: `{name}` is {:?}, expected {dtype:?}",
                    path.display(),
                    t.dtype()
                )));
            }
            Ok((t.shape().to_vec(), t.data().to_vec()))
        };
        let words = |b: &[u8]| -> Vec<[u8; 4]> {
            b.chunks_exact(4)
                .map(|c| [c[0], c[1], c[2], c[3]])
                .collect()
        };
        let ids = |b: &[u8]| -> Vec<u32> {
            words(b)
                .into_iter()
                .map(|w| i32::from_le_bytes(w) as u32)
                .collect()
        };
        let mut g = Goldens {
            prompts: Vec::new(),
            logits: Vec::new(),
            greedy: Vec::new(),
        };
        while st
            .names()
            .contains(&format!("prompt.{}", g.prompts.len()).as_str())
        {
            let i = g.prompts.len();
            let (_, prompt) = get(&format!("prompt.{i}"), StDtype::I32)?;
            let (shape, logits) = get(&format!("logits.{i}"), StDtype::F32)?;
            let (_, greedy) = get(&format!("greedy.{i}"), StDtype::I32)?;
            let prompt = ids(&prompt);
            if shape.first() != Some(&prompt.len()) {
                return Err(ModelError::weights(format!(
                    "{}: `logits.{i}` has shape {shape:?}, its prompt {} tokens",
                    path.display(),
                    prompt.len()
                )));
            }
            g.prompts.push(prompt);
            g.logits
                .push(words(&logits).into_iter().map(f32::from_le_bytes).collect());
            g.greedy.push(ids(&greedy));
        }
        if g.prompts.is_empty() {
            return Err(ModelError::weights(format!(
                "{}: no `prompt.0`",
                path.display()
            )));
        }
        Ok(g)
    }
}

/// Runs `model` on the goldens' prompts (prefill logits, then greedy decode, each as one
/// batch) and compares.
pub fn check(ctx: &Context, model: &Qwen3, goldens: &Goldens) -> Result<Comparison, ModelError> {
    let prompts = &goldens.prompts;
    let new = goldens
        .greedy
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(1)
        .max(1);
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let limits = EngineLimits::for_prompts(model, prompts.len(), longest + new);
    let mut engine = Engine::new(ctx, model, limits)?;
    let logits = engine.prefill_logits(prompts)?;
    let mut max_logit_error = 0.0f64;
    let mut worst_at = (0, 0, 0);
    let vocab = model.config.vocab_size;
    for (p, (got, want)) in logits.iter().zip(&goldens.logits).enumerate() {
        if got.len() != want.len() {
            return Err(ModelError::request(format!(
                "prompt {p}: {} logits, the goldens hold {} (another vocabulary?)",
                got.len(),
                want.len()
            )));
        }
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let e = (f64::from(g) - f64::from(w)).abs();
            let e = if e.is_nan() { f64::INFINITY } else { e };
            if e > max_logit_error {
                max_logit_error = e;
                worst_at = (p, i / vocab, i % vocab);
            }
        }
    }
    let generation = engine.generate(prompts, new, &Sampling::greedy())?;
    let first_mismatch = generation
        .tokens
        .iter()
        .zip(&goldens.greedy)
        .map(|(got, want)| (0..want.len()).find(|&s| got.get(s) != want.get(s)))
        .collect();
    Ok(Comparison {
        max_logit_error,
        worst_at,
        greedy: generation.tokens,
        first_mismatch,
        graph_steps: generation.graph_steps,
    })
}
