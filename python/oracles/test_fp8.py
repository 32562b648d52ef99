"""fp8 (e4m3, e5m2) against ml_dtypes, whose float8_e4m3fn and float8_e5m2 NumPy dtypes are
the formats of torch.float8_e4m3fn and torch.float8_e5m2: every one of the 256 bytes of
each format decoded by fp8_dequantize as ml_dtypes reads it (NaN, inf and -0 included);
every finite value quantized back to its own byte; fp8_quantize's bytes and scales on
random data equal to ml_dtypes' cast of clip(x / scale, -max, max) with the scale
amax / max computed in float32 per block (the cast alone turns e4m3 overflow into NaN and
e5m2 overflow into inf; quantizers saturate, and so does fp8_quantize); fp8_qgemv against
x · Wᵀ in float64 over ml_dtypes' weights times the block scales."""

import ml_dtypes
import numpy as np
import pytest

from harness import as_f64, assert_close, cast, run, DTYPES

FORMATS = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
MAX = {"e4m3": 448.0, "e5m2": 57344.0}
SCALINGS = ["tensor", "1x128", "128x128"]


def block_shape(scaling, n, k):
    return {"tensor": (n, k), "1x128": (1, 128), "128x128": (128, 128)}[scaling]


def expand(scale, scaling, n, k):
    """The per-element scale of an [n, k] matrix from its block scales."""
    bn, bk = block_shape(scaling, n, k)
    return np.repeat(np.repeat(scale, bn, axis=0), bk, axis=1)[:n, :k]


def decoded(fmt, codes):
    """ml_dtypes' value of each byte, in float64."""
    return np.asarray(codes, dtype=np.uint8).view(FORMATS[fmt]).astype(np.float64)


def assert_identical(got, want, what):
    """Equal values, NaN where the oracle has NaN, equal signs of zero."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, oracle {want.shape}"
    same = (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))
    if not same.all():
        i = tuple(np.argwhere(~same)[0])
        raise AssertionError(
            f"{what}: {int((~same).sum())} of {same.size} differ; first at {i}: "
            f"ours {got[i]!r}, ml_dtypes {want[i]!r}"
        )


def finite_codes(rng, fmt, shape):
    """Random bytes, each a finite value of `fmt`."""
    codes = rng.integers(0, 256, size=shape, dtype=np.uint8)
    bad = ~np.isfinite(decoded(fmt, codes))
    while bad.any():
        codes[bad] = rng.integers(0, 256, size=int(bad.sum()), dtype=np.uint8)
        bad = ~np.isfinite(decoded(fmt, codes))
    return codes


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_every_byte_decodes_as_ml_dtypes_reads_it(fmt, dtype, rng):
    codes = np.arange(256, dtype=np.uint8).reshape(2, 128)
    for scale in (1.0, float(rng.uniform(0.5, 2.0) * 2.0 ** rng.integers(-12, 4))):
        s = np.array([[scale]], dtype=np.float32)
        got = run("fp8_dequantize", {"q": codes, "scale": s},
                  {"format": fmt, "scaling": "tensor", "dtype": dtype})
        # The product in float32, rounded once to the output dtype.
        want = (codes.view(FORMATS[fmt]).astype(np.float32) * np.float32(scale)).astype(DTYPES[dtype])
        assert_identical(got["out"], as_f64(want), f"fp8_dequantize {fmt} {dtype} scale {scale} ({got['_cmd']})")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_every_finite_value_quantizes_to_its_own_byte(fmt, dtype):
    codes = np.arange(256, dtype=np.uint8)
    values = decoded(fmt, codes)
    # Non-finite bytes replaced by ±max, so the tensor's amax is max and its scale 1.
    values = np.where(np.isfinite(values), values, np.copysign(MAX[fmt], values))
    x = cast(values.reshape(2, 128), dtype)
    assert np.array_equal(as_f64(x), values.reshape(2, 128))
    got = run("fp8_quantize", {"x": x.astype(DTYPES[dtype])},
              {"format": fmt, "scaling": "tensor"}, outputs=("q", "scale"))
    assert got["scale"].tolist() == [[1.0]], got["_cmd"]
    want = values.astype(FORMATS[fmt]).view(np.uint8).reshape(2, 128)
    assert_identical(got["q"], want.astype(np.float64), f"fp8_quantize {fmt} {dtype} ({got['_cmd']})")


def mixed_rows(rng, n, k, dtype):
    """Rows of random magnitude (2^-20 to 2^10), one row of zeros."""
    x = rng.uniform(-1, 1, size=(n, k)) * 2.0 ** rng.integers(-20, 11, size=(n, 1))
    x[min(1, n - 1)] = 0.0
    return cast(x, dtype)


def ml_dtypes_quantize(x, fmt, scaling):
    """scale = amax / max per block in float32 (1 for an all-zero block), bytes = the cast
    of clip(x / scale, -max, max) with the division in float32."""
    n, k = x.shape
    bn, bk = block_shape(scaling, n, k)
    sn, sk = -(-n // bn), -(-k // bk)
    xf = x.astype(np.float32)
    scale = np.ones((sn, sk), dtype=np.float32)
    for i in range(sn):
        for j in range(sk):
            amax = np.max(np.abs(xf[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk]))
            if amax > 0:
                scale[i, j] = amax / np.float32(MAX[fmt])
    y = (xf / expand(scale, scaling, n, k)).astype(np.float32)
    y = np.clip(y, -np.float32(MAX[fmt]), np.float32(MAX[fmt]))
    return y.astype(FORMATS[fmt]).view(np.uint8), scale


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_quantized_bytes_and_scales_match_ml_dtypes(fmt, scaling, dtype, rng):
    n, k = (131, 300) if scaling == "128x128" else (5, 300)
    x = mixed_rows(rng, n, k, dtype)
    got = run("fp8_quantize", {"x": x.astype(DTYPES[dtype])},
              {"format": fmt, "scaling": scaling}, outputs=("q", "scale"))
    q, scale = ml_dtypes_quantize(x, fmt, scaling)
    assert_identical(got["scale"], scale.astype(np.float64), f"fp8_quantize scale ({got['_cmd']})")
    assert_identical(got["q"], q.astype(np.float64), f"fp8_quantize bytes ({got['_cmd']})")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scaling", SCALINGS)
def test_block_scaled_dequantize_matches_ml_dtypes(fmt, scaling, rng):
    n, k = 131, 272
    codes = rng.integers(0, 256, size=(n, k), dtype=np.uint8)
    bn, bk = block_shape(scaling, n, k)
    scale = (rng.uniform(0.5, 2.0, size=(-(-n // bn), -(-k // bk))) * 2.0 ** -8).astype(np.float32)
    got = run("fp8_dequantize", {"q": codes, "scale": scale},
              {"format": fmt, "scaling": scaling, "dtype": "bf16"})
    want = (codes.view(FORMATS[fmt]).astype(np.float32) * expand(scale, scaling, n, k)).astype(ml_dtypes.bfloat16)
    assert_identical(got["out"], as_f64(want), f"fp8_dequantize {fmt} {scaling} ({got['_cmd']})")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scaling", ["tensor", "128x128"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("m", [1, 3, 16])
def test_qgemv_multiplies_by_ml_dtypes_weights(fmt, scaling, dtype, m, rng):
    n, k = 131, 400
    codes = finite_codes(rng, fmt, (n, k))
    bn, bk = block_shape(scaling, n, k)
    scale = (rng.uniform(0.5, 2.0, size=(-(-n // bn), -(-k // bk))) / MAX[fmt]).astype(np.float32)
    x = cast(rng.standard_normal((m, k)), dtype)
    got = run("fp8_qgemv", {"x": x.astype(DTYPES[dtype]), "w": codes, "scale": scale},
              {"format": fmt, "scaling": scaling}, outputs=("y",))
    w = decoded(fmt, codes) * expand(scale.astype(np.float64), scaling, n, k)
    assert_close(got["y"], as_f64(x) @ w.T, dtype, f"fp8_qgemv {fmt} {scaling} M={m}", terms=k, repro=got["_cmd"])
