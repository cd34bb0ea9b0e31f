#!/usr/bin/env bash
# Files zt writes: checkpoints (ckpt.dir), log.metrics and reports (zt check --report DIR,
# with gnuplot's data, script, log and plots).
#  1. Never through a symlink out of the output directory: symlinks planted where zt will
#     write (step-1.h5.tmp, step-1.h5, latest; report.json, report.md, busbw.dat,
#     plots.gp, plots.log, busbw.png, pairs.png) point to "victim" files outside; after the
#     run every victim holds its original bytes, and what zt wrote in the folder is a
#     regular file. log.metrics naming a symlink is refused (exit 2), the victim intact.
#  2. Modes follow the user's umask: with umask 027 the files are 0640, with 002 0664
#     (0666 & ~umask, computed here).
# Usage: file_safety_test.sh ZT_BINARY
set -uo pipefail
zt="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log="$work/out.log"
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work/outside"

plant() {  # DIR NAME... : NAME -> $work/outside/victim-NAME, with known bytes
  mkdir -p "$1"
  local d=$1
  shift
  for n in "$@"; do
    echo "victim $n" > "$work/outside/victim-$n"
    ln -s "$work/outside/victim-$n" "$d/$n"
  done
}
check_victims() {
  for v in "$work"/outside/victim-*; do
    [[ "$(cat "$v")" == "victim ${v##*/victim-}" ]] || fail "zt wrote through a symlink into $v"
  done
}
mode_of() { stat -c %a "$1"; }

train() {  # UMASK DIR [--set ...]
  local mask=$1 dir=$2
  shift 2
  (umask "$mask" && mpirun -np 2 --oversubscribe --bind-to none "$zt" train "$@" --set train.steps=1 \
    --set ckpt.every=1 --set ckpt.dir="$dir" --set sample.tokens=0 --set eval.every=0 \
    --set data.eval_fraction=0 --set train.peak_tflops=1 --set train.threads=1 \
    --set train.micro_batch=2 --set train.global_batch=4 --set train.seq_len=32 </dev/null >"$log" 2>&1)
}
check() {  # UMASK DIR
  (umask "$1" && mpirun -np 2 --oversubscribe --bind-to none "$zt" check --backend mpi \
    --ops all_reduce --min-bytes 8 --max-bytes 1K --iters 2 --warmup 1 --straggler-iters 2 \
    --pair-bytes 1K --pair-iters 1 --io-bytes 1M --report "$2" </dev/null >"$log" 2>&1)
}

# ---- checkpoints ----------------------------------------------------------------------
plant "$work/ck" step-1.h5.tmp step-1.h5 latest
# The planted `latest` makes the folder look like another run's: without ckpt.overwrite a
# fresh run is refused (its own test: reliability.ckpt_overwrite); with it, the writes.
train 027 "$work/ck" --set ckpt.overwrite=true
rc=$?
check_victims
echo "file_safety_test: ckpt with planted symlinks: exit $rc; folder: $(ls -l "$work/ck" | awk 'NR > 1 {print $1, $NF}' | tr '\n' ';')"
if [[ $rc -eq 0 ]]; then
  for f in step-1.h5 latest; do
    [[ -f "$work/ck/$f" && ! -L "$work/ck/$f" ]] || fail "$f is not a regular file"
    [[ $(mode_of "$work/ck/$f") == 640 ]] || fail "$f has mode $(mode_of "$work/ck/$f") under umask 027"
  done
else
  grep -q "ERROR" "$log" || fail "refused without an error message"
fi
train 002 "$work/ck2" || fail "zt train failed"
for f in step-1.h5 latest; do
  [[ $(mode_of "$work/ck2/$f") == 664 ]] || fail "$f has mode $(mode_of "$work/ck2/$f") under umask 002"
done
echo "file_safety_test: ckpt modes: umask 027 -> $(mode_of "$work/ck/step-1.h5" 2>/dev/null), umask 002 -> $(mode_of "$work/ck2/step-1.h5")"

# ---- log.metrics ----------------------------------------------------------------------
plant "$work/met" metrics.jsonl
train 022 "$work/ck3" --set log.metrics="$work/met/metrics.jsonl"
rc=$?
check_victims
[[ $rc -eq 2 ]] || fail "log.metrics naming a symlink: exit $rc, expected 2"
grep -q "symbolic link" "$log" || fail "log.metrics naming a symlink: no message saying so"
echo "file_safety_test: log.metrics a symlink: exit $rc, $(grep -o "log.metrics = .*symbolic link[^;]*" "$log" | head -1)"

# ---- zt check reports -----------------------------------------------------------------
plant "$work/rep" report.json report.md busbw.dat plots.gp plots.log busbw.png pairs.png
check 027 "$work/rep"
rc=$?
check_victims
echo "file_safety_test: zt check --report with planted symlinks: exit $rc; folder: $(ls -l "$work/rep" | awk 'NR > 1 {print $1, $NF}' | tr '\n' ';')"
[[ $rc -eq 0 || $rc -eq 1 ]] || fail "zt check with planted symlinks: exit $rc"
[[ $(mode_of "$work/rep/report.json") == 640 ]] || fail "report.json mode $(mode_of "$work/rep/report.json") under umask 027"
# What zt (and gnuplot for it) wrote replaced the links; with no gnuplot, only the data
# and the script are made, and the other links stay links (never written through).
made="busbw.dat plots.gp report.json report.md"
command -v gnuplot >/dev/null && made="$made plots.log busbw.png"  # pairs.png: only with several nodes
for f in $made; do
  [[ -f "$work/rep/$f" && ! -L "$work/rep/$f" ]] || fail "$f in the report folder is not a regular file"
done
ls -a "$work/rep" | grep -q '^\.plots\.' && fail "the private plot folder was left behind"
check 002 "$work/rep2"
for f in report.json report.md; do
  m=$(mode_of "$work/rep2/$f")
  [[ $m == 664 ]] || fail "$f mode $m under umask 002 (expected 0666 & ~umask = 664)"
done
echo "file_safety_test: report modes: umask 027 -> 640, umask 002 -> $(mode_of "$work/rep2/report.json")"
echo "PASS"
