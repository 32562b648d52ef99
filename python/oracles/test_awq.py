"""AWQ int4 (AutoAWQ's GEMM checkpoints, as vLLM loads them) against an independent NumPy
packer and unpacker written from the format's description: integer codes q [K, N] (0-15),
zero points z [K/G, N] (0-15) and scales [K/G, N] are packed here into qweight [K, N/8]
and qzeros [K/G, N/8], eight columns per int32 along N in AWQ's interleaved order (nibble
i of a word holds column [0, 2, 4, 6, 1, 3, 5, 7][i] of its eight); awq_dequantize must
give (q - z) * scales from those words and awq_qgemv x @ that in float64, for every group
size (0: one group over K)."""

import numpy as np
import pytest

from harness import as_f64, assert_close, cast, run

GROUPS = [32, 64, 128, 0]
# The column of its eight that each nibble of a word holds (AutoAWQ's pack order).
PACK_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def pack_columns(values):
    """[R, N] 4-bit values → [R, N/8] int32 words in AWQ's order."""
    v = np.asarray(values, dtype=np.uint32).reshape(values.shape[0], -1, 8)
    words = np.zeros(v.shape[:2], dtype=np.uint32)
    for nibble, column in enumerate(PACK_ORDER):
        words |= v[:, :, column] << np.uint32(4 * nibble)
    return words.view(np.int32)


def unpack_columns(words):
    """The inverse of pack_columns."""
    w = np.asarray(words).view(np.uint32)
    out = np.zeros((w.shape[0], w.shape[1], 8), dtype=np.int64)
    for nibble, column in enumerate(PACK_ORDER):
        out[:, :, column] = (w >> np.uint32(4 * nibble)) & np.uint32(15)
    return out.reshape(w.shape[0], -1)


def checkpoint(rng, k, n, group, dtype):
    g = k if group == 0 else group
    q = rng.integers(0, 16, size=(k, n))
    z = rng.integers(0, 16, size=(k // g, n))
    scales = cast(rng.uniform(-0.1, 0.1, size=(k // g, n)), dtype)
    qweight, qzeros = pack_columns(q), pack_columns(z)
    assert np.array_equal(unpack_columns(qweight), q)
    assert np.array_equal(unpack_columns(qzeros), z)
    w = (q - np.repeat(z, g, axis=0)) * np.repeat(as_f64(scales), g, axis=0)
    return {"qweight": qweight, "qzeros": qzeros, "scales": scales}, w


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("group", GROUPS)
def test_dequantize_unpacks_the_published_layout(dtype, group, rng):
    k, n = 256, 48
    inputs, w = checkpoint(rng, k, n, group, dtype)
    got = run("awq_dequantize", inputs, {"group_size": group})
    want = as_f64(cast(w, dtype))  # the exact value rounded once to the dtype
    assert got["out"].shape == want.shape
    bad = got["out"] != want
    assert not bad.any(), (
        f"{int(bad.sum())} of {bad.size} differ; first at {tuple(np.argwhere(bad)[0])} ({got['_cmd']})"
    )


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("m", [1, 3, 16])
def test_qgemv_multiplies_by_the_unpacked_weights(dtype, group, m, rng):
    k, n = 512, 264
    inputs, w = checkpoint(rng, k, n, group, dtype)
    x = cast(rng.standard_normal((m, k)), dtype)
    got = run("awq_qgemv", {"x": x, **inputs}, {"group_size": group}, outputs=("y",))
    assert_close(got["y"], as_f64(x) @ w, dtype, f"awq_qgemv M={m}", terms=k, repro=got["_cmd"])
