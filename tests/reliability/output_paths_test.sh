#!/usr/bin/env bash
# Output folders, checkpoint arguments and outputs that collide, through the real `zt`:
#  - ckpt.dir a symlink to a folder: trains, publishes step-N.h5 and `latest` through the
#    link (read back through the real folder), and resumes; a dangling symlink as
#    ckpt.dir, `zt report --out`, `zt check --report`, h5-to-hf OUTDIR: exit 2 naming the
#    link's target, before any work.
#  - ckpt.init_from = a ckpt.dir loads the checkpoint its `latest` names, as --weights,
#    h5-to-hf and ckpt.resume do; a family mismatch names the --set flags to give.
#  - log.metrics naming ckpt.dir/latest, a step-N.h5 or data.path: exit 2 naming both
#    keys, nothing trained; converters with input == output or the output in the input
#    folder: exit 2 naming both.
# Usage: output_paths_test.sh ZT_BINARY
set -uo pipefail
zt="$(realpath "$1")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
log="$work/log"
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log" 2>/dev/null; exit 1; }
expect() {  # RC REGEX WHAT: the last command's exit code and its output
  [[ $rc -eq $1 ]] || fail "$3: exit $rc, expected $1"
  tr '\n' ' ' <"$log" | grep -Eq -- "$2" || fail "$3: no message matching /$2/"
  echo "ok: $3: exit $rc, $(tr '\n' ' ' <"$log" | grep -Eo -- "$2" | head -1)"
}
TINY=(--set model.hidden=32 --set model.layers=1 --set model.heads=2 --set model.kv_heads=2
      --set model.intermediate=64 --set model.context=32 --set train.seq_len=16
      --set train.micro_batch=2 --set train.global_batch=2 --set sample.tokens=0
      --set eval.every=0 --set data.eval_fraction=0 --set train.peak_tflops=1 --set train.threads=1)
for i in $(seq 1 60); do echo "ROMEO: a small text for the tokens, line $i."; done >in.txt
"$zt" convert text-to-tokens in.txt tokens.h5 >"$log" 2>&1 || fail "text-to-tokens"
train() { "$zt" train "${TINY[@]}" --set data.path=tokens.h5 "$@" </dev/null >"$log" 2>&1; rc=$?; }

# ---- output folders that are symlinks -------------------------------------------------
mkdir real && ln -s real ck
train --set train.steps=2 --set ckpt.dir=ck
expect 0 "done: 2 steps" "ckpt.dir a symlink to a folder"
[[ "$(cat real/latest)" == "step-2.h5" && -f real/step-2.h5 ]] || fail "no latest/step-2.h5 in the link's folder: $(ls real)"
train --set train.steps=3 --set ckpt.dir=ck --set ckpt.resume=auto
expect 0 "resumed from ck/step-2.h5 at step 2" "resume through the symlink"
ln -s nowhere dangling
train --set train.steps=1 --set ckpt.dir=dangling
expect 2 "ckpt.dir = 'dangling': it is a symbolic link to 'nowhere', which does not exist" "ckpt.dir a dangling symlink"
grep -q "^step " "$log" && fail "trained into a dangling ckpt.dir"
train --set train.steps=1 --set ckpt.dir=c2 --set log.metrics=dangling/m.jsonl
expect 2 "symbolic link to 'nowhere', which does not exist" "log.metrics in a dangling folder"
"$zt" report real/report/metrics.jsonl --out dangling >"$log" 2>&1; rc=$?
expect 2 "--out = 'dangling': it is a symbolic link to 'nowhere', which does not exist" "zt report --out a dangling symlink"
"$zt" convert h5-to-hf ck dangling >"$log" 2>&1; rc=$?
expect 2 "OUTDIR = 'dangling': it is a symbolic link to 'nowhere'" "h5-to-hf into a dangling symlink"
[[ -L dangling && ! -e nowhere ]] || fail "the dangling link or its target changed"
"$zt" report real/report/metrics.jsonl --out rlink2 >"$log" 2>&1; rc=$?
expect 0 "report: rlink2/report.md" "zt report --out a new folder"

# ---- one meaning of a checkpoint argument ----------------------------------------------
for arg in ck ck/step-3.h5 real; do
  train --set train.steps=1 --set ckpt.dir="init-$arg" --set ckpt.init_from="$arg"
  expect 0 "initial weights from (ck|real)/step-3\.h5" "ckpt.init_from = $arg"
  "$zt" generate --weights "$arg" --prompt R --max-new-tokens 2 >"$log" 2>&1; rc=$?
  expect 0 "weights (ck|real)/step-3\.h5 loaded" "generate --weights $arg"
done
mkdir empty
train --set train.steps=1 --set ckpt.dir=c3 --set ckpt.init_from=empty
expect 2 "ckpt.init_from = 'empty' is a folder with no .latest." "ckpt.init_from a folder without latest"
train --set train.steps=4 --set ckpt.dir=c4 --set ckpt.resume=ck
expect 0 "resumed from ck/step-3.h5 at step 3" "ckpt.resume = a ckpt.dir"
train --set train.steps=1 --set ckpt.dir=c5 --set ckpt.init_from=ck --set model.family=qwen2
expect 2 "another family: model.family is llama in the checkpoint and qwen2 in this run.*--set model.family=llama" \
  "family mismatch names the keys"
train --set train.steps=1 --set ckpt.dir=c6 --set ckpt.init_from=ck --set model.hidden=64 --set model.intermediate=128
expect 2 "model.hidden is 32 in the checkpoint and 64.*--set model.hidden=32 --set model.intermediate=64" \
  "shape mismatch names every key"

# ---- outputs that collide ---------------------------------------------------------------
for m in ck/latest ck/step-3.h5 ck/step-9.h5 real/latest ck/zt.lock; do
  train --set train.steps=4 --set ckpt.dir=ck --set ckpt.resume=auto --set log.metrics="$m"
  expect 2 "log.metrics = '$m' lies in ckpt.dir = 'ck'" "log.metrics = $m"
  grep -q "^step " "$log" && fail "trained with log.metrics = $m"
done
[[ "$(cat real/latest)" == "step-3.h5" ]] || fail "latest changed: $(cat real/latest)"
train --set train.steps=1 --set ckpt.dir=c7 --set log.metrics=c7/report/metrics.jsonl
expect 2 "log.metrics = 'c7/report/metrics.jsonl' lies in the report folder \(log.report\)" "log.metrics = the report's copy"
cp tokens.h5 tokens-copy.h5
train --set train.steps=1 --set ckpt.dir=c8 --set log.metrics=tokens.h5 --set ckpt.overwrite=true
expect 2 "log.metrics = 'tokens.h5' and data.path = 'tokens.h5' are the same file" "log.metrics = data.path"
cmp -s tokens.h5 tokens-copy.h5 || fail "tokens.h5 changed"
train --set train.steps=1 --set ckpt.dir=ck --set ckpt.init_from=ck --set ckpt.overwrite=true
expect 2 "ckpt.dir = 'ck' and ckpt.init_from = 'ck' are the same" "ckpt.init_from = ckpt.dir"
"$zt" convert text-to-tokens --force in.txt in.txt >"$log" 2>&1; rc=$?
expect 2 "output token file = 'in.txt' and the input = 'in.txt' are the same file" "text-to-tokens IN = OUT"
"$zt" convert h5-to-hf ck hf >"$log" 2>&1 || fail "export"
"$zt" convert hf-to-h5 hf hf/out.h5 >"$log" 2>&1; rc=$?
expect 2 "OUT.h5 = 'hf/out.h5' lies in HFDIR = 'hf'" "hf-to-h5 into its input folder"
[[ -e hf/out.h5 ]] && fail "hf/out.h5 written"
"$zt" convert h5-to-hf ck ck/hf >"$log" 2>&1; rc=$?
expect 2 "OUTDIR = 'ck/hf' lies in CKPT = 'ck'" "h5-to-hf into its input folder"
"$zt" convert h5-to-hf real real >"$log" 2>&1; rc=$?
expect 2 "OUTDIR = 'real' and CKPT = 'real' are the same" "h5-to-hf CKPT = OUTDIR"
"$zt" report real/report/metrics.jsonl --out real/report >"$log" 2>&1; rc=$?
expect 0 "report: real/report/report.md" "zt report into the folder of its input (not one of its names)"
echo "PASS"
