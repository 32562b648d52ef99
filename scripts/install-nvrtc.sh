#!/usr/bin/env bash
# Installs NVRTC (NVIDIA's runtime CUDA C compiler) from the `nvidia-cuda-nvrtc` Python
# wheel into a private directory, with no CUDA toolkit and no GPU, and prints the
# directory that holds libnvrtc.so.* on stdout (progress goes to stderr).
#
#   export TESSERA_NVRTC_PATH="$(scripts/install-nvrtc.sh)"
#   TESSERA_REQUIRE_NVRTC=1 cargo test -p tessera-runtime cuda
#
# Environment:
#   TESSERA_NVRTC_VERSION  wheel version (default 13.0.88: CUDA 13.0, matching the 13.0 driver)
#   TESSERA_NVRTC_DIR      install directory (default .venv/nvrtc-<version> in the repo root)
set -euo pipefail

version="${TESSERA_NVRTC_VERSION:-13.0.88}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${TESSERA_NVRTC_DIR:-$root/.venv/nvrtc-$version}"

find_lib() {
  find "$1" -name 'libnvrtc.so*' ! -name '*builtins*' -print 2>/dev/null | sort | head -n 1
}

lib="$( [ -d "$dir" ] && find_lib "$dir" || true)"
if [ -z "$lib" ]; then
  python="$(command -v python3 || command -v python || true)"
  if [ -z "$python" ]; then
    echo "install-nvrtc: python3 is needed to fetch the nvidia-cuda-nvrtc wheel" >&2
    exit 1
  fi
  echo "install-nvrtc: installing nvidia-cuda-nvrtc==$version into $dir" >&2
  mkdir -p "$dir"
  "$python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$dir" "nvidia-cuda-nvrtc==$version" >&2
  lib="$(find_lib "$dir")"
fi
if [ -z "$lib" ]; then
  echo "install-nvrtc: no libnvrtc.so* found under $dir after installing" >&2
  exit 1
fi
dirname "$lib"
