"""Scaled dot-product attention — decode (plain, strided with a window and sinks, batched,
paged: pages gathered token by token from the table),
multi-query over a cache and prefill (contiguous and packed) — against PyTorch's SDPA (with the KV heads repeated
for GQA) or float64 NumPy softmax attention."""

import numpy as np
import pytest

import math_oracles as M
from conftest import CASES
from harness import DTYPE_MAX, cast, run, assert_close, as_f64

DTYPES = ["f32", "f16", "bf16"]
HEAD_DIMS = [64, 96, 128, 192, 256, 512]


def heads(rng):
    hkv = int(rng.choice([1, 2, 4]))
    return hkv * int(rng.choice([1, 2, 4, 8])), hkv


def qkv(rng, dtype, qshape, kshape, logit_scale=1.0):
    q = cast(rng.standard_normal(qshape) * logit_scale, dtype)
    k = cast(rng.standard_normal(kshape), dtype)
    v = cast(rng.standard_normal(kshape), dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_sdpa_decode(dtype, case, rng):
    d = int(rng.choice(HEAD_DIMS))
    hq, hkv = heads(rng)
    n = int(rng.integers(1, 300))
    q, k, v = qkv(rng, dtype, (hq, d), (hkv, n, d), float(rng.choice([1, 4])))
    scale = float(rng.choice([1 / np.sqrt(d), 0.5]))
    got = run("sdpa_decode", {"q": q, "k": k, "v": v}, {"scale": scale})
    want = M.sdpa(as_f64(q), as_f64(k), as_f64(v), scale, n)
    assert_close(got["out"], want, dtype, f"sdpa_decode d={d} hq={hq} hkv={hkv} n={n}", terms=n, repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
@pytest.mark.parametrize("op", ["sdpa_decode_strided", "sdpa_decode_split"])
def test_sdpa_decode_window_sinks(op, dtype, case, rng):
    d = int(rng.choice(HEAD_DIMS))
    hq, hkv = heads(rng)
    stride = int(rng.integers(2, 300))
    kv_len = int(rng.integers(1, stride + 1))
    window = int(rng.choice([0, 1, int(rng.integers(1, stride + 1))]))
    n_sink = int(rng.choice([0, 1, 4]))
    with_sinks = bool(rng.integers(0, 2))
    q, k, v = qkv(rng, dtype, (hq, d), (hkv, stride, d))
    scale = 1 / np.sqrt(d)
    inputs = {"q": q, "k": k, "v": v}
    sinks = None
    if with_sinks:
        inputs["sink_logits"] = cast(rng.standard_normal(hq) * 2, dtype)
        sinks = as_f64(inputs["sink_logits"])
    params = {"kv_len": kv_len, "scale": scale, "window": window, "n_sink": n_sink}
    if op == "sdpa_decode_split":
        params["splits"] = int(rng.integers(1, 9))
    got = run(op, inputs, params)
    want = M.sdpa(as_f64(q), as_f64(k), as_f64(v), scale, kv_len, window, n_sink, sinks)
    assert_close(got["out"], want, dtype, f"{op} {params} d={d} sinks={with_sinks}", terms=kv_len, repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_sdpa_decode_batched(dtype, case, rng):
    d = int(rng.choice(HEAD_DIMS))
    hq, hkv = heads(rng)
    batch = int(rng.integers(1, 4))
    stride = int(rng.integers(1, 200))
    lens = rng.integers(0, stride + 1, size=batch).astype(np.uint32)
    window, n_sink = int(rng.choice([0, 5])), int(rng.choice([0, 2]))
    q, k, v = qkv(rng, dtype, (batch, hq, d), (batch, hkv, stride, d))
    scale = 1 / np.sqrt(d)
    got = run("sdpa_decode_batched", {"q": q, "k": k, "v": v, "kv_lens": lens},
              {"scale": scale, "window": window, "n_sink": n_sink})
    want = np.stack([M.sdpa(as_f64(q[b]), as_f64(k[b]), as_f64(v[b]), scale, int(lens[b]), window, n_sink)
                     for b in range(batch)])
    assert_close(got["out"], want, dtype, f"sdpa_decode_batched lens={lens.tolist()} d={d}", terms=stride, repro=got["_cmd"])


def paged_pools(rng, dtype, lens, hkv, page, d, layout):
    """Shuffled pages for sequences of `lens` tokens: the NHD or HND pools, each sequence's
    page list, and its K/V gathered token by token into [hkv, n, d]."""
    used = [-(-int(n) // page) for n in lens]
    blocks = sum(used) + 1
    order = rng.permutation(blocks)
    shape = (blocks, page, hkv, d) if layout == "nhd" else (blocks, hkv, page, d)
    kc, vc = cast(rng.standard_normal(shape), dtype), cast(rng.standard_normal(shape), dtype)
    pages, at = [], 0
    for u in used:
        pages.append(order[at:at + u])
        at += u

    def gather(pool, b):
        n = int(lens[b])
        rows = [pool[pages[b][p // page], p % page] if layout == "nhd" else pool[pages[b][p // page], :, p % page]
                for p in range(n)]
        return np.stack(rows, axis=1) if n else np.zeros((hkv, 0, d))

    return kc, vc, pages, gather


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_sdpa_decode_paged(dtype, case, rng):
    d = int(rng.choice(HEAD_DIMS))
    hq, hkv = heads(rng)
    batch = int(rng.integers(1, 4))
    page = int(rng.choice([1, 8, 16, 5]))
    layout = str(rng.choice(["nhd", "hnd"]))
    lens = rng.integers(0, 120, size=batch).astype(np.int32)
    window, n_sink = int(rng.choice([0, 7])), int(rng.choice([0, 2]))
    kc, vc, pages, gather = paged_pools(rng, dtype, lens, hkv, page, d, layout)
    q = cast(rng.standard_normal((batch, hq, d)), dtype)
    width = max(len(p) for p in pages) + 1
    table = np.zeros((batch, width), dtype=np.int32)
    for b, p in enumerate(pages):
        table[b, :len(p)] = p
    scale = 1 / np.sqrt(d)
    got = run("sdpa_decode_paged", {"q": q, "k_cache": kc, "v_cache": vc, "block_table": table, "seq_lens": lens},
              {"layout": layout, "scale": scale, "window": window, "n_sink": n_sink})
    want = np.stack([
        M.sdpa(as_f64(q[b]), as_f64(gather(kc, b)), as_f64(gather(vc, b)), scale, int(lens[b]), window, n_sink)
        if lens[b] else np.zeros((hq, d))
        for b in range(batch)])
    assert_close(got["out"], want, dtype, f"sdpa_decode_paged {layout} page={page} lens={lens.tolist()} d={d}",
                 terms=int(lens.max()) + 1, repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_sdpa_multi_query(dtype, case, rng):
    d = int(rng.choice(HEAD_DIMS))
    hq, hkv = heads(rng)
    nq = int(rng.integers(1, 9))
    base = int(rng.integers(0, 100))
    stride = base + nq + int(rng.integers(0, 5))
    causal = bool(rng.integers(0, 2))
    q, k, v = qkv(rng, dtype, (nq, hq, d), (hkv, stride, d))
    scale = 1 / np.sqrt(d)
    got = run("sdpa_multi_query", {"q": q, "k": k, "v": v},
              {"base_kv": base, "causal": str(causal).lower(), "scale": scale})
    want = np.stack([M.sdpa(as_f64(q[i]), as_f64(k), as_f64(v), scale, base + (i + 1 if causal else nq))
                     for i in range(nq)])
    assert_close(got["out"], want, dtype, f"sdpa_multi_query base={base} nq={nq} causal={causal}", terms=stride, repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_sdpa_prefill(dtype, case, rng):
    d = int(rng.choice([64, 128, 256]))
    hq, hkv = heads(rng)
    n_q = int(rng.integers(1, 70))
    n_kv = n_q + int(rng.integers(0, 40))
    causal = bool(rng.integers(0, 2))
    q, k, v = qkv(rng, dtype, (n_q, hq, d), (n_kv, hkv, d))
    scale = 1 / np.sqrt(d)
    got = run("sdpa_prefill", {"q": q, "k": k, "v": v}, {"causal": str(causal).lower(), "scale": scale})
    kk, vv = np.transpose(as_f64(k), (1, 0, 2)), np.transpose(as_f64(v), (1, 0, 2))
    want = np.stack([M.sdpa(as_f64(q[i]), kk, vv, scale, n_kv - n_q + i + 1 if causal else n_kv)
                     for i in range(n_q)])
    assert_close(got["out"], want, dtype, f"sdpa_prefill n_q={n_q} n_kv={n_kv} causal={causal} d={d}", terms=n_kv, repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_sdpa_prefill_varlen(dtype, case, rng):
    """Packed sequences, each attended alone: query i of lq sees keys j <= i + lk - lq
    (causal, bottom-right) or all lk; empty sequences, fewer keys than queries and keys
    past the last offset included."""
    d = int(rng.choice([64, 96, 128, 192, 256]))
    hq, hkv = heads(rng)
    batch = int(rng.integers(1, 5))
    lq = [int(rng.integers(0, 40)) for _ in range(batch)]
    lq[int(rng.integers(0, batch))] += 1
    lk = [max(0, n + int(rng.integers(-4, 30))) for n in lq]
    causal = bool(rng.integers(0, 2))
    cu_q, cu_k = np.cumsum([0] + lq), np.cumsum([0] + lk)
    total_k = int(cu_k[-1]) + int(rng.integers(0, 3)) or 1
    q, k, v = qkv(rng, dtype, (int(cu_q[-1]), hq, d), (total_k, hkv, d))
    scale = 1 / np.sqrt(d)
    params = {"cu_seqlens_q": ",".join(map(str, cu_q)), "cu_seqlens_k": ",".join(map(str, cu_k)),
              "causal": str(causal).lower(), "scale": scale}
    got = run("sdpa_prefill_varlen", {"q": q, "k": k, "v": v}, params)
    rows = []
    for b in range(batch):
        ks = slice(int(cu_k[b]), int(cu_k[b + 1]))
        kk, vv = np.transpose(as_f64(k[ks]), (1, 0, 2)), np.transpose(as_f64(v[ks]), (1, 0, 2))
        for i in range(lq[b]):
            seen = max(0, i + lk[b] - lq[b] + 1) if causal else lk[b]
            rows.append(M.sdpa(as_f64(q[int(cu_q[b]) + i]), kk, vv, scale, seen))
    want = np.stack(rows)
    assert_close(got["out"], want, dtype, f"sdpa_prefill_varlen lq={lq} lk={lk} causal={causal} d={d}",
                 terms=max(lk), repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["huge_logits", "constant_keys", "zero_query", "near_range_values"])
def test_sdpa_decode_adversarial(dtype, kind, rng):
    d, hq, hkv, n = 128, 4, 2, 257
    q, k, v = qkv(rng, dtype, (hq, d), (hkv, n, d))
    q, k, v = as_f64(q), as_f64(k), as_f64(v)
    if kind == "huge_logits":
        q = q * 30  # logits of several hundred: softmax must subtract its max
        k[:, 100] = q[0] / 4
    elif kind == "constant_keys":
        k[:] = k[:, :1]
    elif kind == "zero_query":
        q[:] = 0
    elif kind == "near_range_values":
        # Up to max/(2n): the online softmax sums p·v over n keys before it divides, so f32
        # values nearer the range overflow that running sum (a known limit of the kernels).
        top = DTYPE_MAX[dtype] / 2 if dtype == "f16" else DTYPE_MAX[dtype] / (2 * n)
        v = np.clip(v * top / 4, -top, top)
    q, k, v = cast(q, dtype), cast(k, dtype), cast(v, dtype)
    scale = 1 / np.sqrt(d)
    got = run("sdpa_decode", {"q": q, "k": k, "v": v}, {"scale": scale})
    want = M.sdpa(as_f64(q), as_f64(k), as_f64(v), scale, n)
    assert_close(got["out"], want, dtype, f"sdpa_decode {kind}", terms=n, repro=got["_cmd"])
