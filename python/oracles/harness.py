"""Drives the `tessera` binary through `tessera run` with .npy files and compares what it
writes against an outside oracle: PyTorch on the CPU where it is installed and has the op,
else float64 NumPy written from the published math (never from Tessera's kernels or its
Rust references)."""

import json
import os
import subprocess
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("TESSERA_BIN", str(ROOT / "target" / "debug" / "tessera"))
BACKEND = os.environ.get("TESSERA_ORACLE_BACKEND", "cpu")

try:  # PyTorch is optional: with it, the ops it has are checked against it.
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
# Largest finite value of each dtype.
DTYPE_MAX = {name: float(ml_dtypes.finfo(t).max) for name, t in DTYPES.items()}
# Unit roundoff of each dtype (half an ulp at 1).
EPS = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}


class OpFailed(Exception):
    """`tessera run` exited non-zero; the message carries its stderr and the command."""


def cast(x, dtype):
    """`x` rounded to `dtype` (f32/f16/bf16), then read back as float64: the values the op
    really sees."""
    with np.errstate(over="ignore"):  # past the range is ±inf, as IEEE rounds it
        return np.asarray(x, dtype=np.float64).astype(DTYPES[dtype])


def as_f64(a):
    a = np.asarray(a)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = a.view(ml_dtypes.bfloat16)
    return a.astype(np.float64)


def run(op, inputs, params=None, outputs=("out",), backend=None):
    """Runs `tessera run OP` on `inputs` (name → ndarray, saved as .npy in its own dtype)
    and returns name → float64 ndarray for each output."""
    params = params or {}
    tmp = tempfile.mkdtemp(prefix=f"{op}-", dir=work_dir())
    if True:
        cmd = [BINARY, "run", op, "--backend", backend or BACKEND]
        for name, arr in inputs.items():
            path = os.path.join(tmp, f"{name}.npy")
            np.save(path, arr)
            cmd += ["--input", f"{name}={path}"]
        for key, value in params.items():
            cmd += ["--param", f"{key}={value}"]
        paths = {}
        for name in outputs:
            paths[name] = os.path.join(tmp, f"out_{name}.npy")
            cmd += ["--output", f"{name}={paths[name]}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            shown = " ".join(cmd)
            raise OpFailed(f"`{shown}` exited {proc.returncode}: {proc.stderr.strip()}")
        got = {name: as_f64(np.load(path)) for name, path in paths.items()}
        got["_cmd"] = " ".join(cmd)
        return got


_WORK = []


def work_dir():
    """One directory per test session holding every call's inputs, so a failure's command
    can be rerun as printed (scripts/oracles.sh removes it when every test passes)."""
    if not _WORK:
        base = os.environ.get("TESSERA_ORACLE_WORK")
        if base:
            os.makedirs(base, exist_ok=True)
        _WORK.append(tempfile.mkdtemp(prefix="tessera-oracles-", dir=base))
    return _WORK[0]


def schema():
    out = subprocess.run([BINARY, "list", "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def tolerance(dtype, terms=1):
    """Allowed error relative to the output's scale: a few roundings of the dtype, growing
    slowly with the number of terms summed (f32 accumulation)."""
    base = {"f32": 2e-5, "f16": 4e-3, "bf16": 3e-2}[dtype]
    return base * max(1.0, np.log2(max(terms, 1)) / 4)


def assert_close(got, want, dtype, what, terms=1, scale=None, repro=None, extra=0.0):
    """Every element of `got` within tolerance of `want`, relative to `scale` (default: the
    largest |want|, at least 1), plus `extra` for a known error source; NaN and ±inf must appear exactly where the oracle has them."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, oracle {want.shape}"
    nonfinite_want = ~np.isfinite(want)
    nonfinite_got = ~np.isfinite(got)
    bad = np.flatnonzero(nonfinite_want != nonfinite_got)
    assert bad.size == 0, (
        f"{what}: non-finite mismatch at {bad.size} elements, first flat index {bad[0]}: "
        f"got {got.flat[bad[0]]}, oracle {want.flat[bad[0]]}{repro_text(repro)}"
    )
    same = nonfinite_want & (got != want) & ~(np.isnan(got) & np.isnan(want))
    assert not same.any(), f"{what}: wrong infinity{repro_text(repro)}"
    finite = ~nonfinite_want
    if not finite.any():
        return
    if scale is None:
        scale = max(1.0, float(np.max(np.abs(want[finite]))))
    err = np.abs(got[finite] - want[finite]) / scale
    worst = int(np.argmax(err))
    tol = tolerance(dtype, terms) + extra
    assert err[worst] <= tol, (
        f"{what}: error {err[worst]:.3g} (relative to {scale:.3g}) over the tolerance "
        f"{tol:.3g}: got {got[finite][worst]}, oracle {want[finite][worst]}{repro_text(repro)}"
    )


def repro_text(repro):
    return f"\n  reproduce: {repro}" if repro else ""
