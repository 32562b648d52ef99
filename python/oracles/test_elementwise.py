"""add and matmul against PyTorch / NumPy float64."""

import numpy as np
import pytest

import math_oracles as M
from conftest import CASES
from harness import DTYPE_MAX, cast, run, assert_close, as_f64

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
