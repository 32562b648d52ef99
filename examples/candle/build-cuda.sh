#!/usr/bin/env bash
# Builds this example's tests for candle's CUDA device on a machine without a CUDA toolkit
# (candle's kernels need nvcc at build time): nvcc, the runtime headers and the libraries
# candle links come from NVIDIA's PyPI wheels, and a stub libcuda.so.1 (every driver
# function, each an empty body) satisfies the linker; the real driver is loaded where the
# binary runs. With a toolkit installed, `cargo test --no-default-features --features cuda`
# is all it takes. Prints the path of the built test binary. CUDA_COMPUTE_CAP (default 90)
# picks the GPU generation candle's kernels are built for.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
tk="${TESSERA_CUDA_WHEELS:-$PWD/target/cuda-wheels}"
root="$tk/nvidia/cu13"
if [[ ! -x "$root/bin/nvcc" ]]; then
    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$tk" \
        "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-crt==13.0.*" \
        "nvidia-cuda-cccl==13.0.*" "nvidia-cublas==13.0.*" "nvidia-curand" \
        "nvidia-cuda-nvrtc==13.0.*" "nvidia-nvvm==13.0.*"
    chmod +x "$root"/bin/* "$root"/nvvm/bin/*
fi
lib="$root/lib"
ln -sfn lib "$root/lib64"
for l in cublas cublasLt cudart nvrtc; do ln -sf "lib$l.so.13" "$lib/lib$l.so"; done
ln -sf libcurand.so.10 "$lib/libcurand.so"
if [[ ! -e "$lib/libcuda.so.1" ]]; then
    grep -ohE '\bcu[A-Z][A-Za-z0-9_]*\b' "$root/include/cuda.h" "$root/include/cudaTypedefs.h" |
        sort -u | sed 's/.*/void &(void) {}/' >"$tk/libcuda-stub.c"
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$lib/libcuda.so.1" "$tk/libcuda-stub.c"
    ln -sf libcuda.so.1 "$lib/libcuda.so"
fi
export CUDA_HOME="$root" CUDA_PATH="$root" CUDA_ROOT="$root"
export PATH="$root/bin:$PATH"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
export CPATH="$root/include:$root/include/cccl${CPATH:+:$CPATH}"
cargo test --release --no-default-features --features cuda --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "against_candle":
        print(m["executable"])'
