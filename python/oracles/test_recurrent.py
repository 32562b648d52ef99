"""Recurrent mixers — the Gated DeltaNet decode step and chunked prefill, causal conv1d
(prefill and update) and the Mamba selective-scan step — against float64 recurrences
written from their papers (flash-linear-attention's naive recurrent gated delta rule)."""

import numpy as np
import pytest

import math_oracles as M
from conftest import CASES
from harness import DTYPE_MAX, cast, run, assert_close, as_f64

DTYPES = ["f32", "f16", "bf16"]


def l2norm(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def gdn_inputs(rng, dtype, lead, hk, hv, dk, dv, value_scale=1.0):
    """q, k unit-norm per head (as models feed them), v, g ≤ 0, β in (0, 1)."""
    q = cast(l2norm(rng.standard_normal(lead + (hk, dk))), dtype)
    k = cast(l2norm(rng.standard_normal(lead + (hk, dk))), dtype)
    v = cast(rng.standard_normal(lead + (hv, dv)) * value_scale, dtype)
    g = -rng.uniform(0.0, 1.0, lead + (hv,)).astype(np.float32)
    beta = rng.uniform(0.0, 1.0, lead + (hv,)).astype(np.float32)
    return q, k, v, g, beta


def state_dtype_of(rng, dtype):
    return "f32" if dtype == "f32" or rng.integers(0, 2) else dtype


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_gdn_decode_step(dtype, case, rng):
    b, hk, dk, dv = int(rng.integers(1, 4)), int(rng.choice([1, 2])), int(rng.choice([64, 128, 256])), int(rng.choice([16, 64, 128]))
    hv = hk * int(rng.choice([1, 2]))
    q, k, v, g, beta = gdn_inputs(rng, dtype, (b,), hk, hv, dk, dv)
    sd = state_dtype_of(rng, dtype)
    s0 = cast(rng.standard_normal((b, hv, dv, dk)) * 0.5, sd)
    scale = 1 / np.sqrt(dk)
    got = run("gdn_decode_step", {"q": q, "k": k, "v": v, "g": g, "beta": beta, "state_in": s0},
              {"scale": scale}, outputs=("state_out", "o"))
    for i in range(b):
        o, s = M.gdn_recurrent(as_f64(q[i : i + 1]), as_f64(k[i : i + 1]), as_f64(v[i : i + 1]),
                               as_f64(g[i : i + 1]), as_f64(beta[i : i + 1]), scale, as_f64(s0[i]))
        assert_close(got["o"][i], o[0], dtype, f"gdn_decode_step o (state {sd})", terms=dk, repro=got["_cmd"])
        assert_close(got["state_out"][i], s, sd, f"gdn_decode_step state (state {sd})", terms=dk, repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_gdn_chunked_prefill(dtype, case, rng):
    hk, dk, dv = int(rng.choice([1, 2])), int(rng.choice([64, 128])), int(rng.choice([32, 64]))
    hv = hk * int(rng.choice([1, 2]))
    lens = rng.integers(1, 100, size=int(rng.integers(1, 3)))
    cu = np.concatenate([[0], np.cumsum(lens)])
    T = int(cu[-1])
    q, k, v, g, beta = gdn_inputs(rng, dtype, (T,), hk, hv, dk, dv)
    inputs = {"q": q, "k": k, "v": v, "g": g, "beta": beta}
    h0 = None
    if rng.integers(0, 2):
        h0 = cast(rng.standard_normal((len(lens), hv, dv, dk)) * 0.5, "f32")
        inputs["h0"] = h0
    scale = 1 / np.sqrt(dk)
    params = {"scale": scale, "cu_seqlens": ",".join(str(int(c)) for c in cu)}
    got = run("gdn_chunked_prefill", inputs, params, outputs=("o", "final_state"))
    for n in range(len(lens)):
        a, z = int(cu[n]), int(cu[n + 1])
        s0 = np.zeros((hv, dv, dk)) if h0 is None else as_f64(h0[n])
        o, s = M.gdn_recurrent(as_f64(q[a:z]), as_f64(k[a:z]), as_f64(v[a:z]), as_f64(g[a:z]),
                               as_f64(beta[a:z]), scale, s0)
        assert_close(got["o"][a:z], o, dtype, f"gdn_chunked_prefill o, sequence {n} of lengths {lens.tolist()}", terms=z - a, repro=got["_cmd"])
        assert_close(got["final_state"][n], s, dtype, f"gdn_chunked_prefill final state, sequence {n}", terms=z - a, repro=got["_cmd"])


@pytest.mark.parametrize("op", ["gdn_decode_step", "gdn_chunked_prefill"])
def test_gdn_f32_past_the_f16_range(op, rng):
    """f32 values and states beyond 65504 are representable in f32: the op must not pass
    them through a narrower type (issue 18, item 3)."""
    hk = hv = 1
    dk, dv, T = 64, 32, 5
    q, k, v, g, beta = gdn_inputs(rng, "f32", (T,), hk, hv, dk, dv, value_scale=2e5)
    s0 = (rng.standard_normal((1, hv, dv, dk)) * 1e5).astype(np.float32)
    scale = 1 / np.sqrt(dk)
    o, s = M.gdn_recurrent(as_f64(q), as_f64(k), as_f64(v), as_f64(g), as_f64(beta), scale, as_f64(s0[0]))
    if op == "gdn_decode_step":
        got = run(op, {"q": q[:1], "k": k[:1], "v": v[:1], "g": g[:1], "beta": beta[:1], "state_in": s0},
                  {"scale": scale}, outputs=("state_out", "o"))
        o1, s1 = M.gdn_recurrent(as_f64(q[:1]), as_f64(k[:1]), as_f64(v[:1]), as_f64(g[:1]), as_f64(beta[:1]), scale, as_f64(s0[0]))
        assert_close(got["o"], o1, "f32", "gdn_decode_step o past 65504", terms=dk, repro=got["_cmd"])
        assert_close(got["state_out"][0], s1, "f32", "gdn_decode_step state past 65504", terms=dk, repro=got["_cmd"])
    else:
        got = run(op, {"q": q, "k": k, "v": v, "g": g, "beta": beta, "h0": s0}, {"scale": scale}, outputs=("o", "final_state"))
        assert_close(got["o"], o, "f32", "gdn_chunked_prefill o past 65504", terms=T, repro=got["_cmd"])
        assert_close(got["final_state"][0], s, "f32", "gdn_chunked_prefill state past 65504", terms=T, repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
@pytest.mark.parametrize("op", ["causal_conv1d", "causal_conv1d_update"])
def test_causal_conv1d(op, dtype, case, rng):
    b, c, w = int(rng.integers(1, 4)), int(rng.integers(1, 200)), int(rng.integers(2, 9))
    t = int(rng.integers(1, 40)) if op == "causal_conv1d" else 1
    x = cast(rng.standard_normal((b, t, c)), dtype)
    wt = cast(rng.standard_normal((c, w)) / np.sqrt(w), dtype)
    bias = cast(rng.standard_normal(c) * 0.1, dtype)
    state = cast(rng.standard_normal((b, c, w - 1)), dtype)
    silu_on = bool(rng.integers(0, 2))
    xin = x if op == "causal_conv1d" else x[:, 0, :]
    got = run(op, {"x": xin, "w": wt, "bias": bias, "state_in": state}, {"silu": str(silu_on).lower()},
              outputs=("out", "state_out"))
    out, new_state = M.causal_conv1d(as_f64(x), as_f64(wt), as_f64(bias), as_f64(state), silu_on)
    if op == "causal_conv1d_update":
        out = out[:, 0, :]
    assert_close(got["out"], out, dtype, f"{op} B={b} T={t} C={c} W={w} silu={silu_on}", terms=w, repro=got["_cmd"])
    assert_close(got["state_out"], new_state, dtype, f"{op} state", repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_selective_scan_step(dtype, case, rng):
    b, d, n = int(rng.integers(1, 4)), int(rng.integers(1, 130)), int(rng.choice([1, 16, 64, 128, 256]))
    sd = state_dtype_of(rng, dtype)
    state = cast(rng.standard_normal((b, d, n)), sd)
    x, dt, z = (cast(rng.standard_normal((b, d)), dtype) for _ in range(3))
    a = (-np.exp(rng.uniform(-2, 2, (d, n)))).astype(np.float32)
    bb, cc = cast(rng.standard_normal((b, n)), dtype), cast(rng.standard_normal((b, n)), dtype)
    dd, dt_bias = cast(rng.standard_normal(d), dtype), cast(rng.uniform(-4, 1, d), dtype)
    got = run("selective_scan_step", {"state_in": state, "x": x, "dt": dt, "a": a, "b": bb, "c": cc,
                                      "d": dd, "z": z, "dt_bias": dt_bias}, outputs=("state_out", "y"))
    h, y = M.selective_scan_step(as_f64(state), as_f64(x), as_f64(dt), as_f64(a), as_f64(bb),
                                 as_f64(cc), as_f64(dd), as_f64(z), as_f64(dt_bias))
    assert_close(got["state_out"], h, sd, f"selective_scan_step state (state {sd}) N={n}", repro=got["_cmd"])
    # y rounds the state to its dtype before C·h in a 2-byte state: allow it.
    assert_close(got["y"], y, sd if sd != "f32" else dtype, f"selective_scan_step y N={n}", terms=n,
                 scale=max(1.0, float(np.sqrt(n))), repro=got["_cmd"])
