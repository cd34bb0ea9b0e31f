#!/usr/bin/env bash
# NaN/Inf steps through the real `zt train` (2 ranks): a learning rate of 1e30 makes the
# first update blow the weights up, so every following step has a non-finite gradient.
# Expected, with train.max_bad_steps = 3 and a checkpoint after every step:
#   - step 1 is good and is checkpointed (step-1.h5, latest -> step-1.h5);
#   - steps 2, 3, 4 are each skipped with one warning naming the step and the units;
#   - after the third the job ends with exit 1 and an error naming the steps;
#   - nothing new is saved: the checkpoint folder still holds step-1.h5 only.
# Then a run whose last steps were skipped (see the second part).
# Usage: bad_steps_test.sh ZT_BINARY
set -uo pipefail
zt="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log="$work/out.log"
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log"; exit 1; }

OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun -np 2 --oversubscribe --bind-to none "$zt" train --set train.steps=20 \
  --set train.lr=1e30 --set train.min_lr=0 --set train.warmup=0 --set train.grad_clip=0 \
  --set train.max_bad_steps=3 --set ckpt.every=1 --set ckpt.dir="$work/ck" \
  --set sample.tokens=0 --set eval.every=0 --set data.eval_fraction=0 --set train.peak_tflops=1 \
  --set train.threads=1 --set train.micro_batch=2 --set train.global_batch=4 --set train.seq_len=32 \
  </dev/null >"$log" 2>&1
rc=$?
echo "bad_steps_test: exit code $rc"
[[ $rc -eq 1 ]] || fail "exit code $rc, expected 1"
for s in 2 3 4; do
  grep -q "WARNING: step $s: .*NaN/Inf in the gradient of .*layers.0 (model.layers.0.\*).*update skipped ($((s - 1)) in a row, train.max_bad_steps = 3)" "$log" ||
    fail "no warning for step $s naming the units"
done
warnings=$(grep -c "update skipped" "$log")
[[ $warnings -eq 3 ]] || fail "$warnings skip warnings, expected 3"
grep -q "ERROR: 3 steps in a row had a NaN/Inf loss or gradient (steps 2-4;" "$log" || fail "no final error"
files=$(cd "$work/ck" 2>/dev/null && ls -1 | tr '\n' ' ')
echo "bad_steps_test: $warnings skip warnings; checkpoint folder holds: $files"
[[ -f "$work/ck/step-1.h5" ]] || fail "the good step 1 was not checkpointed"
[[ $(ls "$work/ck" | grep -c '^step-.*\.h5$') -eq 1 ]] || fail "a checkpoint was saved after a bad step: $files"
grep -q "step-1.h5" "$work/ck/latest" 2>/dev/null || [[ "$(readlink "$work/ck/latest")" == *step-1.h5 ]] ||
  fail "latest does not name step-1.h5"
grep -m1 "ERROR: 3 steps" "$log"

# A run whose last steps were skipped (issue 36, class 7): the same divergence in a 3-step
# run, steps 2 and 3 skipped, fewer in a row than train.max_bad_steps (5). Before: exit 0,
# "final loss -nan". Expected: the final checkpoint saved (the skipped steps left the
# weights as update 1 made them), then exit 1 naming the 2 steps; no sample drawn.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun -np 2 --oversubscribe --bind-to none "$zt" train --set train.steps=3 \
  --set train.lr=1e30 --set train.min_lr=0 --set train.warmup=0 --set train.grad_clip=0 \
  --set ckpt.dir="$work/ck-end" --set sample.tokens=4 --set eval.every=0 --set data.eval_fraction=0 \
  --set train.peak_tflops=1 --set train.threads=1 --set train.micro_batch=2 --set train.global_batch=4 \
  --set train.seq_len=32 </dev/null >"$log" 2>&1
rc=$?
echo "bad_steps_test (skipped at the end): exit code $rc"
[[ $rc -eq 1 ]] || fail "a run ending in 2 skipped steps: exit code $rc, expected 1"
grep -q "ERROR: the last 2 steps took no update (NaN/Inf loss or gradient, or no target): the run did not train at its end (saved: .*step-3.h5)" "$log" ||
  fail "no error naming the 2 skipped steps and the checkpoint"
[[ -f "$work/ck-end/step-3.h5" ]] || fail "the final checkpoint was not saved"
grep -q "sample (" "$log" && fail "a sample was drawn from a run that did not train at its end"
grep -m1 "ERROR: the last" "$log"
echo "PASS"
