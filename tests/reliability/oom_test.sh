#!/usr/bin/env bash
# Out of host memory, two ways (1 rank, under an address-space limit of 2 GB, ulimit -v):
#  1. llama-7b (6,738,415,616 parameters, stage 0): its fp32 model states (16 bytes x
#     parameters) exceed MemAvailable: refused before anything is allocated, exit 2, with
#     both numbers and the `zt estimate` hint (the limit only guards a host with more
#     than 100 GiB available, where the test fails safely).
#  2. llama-7b cut to 1 layer and a 2048-token vocabulary (219,164,672 parameters, 3.27
#     GiB of states): fits MemAvailable but not the 2 GB limit: the allocation fails and
#     the run ends with exit 1 and a message naming what was being allocated and its
#     size, the free memory and the limit, and pointing to `zt estimate`.
# The sizes are checked against 16 bytes x parameters computed here.
# Usage: oom_test.sh ZT_BINARY
set -uo pipefail
zt="$1"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log"; exit 1; }
run() {
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -np 1 bash -c 'ulimit -v 2000000; exec "$0" "$@"' "$zt" train \
    --set model.preset=llama-7b --set train.steps=1 --set sample.tokens=0 --set eval.every=0 \
    --set data.eval_fraction=0 --set train.peak_tflops=1 --set train.threads=1 \
    --set train.micro_batch=1 --set train.global_batch=1 --set train.seq_len=32 "$@" \
    </dev/null >"$log" 2>&1
}
gib() { python3 -c "print('%.2f GiB' % ($1 / 2**30))"; }

run
rc=$?
echo "oom_test (refused before allocating): exit code $rc"
[[ $rc -eq 2 ]] || fail "exit code $rc, expected 2"
states=$(gib "16 * 6738415616")
grep -q "ERROR: model llama-7b (6738415616 parameters, zero.stage 0 over 1 ranks) needs about $states of fp32 model states per rank, $states for the 1 rank on a node; MemAvailable is [0-9.]* GiB" "$log" ||
  fail "no refusal naming the states ($states) and MemAvailable"
grep -q "HINT: \`zt estimate --config <this TOML> --gpus 1\`" "$log" || fail "no zt estimate hint"
grep -m1 "needs about" "$log"

run --set model.layers=1 --set model.vocab=2048
rc=$?
echo "oom_test (allocation fails): exit code $rc"
[[ $rc -eq 1 ]] || fail "exit code $rc, expected 1"
states=$(gib "16 * 219164672")
limit=$(gib "2000000 * 1024")
grep -q "ERROR: out of host memory while allocating the ZeRO engine for llama-7b+overrides (219164672 parameters, stage 0 over 1 ranks): about $states of fp32 model states per rank; MemAvailable [0-9.]* GiB (/proc/meminfo), address-space limit (ulimit -v) $limit" "$log" ||
  fail "no message naming the allocation ($states), MemAvailable and the limit ($limit)"
grep -q "HINT: \`zt estimate --config <this TOML> --gpus 1\`" "$log" || fail "no zt estimate hint"
grep -m1 "out of host memory" "$log"
echo "PASS"
