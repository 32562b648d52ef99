//! `tessera generate --model DIR --tokens 1,2,3 [--tokens …] [--max-new N] [--temperature
//! T] [--top-k K] [--top-p P] [--seed S] [--copies C] [--backend B]`: loads a Hugging Face
//! Qwen3 folder, prefills the prompts as one batch (each `--tokens` is a prompt, each
//! repeated `--copies` times), decodes `--max-new` tokens each, and prints the generated
//! ids with the prefill and decode throughput. A first, untimed request of three tokens
//! compiles every kernel the timed one runs and, on CUDA, records its decode step as a
//! device graph (`--no-graphs`: every step eager, for comparison).
//!
//! `--dtype D` holds the model in D (the checkpoint converted while loading).
//! `--random-weights [--layers L]` takes only the folder's config.json and draws random
//! weights at its widths (a real model's sizes without its checkpoint, for speed);
//! `--prompt-len L` makes a prompt of L token ids. `--goldens FILE` instead checks
//! the model against reference goldens (`scripts/models/make_tiny_qwen3.py`): the logits
//! at every prefill position within `--tolerance`, and every greedy token.

use crate::kernels::{context, parse_dtype};
use std::path::PathBuf;
use std::process::ExitCode;
use tessera_models::verify::{check, Goldens};
use tessera_models::{Engine, EngineLimits, Generation, Qwen3, Qwen3Config, Sampling};
use tessera_runtime::{Context, DType};

#[derive(clap::Args)]
pub struct Args {
    /// A folder holding config.json and model.safetensors (or an index and its shards).
    #[arg(long)]
    model: PathBuf,
    /// A prompt's token ids, comma-separated; repeat for a batch.
    #[arg(long = "tokens")]
    prompts: Vec<String>,
    /// A prompt of this many token ids (0, 1, 2, … modulo the vocabulary), beside any
    /// `--tokens`.
    #[arg(long)]
    prompt_len: Option<usize>,
    /// Tokens to generate per prompt.
    #[arg(long, default_value_t = 32)]
    max_new: usize,
    /// 0 (the default) is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Keep the k most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: u32,
    /// Keep the smallest set of tokens holding this much probability (1: all).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Run each prompt this many times in the batch (for throughput at a batch size).
    #[arg(long, default_value_t = 1)]
    copies: usize,
    /// Random weights at config.json's widths instead of the checkpoint.
    #[arg(long)]
    random_weights: bool,
    /// Hold the weights, activations and cache in this dtype (bf16, f16 or f32): the
    /// checkpoint's converted while loading; with --random-weights, bf16 unless given.
    #[arg(long)]
    dtype: Option<String>,
    /// With --random-weights: this many layers instead of the config's.
    #[arg(long, requires = "random_weights")]
    layers: Option<usize>,
    /// Check against a goldens file instead of generating from prompts.
    #[arg(long, conflicts_with_all = ["prompts", "prompt_len", "random_weights"])]
    goldens: Option<PathBuf>,
    /// With --goldens: the largest allowed |logit − reference|.
    #[arg(long, default_value_t = 1e-3, requires = "goldens")]
    tolerance: f64,
    /// cpu, cuda, metal or metal-emu (default: the best present).
    #[arg(long)]
    backend: Option<String>,
    /// Run every decode step eagerly instead of replaying it from a recorded device
    /// graph (CUDA), for comparison; the same as TESSERA_NO_GRAPHS=1.
    #[arg(long)]
    no_graphs: bool,
}

/// `"1, 2,3"` → `[1, 2, 3]`.
fn parse_ids(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| format!("--tokens: `{t}` is not a token id (a non-negative integer)"))
        })
        .collect()
}

fn load(args: &Args, ctx: &Context) -> Result<Qwen3, String> {
    let dtype = args.dtype.as_deref().map(parse_dtype).transpose()?;
    if !args.random_weights {
        return Qwen3::load_as(ctx, &args.model, dtype).map_err(|e| e.to_string());
    }
    let mut config = Qwen3Config::load(&args.model).map_err(|e| e.to_string())?;
    if let Some(layers) = args.layers {
        if layers == 0 {
            return Err("--layers must be at least 1".into());
        }
        config.num_hidden_layers = layers;
    }
    let dtype = dtype.unwrap_or(DType::BF16);
    Qwen3::random(ctx, config, dtype, args.seed).map_err(|e| e.to_string())
}

fn describe(args: &Args, model: &Qwen3, ctx: &Context) {
    let c = &model.config;
    println!(
        "model: {}{} (qwen3, {} layers, hidden {}, intermediate {}, {} q / {} kv heads of {}, vocab {}, {}{}) on {}",
        args.model.display(),
        if args.random_weights { " with random weights" } else { "" },
        c.num_hidden_layers,
        c.hidden_size,
        c.intermediate_size,
        c.num_attention_heads,
        c.num_key_value_heads,
        c.head_dim,
        c.vocab_size,
        model.dtype,
        if model.tied() { ", tied head" } else { "" },
        ctx.kind()
    );
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    if args.no_graphs {
        // Read by every engine this process makes, the goldens check's included; set
        // before any thread starts.
        std::env::set_var(tessera_models::engine::NO_GRAPHS_ENV, "1");
    }
    let ctx = context(args.backend.as_deref())?;
    if let Some(path) = &args.goldens {
        let model = load(&args, &ctx)?;
        describe(&args, &model, &ctx);
        return verify(&ctx, &model, path, args.tolerance);
    }
    let mut prompts = Vec::new();
    for p in &args.prompts {
        prompts.push(parse_ids(p)?);
    }
    let sampling = Sampling {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: 0.0,
        seed: args.seed,
    };
    sampling.check().map_err(|e| e.to_string())?;
    let model = load(&args, &ctx)?;
    describe(&args, &model, &ctx);
    if let Some(n) = args.prompt_len {
        let vocab = model.config.vocab_size as u32;
        prompts.push((0..n as u32).map(|i| i % vocab).collect());
    }
    if prompts.is_empty() {
        return Err("give a prompt: --tokens 1,2,3 or --prompt-len N (or --goldens FILE)".into());
    }
    let prompts: Vec<Vec<u32>> = prompts
        .iter()
        .flat_map(|p| std::iter::repeat_n(p.clone(), args.copies.max(1)))
        .collect();
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let limits = EngineLimits::for_prompts(&model, prompts.len(), longest + args.max_new);
    let mut engine = Engine::new(&ctx, &model, limits).map_err(|e| e.to_string())?;
    engine
        .generate(&prompts, args.max_new.min(3), &sampling)
        .map_err(|e| e.to_string())?;
    let g = engine
        .generate(&prompts, args.max_new, &sampling)
        .map_err(|e| e.to_string())?;
    report(&g);
    Ok(ExitCode::SUCCESS)
}

/// The generated ids (the first 8 sequences) and the throughput.
fn report(g: &Generation) {
    const SHOWN: usize = 8;
    for (i, tokens) in g.tokens.iter().enumerate().take(SHOWN) {
        let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
        println!("{i}: {}", ids.join(","));
    }
    if g.tokens.len() > SHOWN {
        println!("… and {} more sequences", g.tokens.len() - SHOWN);
    }
    let rate = |n: usize, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
    println!(
        "prefill: {} tokens in {:.4} s, {:.1} tokens/s",
        g.prefill_tokens,
        g.prefill_secs,
        rate(g.prefill_tokens, g.prefill_secs)
    );
    let steps = g.decode_tokens / g.tokens.len().max(1);
    println!(
        "decode: {} tokens in {:.4} s, {:.1} tokens/s (batch {}, {} of {steps} steps replayed from a device graph)",
        g.decode_tokens,
        g.decode_secs,
        rate(g.decode_tokens, g.decode_secs),
        g.tokens.len(),
        g.graph_steps
    );
}

/// Checks the model against a goldens file; exit status 1 when it misses.
fn verify(
    ctx: &Context,
    model: &Qwen3,
    path: &std::path::Path,
    tolerance: f64,
) -> Result<ExitCode, String> {
    let goldens = Goldens::load(path).map_err(|e| e.to_string())?;
    let cmp = check(ctx, model, &goldens).map_err(|e| e.to_string())?;
    println!(
        "logits: max |error| {:.3e} at (prompt, position, token) {:?}, tolerance {tolerance:e}",
        cmp.max_logit_error, cmp.worst_at
    );
    for (p, (miss, want)) in cmp.first_mismatch.iter().zip(&goldens.greedy).enumerate() {
        match miss {
            None => println!("prompt {p}: all {} greedy tokens match", want.len()),
            Some(s) => println!(
                "prompt {p}: greedy tokens differ from step {s} (got {:?}, want {:?})",
                cmp.greedy[p].get(*s),
                want.get(*s)
            ),
        }
    }
    println!(
        "decode: {} of {} steps replayed from a device graph",
        cmp.graph_steps,
        goldens
            .greedy
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(1)
            .saturating_sub(1)
    );
    if cmp.passes(tolerance) {
        println!("PASS");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("FAIL");
        Ok(ExitCode::from(1))
    }
}
