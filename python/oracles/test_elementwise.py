"""add, the gated activations, cast, embedding and matmul against PyTorch / NumPy float64."""

import numpy as np
import pytest

import math_oracles as M
from conftest import CASES
from harness import DTYPE_MAX, DTYPES as NP_DTYPES, cast, run, assert_close, as_f64

DTYPES = ["f32", "f16", "bf16"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_add_random(dtype, case, rng):
    shape = tuple(rng.integers(1, 9, size=rng.integers(1, 4)).tolist()) + (int(rng.integers(1, 300)),)
    a, b = cast(rng.standard_normal(shape) * 10, dtype), cast(rng.standard_normal(shape), dtype)
    got = run("add", {"a": a, "b": b})
    # The exact sum rounded once to the dtype: add must be correctly rounded.
    want = as_f64(cast(M.add(as_f64(a), as_f64(b)), dtype))
    assert_close(got["out"], want, dtype, "add", repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_near_the_range(dtype, rng):
    big = DTYPE_MAX[dtype]
    a = cast(np.array([big * 0.75, -big * 0.75, big * 0.5, big, 1.0, 0.0]), dtype)
    b = cast(np.array([big * 0.5, -big * 0.5, big * 0.25, -big, -1.0, -0.0]), dtype)
    got = run("add", {"a": a, "b": b})
    # Overflow goes to ±inf as IEEE says; everything else is exact here.
    want = as_f64(cast(as_f64(a) + as_f64(b), dtype))
    assert_close(got["out"], want, dtype, "add near the range", repro=got["_cmd"])


ACTS = {
    "silu": lambda x: M.silu(x),
    "erf": lambda x: M.gelu(x, "none"),
    "tanh": lambda x: M.gelu(x, "tanh"),
}


def _gated_call(act, packed):
    op = ("silu_mul" if act == "silu" else "gelu_mul") + ("_packed" if packed else "")
    params = {} if act == "silu" else {"approximate": "none" if act == "erf" else "tanh"}
    return op, params


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
@pytest.mark.parametrize("act", ["silu", "erf", "tanh"])
def test_gated_random(act, dtype, case, rng):
    rows, d = int(rng.integers(1, 9)), int(rng.integers(1, 300))
    gate = cast(rng.standard_normal((rows, d)) * 3, dtype)
    up = cast(rng.standard_normal((rows, d)), dtype)
    op, params = _gated_call(act, False)
    got = run(op, {"gate": gate, "up": up}, params)
    want = ACTS[act](as_f64(gate)) * as_f64(up)
    assert_close(got["out"], want, dtype, f"{op} {act} {rows}x{d}", terms=8, repro=got["_cmd"])
    op, params = _gated_call(act, True)
    got = run(op, {"gate_up": cast(np.concatenate([as_f64(gate), as_f64(up)], axis=1), dtype)}, params)
    assert_close(got["out"], want, dtype, f"{op} {act} {rows}x{d}", terms=8, repro=got["_cmd"])


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_cast_rounds_as_ieee(src, dst, rng):
    x = rng.standard_normal(500) * np.exp2(rng.integers(-30, 30, size=500))
    x[:6] = [np.nan, np.inf, -np.inf, 65520.0, 1.0 + 2.0**-8, 3e38]
    x = cast(x, src)
    got = run("cast", {"x": x}, {"to": dst})["out"]
    with np.errstate(over="ignore"):
        want = as_f64(as_f64(x).astype(np.float32).astype(NP_DTYPES[dst]))
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"cast {src}->{dst}: {got[~same][:4]} != {want[~same][:4]}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_gathers_rows(dtype, rng):
    vocab, d, tokens = int(rng.integers(1, 200)), int(rng.integers(1, 100)), int(rng.integers(1, 50))
    table = cast(rng.standard_normal((vocab, d)), dtype)
    ids = rng.integers(0, vocab, size=tokens).astype(np.int32)
    got = run("embedding", {"ids": ids, "table": table})["out"]
    assert (got == as_f64(table)[ids]).all(), "embedding rows differ"
    bad = ids.copy()
    bad[-1] = vocab
    with pytest.raises(Exception, match="out of range"):
        run("embedding", {"ids": bad, "table": table})


@pytest.mark.parametrize("dtype", ["f16", "bf16"])  # the matmuls take 2-byte inputs only
@pytest.mark.parametrize("case", range(CASES))
@pytest.mark.parametrize("op", ["matmul", "matmul_bt"])
def test_matmul_random(op, dtype, case, rng):
    m, k, n = (int(v) for v in rng.integers(1, 150, size=3))
    a = cast(rng.standard_normal((m, k)), dtype)
    b = cast(rng.standard_normal((k, n) if op == "matmul" else (n, k)), dtype)
    got = run(op, {"a": a, "b": b}, outputs=("c",))
    bb = as_f64(b) if op == "matmul" else as_f64(b).T
    want = M.matmul(as_f64(a), bb)
    # Relative to the magnitude of the products summed, sqrt(k) for unit normal data.
    assert_close(got["c"], want, dtype, f"{op} {m}x{k}x{n}", terms=k, scale=max(1.0, np.sqrt(k)), repro=got["_cmd"])
