"""MLX's affine quantization checked against MLX itself (the `mlx` package's CPU build):
affine_quantize must write mx.quantize's packed words, scales and biases and
affine_dequantize give mx.dequantize's values, bit for bit, for every dtype, bit width and
group size; affine_qgemv, run on MLX's own tensors, must give the float64 product with
mx.dequantize's weights. (Not mx.quantized_matmul's result: on the CPU it sums bf16 in
bf16, a dozen units in the last place away at K = 512.) Skipped where mlx does not
install."""

import os
import subprocess
import tempfile

import numpy as np
import pytest

from harness import BACKEND, BINARY, as_f64, assert_close, cast, run, work_dir

mx = pytest.importorskip("mlx.core")

DTYPES = ["f32", "f16", "bf16"]
BITS = [2, 3, 4, 5, 6, 8]
GROUPS = [32, 64, 128]
MX_DTYPES = {"f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16}


def to_mx(a, dtype):
    """An array of our dtype's values as an MLX array of that dtype (exact: the values
    are representable)."""
    return mx.array(as_f64(a).astype(np.float32)).astype(MX_DTYPES[dtype])


def from_mx(a):
    """An MLX array's values in float64 (exact for every float dtype and u32)."""
    if a.dtype in (mx.float16, mx.bfloat16):
        a = a.astype(mx.float32)
    return np.array(a).astype(np.float64)


def assert_identical(got, want, what):
    """Equal values and equal signs of zero: the same bits for NaN-free data."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, MLX {want.shape}"
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    if not same.all():
        i = np.argwhere(~same)[0]
        raise AssertionError(
            f"{what}: {int((~same).sum())} of {same.size} differ; first at {tuple(i)}: "
            f"ours {got[tuple(i)]!r}, MLX {want[tuple(i)]!r}"
        )


def weights(rng, n, k, group, dtype):
    """Rows of mixed scale with groups of every kind MLX's quantizer branches on: mixed
    signs, all positive, all negative, constant, a range below its 1e-7 step floor, codes
    that are exact ties."""
    w = rng.standard_normal((n, k)) * rng.uniform(0.01, 3.0, size=(n, 1))
    w[0, :group] = w[0, 0]
    w[1 % n, :group] = np.abs(w[1 % n, :group])
    w[2 % n, group : 2 * group] = -np.abs(w[2 % n, group : 2 * group]) - 0.5
    w[3 % n, :group] = 1.0 + rng.uniform(0.0, 1e-8, size=group)
    # Halves from 0 to 3: at 2 bits the step is 1 from the edge 3, every half a tie.
    w[4 % n, group : 2 * group] = (np.arange(group) % 7) * 0.5
    return cast(w, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group", GROUPS)
def test_quantize_and_dequantize_are_mlx_bit_for_bit(dtype, bits, group, rng):
    n, k = 6, 3 * group
    w = weights(rng, n, k, group, dtype)
    params = {"bits": bits, "group_size": group}
    ours = run("affine_quantize", {"w": w}, params, outputs=("packed", "scales", "biases"))
    packed, scales, biases = mx.quantize(to_mx(w, dtype), group_size=group, bits=bits)
    mlx = {"packed": from_mx(packed), "scales": from_mx(scales), "biases": from_mx(biases)}
    for name in ("packed", "scales", "biases"):
        assert_identical(ours[name], mlx[name], f"affine_quantize {name} ({ours['_cmd']})")

    # Dequantize MLX's own tensors, as they come out of an MLX checkpoint.
    inputs = {
        "packed": np.array(packed).astype(np.uint32),
        "scales": cast(mlx["scales"], dtype),
        "biases": cast(mlx["biases"], dtype),
    }
    got = run("affine_dequantize", inputs, params)
    want = from_mx(mx.dequantize(packed, scales, biases, group_size=group, bits=bits))
    assert_identical(got["out"], want, f"affine_dequantize ({got['_cmd']})")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("m", [1, 3, 16])
def test_qgemv_multiplies_by_mlx_dequantized_weights(dtype, bits, m, rng):
    group = [32, 64, 128][bits % 3]
    n, k = 9, 4 * group
    w = weights(rng, n, k, group, dtype)
    x = cast(rng.standard_normal((m, k)), dtype)
    packed, scales, biases = mx.quantize(to_mx(w, dtype), group_size=group, bits=bits)
    inputs = {
        "x": x,
        "packed": np.array(packed).astype(np.uint32),
        "scales": cast(from_mx(scales), dtype),
        "biases": cast(from_mx(biases), dtype),
    }
    got = run("affine_qgemv", inputs, {"bits": bits, "group_size": group}, outputs=("y",))
    w_mlx = from_mx(mx.dequantize(packed, scales, biases, group_size=group, bits=bits))
    want = as_f64(x) @ w_mlx.T
    assert_close(got["y"], want, dtype, f"affine_qgemv M={m}", terms=k, repro=got["_cmd"])


@pytest.mark.parametrize("bits", [3, 4, 6])
def test_an_mlx_safetensors_file_is_read_as_it_is(bits):
    """A layer saved by MLX (`weight`, `scales`, `biases` under a model's names) goes into
    `tessera run` straight from the file, and what comes out is what MLX reads back."""
    pre = "model.layers.0.mlp.up_proj."
    w = mx.random.normal((12, 256), key=mx.random.key(bits)).astype(mx.bfloat16)
    packed, scales, biases = mx.quantize(w, group_size=64, bits=bits)
    tmp = tempfile.mkdtemp(prefix="mlx-file-", dir=work_dir())
    layer, out = os.path.join(tmp, "layer.safetensors"), os.path.join(tmp, "out.safetensors")
    mx.save_safetensors(layer, {pre + "weight": packed, pre + "scales": scales, pre + "biases": biases})
    cmd = [BINARY, "run", "affine_dequantize", "--backend", BACKEND,
           "--input", f"packed={layer}:{pre}weight", "--input", f"scales={layer}:{pre}scales",
           "--input", f"biases={layer}:{pre}biases", "--param", f"bits={bits}",
           "--param", "group_size=64", "--output", f"out={out}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}: {proc.stderr}"
    got = mx.load(out)["out"]
    want = mx.dequantize(packed, scales, biases, group_size=64, bits=bits)
    assert got.dtype == mx.bfloat16 and mx.array_equal(got, want).item(), " ".join(cmd)
