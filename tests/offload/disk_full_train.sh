#!/bin/bash
# zt train with offload.optimizer = nvme on a 16 MiB tmpfs. After the first checkpoint,
# the store's blocks are punched out of its file and the tmpfs is filled (what thin or
# copy-on-write storage does when something else fills it): the run must stop with exit
# code 1 and an ENOSPC error naming the file, and the latest checkpoint must be the same
# bytes as before. Needs root (mount); exits 77 (skipped) without it.
# The rank is stopped (SIGSTOP) from the moment the first checkpoint is named in `latest`
# until the disk is full, and checkpoints are 20 steps apart while every step writes the
# store: the next store write fails long before the next checkpoint, on any machine speed.
#   tests/offload/disk_full_train.sh build/src/apps/zt
set -u
ZT=$(realpath "$1")
D=$(mktemp -d /tmp/zt-disk-full-XXXXXX)
mkdir -p "$D/nvme" "$D/ck"
if ! mount -t tmpfs -o size=16m tmpfs "$D/nvme" 2>/dev/null; then
  rm -rf "$D"; echo "SKIPPED: cannot mount a tmpfs (needs root)"; exit 77
fi
cleanup() { umount "$D/nvme" 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
( cd "$D" && timeout 300 mpiexec -n 1 "$ZT" train --set zero.stage=1 \
    --set offload.optimizer=nvme --set offload.nvme_path="$D/nvme" --set ckpt.dir="$D/ck" \
    --set ckpt.every=20 --set train.steps=2000 --set eval.every=0 --set sample.tokens=0 \
    --set train.micro_batch=4 --set train.global_batch=4 > "$D/log" 2>&1 < /dev/null
  echo "exit code $?" >> "$D/log" ) &
for _ in $(seq 1 10000); do [ -e "$D/ck/latest" ] && break; sleep 0.02; done
[ -e "$D/ck/latest" ] || { echo "no checkpoint appeared"; cat "$D/log"; exit 1; }
# The rank's own command line starts with the binary (mpiexec's and timeout's do not).
pkill -STOP -f "^$ZT train" || { echo "no zt rank to stop"; cat "$D/log"; exit 1; }
LATEST=$(cat "$D/ck/latest")
sha256sum "$D/ck/$LATEST" > "$D/before.sha"
fallocate -p -o 0 -l 64M "$D/nvme/zt-offload-rank0.bin"
dd if=/dev/zero of="$D/nvme/filler" bs=1M 2>/dev/null
pkill -CONT -f "^$ZT train"
wait
fail=0
grep -q "exit code 1" "$D/log" || { echo "FAIL: exit code is not 1"; fail=1; }
grep -q "No space left on device (errno 28)" "$D/log" || { echo "FAIL: no ENOSPC error"; fail=1; }
grep -q "zt-offload-rank0.bin" "$D/log" || { echo "FAIL: the error does not name the file"; fail=1; }
[ "$(cat "$D/ck/latest")" = "$LATEST" ] || { echo "FAIL: latest moved"; fail=1; }
sha256sum -c --quiet "$D/before.sha" || { echo "FAIL: the checkpoint changed"; fail=1; }
grep -E "ERROR|HINT" "$D/log" | head -2
echo "latest checkpoint $LATEST unchanged: $([ $fail = 0 ] && echo yes || echo no)"
exit $fail
