#!/usr/bin/env python3
"""Times tessera's peers on the registered bench shapes, on the same GPU.

Reads the shapes from `tessera bench --list-shapes --json FILE` (so the shapes stay in
sync with the registry), times every peer that applies to each shape and writes the peer
JSON that `tessera bench --compare` reads (schema: docs/bench-json.md).

Timing follows tessera's harness: input sets rotated so that together they exceed twice
the L2 cache (memory-bound shapes), warm-up, median of 9 samples, each sample a CUDA
graph of many launches replayed (kernels under 500 µs) or CUDA events around plain
launches. A peer that cannot run a shape gets `us: null` and the reason.

Peers: PyTorch SDPA (decode with enable_gqa, and with the GQA group folded into query
rows; paged decode as the pages gathered through the block table, then SDPA; prefill
with enable_gqa; a packed prefill batch per sequence and padded to its longest prompt; a chunked prefill
over pages as the pages gathered, then SDPA with a lower-right causal mask), F.rms_norm eager and under torch.compile, Liger RMSNorm,
flash-linear-attention's chunk_gated_delta_rule and fused_recurrent_gated_delta_rule,
and for the elementwise ops PyTorch eager (and torch.compile for the gated activations):
silu(gate)·up, gelu(gate)·up, a + b, Tensor.to and F.embedding; for the dense, the
MLX-affine, the GGUF, the GPTQ, the AWQ and the fp8 GEMV and GEMM, PyTorch's dense `x @ W.T`
(cuBLAS) in the activations' dtype (and for fp8 the eager dequantize-then-matmul, and
torch._scaled_mm for the fp8 GEMM); for
sampling vLLM's PyTorch top-k/top-p path (torch.sort, cumsum, masks, softmax,
torch.multinomial) and torch.argmax; for the reductions torch.sum (f32 out), torch.amax,
torch.topk, torch.cumsum and torch.sort / torch.argsort (stable=True), and for hadamard a
matmul with the scaled Hadamard matrix (for n = m·2^k the Kronecker product with QuaRot's
H_m) and Dao-AILab's fast_hadamard_transform where it is installed; for fft torch.fft.fft
(cuFFT) on complex64;
for the MoE expert projections (dense and MLX-affine experts) `torch._grouped_mm` over the
pairs sorted by expert and the per-expert loop, and for the prefill grouped GEMM the same
two on rows already grouped by expert; for the fused gate/up SiLU·mul GEMV and
the fused RMSNorm + per-token quantization, the unfused PyTorch sequence eager and under
torch.compile.

usage: run_peers.py SHAPES.json OUT.json [--only PEER,PEER] [--filter OP]
"""

import argparse
import json
import math
import sys
import time
import traceback

import torch
import torch.nn.functional as F

DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
GRAPH_BELOW_US = 500.0
SAMPLES = 9
MAX_SETS = 64
DEV = "cuda"


def l2_bytes():
    try:
        return torch.cuda.get_device_properties(0).L2_cache_size
    except Exception:
        return 50 << 20


def sets_for(nbytes, flops):
    if nbytes <= 0 or flops > 20 * nbytes:
        return 1
    return max(1, min(MAX_SETS, math.ceil(2 * l2_bytes() / nbytes)))


def _events_time(fn, iters):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3  # µs


def time_sets(calls, budget_ms=200.0):
    """Median µs per call, rotating through `calls` (one closure per input set)."""
    n = len(calls)
    for c in calls:
        c()
    torch.cuda.synchronize()
    idx = [0]

    def rotate():
        calls[idx[0] % n]()
        idx[0] += 1

    est = max(_events_time(rotate, n) / n, 0.2)
    per_sample_us = budget_ms * 1e3 / SAMPLES
    iters = int(min(max(per_sample_us / est, 1), 4000))
    if est < GRAPH_BELOW_US:
        try:
            launches = math.ceil(min(max(iters, 1), 400) / n) * n
            replays = max(1, min(50, iters // launches))
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for c in calls:
                    c()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(launches):
                    calls[i % n]()
            g.replay()
            torch.cuda.synchronize()
            samples = sorted(_events_time(g.replay, replays) / (launches * replays)
                             for _ in range(SAMPLES))
            return samples[SAMPLES // 2], "graph"
        except Exception as ex:  # fall back to plain launches
            print(f"  (graph capture failed: {type(ex).__name__}: {ex}; timing plain launches)",
                  file=sys.stderr)
            torch.cuda.synchronize()
    samples = sorted(_events_time(rotate, iters) / iters for _ in range(SAMPLES))
    return samples[SAMPLES // 2], "events"


def rnd(shape, dt, lo=-1.0, hi=1.0):
    return (torch.rand(shape, device=DEV, dtype=torch.float32) * (hi - lo) + lo).to(dt)


# ── peers per op: each returns a list of (peer name, [closure per set]) ──────────────

def sdpa_decode_peers(p, dt, nsets, batched):
    b = p.get("B", 1)
    hq, hkv, d = p["hq"], p["hkv"], p["d"]
    n = p["len"] if batched else p["n_kv"]
    g = hq // hkv
    sets = []
    for _ in range(nsets):
        q = rnd((b, hq, 1, d), dt)
        k = rnd((b, hkv, n, d), dt)
        v = rnd((b, hkv, n, d), dt)
        sets.append((q, k, v))
    out = []
    out.append(("torch_sdpa_gqa", [
        (lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        for q, k, v in sets]))
    # The GQA group as g query rows against its KV head: no mask is needed for decode,
    # and every SDPA backend (flash, efficient, cuDNN) takes it.
    out.append(("torch_sdpa_grouped", [
        (lambda q=q.view(b, hkv, g, d), k=k, v=v: F.scaled_dot_product_attention(q, k, v))
        for q, k, v in sets]))
    try:
        import flashinfer  # noqa: F401
        if not batched:
            out.append(("flashinfer_decode", [
                (lambda q=q.view(hq, d), k=k[0].transpose(0, 1).contiguous(),
                 v=v[0].transpose(0, 1).contiguous():
                 flashinfer.single_decode_with_kv_cache(q, k, v))
                for q, k, v in sets]))
    except Exception as ex:
        out.append(("flashinfer_decode", ex))
    return out


def sdpa_decode_paged_peers(p, dt, nsets):
    """Paged decode in plain PyTorch: each sequence's pages gathered through its vLLM block
    table (NHD pages, shuffled), then SDPA with enable_gqa over the gathered keys."""
    b, hq, hkv, d, n, page = p["B"], p["hq"], p["hkv"], p["d"], p["len"], p["page"]
    npg = -(-n // page)
    blocks = b * npg + 1
    sets = []
    for _ in range(nsets):
        table = torch.randperm(blocks, device=DEV)[: b * npg].view(b, npg).to(torch.int32)
        sets.append((rnd((b, hq, 1, d), dt), rnd((blocks, page, hkv, d), dt),
                     rnd((blocks, page, hkv, d), dt), table))

    def gather_sdpa(q, kc, vc, table):
        idx = table.long()
        k = kc[idx].reshape(b, npg * page, hkv, d)[:, :n].transpose(1, 2)
        v = vc[idx].reshape(b, npg * page, hkv, d)[:, :n].transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    return [("torch_gather_sdpa_gqa", [(lambda s=s: gather_sdpa(*s)) for s in sets])]


def sdpa_prefill_paged_peers(p, dt, nsets):
    """Chunked prefill over paged caches in plain PyTorch: each sequence's pages gathered
    through its vLLM block table (NHD pages, shuffled), then SDPA with enable_gqa and the
    causal mask aligned to the last key (the chunk's queries are the last positions)."""
    from torch.nn.attention.bias import causal_lower_right
    b, hq, hkv, d = p["B"], p["hq"], p["hkv"], p["d"]
    prefix, chunk, page = p["prefix"], p["chunk"], p["page"]
    n = prefix + chunk
    npg = -(-n // page)
    blocks = b * npg + 1
    mask = causal_lower_right(chunk, n)
    sets = []
    for _ in range(nsets):
        table = torch.randperm(blocks, device=DEV)[: b * npg].view(b, npg).to(torch.int32)
        sets.append((rnd((b, hq, chunk, d), dt), rnd((blocks, page, hkv, d), dt),
                     rnd((blocks, page, hkv, d), dt), table))

    def gather_sdpa(q, kc, vc, table):
        idx = table.long()
        k = kc[idx].reshape(b, npg * page, hkv, d)[:, :n].transpose(1, 2)
        v = vc[idx].reshape(b, npg * page, hkv, d)[:, :n].transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    return [("torch_gather_sdpa_causal_lower_right",
             [(lambda s=s: gather_sdpa(*s)) for s in sets])]


def sdpa_prefill_peers(p, dt, nsets):
    hq, hkv, d, n = p["hq"], p["hkv"], p["d"], p["n"]
    causal = bool(p.get("causal", False))
    sets = [(rnd((1, hq, n, d), dt), rnd((1, hkv, n, d), dt), rnd((1, hkv, n, d), dt))
            for _ in range(nsets)]
    return [("torch_sdpa_gqa", [
        (lambda q=q, k=k, v=v: F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, enable_gqa=True))
        for q, k, v in sets])]


def sdpa_prefill_varlen_peers(p, dt, nsets):
    """A packed batch of prompts: PyTorch SDPA (cuDNN) once per sequence, as an engine
    without a variable-length kernel runs it, and once over the batch padded to the
    longest prompt."""
    lens = [int(x) for x in str(p["lens"]).split(",")]
    hq, hkv, d = p["hq"], p["hkv"], p["d"]
    total, longest = sum(lens), max(lens)
    sets = [(rnd((total, hq, d), dt), rnd((total, hkv, d), dt), rnd((total, hkv, d), dt))
            for _ in range(nsets)]
    padded = [(rnd((len(lens), hq, longest, d), dt), rnd((len(lens), hkv, longest, d), dt),
               rnd((len(lens), hkv, longest, d), dt)) for _ in range(nsets)]

    def per_sequence(q, k, v):
        at = 0
        for n in lens:
            s = slice(at, at + n)
            F.scaled_dot_product_attention(
                q[s].transpose(0, 1), k[s].transpose(0, 1), v[s].transpose(0, 1),
                is_causal=True, enable_gqa=True)
            at += n

    return [
        ("torch_sdpa_per_sequence",
         [(lambda q=q, k=k, v=v: per_sequence(q, k, v)) for q, k, v in sets]),
        ("torch_sdpa_padded", [
            (lambda q=q, k=k, v=v: F.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=True))
            for q, k, v in padded]),
    ]


_compiled_rms = None


def rms_norm_peers(p, dt, nsets):
    global _compiled_rms
    rows, n = p["rows"], p["n"]
    eps = 1e-5
    sets = [(rnd((rows, n), dt, -3, 3), rnd((n,), dt, 0.5, 1.5)) for _ in range(nsets)]
    out = [("torch_rms_norm", [(lambda x=x, w=w: F.rms_norm(x, (n,), w, eps)) for x, w in sets])]
    if _compiled_rms is None:
        _compiled_rms = torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-5),
                                      dynamic=False)
    out.append(("torch_compile_rms_norm",
                [(lambda x=x, w=w: _compiled_rms(x, w)) for x, w in sets]))
    try:
        from liger_kernel.transformers.functional import liger_rms_norm
        out.append(("liger_rms_norm", [
            (lambda x=x, w=w: liger_rms_norm(x, w, eps, offset=0.0, casting_mode="llama",
                                             in_place=False))
            for x, w in sets]))
    except Exception as ex:
        out.append(("liger_rms_norm", ex))
    return out


def _gdn_inputs(b, t, hk, hv, dk, dv, dt):
    q = F.normalize(rnd((b, t, hk, dk), torch.float32), dim=-1).to(dt)
    k = F.normalize(rnd((b, t, hk, dk), torch.float32), dim=-1).to(dt)
    v = rnd((b, t, hv, dv), dt)
    g = F.logsigmoid(rnd((b, t, hv), torch.float32, 2.0, 6.0)).to(dt)
    beta = torch.rand((b, t, hv), device=DEV, dtype=torch.float32).to(dt)
    return q, k, v, g, beta


def _gva(q, k, hv):
    """fla versions without grouped value heads take q/k with as many heads as v."""
    rep = hv // q.shape[2]
    return q.repeat_interleave(rep, dim=2), k.repeat_interleave(rep, dim=2)


def gdn_decode_peers(p, dt, nsets):
    b, hk, hv, dk, dv = p["B"], p["Hk"], p["Hv"], p["Dk"], p["Dv"]
    if p.get("state") not in ("f32", None):
        return [("fla_fused_recurrent", RuntimeError("fla keeps the recurrent state in f32"))]
    try:
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fr
    except Exception as ex:
        return [("fla_fused_recurrent", ex)]
    sets = []
    for _ in range(nsets):
        q, k, v, g, beta = _gdn_inputs(b, 1, hk, hv, dk, dv, dt)
        h0 = rnd((b, hv, dk, dv), torch.float32, -0.1, 0.1)
        sets.append((q, k, v, g, beta, h0))
    q, k, v, g, beta, h0 = sets[0]
    try:
        fr(q, k, v, g, beta, initial_state=h0, output_final_state=True)
        grouped = True
    except Exception:
        grouped = False
    calls = []
    for q, k, v, g, beta, h0 in sets:
        if not grouped:
            q, k = _gva(q, k, hv)
        calls.append(lambda q=q, k=k, v=v, g=g, beta=beta, h0=h0: fr(
            q, k, v, g, beta, initial_state=h0, output_final_state=True))
    return [("fla_fused_recurrent" + ("" if grouped else "_repeat_qk"), calls)]


def gdn_prefill_peers(p, dt, nsets):
    t, hk, hv, dk, dv = p["T"], p["Hk"], p["Hv"], p["Dk"], p["Dv"]
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as ch
    except Exception as ex:
        return [("fla_chunk", ex)]
    q, k, v, g, beta = _gdn_inputs(1, t, hk, hv, dk, dv, dt)
    try:
        ch(q, k, v, g, beta, output_final_state=True)
        grouped = True
    except Exception:
        grouped = False
        q, k = _gva(q, k, hv)
    return [("fla_chunk" + ("" if grouped else "_repeat_qk"),
             [lambda: ch(q, k, v, g, beta, output_final_state=True)])]


def _act(p):
    if p.get("silu"):
        return F.silu
    approx = "tanh" if p.get("tanh") else "none"
    return lambda g: F.gelu(g, approximate=approx)


_compiled_act = {}


def gated_peers(p, dt, nsets, packed):
    rows, d, act = p["rows"], p["d"], _act(p)
    key = (tuple(sorted(k for k in p if p[k] is True)), packed)
    if packed:
        sets = [rnd((rows, 2 * d), dt, -4, 4) for _ in range(nsets)]
        fn = lambda gu: act(gu[..., :d]) * gu[..., d:]  # noqa: E731
        calls = lambda f: [(lambda gu=gu: f(gu)) for gu in sets]  # noqa: E731
    else:
        sets = [(rnd((rows, d), dt, -4, 4), rnd((rows, d), dt, -4, 4)) for _ in range(nsets)]
        fn = lambda g, u: act(g) * u  # noqa: E731
        calls = lambda f: [(lambda g=g, u=u: f(g, u)) for g, u in sets]  # noqa: E731
    if key not in _compiled_act:
        _compiled_act[key] = torch.compile(fn, dynamic=False)
    return [("torch_eager", calls(fn)), ("torch_compile", calls(_compiled_act[key]))]


def add_peers(p, dt, nsets):
    sets = [(rnd((p["n"],), dt), rnd((p["n"],), dt)) for _ in range(nsets)]
    return [("torch_add", [(lambda a=a, b=b: a + b) for a, b in sets])]


def cast_peers(p, dt, nsets):
    to = next(DT[k] for k in DT if p.get(k))
    sets = [rnd((p["n"],), dt) for _ in range(nsets)]
    return [("torch_to", [(lambda x=x: x.to(to)) for x in sets])]


def embedding_peers(p, dt, nsets):
    tokens, vocab, d = p["tokens"], p["vocab"], p["d"]
    table = rnd((vocab, d), dt)
    sets = [torch.randint(0, vocab, (tokens,), device=DEV, dtype=torch.int32)
            for _ in range(nsets)]
    return [("torch_embedding", [(lambda i=i: F.embedding(i, table)) for i in sets])]


# ── GEMV: dense and on MLX affine weights (matmul/gemv.rs, quant/qgemv.rs) ───────────────


def linear_peers(p, dt, nsets):
    """PyTorch's `x @ W.T` with W a dense [N, K] matrix in the activations' dtype (cuBLAS):
    the peer of the dense GEMV, and of the quantized GEMV and GEMM (what they replace). Its
    own input sets: dense weights are larger than the quantized row's bytes."""
    m, n, k = p["M"], p["N"], p["K"]
    sets = [(rnd((m, k), dt), rnd((n, k), dt, -0.05, 0.05))
            for _ in range(sets_for(n * k * dt.itemsize, 0))]
    return [("torch_matmul", [(lambda x=x, w=w: x @ w.T) for x, w in sets])]


def matmul_peers(p, dt, nsets):
    """`torch.matmul(a, b)` with b [K, N] (cuBLAS), the peer of the tiled GEMM."""
    m, n, k = p["M"], p["N"], p["K"]
    sets = [(rnd((m, k), dt), rnd((k, n), dt, -0.05, 0.05))
            for _ in range(sets_for((m * k + k * n) * dt.itemsize, 0))]
    return [("torch_matmul", [(lambda a=a, b=b: a @ b) for a, b in sets])]


def gemv_silu_mul_peers(p, dt, nsets):
    """The unfused dense MLP first half: `x @ W_gate_up.T` (cuBLAS), then SiLU·mul, eager
    and under torch.compile (which fuses the SiLU·mul, not the matmul)."""
    m, i, k = p["M"], p["I"], p["K"]
    sets = [(rnd((m, k), dt), rnd((2 * i, k), dt, -0.05, 0.05))
            for _ in range(sets_for(2 * i * k * dt.itemsize, 0))]

    def eager(x, w):
        gu = x @ w.T
        return F.silu(gu[:, :i]) * gu[:, i:]
    compiled = torch.compile(eager, dynamic=False)
    return [("torch_matmul_silu_mul", [(lambda x=x, w=w: eager(x, w)) for x, w in sets]),
            ("torch_compile_matmul_silu_mul",
             [(lambda x=x, w=w: compiled(x, w)) for x, w in sets])]


# ── RMSNorm + per-token quantization (norm/rms_norm_quant.rs) ─────────────────────────


def rms_norm_quant_peers(p, dt, nsets, residual):
    """RMSNorm (after the residual add) then a per-row amax scale and the cast to fp8 or
    int8, eager and under torch.compile (which fuses it into one or two kernels)."""
    rows, n, fmt = p["rows"], p["n"], p["format"]
    qmax = {"e4m3": 448.0, "e5m2": 57344.0, "int8": 127.0}[fmt]
    to = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "int8": torch.int8}[fmt]
    sets = [(rnd((rows, n), dt, -2, 2), rnd((rows, n), dt, -2, 2), rnd((n,), dt, 0.5, 1.5))
            for _ in range(nsets)]

    def eager(x, r, w):
        if residual:
            x = x + r
        y = F.rms_norm(x, (n,), w, 1e-5).float()
        s = y.abs().amax(-1, keepdim=True) / qmax
        q = y / s
        q = q.round().clamp(-128, 127) if fmt == "int8" else q.clamp(-qmax, qmax)
        return q.to(to), s, x
    compiled = torch.compile(eager, dynamic=False)
    return [("torch_rms_norm_quant", [(lambda a=a: eager(*a)) for a in sets]),
            ("torch_compile_rms_norm_quant", [(lambda a=a: compiled(*a)) for a in sets])]


# ── fp8 GEMV (quant/fp8_qgemv.rs) ────────────────────────────────────────────────────


def fp8_qgemv_peers(p, dt, nsets):
    """For the fp8 GEMV: PyTorch's `x @ W.T` on the weight already dequantized to the
    activations' dtype (what the fp8 weight replaces), and the eager path an engine
    without an fp8 GEMV takes: `torch.float8_e4m3fn` weights cast up, times the scale
    expanded over their 128×128 tiles (or the tensor's one scale), then the matmul.
    (`torch._scaled_mm` is a GEMM that quantizes the activations too: not this op.)"""
    m, n, k = p["M"], p["N"], p["K"]
    peers = linear_peers(p, dt, nsets)
    tiled = p.get("scaling") == "128x128"
    sn, sk = (-(-n // 128), -(-k // 128)) if tiled else (1, 1)
    sets = []
    for _ in range(sets_for(n * k, 0)):
        w8 = rnd((n, k), torch.float32, -448.0, 448.0).to(torch.float8_e4m3fn)
        s = torch.rand((sn, sk), device=DEV, dtype=torch.float32) / 448.0
        sets.append((rnd((m, k), dt), w8, s))

    def dequant_matmul(x, w8, s):
        if tiled:
            s = s.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
        return x @ (w8.to(torch.float32) * s).to(x.dtype).T

    peers.append(("torch_fp8_dequant_matmul",
                  [(lambda x=x, w8=w8, s=s: dequant_matmul(x, w8, s)) for x, w8, s in sets]))
    return peers


def fp8_qgemm_peers(p, dt, nsets):
    """For the fp8 GEMM of prefill: the GEMV's peers (dense `x @ W.T`, the eager
    dequantize-then-matmul) and `torch._scaled_mm`, cuBLAS's fp8 GEMM, on e4m3 x and W
    with per-tensor scales (it quantizes the activations too, which fp8_qgemm does not:
    the bar the fp8 GEMM is held to)."""
    m, n, k = p["M"], p["N"], p["K"]
    peers = fp8_qgemv_peers(p, dt, nsets)
    if not hasattr(torch, "_scaled_mm"):
        return peers
    one = torch.ones((), device=DEV, dtype=torch.float32)
    sets = [(rnd((m, k), torch.float32, -448.0, 448.0).to(torch.float8_e4m3fn),
             rnd((n, k), torch.float32, -448.0, 448.0).to(torch.float8_e4m3fn))
            for _ in range(sets_for(n * k, 0))]
    peers.append(("torch_scaled_mm_e4m3",
                  [(lambda a=a, b=b: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                                       out_dtype=dt)) for a, b in sets]))
    return peers


# ── sampling: PyTorch's sort-based top-k / top-p and its argmax ─────────────────────


def _torch_top_k_top_p_sample(logits, temperature, k, p):
    """vLLM's PyTorch path: scale, sort, mask below the k-th, mask the low cumulative
    mass, softmax, then torch.multinomial."""
    x = logits.float() / temperature
    srt, idx = torch.sort(x, dim=-1, descending=False)
    kth = srt.gather(-1, (srt.shape[-1] - k).clamp(min=0).unsqueeze(-1))
    srt = srt.masked_fill(srt < kth, float("-inf"))
    probs = srt.softmax(dim=-1)
    drop = probs.cumsum(dim=-1) <= (1.0 - p).unsqueeze(-1)
    drop[:, -1] = False
    srt = srt.masked_fill(drop, float("-inf"))
    x = torch.empty_like(srt).scatter_(-1, idx, srt)
    return torch.multinomial(x.softmax(dim=-1), 1)


def sample_peers(p, dt, nsets):
    b, v = p["batch"], p["vocab"]
    k = torch.full((b,), int(p.get("top_k", 50)), device=DEV, dtype=torch.int64)
    top_p = torch.full((b,), float(p.get("top_p", 0.9)), device=DEV, dtype=torch.float32)
    t = torch.full((b, 1), 0.7, device=DEV, dtype=torch.float32)
    sets = [rnd((b, v), dt, -4.0, 4.0) for _ in range(nsets)]
    return [("torch_sort_top_k_top_p",
             [(lambda x=x: _torch_top_k_top_p_sample(x, t, k, top_p)) for x in sets])]


def argmax_peers(p, dt, nsets):
    sets = [rnd((p["batch"], p["vocab"]), dt, -4.0, 4.0) for _ in range(nsets)]
    return [("torch_argmax", [(lambda x=x: torch.argmax(x, dim=-1)) for x in sets])]


# ── reduce and hadamard: torch.sum/amax, torch.topk, torch.cumsum, a Hadamard matmul ─────


def row_reduce_peers(p, dt, nsets):
    sets = [rnd((p["rows"], p["n"]), dt, 0.0, 1.0) for _ in range(nsets)]
    if p["reduction"] == "max":
        return [("torch_amax", [(lambda x=x: torch.amax(x, dim=-1)) for x in sets])]
    return [("torch_sum_f32", [(lambda x=x: torch.sum(x, dim=-1, dtype=torch.float32))
                               for x in sets])]


def topk_peers(p, dt, nsets):
    sets = [rnd((p["batch"], p["vocab"]), dt, -4.0, 4.0) for _ in range(nsets)]
    k = p["k"]
    return [("torch_topk", [(lambda x=x: torch.topk(x, k, dim=-1, sorted=True)) for x in sets])]


def cumsum_peers(p, dt, nsets):
    sets = [rnd((p["rows"], p["n"]), dt, 0.0, 1.0) for _ in range(nsets)]
    return [("torch_cumsum", [(lambda x=x: torch.cumsum(x, dim=-1)) for x in sets])]


def sort_peers(p, dt, nsets, values_too):
    sets = [rnd((p["rows"], p["n"]), dt, -4.0, 4.0) for _ in range(nsets)]
    if values_too:
        return [("torch_sort_stable", [(lambda x=x: torch.sort(x, dim=-1, stable=True))
                                       for x in sets])]
    return [("torch_argsort_stable", [(lambda x=x: torch.argsort(x, dim=-1, stable=True))
                                      for x in sets])]


def _sylvester(n, dt):
    """H_n in Sylvester order (as scipy.linalg.hadamard): H_2m = [[H_m, H_m], [H_m, -H_m]]."""
    h = torch.ones((1, 1), device=DEV, dtype=dt)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def _legendre(a, q):
    a %= q
    return 0 if a == 0 else (1 if pow(a, (q - 1) // 2, q) == 1 else -1)


def _paley(m):
    """QuaRot's H_12, H_20 (Paley I, q = 11, 19) and H_28 (Paley II, q = 13)."""
    eye = torch.eye(m, device=DEV)
    if m in (12, 20):
        q = m - 1
        s = torch.tensor([[0 if i == j == 0 else -1 if i == 0 else 1 if j == 0
                           else _legendre(i - j, q) for j in range(m)] for i in range(m)],
                         device=DEV, dtype=torch.float32)
        return eye + s
    q, h = 13, 14
    s = torch.tensor([[0 if a == b == 0 else 1 if a == 0 or b == 0 else _legendre(b - a, q)
                       for b in range(h)] for a in range(h)], device=DEV, dtype=torch.float32)
    i = torch.eye(h, device=DEV)
    return torch.cat([torch.cat([s + i, s - i], 1), torch.cat([s - i, -s - i], 1)], 0)


def _fast_hadamard_transform(n):
    """Dao-AILab's fast_hadamard_transform for n (2^k, or 12/20/28·2^k: its own base
    matrices, not QuaRot's, so the same work but other numbers), or None."""
    try:
        import fast_hadamard_transform as fht
    except ImportError:
        return None
    m = n >> (n & -n).bit_length() - 1
    m = 1 if m == 1 else 4 * m
    if m == 1:
        return fht.hadamard_transform
    return getattr(fht, f"hadamard_transform_{m}N", None)


def hadamard_peers(p, dt, nsets):
    n = p["n"]
    m = n >> (n & -n).bit_length() - 1
    m = 1 if m == 1 else 4 * m
    if m == 1:
        h = _sylvester(n, dt) * (1.0 / n ** 0.5)
    else:
        # out = (H_m ⊗ H_{n/m}) · x per row, so x @ (H_m ⊗ H_{n/m})ᵀ.
        k = torch.kron(_paley(m), _sylvester(n // m, torch.float32))
        h = (k.T * (1.0 / n ** 0.5)).to(dt)
    sets = [rnd((p["rows"], n), dt) for _ in range(nsets)]
    peers = [("torch_matmul_hadamard", [(lambda x=x: x @ h) for x in sets])]
    fht = _fast_hadamard_transform(n)
    if fht is not None:
        scale = 1.0 / n ** 0.5
        peers.append(("fast_hadamard_transform",
                      [(lambda x=x: fht(x, scale)) for x in sets]))
    return peers


# ── fft: torch.fft.fft (cuFFT) on complex64 rows ───────────────────────────────────


def fft_peers(p, dt, nsets):
    """The same call as ours: a forward FFT over rows of n complex64, norm="ortho"; x is
    [rows, n, 2] f32 viewed as complex (no copy), the output a new complex64 tensor."""
    sets = [torch.view_as_complex(rnd((p["rows"], p["n"], 2), torch.float32))
            for _ in range(nsets)]
    return [("torch_fft_fft", [(lambda x=x: torch.fft.fft(x, dim=-1, norm="ortho"))
                               for x in sets])]


# ── MoE decode: the grouped expert GEMVs (moe/gemv.rs, moe/qgemv.rs) ─────────────────


def _routing(t, e, k):
    """Distinct experts per token, as a router gives; with the pairs grouped by expert (the
    plan, built outside the timed call as tessera's bench builds it)."""
    ids = torch.rand(t, e, device=DEV).topk(k, dim=-1).indices
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=e)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    active = [int(i) for i in torch.nonzero(counts).flatten().tolist()]
    starts = (offs - counts).tolist()
    groups = [(x, order[starts[x]:starts[x] + int(counts[x])]) for x in active]
    return ids, order, offs, groups


def moe_peers(p, dt, nsets, gated):
    """PyTorch's forms of one MoE expert projection over the chosen experts, on dense
    weights in the activations' dtype (the quantized ops' peer is the dense form they
    replace): `torch._grouped_mm` over the pairs sorted by expert (gather the rows, one
    grouped GEMM, SiLU·mul for the gate/up projection, scatter back), and the per-expert
    loop over the experts chosen (vLLM's and HF's fallback). One weight tensor, a routing
    per set (different experts each set, so L2 holds none of them)."""
    t, e, k, n, kk = p["T"], p["E"], p["k"], p["N"], p["K"]
    rows = 2 * n if gated else n
    w = rnd((e, rows, kk), dt, -0.05, 0.05)
    sets = []
    for _ in range(nsets):
        ids, order, offs, groups = _routing(t, e, k)
        x = rnd((t, kk), dt) if gated else rnd((t * k, kk), dt)
        tok = (order // k) if gated else order
        sets.append((x, order, tok, offs, groups))

    def finish(h):
        return F.silu(h[:, :n]) * h[:, n:] if gated else h

    def grouped(x, order, tok, offs, groups):
        h = finish(torch._grouped_mm(x[tok], w.transpose(-2, -1), offs=offs))
        y = torch.empty((t * k, n), device=DEV, dtype=dt)
        y[order] = h
        return y

    def loop(x, order, tok, offs, groups):
        y = torch.empty((t * k, n), device=DEV, dtype=dt)
        for ex, pairs in groups:
            src = (pairs // k) if gated else pairs
            y[pairs] = finish(x[src] @ w[ex].T)
        return y

    out = [("torch_expert_loop", [(lambda s=s: loop(*s)) for s in sets])]
    if hasattr(torch, "_grouped_mm"):
        out.insert(0, ("torch_grouped_mm", [(lambda s=s: grouped(*s)) for s in sets]))
    return out


def moe_gemm_peers(p, dt, nsets, gated):
    """PyTorch's forms of the contiguous grouped GEMM of MoE prefill on the same call as
    ours (for the MLX-affine experts, the dense bf16 form they replace): x [R, K] already
    grouped by expert, offs the experts' end rows (int32 cumulative
    counts of a random routing), w [E, N, K] (gated: [E, 2N, K], SiLU·mul after):
    `torch._grouped_mm` (then, gated, silu(h[:, :N])·h[:, N:]), and the per-expert loop of
    matmuls over the experts' row ranges."""
    r, e, n, kk = p["R"], p["E"], p["N"], p["K"]
    rows = 2 * n if gated else n
    w = rnd((e, rows, kk), dt, -0.05, 0.05)
    sets = []
    for _ in range(nsets):
        counts = torch.bincount(torch.randint(0, e, (r,), device=DEV), minlength=e)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        bounds = [0] + offs.tolist()
        sets.append((rnd((r, kk), dt), offs, bounds))

    def finish(h):
        return F.silu(h[:, :n]) * h[:, n:] if gated else h

    def grouped(x, offs, bounds):
        return finish(torch._grouped_mm(x, w.transpose(-2, -1), offs=offs))

    def loop(x, offs, bounds):
        y = torch.empty((r, n), device=DEV, dtype=dt)
        for ex in range(e):
            lo, hi = bounds[ex], bounds[ex + 1]
            if hi > lo:
                y[lo:hi] = finish(x[lo:hi] @ w[ex].T)
        return y

    out = [("torch_expert_loop", [(lambda s=s: loop(*s)) for s in sets])]
    if hasattr(torch, "_grouped_mm"):
        out.insert(0, ("torch_grouped_mm", [(lambda s=s: grouped(*s)) for s in sets]))
    return out


def peers_for(row, nsets):
    p, dt, op = row["params"], DT[row["dtype"]], row["op"]
    if op == "sdpa_decode":
        return sdpa_decode_peers(p, dt, nsets, False)
    if op == "sdpa_decode_batched":
        return sdpa_decode_peers(p, dt, nsets, True)
    if op == "sdpa_decode_paged":
        return sdpa_decode_paged_peers(p, dt, nsets)
    if op == "sdpa_prefill":
        return sdpa_prefill_peers(p, dt, nsets)
    if op == "sdpa_prefill_varlen":
        return sdpa_prefill_varlen_peers(p, dt, nsets)
    if op == "sdpa_prefill_paged":
        return sdpa_prefill_paged_peers(p, dt, nsets)
    if op == "rms_norm":
        return rms_norm_peers(p, dt, nsets)
    if op == "gdn_decode_step":
        return gdn_decode_peers(p, dt, nsets)
    if op == "gdn_chunked_prefill":
        return gdn_prefill_peers(p, dt, nsets)
    if op in ("silu_mul", "gelu_mul", "silu_mul_packed", "gelu_mul_packed"):
        return gated_peers(p, dt, nsets, op.endswith("_packed"))
    if op == "add":
        return add_peers(p, dt, nsets)
    if op == "cast":
        return cast_peers(p, dt, nsets)
    if op == "embedding":
        return embedding_peers(p, dt, nsets)
    if op in ("gemv", "affine_qgemv", "affine_qgemm", "gguf_qgemv", "gptq_qgemv", "awq_qgemv",
              "gptq_qgemm", "awq_qgemm", "gguf_qgemm", "matmul_bt"):
        return linear_peers(p, dt, nsets)
    if op == "matmul":
        return matmul_peers(p, dt, nsets)
    if op == "fp8_qgemv":
        return fp8_qgemv_peers(p, dt, nsets)
    if op == "fp8_qgemm":
        return fp8_qgemm_peers(p, dt, nsets)
    if op == "gemv_silu_mul":
        return gemv_silu_mul_peers(p, dt, nsets)
    if op in ("rms_norm_quant", "rms_norm_residual_quant"):
        return rms_norm_quant_peers(p, dt, nsets, op == "rms_norm_residual_quant")
    if op == "sample":
        return sample_peers(p, dt, nsets)
    if op == "argmax":
        return argmax_peers(p, dt, nsets)
    if op == "row_reduce":
        return row_reduce_peers(p, dt, nsets)
    if op == "topk":
        return topk_peers(p, dt, nsets)
    if op == "cumsum":
        return cumsum_peers(p, dt, nsets)
    if op in ("sort", "argsort"):
        return sort_peers(p, dt, nsets, op == "sort")
    if op == "hadamard":
        return hadamard_peers(p, dt, nsets)
    if op == "fft":
        return fft_peers(p, dt, nsets)
    if op in ("moe_gemv", "moe_gemv_silu_mul", "moe_qgemv", "moe_qgemv_silu_mul"):
        return moe_peers(p, dt, nsets, op.endswith("_silu_mul"))
    if op in ("moe_gemm", "moe_gemm_silu_mul", "moe_qgemm", "moe_qgemm_silu_mul"):
        return moe_gemm_peers(p, dt, nsets, op.endswith("_silu_mul"))
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes")
    ap.add_argument("out")
    ap.add_argument("--only", default="")
    ap.add_argument("--filter", default="")
    ap.add_argument("--quick", action="store_true", help="only the quick shapes")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s]
    shapes = json.load(open(a.shapes))
    rows = []
    dev = torch.cuda.get_device_name(0)
    t0 = time.time()
    for r in shapes:
        if a.filter and a.filter not in r["op"]:
            continue
        if a.quick and not r["quick"]:
            continue
        nsets = sets_for(r["bytes"], r["flops"])
        try:
            peers = peers_for(r, nsets)
        except Exception as ex:
            peers = [("setup", ex)]
        for name, calls in peers:
            if only and not any(o in name for o in only):
                continue
            rec = {"peer": name, "op": r["op"], "shape": r["shape"], "dtype": r["dtype"],
                   "us": None, "sets": nsets}
            if isinstance(calls, Exception):
                rec["error"] = f"{type(calls).__name__}: {calls}"[:300]
            else:
                try:
                    us, how = time_sets(calls)
                    rec["us"], rec["timing"] = us, how
                    gbps = r["bytes"] / (us * 1e-6) / 1e9
                    rec["gbps"] = gbps
                except Exception as ex:
                    rec["error"] = f"{type(ex).__name__}: {ex}"[:300]
                    traceback.print_exc(limit=2)
                    torch.cuda.synchronize()
            rows.append(rec)
            us = f"{rec['us']:.2f} µs" if rec["us"] is not None else rec.get("error", "")[:90]
            print(f"{name:<26} {r['op']:<20} {r['dtype']:<5} {r['shape']:<42} {us}", flush=True)
        del peers
        torch.cuda.empty_cache()
    json.dump({"device": dev, "torch": torch.__version__, "rows": rows}, open(a.out, "w"),
              indent=1)
    print(f"{len(rows)} peer rows in {time.time() - t0:.0f} s -> {a.out}")


if __name__ == "__main__":
    main()
