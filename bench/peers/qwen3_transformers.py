"""Hugging Face transformers running a Qwen3 config with random weights: prefill and
decode throughput, to set beside `tessera generate --random-weights` at the same widths.

    python bench/peers/qwen3_transformers.py --model scripts/models/configs/qwen3-0.6b \
        --prompt-len 512 --batch 1 8 64 --max-new 64 [--layers L] [--dtype bf16]

Prefill: one forward pass over `batch` prompts of `prompt-len` random ids (eager
attention off: transformers' default SDPA). Decode: `max-new` steps of one token per
sequence through the KV cache (DynamicCache), greedy; both timed after an untimed
prefill and a few decode steps at the same shape. Prints
one line per batch size.
"""

import argparse
import json
import os
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="a folder with config.json")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--batch", type=int, nargs="+", default=[1])
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    a = ap.parse_args()
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    if a.layers:
        cfg["num_hidden_layers"] = a.layers
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    torch.manual_seed(0)
    config = Qwen3Config(**cfg)
    model = Qwen3ForCausalLM(config).to(device="cuda", dtype=dtype).eval()
    layers = config.num_hidden_layers
    for b in a.batch:
        ids = torch.randint(0, config.vocab_size, (b, a.prompt_len), device="cuda")
        with torch.no_grad():
            # Warm-up: the full prefill and a few decode steps, untimed.
            warm = model(ids, use_cache=True)
            for _ in range(3):
                warm = model(
                    warm.logits[:, -1].argmax(-1, keepdim=True),
                    past_key_values=warm.past_key_values,
                    use_cache=True,
                )
            del warm
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model(ids, use_cache=True)
            torch.cuda.synchronize()
            prefill = time.perf_counter() - t0
            cache = out.past_key_values
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            out = model(tok, past_key_values=cache, use_cache=True)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.max_new):
                out = model(tok, past_key_values=out.past_key_values, use_cache=True)
                tok = out.logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            decode = time.perf_counter() - t0
        print(
            f"transformers {torch.__version__} {a.dtype} layers={layers} batch={b} "
            f"prompt={a.prompt_len}: prefill {b * a.prompt_len / prefill:.0f} tok/s "
            f"({prefill * 1e3:.1f} ms), decode {b * a.max_new / decode:.0f} tok/s "
            f"({decode / a.max_new * 1e3:.2f} ms/step)",
            flush=True,
        )
        del cache, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
