#!/usr/bin/env bash
# The Python package's job: builds the `tessera` wheel with maturin (debug profile, into the
# workspace's target/, reusing its builds) into a venv (TESSERA_PY_VENV, default
# target/python-venv) and runs its pytest suite (python/tessera/tests). PyTorch tests run
# when the venv's interpreter has torch (TESSERA_PY_PYTHON picks one, e.g. an interpreter
# with torch installed) and skip otherwise; the CUDA tests skip without a GPU. When the
# build tools cannot be installed the job says why and exits 0; a failing build or test
# fails it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${TESSERA_PY_PYTHON:-python3}"
venv="${TESSERA_PY_VENV:-$PWD/target/python-venv}"
if ! command -v "$python" >/dev/null; then
    echo "python-tests: skipped: no $python"
    exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
    # --system-site-packages: an interpreter that has torch keeps it in the venv.
    if ! log="$("$python" -m venv --system-site-packages "$venv" 2>&1)"; then
        echo "python-tests: skipped: cannot create a venv with $python: $log"
        exit 0
    fi
fi
if ! log="$("$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "maturin>=1.9,<2" "pytest>=7" "numpy>=1.22" "ml_dtypes>=0.3" 2>&1)"; then
    echo "python-tests: skipped: cannot install maturin, pytest, numpy and ml_dtypes:"
    echo "$log" | tail -5
    exit 0
fi

start=$SECONDS
wheels="$PWD/target/wheels/debug"
rm -rf "$wheels"
(cd python/tessera && "$venv/bin/maturin" build --quiet --profile dev -o "$wheels" -i "$venv/bin/python")
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheels"/tessera-*.whl
echo "python-tests: wheel built and installed in $((SECONDS - start)) s"
# From outside the source tree, so the installed package (with its native module) is tested.
cd target
"$venv/bin/python" -m pytest -q -p no:cacheprovider ../python/tessera/tests "$@"
