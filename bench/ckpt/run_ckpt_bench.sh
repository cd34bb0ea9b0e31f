#!/bin/sh
# run_ckpt_bench.sh BUILD_DIR WORK_DIR [ROUNDS] [PRESET]
# Checkpoint write/read bandwidth of a preset's training state at 2 ranks through zt's
# HDF5 path (bench_ckpt_io: tensor bytes written and read with O_DIRECT, page-aligned
# middles, buffered heads and tails), beside fio's sequential write and read of the same
# number of bytes in the same folder, interleaved round by round: direct I/O (--direct=1,
# the comparison: both sides bypass the page cache) and buffered (fsync at the end; page
# cache invalidated before the read), for reference. WORK_DIR should be
# outside the repository (e.g. /work/peers/ckpt-bench); it is emptied.
set -eu
build=$1
work=$2
rounds=${3:-2}
preset=${4:-tinyllama-1.1b}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench="$build/bench/ckpt/bench_ckpt_io"
[ -x "$bench" ] || { echo "build bench_ckpt_io first (cmake -DZT_BUILD_BENCH=ON)"; exit 2; }
command -v fio >/dev/null || { echo "fio not found (apt-get install fio)"; exit 2; }
echo "# machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | tr -s ' '), $(uname -r)"
echo "# commit: $(git -C "$(dirname "$0")" rev-parse --short=12 HEAD)$(git -C "$(dirname "$0")" diff --quiet -- ../../src ../../include || echo '+dirty')"
echo "# fio: $(fio --version)"
# Bytes of the state: 12 per parameter (fp32 params + exp_avg + exp_avg_sq).
bytes=$(mpiexec -n 1 "$bench" --preset "$preset" --repeats 0 --dir "$work/probe" | sed -n 's/.* \([0-9]*\) parameters.*/\1/p')
bytes=$((bytes * 12))
echo "# state: $bytes bytes"
for r in $(seq 1 "$rounds"); do
  echo "## round $r ($(uptime | sed 's/.*load/load/'))"
  rm -rf "$work"; mkdir -p "$work"
  mpiexec -n 2 --oversubscribe --bind-to none "$bench" --preset "$preset" --repeats 1 --dir "$work/zt" </dev/null
  rm -rf "$work"; mkdir -p "$work/fio"
  echo "fio direct (--direct=1):"
  fio --name=ckpt-write --directory="$work/fio" --rw=write --bs=4M --size="$bytes" --ioengine=psync \
      --direct=1 --end_fsync=1 --numjobs=1 | grep -E "WRITE:"
  fio --name=ckpt-write --directory="$work/fio" --rw=read --bs=4M --size="$bytes" --ioengine=psync \
      --direct=1 --numjobs=1 | grep -E "READ:"
  rm -rf "$work"; mkdir -p "$work/fio"
  echo "fio buffered (fsync at the end; cache invalidated before the read):"
  fio --name=ckpt-write --directory="$work/fio" --rw=write --bs=4M --size="$bytes" --ioengine=psync \
      --end_fsync=1 --numjobs=1 | grep -E "WRITE:"
  fio --name=ckpt-write --directory="$work/fio" --rw=read --bs=4M --size="$bytes" --ioengine=psync \
      --invalidate=1 --numjobs=1 | grep -E "READ:"
  rm -rf "$work"
done
