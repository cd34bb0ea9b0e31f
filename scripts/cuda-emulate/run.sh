#!/usr/bin/env bash
# Runs Gated DeltaNet's CUDA kernels (src/kernels/cuda/gated_delta*.cu) on the CPU against
# the CPU kernels in double: each CUDA thread a std::thread, each __syncthreads a barrier,
# warp shuffles through a per-warp exchange (emu.hpp). It checks the kernels' algebra,
# indexing and barriers where no GPU is at hand; it says nothing of speed, and the GPU tests
# (GatedDeltaCuda.* in test_kernels_cuda) remain the verdict.
# usage: scripts/cuda-emulate/run.sh BUILD_DIR [big]
#   BUILD_DIR: a build holding src/kernels/libzt_kernels.a and src/core/libzt_core.a;
#   big: Dk = Dv = 128 too (minutes). Needs the CUDA headers (/usr/local/cuda/include).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [big]}" && pwd)
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in gated_delta_ops.cu gated_delta.cu gated_delta_backward.cu gated_delta_block.cuh; do
  python3 "$here/transform.py" "$root/src/kernels/cuda/$f" "$work/$f" "$root/src/kernels/cuda" "$work"
done
cp "$here/emu.hpp" "$here/gated_delta_emu.cpp" "$work/"
g++ -std=c++20 -O2 -w -I"$root/include" -I/usr/local/cuda/include "$work/gated_delta_emu.cpp" \
  -o "$work/emu" "$build/src/kernels/libzt_kernels.a" "$build/src/core/libzt_core.a" -fopenmp -lpthread
"$work/emu" "$@"
