#!/usr/bin/env bash
# The device scripts dry-run (issue 35 item 6): every line of tests/train/engine_on_device.sh
# run (A B C D D2 D3 D4 E L Q H P M, scripts/gpu-kit.sh's definitions) with the device replaced by
# the CPU, and tests/kernels_cuda/run_on_device.sh's test stage, on BUILD's binaries; a
# shell error in either fails here instead of costing device time.
# usage: device_scripts_dry.sh BUILD
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: device_scripts_dry.sh BUILD}" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
cd "$repo" || exit 1
OUT=$out/engine ZT_GPU_BUILD=$build ZT_KIT_DEVICE=cpu ZT_KIT_SLOW=4 ZT_KIT_BUDGET=1200 \
  tests/train/engine_on_device.sh run >"$out/engine.txt" 2>&1
rc=$?
cat "$out/engine.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: engine_on_device.sh run exited $rc"; fail=1; }
for l in A B C D D2 D3 D4 E L Q H P M; do
  grep -q "^PASS ${l}[ :]" "$out/engine.txt" || { echo "FAIL: line $l did not PASS"; fail=1; }
done
grep -q '^FAIL' "$out/engine.txt" && fail=1
OUT=$out/kernels ZT_GPU_BUILD=$build tests/kernels_cuda/run_on_device.sh test >"$out/kernels.txt" 2>&1
rc=$?
cat "$out/kernels.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: run_on_device.sh test exited $rc"; fail=1; }
grep -q 'test_kernels_cuda exit 0' "$out/kernels.txt" || { echo "FAIL: no 'test_kernels_cuda exit 0'"; fail=1; }
[ "$fail" -eq 0 ] && echo "device scripts dry run: PASS" || echo "device scripts dry run: FAIL"
exit "$fail"
