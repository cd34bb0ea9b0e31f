#!/bin/sh
# run_resume_bench.sh BUILD_DIR WORK_DIR [ROUNDS] [PRESET] [LAYERS]
#
# `zt train`'s checkpoint save and its resume (ckpt.resume) load, against fio at the SAME
# parallelism (issue 43): per rank zt keeps RawFile's kThreads requests of kBounce bytes in
# flight, O_DIRECT (src/ckpt/io_engine.hpp, read from there so the two never drift apart);
# fio runs as many jobs as zt has ranks, --ioengine=io_uring --direct=1
# --iodepth=kThreads --bs=kBounce (the same outstanding bytes: jobs x iodepth x bs), each
# job a ranks-th of the state's bytes, sequential, in the same folder. Each round, in this
# order (alternated zt / fio, the page cache dropped before every read with
# `sync; echo 3 > /proc/sys/vm/drop_caches`, so run it as root):
#   zt save at 2 ranks | fio write, 2 jobs | zt load at 2 ranks | fio read, 2 jobs |
#   zt load at 4 ranks of the 2-rank file (world size 2 -> 4) |
#   zt save at 4 ranks | fio write, 4 jobs | zt load at 4 ranks | fio read, 4 jobs
# zt's figures are its own lines: the save's is the `ckpt: step 1 -> ... (X MB in Y s, ...)`
# line, timed over the whole save (the writes, the fsync and the publish of the file and
# `latest`, as fio's write pays its --end_fsync); the load's is `progress: load ... done:
# ... in X s; reads ..., HDF5 metadata ..., checksums ...`, which says where its time went.
# Prints the load average before each round, the fio command lines, every figure, per
# round the ratios zt/fio (MB/s over MB/s), and the medians over the rounds. MB = 1e6 bytes.
#
# Needs: fio (apt-get install fio), root (drop_caches), about 1.3x the state in RAM at 2
# ranks (tinyllama-1.1b: 13.2 GB of state; check `free -g`) and 2x the state on disk.
# LAYERS > 0 cuts the preset's layers (same shapes, a smaller state).
#
#   sh bench/ckpt/run_resume_bench.sh build-ci /tmp/resume-bench 3                  # 1.1B
#   sh bench/ckpt/run_resume_bench.sh build-ci /tmp/resume-bench 3 tinyllama-1.1b 4 # 3.7 GB
set -eu
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
here=$(cd "$(dirname "$0")" && pwd)
build=$1 work=$2 rounds=${3:-3} preset=${4:-tinyllama-1.1b} layers=${5:-0}
zt="$build/src/apps/zt"
[ -x "$zt" ] || { echo "build zt first (cmake --build $build --target zt)"; exit 2; }
command -v fio >/dev/null || { echo "fio not found (apt-get install fio)"; exit 2; }
[ -w /proc/sys/vm/drop_caches ] || { echo "run as root: the page cache is dropped before each read"; exit 2; }
engine="$here/../../src/ckpt/io_engine.hpp"
depth=$(sed -n 's/.*kThreads = \([0-9]*\);.*/\1/p' "$engine")
bs_mib=$(sed -n 's/.*kBounce = size_t{\([0-9]*\)} << 20;.*/\1/p' "$engine")
[ -n "$depth" ] && [ -n "$bs_mib" ] || { echo "cannot read kThreads / kBounce from $engine"; exit 2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
echo "# machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | tr -s ' '), $(uname -r)"
echo "# commit: $(git -C "$here" rev-parse --short=12 HEAD)$(git -C "$here" diff --quiet HEAD -- ../../src ../../include ../../bench || echo '+dirty')"
echo "# fio: $(fio --version); file system of $work: $(mkdir -p "$work" && df -T "$work" | awk 'NR==2 {print $2, $1}')"
echo "# zt per rank: $depth requests x $bs_mib MiB in flight, O_DIRECT; fio: jobs = ranks, io_uring, iodepth $depth, bs ${bs_mib}M, direct"

# zt train at NP ranks: one step and a save (save), or the resume's load (load).
zt_run() {  # np save|load
  if [ "$2" = save ]; then rm -rf "$work/zt"; extra="--set ckpt.every=1"; else extra="--set ckpt.resume=auto"; fi
  [ "$layers" != 0 ] && extra="$extra --set model.layers=$layers"
  # shellcheck disable=SC2086
  mpiexec -n "$1" --oversubscribe --bind-to none "$zt" train --set model.preset="$preset" \
    --set train.seq_len=8 --set train.micro_batch=1 --set train.global_batch=4 --set train.steps=1 \
    --set train.warmup=1 --set ckpt.dir="$work/zt" --set eval.every=0 --set sample.tokens=0 \
    --set train.peak_tflops=1 --set zero.stage=3 $extra </dev/null 2>&1 |
    grep -E "^ckpt: step 1 -> |^progress: load step-1.h5 done:|rror" || true
}
# Seconds of the save's `ckpt:` line ("(12.6 MB in 0.13 s, ...").
save_secs() { sed -n 's/.* MB in \([0-9.]*\) s, .*/\1/p' | head -1; }
# Seconds of a progress end line ("in 12.3s", "in 1m05s").
secs() {
  sed -n 's/.* in \([0-9hms.]*\), .*/\1/p' | head -1 |
    awk '{ s = $1; t = 0; if (s ~ /h/) { split(s, a, "h"); t += a[1] * 3600; s = a[2] }
           if (s ~ /m/) { split(s, a, "m"); t += a[1] * 60; s = a[2] } sub("s", "", s); printf "%.2f", t + s }'
}
# fio at JOBS jobs, RW (write|read), each job its share of the state's bytes; MB/s.
fio_run() {  # jobs rw
  cmd="fio --name=ckpt --directory=$work/fio --rw=$2 --numjobs=$1 --size=$((bytes / $1)) \
--ioengine=io_uring --direct=1 --iodepth=$depth --bs=${bs_mib}M --fallocate=none \
$([ "$2" = write ] && echo --end_fsync=1 || true) --group_reporting --output-format=json"
  echo "  $ $cmd" >&2
  $cmd | python3 -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]
print("%.0f" % (j[sys.argv[1]]["bw_bytes"] / 1e6))' "$2"
}

bytes=""
summary=""
for r in $(seq 1 "$rounds"); do
  echo "## round $r (load average before: $(load); $(free -g | awk '/Mem:/ {print $7}') GiB available)"
  rm -rf "$work"; mkdir -p "$work/fio"
  s2=$(zt_run 2 save); echo "zt save, 2 ranks: $s2"
  bytes=$(echo "$s2" | sed -n 's/.* (\([0-9.]*\) MB in .*/\1/p' | awk '{ printf "%.0f", $1 * 1e6 }')
  [ -n "$bytes" ] && [ "$bytes" -gt 0 ] || { echo "no save line from zt train"; exit 1; }
  zs2=$(echo "$s2" | save_secs)
  rm -rf "$work/fio"; mkdir -p "$work/fio"
  fw2=$(fio_run 2 write); echo "fio write, 2 jobs: $fw2 MB/s"
  drop; l2=$(zt_run 2 load); echo "zt load, 2 ranks: $l2"; zl2=$(echo "$l2" | secs)
  drop; fr2=$(fio_run 2 read); echo "fio read, 2 jobs: $fr2 MB/s"
  drop; l24=$(zt_run 4 load); echo "zt load, 4 ranks of the 2-rank file: $l24"; zl24=$(echo "$l24" | secs)
  s4=$(zt_run 4 save); echo "zt save, 4 ranks: $s4"; zs4=$(echo "$s4" | save_secs)
  rm -rf "$work/fio"; mkdir -p "$work/fio"
  fw4=$(fio_run 4 write); echo "fio write, 4 jobs: $fw4 MB/s"
  drop; l4=$(zt_run 4 load); echo "zt load, 4 ranks: $l4"; zl4=$(echo "$l4" | secs)
  drop; fr4=$(fio_run 4 read); echo "fio read, 4 jobs: $fr4 MB/s"
  line=$(awk -v r="$r" -v b="$bytes" -v s2="$zs2" -v l2="$zl2" -v l24="$zl24" -v s4="$zs4" -v l4="$zl4" \
    -v fw2="$fw2" -v fr2="$fr2" -v fw4="$fw4" -v fr4="$fr4" 'BEGIN {
    m = b / 1e6
    printf "round %s: 2 ranks save %.0f / %s = %.2f, load %.0f / %s = %.2f; 2->4 load %.0f / %s = %.2f; 4 ranks save %.0f / %s = %.2f, load %.0f / %s = %.2f",
      r, m / s2, fw2, m / s2 / fw2, m / l2, fr2, m / l2 / fr2, m / l24, fr4, m / l24 / fr4,
      m / s4, fw4, m / s4 / fw4, m / l4, fr4, m / l4 / fr4 }')
  echo "$line (MB/s zt / fio; load average after: $(load))"
  summary="$summary$line
"
done
rm -rf "$work"
echo "## summary (zt MB/s / matched fio MB/s; issue 43's bar: >= 0.80)"
printf "%s" "$summary"
printf "%s" "$summary" | awk '
  { for (i = 1; i <= NF; ++i) if ($i == "=") { k = ++n[NR]; v[k, NR] = $(i + 1) + 0 } rows = NR }
  END {
    split("2-rank save,2-rank load,2->4 load,4-rank save,4-rank load", name, ",")
    for (k = 1; k <= 5; ++k) {
      c = 0; for (r = 1; r <= rows; ++r) a[++c] = v[k, r]
      for (i = 1; i <= c; ++i) for (j = i + 1; j <= c; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      printf "median ratio, %s: %.2f (%d rounds)\n", name[k], a[int((c + 1) / 2)], c
    }
  }'
