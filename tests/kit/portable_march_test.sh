#!/usr/bin/env bash
# The portable build (ZT_MARCH, src/kernels/CMakeLists.txt): a binary built here must run on
# another x86-64 CPU of the level it targets, and the GPU kit must refuse a CPU below it in
# one line rather than die of SIGILL.
#   1. every compile command of zt and test_kernels says -march=x86-64-v3, none native;
#   2. the CPU kernels' tests pass under `qemu-x86_64 -cpu Haswell` (AVX2 + FMA, no AVX-512:
#      the level's oldest CPU), and `zt estimate` runs there;
#   3. scripts/gpu-kit.sh's CPU check passes this host's /proc/cpuinfo and refuses one
#      without avx2 (REFUSED naming avx2, exit 2).
# Planted fault: a build with -DZT_MARCH=native on an AVX-512 host fails 1, and its
# test_kernels dies of SIGILL (132) in 2.
# Usage: portable_march_test.sh BUILD_DIR REPO
set -uo pipefail
build=$1 repo=$2
fail() { echo "FAIL: $*"; exit 1; }
if grep -qE '^ZT_SANITIZE:[A-Z]*=(ON|TRUE|1)$' "$build/CMakeCache.txt"; then
  # an ASan binary cannot map its shadow memory under qemu-user: the release flags are the
  # ones this test is about, and the ci build runs it
  echo "SKIPPED: a sanitizer build (ZT_SANITIZE=ON): the ci build checks the portable flags"; exit 77
fi
march=$(sed -n 's/^ZT_MARCH:[A-Z]*=//p' "$build/CMakeCache.txt")
[ "$march" = x86-64-v3 ] || { echo "SKIPPED: this build has ZT_MARCH=$march; the test checks the default, x86-64-v3"; exit 77; }

# 1. the compile commands
cmds=$(ninja -C "$build" -t commands zt test_kernels) || fail "ninja -t commands"
! grep -q -- '-march=native' <<<"$cmds" || fail "a compile command says -march=native: $(grep -m1 -o '[^ ]*\.cpp$' <<<"$(grep -- '-march=native' <<<"$cmds")")"
n=$(grep -c -- '-march=x86-64-v3' <<<"$cmds")
((n > 0)) || fail "no compile command says -march=x86-64-v3"
echo "ok: $n compile commands of zt and test_kernels say -march=x86-64-v3, none native"

# 2. under an emulated CPU of the level
if ! command -v qemu-x86_64 >/dev/null; then
  echo "SKIPPED: qemu-x86_64 is missing (scripts/install-deps.sh installs qemu-user)"; exit 77
fi
quiet() { grep -v "TCG doesn't support requested feature"; }
out=$(OMP_NUM_THREADS=1 qemu-x86_64 -cpu Haswell "$build/tests/kernels/test_kernels" \
        --gtest_filter='KernelForward.*:KernelF32.*:AdamW.*:Moe.*' 2>&1 | quiet)
rc=${PIPESTATUS[0]}
((rc == 0)) || { tail -5 <<<"$out"; fail "test_kernels under qemu-x86_64 -cpu Haswell: exit $rc (132: SIGILL)"; }
echo "ok: test_kernels under qemu -cpu Haswell: $(grep -o '\[  PASSED  \] [0-9]* tests' <<<"$out")"
out=$(qemu-x86_64 -cpu Haswell "$build/src/apps/zt" estimate --set model.preset=llama-7b 2>&1 | quiet)
rc=${PIPESTATUS[0]}
((rc == 0)) || { tail -5 <<<"$out"; fail "zt estimate under qemu-x86_64 -cpu Haswell: exit $rc"; }
echo "ok: zt estimate under qemu -cpu Haswell"

# 3. the kit's CPU check
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo x86-64-v3 >"$tmp/march"
out=$(bash "$repo/scripts/gpu-kit.sh" cpu-check "$tmp") || fail "the kit's CPU check refused this host: $out"
echo "ok: $out"
sed '/^flags/ s/ avx2//' /proc/cpuinfo >"$tmp/cpuinfo"
out=$(ZT_KIT_CPUINFO=$tmp/cpuinfo bash "$repo/scripts/gpu-kit.sh" cpu-check "$tmp")
rc=$?
((rc == 2)) && grep -q '^REFUSED: .* lacks avx2 of -march=x86-64-v3' <<<"$out" ||
  fail "a CPU without avx2: exit $rc, '$out' (want 2 and REFUSED naming avx2)"
echo "ok: a CPU without avx2: $(grep REFUSED <<<"$out" | cut -c1-120)..."
echo PASS
