#!/usr/bin/env bash
# Installs dependencies, configures and builds zt with a CMake preset.
# Usage: scripts/setup.sh [PRESET]   PRESET: default (build/), ci (build-ci/), cpu, asan
# default and cpu build the `zt` program only (the main job); ci and asan build the
# tests too (`bash scripts/setup.sh ci && ctest --preset ci`).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
bash scripts/install-deps.sh
cmake --preset "$preset" > /dev/null
cmake --build --preset "$preset" -j "$(nproc)"
echo "setup: built preset '$preset'"
