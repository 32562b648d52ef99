"""gguf_dequantize against gguf-py (llama.cpp's own Python package, whose NumPy
dequantizers follow ggml-quants.c) bit for bit, and gguf_qgemv against x · Wᵀ over
gguf-py's weights in float64. Skipped where the `gguf` package is not installed."""

import numpy as np
import pytest

from conftest import CASES
from harness import cast, run, assert_close, as_f64

gguf_quants = pytest.importorskip("gguf.quants")
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # noqa: E402

FORMATS = {
    "q4_0": GGMLQuantizationType.Q4_0,
    "q8_0": GGMLQuantizationType.Q8_0,
    "q4_k": GGMLQuantizationType.Q4_K,
    "q5_k": GGMLQuantizationType.Q5_K,
    "q6_k": GGMLQuantizationType.Q6_K,
}
# Byte offsets of each block's f16 scales (d, and dmin for Q4_K / Q5_K), from ggml-common.h.
HALF_FIELDS = {"q4_0": [0], "q8_0": [0], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}


def random_blocks(rng, fmt, rows, blocks, moderate):
    """Random bytes with f16 scales of either sign over f16's range (or near 2^-8 where a
    GEMV sums them), some zero or subnormal, and some all-zero blocks."""
    qk, size = GGML_QUANT_SIZES[FORMATS[fmt]]
    data = rng.integers(0, 256, size=(rows * blocks, size), dtype=np.uint8)
    for at in HALF_FIELDS[fmt]:
        exp = rng.integers(-10, -6, size=rows * blocks) if moderate else rng.integers(-14, 16, size=rows * blocks)
        d = rng.uniform(1, 2, size=rows * blocks) * 2.0 ** exp * rng.choice([-1, 1], size=rows * blocks)
        d[rng.random(rows * blocks) < 0.1] = 0.0
        halves = d.astype(np.float16)
        sub = rng.random(rows * blocks) < 0.1
        halves[sub] = rng.integers(1, 0x400, size=int(sub.sum()), dtype=np.uint16).view(np.float16)
        data[:, at : at + 2] = halves.view(np.uint8).reshape(-1, 2)
    data[rng.random(rows * blocks) < 0.1] = 0
    return data.reshape(rows, blocks * size), blocks * qk


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("case", range(CASES))
def test_dequantize_bit_exact(fmt, case, rng):
    rows, blocks = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    w, k = random_blocks(rng, fmt, rows, blocks, moderate=False)
    want = gguf_quants.dequantize(w, FORMATS[fmt]).astype(np.float32)
    assert want.shape == (rows, k)
    got = run("gguf_dequantize", {"w": w}, {"format": fmt, "dtype": "f32"})
    mismatch = got["out"].astype(np.float32).view(np.uint32) != want.view(np.uint32)
    assert not mismatch.any(), (
        f"{fmt}: {int(mismatch.sum())} of {want.size} weights differ from gguf-py, first at "
        f"{np.argwhere(mismatch)[0]}: {got['out'][mismatch][0]} vs {want[mismatch][0]}; {got['_cmd']}"
    )


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_qgemv_against_gguf_py_weights(fmt, dtype, rng):
    m, n = int(rng.integers(1, 17)), int(rng.integers(1, 20))
    blocks = 8 if fmt in ("q4_0", "q8_0") else 2
    w, k = random_blocks(rng, fmt, n, blocks, moderate=True)
    weights = gguf_quants.dequantize(w, FORMATS[fmt]).astype(np.float64)
    x = cast(rng.standard_normal((m, k)), dtype)
    got = run("gguf_qgemv", {"x": x, "w": w}, {"format": fmt}, outputs=("y",))
    want = as_f64(x) @ weights.T
    assert_close(got["y"], want, dtype, f"gguf_qgemv {fmt} {m}x{n}x{k}", terms=k, repro=got["_cmd"])


@pytest.mark.parametrize("fmt", ["q4_0", "q8_0"])
@pytest.mark.parametrize("case", range(CASES))
def test_quantize_byte_exact(fmt, case, rng):
    rows, k = int(rng.integers(1, 6)), 32 * int(rng.integers(1, 5))
    x = (rng.standard_normal((rows, k)) * 2.0 ** rng.integers(-10, 10)).astype(np.float32)
    x[:, :32][rng.random(rows) < 0.2] = 0.0  # some all-zero blocks
    want = gguf_quants.quantize(x, FORMATS[fmt])
    got = run("gguf_quantize", {"x": x}, {"format": fmt}, outputs=("w",))
    got_bytes = got["w"].astype(np.uint8)
    assert got_bytes.shape == want.shape
    mismatch = got_bytes != want
    assert not mismatch.any(), (
        f"{fmt}: {int(mismatch.sum())} of {want.size} bytes differ from gguf-py, first at "
        f"{np.argwhere(mismatch)[0]}; {got['_cmd']}"
    )
