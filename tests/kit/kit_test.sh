#!/usr/bin/env bash
# The GPU kit proven without a GPU (issue 33 item 3; label kit): pack the kit from BUILD (the
# build under test, a CUDA build), then in a bare Debian root (tests/kit/bare_root.sh: minbase
# bookworm + python3, no Open MPI/HDF5/-dev, the checkout and /usr/local/cuda bound in):
#   1. `gpu-kit.sh run`: discovery prints the libraries and "gpu: none visible"; the CPU lines
#      PASS (the kit's mpirun starts 2 and 4 ranks of zt check --backend mpi; a 2-step zt
#      train); every GPU line ends SKIP "no GPU visible" (dead_rank: "needs 2 GPUs") within
#      15 s; no FAIL; run.log and summary.txt in $OUT
#   2. the same with ZT_KIT_DEVICE=cpu: every engine line and dead_rank PASS with the device
#      replaced by the CPU (issue 35 item 6: the device scripts' lines dry-run)
#   3. a CUDA library hidden (ZT_KIT_LIB_DIRS without libnccl): one REFUSED line, exit 2
# A planted failure: ZT_KIT_DROP=libhdf5 (pack leaves HDF5 out of the kit) turns step 1 red.
# usage: kit_test.sh BUILD
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: kit_test.sh BUILD}" && pwd)
bare=$repo/tests/kit/bare_root.sh
kit=$repo/.carry/gpu-kit-test  # inside the checkout (git-ignored): the bare root sees it
fail=0
bad() { echo "FAIL: $*"; fail=1; }
grep -qE '^ZT_NCCL_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt" 2>/dev/null ||
  { echo "SKIPPED: $build is not a CUDA build (the kit packs CUDA binaries)"; exit 77; }
"$bare" true >/dev/null 2>&1
rc=$?
[ "$rc" -eq 77 ] && { "$bare" true; exit 77; }
[ "$rc" -eq 0 ] || { "$bare" true; echo "FAIL: the bare root does not start"; exit 1; }

t0=$SECONDS
ZT_KIT_BUILD=$build ZT_KIT_DIR=$kit "$repo/scripts/gpu-kit.sh" pack || { echo "FAIL: pack"; exit 1; }
echo "pack: $((SECONDS - t0)) s"

# 1. the run as on a machine without a GPU
out=$kit/out  # the device tool's $OUT, inside the checkout so that the bare root writes it
rm -rf "$out" && mkdir -p "$out"
t0=$SECONDS
ZT_KIT_DIR=$kit OUT=$out "$bare" 'scripts/gpu-kit.sh run' >"$out/stdout" 2>&1
rc=$?
cat "$out/stdout"
echo "run (no GPU): exit $rc in $((SECONDS - t0)) s"
[ "$rc" -eq 0 ] || bad "gpu-kit.sh run exited $rc"
grep -q '^gpu: none visible' "$out/stdout" || bad "no 'gpu: none visible' line"
for so in libcudart.so.13 libcublas.so.13 libnccl.so.2; do
  grep -qE "^lib: $so .* in /" "$out/stdout" || bad "discovery did not find $so in the bound toolkit"
done
for l in launcher cpu_train; do grep -q "^PASS $l:" "$out/stdout" || bad "CPU line $l did not PASS"; done
grep -q 'np 2: zt check --backend mpi exit 0.*np 4: zt check' "$out/stdout" || bad "the launcher did not start 2 and 4 ranks"
for l in kernels nccl_comm check_nccl speed A C D E L Q P M attention; do
  grep -q "^SKIP $l: no GPU visible" "$out/stdout" || bad "GPU line $l did not SKIP with 'no GPU visible'"
  s=$(grep -oP "^  \\($l: \\K[0-9.]+" "$out/stdout")
  [ -n "$s" ] && awk -v s="$s" 'BEGIN { exit !(s < 15) }' || bad "GPU line $l took ${s:-?} s (limit 15 s without a GPU)"
done
grep -q '^FAIL\|^NOT RUN' "$out/stdout" && bad "a line FAILed or was not run"
grep -qE '^summary: [0-9]+ PASS, 0 FAIL, [0-9]+ SKIP, 0 NOT RUN$' "$out/stdout" || bad "no summary line counting the lines"
# the second call's lines (ZT_KIT_LINES), as docs/gpu-verification.md gives them
ZT_KIT_DIR=$kit OUT=$out/second ZT_KIT_LINES='B D2 D3 D4 H dead_rank' "$bare" 'mkdir -p $OUT && scripts/gpu-kit.sh run' >"$out/second.txt" 2>&1 ||
  bad "the second call exited $?"
for l in B D2 D3 D4 H; do grep -q "^SKIP $l: no GPU visible" "$out/second.txt" || bad "GPU line $l did not SKIP"; done
grep -q '^SKIP dead_rank: needs 2 GPUs' "$out/second.txt" || bad "dead_rank did not SKIP for want of 2 GPUs"
[ -s "$out/summary.txt" ] && [ -s "$out/run.log" ] && [ -s "$out/logs.tar.gz" ] || bad "summary.txt, run.log, logs.tar.gz not all in \$OUT"

# 2. the dry run: the engine lines with the device replaced by the CPU
t0=$SECONDS
ZT_KIT_DIR=$kit ZT_KIT_DEVICE=cpu ZT_KIT_LINES='A B C D D2 D3 D4 E L Q H P M dead_rank' ZT_KIT_BUDGET=1200 ZT_KIT_SLOW=4 \
  OUT=$out/dry-out "$bare" 'scripts/gpu-kit.sh run' >"$out/dry" 2>&1
rc=$?
grep -E '^(PASS|FAIL|SKIP|REFUSED)|^  \(' "$out/dry"
echo "dry run (device replaced by the CPU): exit $rc in $((SECONDS - t0)) s"
[ "$rc" -eq 0 ] || bad "the dry run exited $rc"
for l in A B C D D2 D3 D4 E L Q H P M dead_rank; do
  grep -q "^PASS ${l}[ :]" "$out/dry" || bad "dry line $l did not PASS"
done
grep -q '^FAIL' "$out/dry" && bad "a dry line FAILed"

# 3. a hidden library: one clear refusal, exit 2, before any line
ZT_KIT_DIR=$kit ZT_KIT_LIB_DIRS=/tmp/hide OUT=$out/hidden-out "$bare" \
  'mkdir /tmp/hide && ln -s /usr/local/cuda/lib/* /usr/local/cuda/lib64/* /tmp/hide/ 2>/dev/null; rm -f /tmp/hide/libnccl.so*; scripts/gpu-kit.sh run' >"$out/hidden" 2>&1
rc=$?
grep -E '^REFUSED|^summary' "$out/hidden"
[ "$rc" -eq 2 ] || bad "with libnccl hidden, run exited $rc (want 2)"
grep -q '^REFUSED: missing libnccl.so.2 ' "$out/hidden" || bad "no REFUSED line naming libnccl.so.2"
grep -qE '^(PASS|SKIP|FAIL) ' "$out/hidden" && bad "lines ran after the refusal"

[ "$fail" -eq 0 ] && echo "kit: PASS" || echo "kit: FAIL"
exit "$fail"
