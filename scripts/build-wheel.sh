#!/usr/bin/env bash
# Builds the release wheel of the `tessera` Python package for machines without Rust: one
# abi3 wheel (every CPython ≥ 3.9) tagged manylinux2014 x86_64 (glibc ≥ 2.17), linked
# through zig so it does not depend on this machine's glibc. Prints the wheel's path.
# Install it with `pip install <wheel>`; TESSERA_PY_VENV picks the build venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${TESSERA_PY_VENV:-$PWD/target/python-venv}"
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.9,<2" ziglang
out="$PWD/target/wheels/manylinux2014"
rm -rf "$out"
# maturin finds zig as `python -m ziglang` of the first python on the PATH.
(cd python/tessera && PATH="$venv/bin:$PATH" "$venv/bin/maturin" build --quiet --release \
    --zig --compatibility manylinux2014 -o "$out" -i "$venv/bin/python" >&2)
ls "$out"/tessera-*.whl
