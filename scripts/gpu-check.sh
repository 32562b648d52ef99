#!/usr/bin/env bash
# What to run on a machine with an NVIDIA GPU: builds Tessera, runs the CUDA backend's
# self-test (every sample kernel on the GPU against the CPU reference), every registered
# correctness case on CUDA, and the benchmarks, and keeps the whole log.
#
#   scripts/gpu-check.sh                 # everything; log in target/gpu-logs/<date>-<host>.log
#   scripts/gpu-check.sh --quick         # small bench shapes only
#   FILTER=rms_norm scripts/gpu-check.sh # only cases / shapes matching FILTER
#
# Needs: a Rust toolchain, the NVIDIA driver (libcuda.so), and NVRTC — from the CUDA
# toolkit, or from `scripts/install-nvrtc.sh` (no toolkit needed; run here when neither
# TESSERA_NVRTC_PATH nor a toolkit's libnvrtc is found). No GPU is touched before the
# build succeeds. Exits non-zero if any step fails; later steps still run.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
quick=""
for a in "$@"; do
  case "$a" in
    --quick) quick="--quick" ;;
    *) echo "gpu-check: unknown argument $a (expected --quick)" >&2; exit 2 ;;
  esac
done
filter=()
[ -n "${FILTER:-}" ] && filter=(--filter "$FILTER")

logdir="${TESSERA_LOG_DIR:-$root/target/gpu-logs}"
mkdir -p "$logdir"
log="$logdir/$(date -u +%Y%m%dT%H%M%SZ)-$(hostname -s 2>/dev/null || echo host).log"
exec > >(tee -a "$log") 2>&1
echo "gpu-check: log at $log"
echo "== commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(git status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')"
echo "== $(date -u)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv

# NVRTC: an explicit path, a toolkit, or the wheel.
if [ -z "${TESSERA_NVRTC_PATH:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1 \
   && ! ldconfig -p 2>/dev/null | grep -q libnvrtc.so; then
  echo "== NVRTC not found on this machine; installing the wheel"
  TESSERA_NVRTC_PATH="$(scripts/install-nvrtc.sh)" || { echo "gpu-check: NVRTC install failed"; exit 1; }
  export TESSERA_NVRTC_PATH
fi

failed=()
step() {
  local name="$1"; shift
  echo
  echo "== $name: $*"
  local t0=$SECONDS
  if "$@"; then
    echo "== $name: ok ($((SECONDS - t0)) s)"
  else
    echo "== $name: FAILED ($((SECONDS - t0)) s)"
    failed+=("$name")
  fi
}

step build cargo build --release -p tessera-cli -p tessera-runtime --example cuda_smoke
if [ ${#failed[@]} -ne 0 ]; then
  echo "gpu-check: the build failed; nothing ran on the GPU. Log: $log"
  exit 1
fi
tessera=target/release/tessera
step device "$tessera" device
step nvrtc-tests env TESSERA_REQUIRE_NVRTC=1 cargo test --release -p tessera-runtime --lib cuda
step cuda-smoke target/release/examples/cuda_smoke
step check "$tessera" check --backend cuda "${filter[@]}"
step bench "$tessera" bench --backend cuda $quick "${filter[@]}" --json "$logdir/bench-$(date -u +%Y%m%dT%H%M%SZ).json"

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "gpu-check: all steps passed. Log: $log"
else
  echo "gpu-check: FAILED steps: ${failed[*]}. Log: $log"
  exit 1
fi
