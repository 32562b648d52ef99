"""Row ops — RMSNorm, RMSNorm + residual, LayerNorm, the gated mixer norm, softmax and
logsumexp — on random rows and adversarial ones: huge logits, constant and zero rows, long
rows, values near the dtype's range."""

import numpy as np
import pytest

import math_oracles as M
from conftest import CASES
from harness import DTYPE_MAX, cast, run, assert_close, as_f64

DTYPES = ["f32", "f16", "bf16"]


def random_rows(rng, dtype, n=None, scale=1.0):
    rows = int(rng.integers(1, 6))
    n = n or int(rng.choice([int(rng.integers(1, 300)), 64 * int(rng.integers(1, 40)), 4096]))
    return cast(rng.standard_normal((rows, n)) * scale, dtype)


def adversarial_rows(rng, dtype, kind):
    """Rows of one adversarial kind, `n` chosen to hit several kernel variants."""
    n = int(rng.choice([7, 128, 1000, 4096, 8192]))
    big = DTYPE_MAX[dtype]
    x = rng.standard_normal((4, n))
    if kind == "zero":
        x[:] = 0.0
    elif kind == "constant":
        x[:] = rng.standard_normal((4, 1)) * 3
    elif kind == "huge":
        # Logits far from zero: the max subtraction must keep softmax finite.
        x = x * 100 + np.array([[1e4], [-1e4], [6e4], [0]])
    elif kind == "near_range":
        # Values up to the dtype's range; f32 keeps its squares finite in f32 too.
        top = min(big * 0.5, 1e18)
        x = np.clip(x * top / 3, -top, top)
    elif kind == "long":
        x = rng.standard_normal((2, 65536)) * 4
    if dtype == "f16":
        x = np.clip(x, -65000, 65000)
    return cast(x, dtype)


KINDS = ["zero", "constant", "huge", "near_range", "long"]


def rms_case(op, x, dtype, rng):
    if op == "gated_mixer_norm" and (x.shape[-1] % 128 or x.shape[-1] > 4096):
        # The op takes multiples of 128 up to 4096: cut the row to the nearest such width.
        x = x[..., : max(128, min(4096, x.shape[-1] // 128 * 128))]
        if x.shape[-1] < 128:
            x = np.resize(x, x.shape[:-1] + (128,))
    n = x.shape[-1]
    w = cast(rng.uniform(0.5, 1.5, n), dtype)
    eps = float(rng.choice([1e-6, 1e-5, 0.0])) if np.any(x != 0) else 1e-6
    if op == "rms_norm":
        got = run(op, {"x": x, "w": w}, {"eps": eps})
        want = M.rms_norm(as_f64(x), as_f64(w), eps)
        assert_close(got["out"], want, dtype, f"rms_norm n={n}", terms=n, repro=got["_cmd"])
    elif op == "rms_norm_residual":
        r = cast(rng.standard_normal(x.shape), dtype)
        got = run(op, {"x": x, "residual": r, "w": w}, {"eps": eps}, outputs=("sum", "out"))
        s = as_f64(x) + as_f64(r)
        assert_close(got["sum"], as_f64(cast(s, dtype)), dtype, "rms_norm_residual sum", repro=got["_cmd"])
        # The norm reads the sum as stored (rounded to the dtype), as an engine would.
        want = M.rms_norm(as_f64(cast(s, dtype)), as_f64(w), eps)
        assert_close(got["out"], want, dtype, f"rms_norm_residual n={n}", terms=n, repro=got["_cmd"])
    elif op == "layer_norm":
        b = cast(rng.standard_normal(n), dtype)
        eps = 1e-5
        got = run(op, {"x": x, "w": w, "b": b}, {"eps": eps})
        want = M.layer_norm(as_f64(x), as_f64(w), as_f64(b), eps)
        # Centring cancels: one rounding of x (or of its mean) is amplified by 1/σ, so the
        # error is relative to max|x|/σ·|w| + |b|, the size of what the kernel forms.
        xf = as_f64(x)
        sigma = np.sqrt(xf.var(axis=-1) + eps)
        scale = float(np.max(np.max(np.abs(xf), axis=-1) / sigma)) * float(np.max(np.abs(as_f64(w)))) + float(np.max(np.abs(as_f64(b))))
        assert_close(got["out"], want, dtype, f"layer_norm n={n}", terms=n, scale=max(1.0, scale), repro=got["_cmd"])
    elif op == "gated_mixer_norm":
        y = as_f64(x).astype(np.float32)
        z = cast(rng.standard_normal(x.shape) * 3, dtype)
        got = run(op, {"y": y, "z": z, "w": w}, {"eps": eps})
        want = M.gated_mixer_norm(as_f64(y), as_f64(z), as_f64(w), eps)
        assert_close(got["out"], want, dtype, f"gated_mixer_norm n={n}", terms=n, repro=got["_cmd"])


NORMS = ["rms_norm", "rms_norm_residual", "layer_norm", "gated_mixer_norm"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
@pytest.mark.parametrize("op", NORMS)
def test_norm_random(op, dtype, case, rng):
    rms_case(op, random_rows(rng, dtype, scale=float(rng.choice([0.01, 1, 100]))), dtype, rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", NORMS)
def test_norm_adversarial(op, kind, dtype, rng):
    if kind == "huge":
        pytest.skip("huge logits are a softmax case")
    x = adversarial_rows(rng, dtype, kind)
    rms_case(op, x, dtype, rng)


def softmax_case(op, x, dtype):
    n = x.shape[-1]
    got = run(op, {"x": x})
    if op == "softmax":
        want = M.softmax(as_f64(x))
        assert_close(got["out"], want, dtype, f"softmax n={n}", terms=n, repro=got["_cmd"])
    else:
        want = M.logsumexp(as_f64(x))
        # logsumexp is f32 out; its error is relative to the logits' scale.
        scale = max(1.0, float(np.max(np.abs(as_f64(x)[np.isfinite(as_f64(x))]), initial=1.0)))
        assert_close(got["out"], want, "f32", f"logsumexp n={n}", terms=n, scale=scale, repro=got["_cmd"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
@pytest.mark.parametrize("op", ["softmax", "logsumexp"])
def test_softmax_random(op, dtype, case, rng):
    softmax_case(op, random_rows(rng, dtype, scale=float(rng.choice([0.1, 3, 30]))), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", ["softmax", "logsumexp"])
def test_softmax_adversarial(op, kind, dtype, rng):
    softmax_case(op, adversarial_rows(rng, dtype, kind), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["softmax", "logsumexp"])
def test_softmax_masked_rows(op, dtype):
    """−inf logits (masked positions), a row masked but for one, and a fully masked row:
    softmax of all −inf is NaN in every library; logsumexp of it is −inf."""
    x = np.zeros((3, 40))
    x[0, ::2] = -np.inf
    x[1, :] = -np.inf
    x[1, 5] = 2.0
    x[2, :] = -np.inf
    softmax_case(op, cast(x, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["rms_norm_pipe", "rms_norm_small", "rms_norm_tpg4", "rms_norm_vec", "rms_norm_wide"])
def test_rms_norm_layouts(op, dtype, rng):
    """Each RMSNorm kernel layout called directly, at widths every layout takes."""
    n = int(rng.choice([1024, 2048]))
    x = cast(rng.standard_normal((int(rng.integers(1, 5)), n)) * 3, dtype)
    w = cast(rng.uniform(0.5, 1.5, n), dtype)
    got = run(op, {"x": x, "w": w}, {"eps": 1e-6})
    want = M.rms_norm(as_f64(x), as_f64(w), 1e-6)
    assert_close(got["out"], want, dtype, f"{op} n={n}", terms=n, repro=got["_cmd"])
