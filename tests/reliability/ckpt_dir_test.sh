#!/usr/bin/env bash
# An unusable ckpt.dir is found before the first step (ckpt::preflight_dir), not at the
# first save after all the training: exit 2 naming ckpt.dir and the path, on every rank,
# with no step run. Cases: a file; a folder under a file. A missing folder is created at
# the first save (the run succeeds). With `readonly`, the one case of a read-only file
# system (a tmpfs mounted ro: root only, else SKIPPED, exit 77), its own CTest test so a
# skip shows as one.
# Usage: ckpt_dir_test.sh ZT_BINARY [readonly]
set -uo pipefail
zt="$(realpath "$1")"
work="$(mktemp -d)"
log="$work/log"
cleanup() { mountpoint -q "$work/ro" 2>/dev/null && umount "$work/ro"; rm -rf "$work"; }
trap cleanup EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log"; exit 1; }
train() {
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 "$zt" train \
    --set train.steps=2 --set sample.tokens=0 --set eval.every=0 --set data.eval_fraction=0 \
    --set train.micro_batch=1 --set train.global_batch=2 --set train.seq_len=32 \
    --set train.peak_tflops=1 --set train.threads=1 --set ckpt.dir="$1" </dev/null >"$log" 2>&1
}
expect_refusal() {  # DIR REGEX
  train "$1"
  local rc=$?
  [[ $rc -eq 2 ]] || fail "ckpt.dir=$1: exit code $rc, expected 2"
  grep -Eq "$2" "$log" || fail "ckpt.dir=$1: no message matching /$2/"
  grep -q "^step " "$log" && fail "ckpt.dir=$1: a step ran before the refusal"
  echo "ok: ckpt.dir=$1: exit 2, $(grep -m1 -o "ERROR: .*" "$log")"
}
if [[ "${2:-}" == readonly ]]; then
  mkdir ro
  if [[ $(id -u) -eq 0 ]] && mount -t tmpfs -o size=1m,ro tmpfs ro 2>/dev/null; then
    expect_refusal ro/ck "ERROR: ckpt.dir = 'ro/ck': 'ro' is on a read-only file system"
    echo "PASS"
    exit 0
  fi
  echo "SKIPPED: the read-only case needs root (mount -t tmpfs -o ro)"
  exit 77
fi
echo data >afile
expect_refusal afile "ERROR: ckpt.dir = 'afile': it exists and is not a folder"
expect_refusal afile/sub/x "ERROR: ckpt.dir = 'afile/sub/x': 'afile' above it is a file, not a folder"
train new/a/b
rc=$?
[[ $rc -eq 0 && -f new/a/b/latest ]] || fail "a missing ckpt.dir: exit $rc, expected 0 and new/a/b/latest"
echo "ok: a missing ckpt.dir is created at the first save"
echo "PASS"
