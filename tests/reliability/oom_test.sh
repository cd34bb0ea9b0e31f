#!/usr/bin/env bash
# Out of host memory: `zt train` of llama-7b (6,738,415,616 parameters, stage 0, 1 rank)
# under an address-space limit of 2 GB (ulimit -v, RLIMIT_AS) must end with exit 1 and a
# message naming what was being allocated and its size, the free memory and the limit,
# and pointing to `zt estimate`. The size is checked against 16 bytes x parameters
# (fp32 parameters, gradients, two AdamW moments) computed here.
# Usage: oom_test.sh ZT_BINARY
set -uo pipefail
zt="$1"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log"; exit 1; }

OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun -np 1 bash -c 'ulimit -v 2000000; exec "$0" "$@"' "$zt" train \
  --set model.preset=llama-7b --set train.steps=1 --set sample.tokens=0 --set eval.every=0 \
  --set data.eval_fraction=0 --set train.peak_tflops=1 --set train.threads=1 \
  --set train.micro_batch=1 --set train.global_batch=1 --set train.seq_len=32 </dev/null >"$log" 2>&1
rc=$?
echo "oom_test: exit code $rc"
[[ $rc -eq 1 ]] || fail "exit code $rc, expected 1"
states=$(python3 -c "print('%.2f GiB' % (16 * 6738415616 / 2**30))")
limit=$(python3 -c "print('%.2f GiB' % (2000000 * 1024 / 2**30))")
grep -q "ERROR: out of host memory while allocating the ZeRO engine for llama-7b (6738415616 parameters, stage 0 over 1 ranks): about $states of fp32 model states per rank; MemAvailable [0-9.]* GiB (/proc/meminfo), address-space limit (ulimit -v) $limit" "$log" ||
  fail "no message naming the allocation ($states), MemAvailable and the limit ($limit)"
grep -q "HINT: \`zt estimate --config <this TOML> --gpus 1\`" "$log" || fail "no zt estimate hint"
grep -m1 "out of host memory" "$log"
echo "PASS"
