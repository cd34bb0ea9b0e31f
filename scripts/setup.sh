#!/usr/bin/env bash
# Installs dependencies, configures and builds zt with a CMake preset.
# Usage: scripts/setup.sh [PRESET [CMAKE_ARG...]]   PRESET: default (build/), ci (build-ci/), cpu, asan
# default and cpu build the `zt` program only (the main job); ci and asan build the
# tests too (`bash scripts/setup.sh ci && ctest --preset ci`). CMAKE_ARGs go to the
# configure step (.ci/run: `ci -DZT_CUDA=ON`, so a CI without nvcc fails).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
shift || true
bash scripts/install-deps.sh
echo "setup: configuring preset '$preset'"
cmake --preset "$preset" "$@" > /dev/null
echo "setup: building preset '$preset' on $(nproc) cores (ninja prints [n/N] per step)"
cmake --build --preset "$preset" -j "$(nproc)"
echo "setup: built preset '$preset'"
