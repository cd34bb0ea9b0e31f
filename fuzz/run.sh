#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS on its committed seed corpus (fuzz/corpus/NAME)
# plus a scratch corpus of what it finds, and fails on the first crash, leak or sanitizer
# report (the reproducer is written to the scratch folder).
# Usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET...]   (default: every fuzz_* in BUILD_DIR/fuzz)
# ZT_FUZZ_BUDGET=TOTAL bounds the whole run: each target gets min(SECONDS, TOTAL / targets)
# seconds (at least 1), so adding targets does not lengthen CI.
# ZT_FUZZ_JOBS=N targets fuzz at once (default: the number of cores, nproc): each libFuzzer
# process is single-threaded, so each target still gets its seconds of one core, and the
# run takes TOTAL / N seconds of wall time (CI, 2 cores: 45 s for the 90 s budget).
# Example (CI): cmake --preset fuzz && cmake --build --preset fuzz &&
#               ZT_FUZZ_BUDGET=90 fuzz/run.sh build-fuzz 30
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$1"
seconds="$2"
shift 2
targets=("$@")
if ((${#targets[@]} == 0)); then
  for t in "$build"/fuzz/fuzz_*; do [[ -x "$t" ]] && targets+=("$(basename "$t")"); done
fi
if [[ -n "${ZT_FUZZ_BUDGET:-}" && ${#targets[@]} -gt 0 ]]; then
  [[ "$ZT_FUZZ_BUDGET" =~ ^[0-9]+$ ]] || { echo "fuzz: ZT_FUZZ_BUDGET='$ZT_FUZZ_BUDGET' is not a number of seconds" >&2; exit 2; }
  share=$((ZT_FUZZ_BUDGET / ${#targets[@]}))
  if ((share < 1)); then share=1; fi
  if ((share < seconds)); then seconds=$share; fi
  echo "fuzz: ${#targets[@]} targets, budget ${ZT_FUZZ_BUDGET}s: ${seconds}s each"
fi
scratch="${ZT_FUZZ_SCRATCH:-$(mktemp -d)}"
# Full malloc stacks (libhdf5 has no frame pointers), so suppressions match by function.
# A single allocation above 256 MiB fails as on a host without that much memory: malloc
# returns NULL, operator new reports out-of-memory (a finding). libhdf5 1.10 asks malloc
# for up to 4 GiB while reading a corrupt superblock or object header of a few dozen
# bytes (H5F__super_read -> H5C_protect -> H5MM_realloc) and fails cleanly when refused;
# zt's own allocations are bounded by what a file stores, far below this for fuzz inputs.
export ASAN_OPTIONS="fast_unwind_on_malloc=0:allocator_may_return_null=1:max_allocation_size_mb=256:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
jobs="${ZT_FUZZ_JOBS:-$(nproc)}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: ZT_FUZZ_JOBS='$jobs' is not a positive number" >&2; exit 2; }
fuzz_one() {  # TARGET: runs it, writes $scratch/TARGET.rc (its exit status)
  local t=$1 name="${1#fuzz_}" rc=0
  "$build/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1048576 -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$scratch/$name/" "$scratch/$name" "$here/corpus/$name" \
      > "$scratch/$t.log" 2>&1 || rc=$?
  echo "$rc" > "$scratch/$t.rc"
}
running=0
for t in "${targets[@]}"; do
  name="${t#fuzz_}"
  mkdir -p "$scratch/$name"
  echo "fuzz: $t for ${seconds}s (seeds fuzz/corpus/$name, scratch $scratch/$name)"
  rm -f "$scratch/$t.rc"
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
# Results in the targets' order; a target without its status file did not finish: a failure.
status=0
for t in "${targets[@]}"; do
  name="${t#fuzz_}"
  if [[ "$(cat "$scratch/$t.rc" 2>/dev/null)" == 0 ]]; then
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|^#[0-9]+.*DONE" "$scratch/$t.log" || true
    echo "fuzz: $t ok"
  else
    tail -n 60 "$scratch/$t.log" 2>/dev/null || true
    echo "fuzz: $t FAILED (exit $(cat "$scratch/$t.rc" 2>/dev/null || echo none); reproducer under $scratch/$name/)"
    status=1
  fi
done
exit $status
