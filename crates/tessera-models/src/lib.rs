//! Model runners built only on Tessera's op wrappers: a Qwen3 dense decoder loaded from a
//! Hugging Face folder (`config.json` + `.safetensors`, bf16 / f16 / f32), a paged KV cache
//! per sequence, batched prefill of prompts of different lengths and batched greedy or
//! sampled decode. Every step of the forward pass is an op of `tessera-std` launched on a
//! `tessera_runtime::Context`, so one code path runs on the CPU interpreter, CUDA and
//! Metal; the host only keeps the books (token ids, positions, page tables).
//!
//! ```no_run
//! use tessera_models::{Engine, EngineLimits, Qwen3, Sampling};
//! let ctx = tessera_runtime::Context::new()?;
//! let model = Qwen3::load(&ctx, std::path::Path::new("tiny-qwen3"))?;
//! let mut engine = Engine::new(&ctx, &model, EngineLimits::for_prompts(&model, 2, 64))?;
//! let out = engine.generate(&[vec![1, 2, 3], vec![4, 5]], 16, &Sampling::greedy())?;
//! println!("{:?}", out.tokens);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cache;
pub mod config;
pub mod engine;
pub mod error;
pub mod linear;
pub mod qwen3;
pub mod sampling;
pub mod verify;
pub mod weights;

pub use cache::PagedCache;
pub use config::Qwen3Config;
pub use engine::{Engine, EngineLimits, Generation};
pub use error::ModelError;
pub use qwen3::Qwen3;
pub use sampling::Sampling;
