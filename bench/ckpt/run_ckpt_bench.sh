#!/bin/sh
# run_ckpt_bench.sh BUILD_DIR WORK_DIR [ROUNDS] [PRESET] [LAYERS]
#
# Checkpoint save and load bandwidth of a preset's training state (fp32 params + AdamW
# moments: 12 bytes per parameter) at 2 ranks through zt's writer and reader
# (bench_ckpt_io: tensor bytes in O_DIRECT pieces on I/O threads, zt-xxh3 checksums
# beside them, fsync, publish), beside fio's sequential direct write and read of the same
# byte count in the same folder, round by round, fio at zt's parallelism (2 jobs, io_uring,
# iodepth 3, 8 MiB: run_resume_bench.sh says why; `zt train`'s own save and resume beside
# the same fio are there). Both sides direct I/O (fio --direct=1;
# zt's page-aligned middles O_DIRECT): the comparison issue 23 asks for. Prints the load
# average before and after each round, zt's breakdown (HDF5 metadata, data, checksums and
# what they did not hide, checksum chunks read back, fsync, publish), fio's figures, and
# per round the ratios zt/fio for write and read and whether loading took no longer
# than saving. Run it on a quiet machine; WORK_DIR (emptied) should be on the file
# system under test and outside the repository, with room for the state (13.2 GB for
# tinyllama-1.1b). LAYERS > 0 cuts the preset's layers (a smaller state, same shapes).
#
# BENCH_FLAGS (environment): more bench_ckpt_io options, e.g. "--malloc" (shards malloc'ed,
# through the bounce buffers, as the engine's were before they were page-aligned).
#
#   sh bench/ckpt/run_ckpt_bench.sh build-cpu /data/ckpt-bench 2                 # the 1.1B state
#   sh bench/ckpt/run_ckpt_bench.sh build-cpu /tmp/ckpt-bench 1 tinyllama-1.1b 4 # 3.7 GB
set -eu
build=$1
work=$2
rounds=${3:-2}
preset=${4:-tinyllama-1.1b}
layers=${5:-0}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench="$build/bench/ckpt/bench_ckpt_io"
[ -x "$bench" ] || { echo "build bench_ckpt_io first (cmake --build $build --target bench_ckpt_io)"; exit 2; }
command -v fio >/dev/null || { echo "fio not found (apt-get install fio)"; exit 2; }
here=$(dirname "$0")
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | tr -s ' '), $(uname -r)"
echo "# commit: $(git -C "$here" rev-parse --short=12 HEAD)$(git -C "$here" diff --quiet HEAD -- ../../src ../../include ../../bench || echo '+dirty')"
echo "# fio: $(fio --version); file system of $work: $(mkdir -p "$work" && df -T "$work" | awk 'NR==2 {print $2, $1}')"
echo "# both sides direct I/O (zt O_DIRECT middles, fio --direct=1), 2 ranks; MB = 1e6 bytes"
bytes=$(mpiexec -n 1 "$bench" --preset "$preset" --layers "$layers" --repeats 0 --dir "$work/probe" |
        sed -n 's/.* \([0-9]*\) parameters.*/\1/p')
bytes=$((bytes * 12))
echo "# state: $bytes bytes ($preset, layers ${layers} (0: the preset's))"
# fio's MB/s from its summary line (bw=...MB/s or ...MiB/s -> MB/s).
fio_mbs() {
  sed -n 's/.*bw=[0-9.]*[KMG]i*B\/s (\([0-9.]*\)\([kMG]\)B\/s).*/\1 \2/p' | head -1 |
    awk '{ v = $1; if ($2 == "k") v /= 1000; if ($2 == "G") v *= 1000; printf "%.0f", v }'
}
summary=""
for r in $(seq 1 "$rounds"); do
  echo "## round $r (load average before: $(load))"
  rm -rf "$work"; mkdir -p "$work"
  out=$(mpiexec -n 2 --oversubscribe --bind-to none "$bench" --preset "$preset" --layers "$layers" \
        --repeats 1 --dir "$work/zt" ${BENCH_FLAGS:-} </dev/null 2>&1 | grep -v '^progress:')
  echo "$out"
  zw=$(echo "$out" | sed -n 's/^round 1: write .* = \([0-9]*\) MB\/s.*/\1/p')
  zr=$(echo "$out" | sed -n 's/^round 1: read .* = \([0-9]*\) MB\/s.*/\1/p')
  zws=$(echo "$out" | sed -n 's/^round 1: write \([0-9.]*\) s.*/\1/p')
  zrs=$(echo "$out" | sed -n 's/^round 1: read \([0-9.]*\) s.*/\1/p')
  rm -rf "$work"; mkdir -p "$work/fio"
  # At zt's parallelism (issue 43): 2 jobs as 2 ranks, each RawFile's kThreads x kBounce in
  # flight (src/ckpt/io_engine.hpp: 3 x 8 MiB), each job half the bytes.
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  fw_line=$(fio --name=ckpt --directory="$work/fio" --rw=write --bs=8M --size="$((bytes / 2))" --ioengine=io_uring \
            --iodepth=3 --direct=1 --end_fsync=1 --numjobs=2 --fallocate=none | grep -E "WRITE:")
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  fr_line=$(fio --name=ckpt --directory="$work/fio" --rw=read --bs=8M --size="$((bytes / 2))" --ioengine=io_uring \
            --iodepth=3 --direct=1 --numjobs=2 | grep -E "READ:")
  echo "fio direct write: $fw_line"
  echo "fio direct read:  $fr_line"
  fw=$(echo "$fw_line" | fio_mbs)
  fr=$(echo "$fr_line" | fio_mbs)
  rm -rf "$work"
  line=$(awk -v r="$r" -v zw="$zw" -v fw="$fw" -v zr="$zr" -v fr="$fr" -v ws="$zws" -v rs="$zrs" 'BEGIN {
    printf "round %s: zt write %s MB/s / fio %s = %.2f; zt read %s MB/s / fio %s = %.2f; load %s s vs save %s s (%s)",
      r, zw, fw, zw / fw, zr, fr, zr / fr, rs, ws, (rs + 0 <= ws + 0) ? "load no slower" : "load slower" }')
  echo "$line (load average after: $(load))"
  summary="$summary$line
"
done
echo "## summary (ratios >= 0.80 and load no slower than save are issue 23's bar)"
printf "%s" "$summary"
