"""tessera.ops on NumPy arrays (the CPU backend) against float64 references, the
parameters and errors of the declarations, and outputs written in place."""

import inspect

import numpy as np
import pytest

import references as ref
import tessera
from tessera import ops

try:
    import ml_dtypes

    FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]
except ImportError:
    FLOATS = [np.float32, np.float16]

TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 4e-3}
if len(FLOATS) == 3:
    TOL[np.dtype(FLOATS[2])] = 3e-2


def close(got, want, dtype):
    got = np.asarray(got).astype(np.float64)
    tol = TOL[np.dtype(dtype)]
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm(rng, dtype):
    rows, n = int(rng.integers(1, 9)), int(rng.integers(1, 300))
    x, w = rand(rng, (rows, n), dtype), rand(rng, (n,), dtype)
    eps = float(rng.uniform(1e-6, 1e-2))
    out = ops.rms_norm(x, w, eps=eps)
    assert out.dtype == np.dtype(dtype)
    close(out, ref.rms_norm(x.astype(np.float64), w.astype(np.float64), eps), dtype)


def test_parameters_take_effect_call_after_call(rng):
    # Parameter text is parsed once per distinct value: alternating values, and a refused
    # one between them, must each act as given every time.
    x, w = rand(rng, (3, 40), np.float32), rand(rng, (40,), np.float32)
    for eps in [1e-2, 1e-5, 1e-2, 0.5, 1e-5]:
        close(ops.rms_norm(x, w, eps=eps), ref.rms_norm(x, w, eps), np.float32)
        with pytest.raises(ValueError, match="finite"):
            ops.rms_norm(x, w, eps=float("nan"))


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_residual_returns_both_outputs(rng, dtype):
    shape = (int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(8, 200)))
    x, r, w = rand(rng, shape, dtype), rand(rng, shape, dtype), rand(rng, shape[-1:], dtype)
    s, out = ops.rms_norm_residual(x, r, w)
    total = x.astype(np.float64) + r.astype(np.float64)
    close(s, total, dtype)
    # The norm reads the rounded sum, as the kernel stores it.
    close(out, ref.rms_norm(s.astype(np.float64), w.astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rope_neox_with_int64_positions(rng, dtype):
    tokens, heads, d = int(rng.integers(1, 6)), int(rng.integers(1, 4)), 2 * int(rng.integers(1, 33))
    x = rand(rng, (tokens, heads, d), dtype)
    positions = rng.integers(0, 4096, size=tokens)  # int64: narrowed to u32 as `tessera run` does
    theta = float(rng.choice([10000.0, 500000.0]))
    out = ops.rope(x, positions, theta=theta)
    close(out, ref.rope_neox(x, positions, theta), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sdpa_decode_gqa(rng, dtype):
    d = int(rng.choice([64, 128]))
    hkv = int(rng.integers(1, 3))
    hq = hkv * int(rng.integers(1, 4))
    s = int(rng.integers(1, 80))
    q, k, v = rand(rng, (hq, d), dtype), rand(rng, (hkv, s, d), dtype), rand(rng, (hkv, s, d), dtype)
    close(ops.sdpa_decode(q, k, v), ref.decode_attention(q, k, v), dtype)
    scale = float(rng.uniform(0.01, 0.3))
    close(ops.sdpa_decode(q, k, v, scale=scale), ref.decode_attention(q, k, v, scale), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gemv(rng, dtype):
    m, n, k = int(rng.integers(1, 17)), int(rng.integers(1, 70)), int(rng.integers(1, 300))
    x, w = rand(rng, (m, k), dtype), rand(rng, (n, k), dtype)
    want = x.astype(np.float64) @ w.astype(np.float64).T
    got = ops.gemv(x, w).astype(np.float64)
    tol = TOL[np.dtype(dtype)] * np.sqrt(k)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_argmax_takes_the_lowest_index_of_ties(rng, dtype):
    batch, vocab = int(rng.integers(1, 6)), int(rng.integers(2, 5000))
    logits = rand(rng, (batch, vocab), dtype)
    best = logits.astype(np.float64).max(-1)
    j = int(rng.integers(0, vocab))
    logits[0, j] = logits[0].max()  # a tie with the first maximum, or a new one
    token = ops.argmax(logits)
    assert token.dtype == np.int32
    np.testing.assert_array_equal(token, logits.astype(np.float64).argmax(-1))
    assert best.shape == token.shape


@pytest.mark.parametrize("dtype", FLOATS)
def test_silu_mul(rng, dtype):
    shape = (int(rng.integers(1, 5)), int(rng.integers(1, 500)))
    g, u = rand(rng, shape, dtype, 3.0), rand(rng, shape, dtype)
    close(ops.silu_mul(g, u), ref.silu_mul(g, u), dtype)


def test_an_output_given_is_written_in_place_and_returned(rng):
    x, w = rand(rng, (3, 64), np.float32), rand(rng, (64,), np.float32)
    out = np.full((3, 64), np.nan, dtype=np.float32)
    got = ops.rms_norm(x, w, out=out)
    assert got is out
    close(out, ref.rms_norm(x, w), np.float32)


def test_non_contiguous_inputs_are_read_by_their_strides(rng):
    big = rand(rng, (64, 6), np.float32)
    x = big.T  # [6, 64], Fortran order
    w = rand(rng, (128,), np.float32)[::2]  # a stride of 2
    assert not x.flags.c_contiguous and not w.flags.c_contiguous
    close(ops.rms_norm(x, w), ref.rms_norm(x, w), np.float32)


def test_signatures_and_docs_come_from_the_declarations():
    decls = tessera.declarations()
    assert len(decls) > 50
    sig = inspect.signature(ops.rope)
    assert list(sig.parameters)[:2] == ["x", "positions"]
    assert repr(sig.parameters["theta"].default) == "10000.0"
    assert repr(sig.parameters["layout"].default) == "'neox'"
    assert sig.parameters["rot_dim"].default is None  # the op decides
    assert decls["rope"]["summary"] in ops.rope.__doc__
    for name, d in decls.items():
        fn = getattr(ops, name)
        params = inspect.signature(fn).parameters
        for p in d["params"]:
            assert p["name"] in params, (name, p["name"])
            if p["required"]:
                assert params[p["name"]].default is inspect.Parameter.empty


def test_output_specs_need_no_data():
    specs = tessera.output_specs("sdpa_decode", {"q": ("bf16", [32, 128]), "k": ("bf16", [8, 1 << 20, 128]), "v": ("bf16", [8, 1 << 20, 128])})
    assert specs == [("out", "bf16", [32, 128])]
    specs = tessera.output_specs("rms_norm_residual", {"x": ("f16", [2, 3, 8]), "residual": ("f16", [2, 3, 8]), "w": ("f16", [8])})
    assert specs == [("sum", "f16", [2, 3, 8]), ("out", "f16", [2, 3, 8])]


def test_bad_calls_raise_with_the_ops_own_words(rng):
    x, w = rand(rng, (2, 64), np.float32), rand(rng, (64,), np.float32)
    with pytest.raises(ValueError, match="finite"):
        ops.rms_norm(x, w, eps=float("inf"))
    with pytest.raises(ValueError, match="none, llama3, yarn"):
        ops.rope(rand(rng, (1, 1, 8), np.float32), np.zeros(1, np.uint32), scaling="linear")
    with pytest.raises(ValueError, match="rms_norm"):
        ops.rms_norm(x, rand(rng, (63,), np.float32))
    with pytest.raises(ValueError, match="scaling=none does not use it"):
        ops.rope(rand(rng, (1, 1, 8), np.float32), np.zeros(1, np.uint32), factor=2.0)
    with pytest.raises(ValueError, match="head_dim"):
        q = rand(rng, (2, 48), np.float32)
        ops.sdpa_decode(q, rand(rng, (1, 4, 48), np.float32), rand(rng, (1, 4, 48), np.float32))
    with pytest.raises(TypeError, match="float64"):
        ops.rms_norm(x.astype(np.float64), w)
    with pytest.raises(ValueError, match="outside"):
        ops.rope(rand(rng, (2, 1, 8), np.float32), np.array([-1, 3]))
    with pytest.raises(TypeError):
        ops.rms_norm(x, w, epsilon=1e-5)
    with pytest.raises(TypeError):
        ops.rms_norm(x)
    with pytest.raises(ValueError):
        ops.rms_norm(x, w, out=np.zeros((3, 64), np.float32))
    with pytest.raises(ValueError, match="no op"):
        tessera.output_specs("rms_nrom", {})
