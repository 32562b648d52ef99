#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what the tests need (NVRTC from the
# `nvidia-cuda-nvrtc` wheel, so every kernel's CUDA C compiles without a GPU or toolkit),
# runs every crate's tests, compiles every registered kernel for CUDA (NVRTC) and Metal
# (g++ against the Metal model header), and runs every registered case on the CPU backend
# and under the Metal emulator.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TESSERA_NVRTC_PATH="$(scripts/install-nvrtc.sh)"
export TESSERA_NVRTC_PATH
export TESSERA_REQUIRE_NVRTC=1
export TESSERA_CACHE_DIR="${TESSERA_CACHE_DIR:-$PWD/target/tessera-cache}"

# One build. `cargo test` builds the CLI binary too (tessera-cli's integration tests run
# it) with the features the whole workspace resolves to; a separate `cargo build -p
# tessera-cli` would resolve them for that package alone and compile tessera-std and the CLI
# a second time.
cargo test --workspace
tessera=target/debug/tessera
"$tessera" device
"$tessera" compile --target cuda
"$tessera" compile --target msl
"$tessera" check --backend cpu
# The Metal emulator builds each kernel with one g++ at a time: its cases run as parallel
# processes split by dtype (every correctness case is f32, f16 or bf16 but moe_permute's,
# which have none; rejection cases run in each), so both cores build. Logs print in turn.
emu_logs="$(mktemp -d)"
emu_pids=()
for sel in "--dtype f32" "--dtype f16" "--dtype bf16" "--filter moe_permute"; do
    # shellcheck disable=SC2086 # $sel is two words on purpose
    "$tessera" check --backend metal-emu $sel >"$emu_logs/${sel// /_}.log" 2>&1 &
    emu_pids+=("$!")
done
emu_failed=0
for pid in "${emu_pids[@]}"; do
    wait "$pid" || emu_failed=1
done
cat "$emu_logs"/*.log
rm -rf "$emu_logs"
if [[ $emu_failed -ne 0 ]]; then
    echo "metal-emu: some cases failed (above)"
    exit 1
fi

# Optional, last: every op against outside oracles (PyTorch when installed, else float64
# NumPy from the published math). Skips itself, exit 0, when its Python packages cannot be
# installed; TESSERA_ORACLE_CASES raises its budget.
TESSERA_BIN="$tessera" scripts/oracles.sh

# Last: the Python package: builds the wheel (maturin, debug) and runs its pytest suite.
scripts/python-test.sh
