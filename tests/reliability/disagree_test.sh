#!/usr/bin/env bash
# Ranks that disagree (issue 36, class 2), launched as MPMD (`mpirun -np 1 zt train A :
# -np 1 zt train B`): before any collective that depends on them, the ranks compare
# every key of the resolved configuration (zt train), every option (zt check) and the
# token file's contents; a difference is exit 2 naming the first differing key and which
# ranks hold which value. Before: a different train.seed trained two models into one
# checkpoint (exit 0), model.hidden aborted on heap corruption, model.layers and
# finetune.method crashed (SIGSEGV), zero.stage was a raw MPI error, train.steps and
# ckpt.dir hung until comm.timeout.
# Usage: disagree_test.sh ZT_BINARY
set -uo pipefail
zt="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
cd "$work" || exit 1
fails=0
tiny=(--set model.hidden=32 --set model.layers=1 --set model.heads=2 --set model.kv_heads=2
      --set model.intermediate=64 --set model.context=32 --set train.seq_len=16
      --set train.micro_batch=1 --set train.global_batch=2 --set train.steps=2
      --set sample.tokens=0 --set eval.every=0 --set data.eval_fraction=0
      --set train.peak_tflops=1 --set train.threads=1 --set comm.timeout=20)
for i in 1 2; do
  mkdir -p "d$i"
  { printf 'ROMEO: data set %s.\n' "$i"; head -c 4000 /dev/urandom | base64; } > "d$i/in.txt"
  "$zt" convert text-to-tokens "d$i/in.txt" "d$i/tokens.h5" >/dev/null 2>&1 || { echo "FAIL: setup"; exit 1; }
done
data=(--set data.path="$work/d1/tokens.h5")

# expect NAME RC REGEX -- ARGS OF RANK 0 -- ARGS OF RANK 1 [-- WDIR0 WDIR1]
expect() {
  local name="$1" rc_want="$2" regex="$3"
  shift 4
  local a=() b=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do a+=("$1"); shift; done
  shift
  while [[ $# -gt 0 && "$1" != "--" ]]; do b+=("$1"); shift; done
  local w0="$work" w1="$work"
  if [[ $# -gt 0 ]]; then w0="$2"; w1="$3"; fi
  local t0=$SECONDS
  timeout 120 mpirun --oversubscribe --bind-to none -np 1 -wdir "$w0" "$zt" "${a[@]}" : \
    -np 1 -wdir "$w1" "$zt" "${b[@]}" </dev/null >"$work/out.log" 2>&1
  local rc=$?
  if [[ $rc -ne $rc_want ]] || ! grep -Eq "$regex" "$work/out.log"; then
    echo "FAIL: $name: exit $rc (expected $rc_want), /$regex/ $(grep -Ec "$regex" "$work/out.log") times"
    sed 's/^/    /' "$work/out.log" | tail -15
    fails=$((fails + 1))
  else
    echo "ok: $name: exit $rc in $((SECONDS - t0)) s: $(grep -Em1 "$regex" "$work/out.log" | cut -c1-220)"
  fi
}

k="the ranks disagree on the configuration key"
for kv in train.seed=1,2 train.lr=0.001,0.002 train.seq_len=16,8 model.hidden=32,64 \
          model.layers=1,2 finetune.method=full,lora zero.stage=0,3 train.steps=2,3 \
          eval.every=0,1 sample.tokens=0,2 ckpt.dir=ck1,ck2 runtime.ranks_per_node=0,1; do
  key="${kv%%=*}" vals="${kv#*=}"
  v0="${vals%%,*}" v1="${vals#*,}"
  expect "train $key" 2 "$k '${key//./\\.}': rank 0 has '$v0'; rank 1 has '$v1'" -- \
    train "${tiny[@]}" "${data[@]}" --set "$key=$v0" -- train "${tiny[@]}" "${data[@]}" --set "$key=$v1"
done
# --ranks-per-node (the flag) counts as runtime.ranks_per_node.
expect "train --ranks-per-node" 2 "$k 'runtime\.ranks_per_node': rank 0 has '0'; rank 1 has '1'" -- \
  train "${tiny[@]}" "${data[@]}" -- train "${tiny[@]}" "${data[@]}" --ranks-per-node 1
# The same data.path text, different files (relative to each rank's folder).
expect "train data identity" 2 "the ranks disagree on the data \(data\.path 'tokens\.h5'\) '(tokens|token ids \(zt-xxh3\))'" -- \
  train "${tiny[@]}" --set data.path=tokens.h5 --set ckpt.dir="$work/ckd" -- \
  train "${tiny[@]}" --set data.path=tokens.h5 --set ckpt.dir="$work/ckd" -- "$work/d1" "$work/d2"
# The same everything: trains (exit 0).
expect "train agreeing" 0 "done: 2 steps" -- train "${tiny[@]}" "${data[@]}" --set ckpt.dir=cka -- \
  train "${tiny[@]}" "${data[@]}" --set ckpt.dir=cka
chk=(check --ops all_reduce --min-bytes 8 --max-bytes 8 --iters 1 --warmup 0 --straggler-iters 1
     --straggler-bytes 8 --pair-iters 1 --pair-bytes 8 --io-bytes 4K --copy-bytes 4K)
expect "check --step-factor" 2 "the ranks disagree on the option '--step-factor': rank 0 has '2'; rank 1 has '4'" -- \
  "${chk[@]}" -- "${chk[@]}" --step-factor 4
expect "check --timeout" 2 "the ranks disagree on the option '--timeout': rank 0 has ''; rank 1 has '30'" -- \
  "${chk[@]}" -- "${chk[@]}" --timeout 30
expect "check agreeing" 0 "all_reduce" -- "${chk[@]}" -- "${chk[@]}"
[[ $fails -eq 0 ]] || { echo "$fails failures"; exit 1; }
echo "PASS"
