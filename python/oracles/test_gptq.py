"""GPTQ int4 (AutoGPTQ's `gptq` checkpoint format, act-order off) against an independent
NumPy packer and unpacker written from the format's description: integer codes q [K, N]
(0-15), zero points z [K/G, N] (1-16) and scales [K/G, N] are packed here into qweight
[K/8, N] (eight codes of a column per int32 along K, the first in the low nibble) and
qzeros [K/G, N/8] (eight stored zeros z - 1 of a row per int32 along N, low nibble first);
gptq_dequantize must give scales * (q - z) from those words and gptq_qgemv x @ that in
float64, for every group size (0: one group over K)."""

import numpy as np
import pytest

from harness import DTYPES, as_f64, assert_close, cast, run

GROUPS = [32, 64, 128, 0]


def pack_nibbles(values, axis):
    """Eight 4-bit values along `axis` per 32-bit word, the first in the low nibble, as
    int32 (the dtype the checkpoints store)."""
    v = np.moveaxis(np.asarray(values, dtype=np.uint32), axis, 0)
    v = v.reshape(v.shape[0] // 8, 8, *v.shape[1:])
    words = np.zeros((v.shape[0], *v.shape[2:]), dtype=np.uint32)
    for j in range(8):
        words |= v[:, j] << np.uint32(4 * j)
    return np.ascontiguousarray(np.moveaxis(words, 0, axis)).view(np.int32)


def unpack_nibbles(words, axis):
    """The inverse of pack_nibbles."""
    w = np.moveaxis(np.asarray(words).view(np.uint32), axis, 0)
    v = np.stack([(w >> np.uint32(4 * j)) & np.uint32(15) for j in range(8)], axis=1)
    return np.moveaxis(v.reshape(w.shape[0] * 8, *w.shape[1:]), 0, axis).astype(np.int64)


def checkpoint(rng, k, n, group, dtype):
    """Random codes, zero points (1-16: a stored 15 is the zero point 16) and scales, and
    the tensors a checkpoint holds for them."""
    g = k if group == 0 else group
    q = rng.integers(0, 16, size=(k, n))
    z = rng.integers(1, 17, size=(k // g, n))
    scales = cast(rng.uniform(-0.1, 0.1, size=(k // g, n)), dtype)
    qweight = pack_nibbles(q, axis=0)
    qzeros = pack_nibbles(z - 1, axis=1)
    assert np.array_equal(unpack_nibbles(qweight, 0), q)
    assert np.array_equal(unpack_nibbles(qzeros, 1) + 1, z)
    w = np.repeat(as_f64(scales), g, axis=0) * (q - np.repeat(z, g, axis=0))
    return {"qweight": qweight, "qzeros": qzeros, "scales": scales}, w


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("group", GROUPS)
def test_dequantize_unpacks_the_published_layout(dtype, group, rng):
    k, n = 256, 48
    inputs, w = checkpoint(rng, k, n, group, dtype)
    got = run("gptq_dequantize", inputs, {"group_size": group})
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
    k, n = 512, 104
    inputs, w = checkpoint(rng, k, n, group, dtype)
    x = cast(rng.standard_normal((m, k)), dtype)
    got = run("gptq_qgemv", {"x": x, **inputs}, {"group_size": group}, outputs=("y",))
    assert_close(got["y"], as_f64(x) @ w, dtype, f"gptq_qgemv M={m}", terms=k, repro=got["_cmd"])
