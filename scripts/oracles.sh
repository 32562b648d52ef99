#!/usr/bin/env bash
# The optional oracle job: checks every op, through `tessera run`, against PyTorch (when
# installed) or float64 NumPy references written from the published math. Builds nothing:
# it runs target/debug/tessera, or the binary in TESSERA_BIN. Its dependencies go into a
# venv (TESSERA_ORACLE_VENV, default target/oracle-venv); when they cannot be installed the
# job says why and exits 0. TESSERA_ORACLE_CASES sets the random cases per op and dtype
# (default 6, about a minute on two cores), TESSERA_ORACLE_SEED reruns a seed,
# TESSERA_ORACLE_PYTHON picks the interpreter (one with torch adds the PyTorch oracles).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export TESSERA_BIN="${TESSERA_BIN:-$PWD/target/debug/tessera}"
if [[ ! -x "$TESSERA_BIN" ]]; then
    echo "oracles: skipped: no tessera binary at $TESSERA_BIN (build it, or set TESSERA_BIN)"
    exit 0
fi

python="${TESSERA_ORACLE_PYTHON:-python3}"
venv="${TESSERA_ORACLE_VENV:-$PWD/target/oracle-venv}"
requirements=python/oracles/requirements.txt
if ! command -v "$python" >/dev/null; then
    echo "oracles: skipped: no $python"
    exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
    # --system-site-packages: an interpreter that has torch keeps it in the venv.
    if ! log="$("$python" -m venv --system-site-packages "$venv" 2>&1)"; then
        echo "oracles: skipped: cannot create a venv with $python: $log"
        exit 0
    fi
fi
# A venv made from another venv's interpreter sees only the base installation; a .pth
# file puts that venv's packages (torch, numpy) on the path as well.
parent_site="$("$python" -c 'import site; print("\n".join(site.getsitepackages()))')"
venv_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$parent_site" >"$venv_site/parent-interpreter.pth"
if ! log="$("$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" 2>&1)"; then
    echo "oracles: skipped: cannot install $requirements:"
    echo "$log" | tail -5
    exit 0
fi

# MLX (its CPU build on Linux) is the oracle of its own affine quantization format; where it
# does not install, those tests skip and the rest run.
if ! "$venv/bin/python" -c "import mlx.core" 2>/dev/null \
    && ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mlx[cpu]" >/dev/null 2>&1; then
    echo "oracles: mlx does not install here; the MLX affine format tests skip"
fi

export TESSERA_ORACLE_SEED="${TESSERA_ORACLE_SEED:-$RANDOM$RANDOM}"
export TESSERA_ORACLE_WORK="${TESSERA_ORACLE_WORK:-$PWD/target/oracle-work}"
echo "oracles: seed $TESSERA_ORACLE_SEED (TESSERA_ORACLE_SEED=$TESSERA_ORACLE_SEED $0 reruns it)"
rm -rf "$TESSERA_ORACLE_WORK"
status=0
start=$SECONDS
"$venv/bin/python" -m pytest -q -p no:cacheprovider python/oracles "$@" || status=$?
echo "oracles: $((SECONDS - start)) s"
if [[ $status -eq 0 ]]; then
    rm -rf "$TESSERA_ORACLE_WORK"
else
    echo "oracles: failing calls' inputs are kept under $TESSERA_ORACLE_WORK"
fi
exit $status
