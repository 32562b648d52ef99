"""Rotary embeddings — NeoX and interleaved layouts, partial rotation, Llama-3 and YaRN
scaling — against the frequencies Hugging Face transformers computes, including positions
near the context limit; qk_norm_rope against RMSNorm per head followed by RoPE."""

import numpy as np
import pytest

import math_oracles as M
from conftest import CASES
from harness import cast, run, assert_close, as_f64

DTYPES = ["f32", "f16", "bf16"]

# (theta, scaling, factor, original_max_position, extra): configurations models ship with,
# and the YaRN ones where its correction range reaches past rot_dim/2 (issue 18, item 1).
CONFIGS = [
    (10000.0, "none", 1.0, 8192, {}),
    (500000.0, "llama3", 8.0, 8192, {"low_freq_factor": 1.0, "high_freq_factor": 4.0}),
    (500000.0, "llama3", 32.0, 8192, {"low_freq_factor": 1.0, "high_freq_factor": 4.0}),
    (10000.0, "yarn", 4.0, 32768, {"beta_fast": 32.0, "beta_slow": 1.0}),
    (1000000.0, "yarn", 4.0, 32768, {"beta_fast": 32.0, "beta_slow": 1.0}),
    (10000.0, "yarn", 8.0, 131072, {"beta_fast": 32.0, "beta_slow": 1.0}),
    (500.0, "yarn", 2.0, 8192, {"beta_fast": 32.0, "beta_slow": 1.0}),
]


def check_rope(rng, dtype, config, positions, head_dim, rot_dim, layout):
    theta, scaling, factor, omp, extra = config
    tokens, heads = len(positions), int(rng.integers(1, 5))
    x = cast(rng.standard_normal((tokens, heads, head_dim)), dtype)
    params = {"theta": theta, "layout": layout, "rot_dim": rot_dim, "scaling": scaling}
    if scaling != "none":
        params.update({"factor": factor, "original_max_position": omp, **extra})
    got = run("rope", {"x": x, "positions": np.asarray(positions, dtype=np.int64)}, params)
    inv, mscale = M.rope_inv_freq(
        rot_dim, theta, scaling, factor, omp,
        extra.get("low_freq_factor", 1.0), extra.get("high_freq_factor", 4.0),
        extra.get("beta_fast", 32.0), extra.get("beta_slow", 1.0),
    )
    want = M.rope(as_f64(x), np.asarray(positions), rot_dim, layout, inv, mscale)
    assert_close(got["out"], want, dtype, f"rope {params} positions {min(positions)}..{max(positions)}",
                 extra=angle_error(dtype, positions), repro=got["_cmd"])


def angle_error(dtype, positions):
    """f32 forms the angle pos·f in f32 (as transformers does), off by up to pos·2⁻²⁴
    radians at f = 1: that much more error is allowed in f32."""
    return float(np.max(positions)) * 2.0**-23 if dtype == "f32" else 0.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", range(len(CONFIGS)))
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
def test_rope_configs(layout, config, dtype, rng):
    head_dim = int(rng.choice([64, 128]))
    rot_dim = int(rng.choice([head_dim, head_dim // 2]))
    positions = rng.integers(0, 4096, size=int(rng.integers(1, 20)))
    check_rope(rng, dtype, CONFIGS[config], positions, head_dim, rot_dim, layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", [0, 1, 5])
def test_rope_near_the_context_limit(config, dtype, rng):
    """Positions up to the scaled context (factor × original): the angle pos·f must be
    formed without losing the position's low bits."""
    theta, scaling, factor, omp, _ = CONFIGS[config]
    limit = int(omp * factor) if scaling != "none" else 131072
    positions = np.array([limit - 1, limit - 2, limit // 2 + 1, 65535, 0])
    check_rope(rng, dtype, CONFIGS[config], positions, 128, 128, "neox")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_rope_random(dtype, case, rng):
    head_dim = int(rng.choice([32, 64, 80, 128, 256]))
    rot_dim = 2 * int(rng.integers(1, head_dim // 2 + 1))
    config = CONFIGS[int(rng.integers(0, len(CONFIGS)))]
    positions = rng.integers(0, 20000, size=int(rng.integers(1, 30)))
    check_rope(rng, dtype, config, positions, head_dim, rot_dim, str(rng.choice(["neox", "interleaved"])))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(CASES))
def test_qk_norm_rope(dtype, case, rng):
    head_dim = int(rng.choice([64, 128]))
    tokens, hq, hk = int(rng.integers(1, 10)), int(rng.integers(1, 9)), int(rng.integers(1, 3))
    q = cast(rng.standard_normal((tokens, hq, head_dim)) * 5, dtype)
    k = cast(rng.standard_normal((tokens, hk, head_dim)) * 5, dtype)
    qw, kw = cast(rng.uniform(0.5, 1.5, head_dim), dtype), cast(rng.uniform(0.5, 1.5, head_dim), dtype)
    positions = rng.integers(0, 8192, size=tokens)
    params = {"theta": 1000000.0, "layout": "neox", "rot_dim": head_dim, "eps": 1e-6}
    got = run("qk_norm_rope", {"q": q, "k": k, "q_w": qw, "k_w": kw, "positions": positions.astype(np.int64)},
              params, outputs=("q_out", "k_out"))
    inv, _ = M.rope_inv_freq(head_dim, 1000000.0, "none", 1, 1, 1, 4, 32, 1)
    for name, x, w in (("q_out", q, qw), ("k_out", k, kw)):
        want = M.rope(M.rms_norm(as_f64(x), as_f64(w), 1e-6), positions, head_dim, "neox", inv, 1.0)
        # The normalised values are rounded to the dtype before rotating in some engines;
        # the tolerance allows one extra rounding.
        assert_close(got[name], want, dtype, f"qk_norm_rope {name}", terms=head_dim, extra=angle_error(dtype, positions), repro=got["_cmd"])
