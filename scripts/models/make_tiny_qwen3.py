#!/usr/bin/env python3
"""Writes a tiny randomly initialised Qwen3 decoder and its Hugging Face goldens.

The model (config.json + model.safetensors, bf16 weights: half the bytes of f32) and
goldens.safetensors land in the output folder (default:
crates/tessera-models/tests/fixtures/tiny-qwen3). The goldens are transformers' own eager
forward pass in f32 over those bf16 weights (each exactly representable in f32): the logits at every position of each prompt's
prefill (`logits.{i}` [len, vocab]) and its 32 greedy tokens (`greedy.{i}` [32], the first
from the prefill's last position), beside the prompts (`prompt.{i}`). Everything is drawn
from a fixed seed, so running it again writes the same files.

Needs torch and transformers:  python scripts/models/make_tiny_qwen3.py [OUT_DIR]
"""

import os
import sys

import torch
from safetensors.torch import save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

SEED = 23
PROMPT_LENS = [5, 11, 17]
NEW_TOKENS = 32
# The greedy goldens are only meaningful if no step is a near tie: f32 rounding
# differences between implementations (~1e-5 here) must not be able to flip a choice.
MIN_MARGIN = 1e-2


def config() -> Qwen3Config:
    return Qwen3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=128,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        tie_word_embeddings=True,
        attention_bias=False,
        hidden_act="silu",
        # Wider than the default 0.02, so the random logits are far apart and the greedy
        # path does not hinge on rounding.
        initializer_range=0.25,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )


def build() -> Qwen3ForCausalLM:
    torch.manual_seed(SEED)
    model = Qwen3ForCausalLM(config()).to(torch.float32)
    model.config._attn_implementation = "eager"
    # The RMSNorm weights start at one; perturb them so a norm that skipped its weight
    # would fail the comparison.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    # The checkpoint is bf16; the reference runs those same values in f32. Only the
    # parameters are rounded: `model.to(bfloat16)` would round the RoPE frequencies too.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    model.eval()
    return model


def greedy(model, prompt: torch.Tensor):
    """Greedy tokens by hand (full recompute each step), and the smallest top-2 margin."""
    ids = prompt.clone()
    tokens, margin = [], float("inf")
    for _ in range(NEW_TOKENS):
        logits = model(ids[None]).logits[0, -1].double()
        top = torch.topk(logits, 2).values
        margin = min(margin, float(top[0] - top[1]))
        t = int(torch.argmax(logits))
        tokens.append(t)
        ids = torch.cat([ids, torch.tensor([t])])
    return tokens, margin


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "../../crates/tessera-models/tests/fixtures/tiny-qwen3"
    )
    os.makedirs(out, exist_ok=True)
    model = build()
    gen = torch.Generator().manual_seed(SEED + 1)
    vocab = model.config.vocab_size
    goldens = {}
    with torch.no_grad():
        for i, n in enumerate(PROMPT_LENS):
            prompt = torch.randint(0, vocab, (n,), generator=gen)
            logits = model(prompt[None]).logits[0]
            tokens, margin = greedy(model, prompt)
            # The cached path transformers serves must agree with the recompute.
            cached = model.generate(
                prompt[None], max_new_tokens=NEW_TOKENS, do_sample=False, min_new_tokens=NEW_TOKENS
            )[0, n:].tolist()
            assert cached == tokens, (cached, tokens)
            assert margin > MIN_MARGIN, f"prompt {i}: a greedy step is a near tie ({margin})"
            print(f"prompt {i}: {n} tokens, greedy {tokens[:8]}..., smallest top-2 margin {margin:.4f}")
            goldens[f"prompt.{i}"] = prompt.to(torch.int32)
            goldens[f"logits.{i}"] = logits.to(torch.float32).contiguous()
            goldens[f"greedy.{i}"] = torch.tensor(tokens, dtype=torch.int32)
    # Last: this rounds the model's buffers as well as its (already rounded) weights.
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    # Generation defaults are not part of what is checked.
    gen_config = os.path.join(out, "generation_config.json")
    if os.path.exists(gen_config):
        os.remove(gen_config)
    save_file(goldens, os.path.join(out, "goldens.safetensors"))
    for f in sorted(os.listdir(out)):
        print(f, os.path.getsize(os.path.join(out, f)))


if __name__ == "__main__":
    main()
