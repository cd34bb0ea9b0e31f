#!/usr/bin/env bash
# A checkpoint onto a full or read-only file system: the job must end with a non-zero exit
# within comm.timeout (+ a margin; never a hang), with a message naming the checkpoint,
# and the previous checkpoint and `latest` must stay intact: same bytes as before, and a
# resume from a copy of the folder loads it (zt verifies every dataset's checksum).
#   full:      a 20 MiB tmpfs; step 1's checkpoint (12.7 MB) fits, step 2's does not.
#   read-only: step 1 saved, the tmpfs remounted read-only, then a resume that would save
#              step 2: refused before its first step (ckpt::preflight_dir), exit 2 naming
#              ckpt.dir and the read-only file system.
# Needs root (mount -t tmpfs); exits 77 (skipped) where mounting is not permitted.
# Usage: disk_full_test.sh ZT_BINARY full|readonly
set -uo pipefail
zt="$1"
mode="$2"
timeout_s=10
margin_s=60
work="$(mktemp -d)"
mnt="$work/mnt"
mkdir -p "$mnt"
log="$work/out.log"
cleanup() {
  [[ -n "${job:-}" ]] && kill -KILL "$job" 2>/dev/null
  umount "$mnt" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log"; exit 1; }

size=20m
[[ "$mode" == readonly ]] && size=64m
if ! mount -t tmpfs -o size=$size tmpfs "$mnt" 2>/dev/null; then
  echo "SKIPPED: cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)"
  exit 77
fi

train() {  # STEPS EXTRA-ARGS... ; runs zt train in the background, sets $job
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -np 2 --oversubscribe --bind-to none "$zt" train --set train.steps="$1" \
    --set ckpt.every=1 --set ckpt.keep=0 --set comm.timeout=$timeout_s \
    --set sample.tokens=0 --set eval.every=0 --set data.eval_fraction=0 --set train.peak_tflops=1 \
    --set train.threads=1 --set train.micro_batch=2 --set train.global_batch=4 --set train.seq_len=32 \
    "${@:2}" </dev/null >"$log" 2>&1 &
  job=$!
}
wait_bounded() {  # -> sets $rc, $elapsed; fails on a hang
  local start ended=0
  start=$(date +%s.%N)
  for _ in $(seq 1 $(((timeout_s + margin_s) * 5))); do
    if ! kill -0 "$job" 2>/dev/null; then ended=1; break; fi
    sleep 0.2
  done
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  [[ $ended == 1 ]] || fail "zt still runs $((timeout_s + margin_s)) s later: a hang"
  wait "$job"
  rc=$?
  job=""
}

if [[ "$mode" == readonly ]]; then
  train 1 --set ckpt.dir="$mnt/ck"
  wait_bounded
  [[ $rc -eq 0 ]] || fail "the first run (step 1) failed"
  mount -o remount,ro "$mnt" || fail "cannot remount read-only"
  before=$(cd "$mnt/ck" && md5sum step-1.h5 latest)
  train 3 --set ckpt.dir="$mnt/ck" --set ckpt.resume=auto
else
  train 3 --set ckpt.dir="$mnt/ck"
fi
wait_bounded
echo "disk_full_test ($mode): exit code $rc after ${elapsed} s (comm.timeout ${timeout_s} s)"
[[ $rc -ne 0 ]] || fail "exit code 0 although step 2's checkpoint cannot be written"
if [[ "$mode" == readonly ]]; then
  [[ $rc -eq 2 ]] || fail "exit code $rc, expected 2 (ckpt.dir refused before the first step)"
  pattern="ERROR: ckpt.dir = '$mnt/ck': '$mnt/ck' is on a read-only file system"
  grep -q "^step " "$log" && fail "a step ran although ckpt.dir is read-only"
else
  pattern="ERROR: .*(checkpoint|step-2)"
fi
grep -E "$pattern" "$log" | head -3
grep -qE "$pattern" "$log" || fail "no error matching /$pattern/"
[[ -f "$mnt/ck/step-1.h5" ]] || fail "step-1.h5 is gone"
grep -q "step-1.h5" "$mnt/ck/latest" || fail "latest does not name step-1.h5: $(cat "$mnt/ck/latest")"
if [[ "$mode" == readonly ]]; then
  after=$(cd "$mnt/ck" && md5sum step-1.h5 latest)
  [[ "$before" == "$after" ]] || fail "step-1.h5 or latest changed"
fi
echo "disk_full_test ($mode): folder after the failure: $(ls "$mnt/ck" | tr '\n' ' ')"

# The previous checkpoint still loads: resume from a copy on a healthy disk.
cp -r "$mnt/ck" "$work/copy"
rm -f "$work/copy"/*.tmp*
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun -np 2 --oversubscribe --bind-to none "$zt" train --set train.steps=2 \
  --set ckpt.dir="$work/copy" --set ckpt.resume=auto --set ckpt.save_final=false \
  --set sample.tokens=0 --set eval.every=0 --set data.eval_fraction=0 --set train.peak_tflops=1 \
  --set train.threads=1 --set train.micro_batch=2 --set train.global_batch=4 --set train.seq_len=32 \
  </dev/null >"$log" 2>&1 || fail "resume from the surviving checkpoint failed"
grep -iE "resum" "$log" | head -2
grep -q "step     2/2" "$log" || fail "the resumed run did not run step 2"
echo "PASS"
