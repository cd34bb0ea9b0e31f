#!/usr/bin/env bash
# tests/slurm/test_chain.sh ZT SRC_DIR: slurm/submit.sh on a real single-node Slurm.
#  1. check + train chained with --dependency=afterok (tiny model, CPU, 2 tasks): the check
#     job completes with exit 0 and a report, then the train job runs to the end, writes
#     its checkpoints (steps 3 and 6, `latest` naming the last), and its log has every step
#     and srun's report that each task was bound to a core of its own.
#  2. the same chain with a gate no cluster can pass: the check job fails with exit 1 and
#     the train job is cancelled without ever starting (no output file, no checkpoint).
set -euo pipefail
zt=$(realpath "$1") src=$(realpath "$2")
source "$src/tests/slurm/lib.sh"
require_slurm "$src"

work=$(mktemp -d /tmp/zt-slurm-chain.XXXXXX)
export ZT_BIN="$zt"
export ZT_CPU_BIND=verbose,cores   # srun prints each task's CPU mask: checked below
steps=6
check_args="--ops all_reduce --min-bytes 8 --max-bytes 64K --iters 3 --warmup 1"
train_args=(--set train.steps=$steps --set eval.every=0 --set sample.tokens=0 --set train.threads=1
            --set train.micro_batch=4 --set train.global_batch=8 --set train.seq_len=64)
ckpt_dir="$work/ckpt"
train_args+=(--set ckpt.every=3)

submit() {  # submit NAME THRESHOLDS -> sets check_id, train_id
  local out
  out=$(cd "$work" && bash "$src/slurm/submit.sh" --config "$src/jobs/tiny.toml" --cpu \
          --tasks-per-node 2 --cpus-per-task 1 --time 5 --job-name "$1" --log-dir "$work/logs" \
          --ckpt-dir "$ckpt_dir/$1" \
          ${2:+--thresholds "$2"} --check-args "$check_args" -- "${train_args[@]}")
  echo "$out"
  check_id=$(sed -n 's/^check job \([0-9]*\)$/\1/p' <<<"$out")
  train_id=$(sed -n 's/^train job \([0-9]*\)$/\1/p' <<<"$out")
  [[ -n "$check_id" && -n "$train_id" ]] || fail "submit.sh printed no job ids"
}

# --- 1. a healthy chain -------------------------------------------------------------
log "chain 1: check + train"
submit zt-chain-ok ""
wait_state "$check_id" 120 COMPLETED FAILED CANCELLED
[[ $(job_field "$check_id" JobState) == COMPLETED ]] || { cat "$work/logs/zt-check-$check_id.out" >&2; fail "check job $check_id did not complete"; }
[[ $(job_field "$check_id" ExitCode) == 0:0 ]] || fail "check job exit code $(job_field "$check_id" ExitCode)"
report="$work/logs/reports/check-$check_id/report.json"
[[ -s "$report" ]] || fail "no check report at $report"
expect_match "$work/logs/zt-check-$check_id.out" '^# zt check: (PASS|WARN)' "check verdict"
wait_state "$train_id" 180 COMPLETED FAILED CANCELLED
tlog="$work/logs/zt-chain-ok-$train_id.out"
[[ $(job_field "$train_id" JobState) == COMPLETED ]] || { cat "$tlog" >&2; fail "train job $train_id did not complete"; }
[[ $(job_field "$train_id" ExitCode) == 0:0 ]] || fail "train job exit code $(job_field "$train_id" ExitCode)"
expect_match "$tlog" "^step +$steps/$steps " "last step"
expect_match "$tlog" "^done: $steps steps" "end of training"
expect_match "$tlog" "^fabric: tcp" "fabric summary"
# CPU binding: srun pinned each of the 2 tasks (1 core each) to its own core.
masks=$(sed -n 's/^cpu-bind=MASK - .*, task *\([0-9]*\) .*: mask \(0x[0-9a-f]*\) set$/\1 \2/p' "$tlog" | sort -u)
[[ $(wc -l <<<"$masks") -eq 2 && $(cut -d' ' -f2 <<<"$masks" | sort -u | wc -l) -eq 2 ]] ||
  fail "expected 2 tasks bound to 2 different cores, srun reported: ${masks:-nothing}"
d="$ckpt_dir/zt-chain-ok"
for s in 3 $steps; do
  [[ -s "$d/step-$s.h5" ]] || { ls -la "$d" >&2 || true; fail "no checkpoint $d/step-$s.h5 (ckpt.every=3)"; }
  expect_match "$tlog" "^ckpt: step $s -> .*step-$s\.h5" "checkpoint of step $s in the log"
done
grep -q "step-$steps.h5" "$d/latest" || fail "$d/latest does not name step-$steps.h5: $(cat "$d/latest")"
h5dump -H "$d/step-$steps.h5" >/dev/null || fail "$d/step-$steps.h5 is not a readable HDF5 file"
log "chain 1: ok (check $check_id COMPLETED 0:0, train $train_id COMPLETED 0:0)"

# --- 2. a failing check stops the train job -----------------------------------------
log "chain 2: a gate that fails"
cat > "$work/impossible.toml" <<'TOML'
description = "a gate no cluster passes: 1 PB/s all_reduce bus bandwidth"
[all_reduce]
size = "64K"
min_busbw_gbs = 1.0e6
TOML
submit zt-chain-bad "$work/impossible.toml"
wait_state "$check_id" 120 FAILED COMPLETED CANCELLED
[[ $(job_field "$check_id" JobState) == FAILED ]] || fail "check job $check_id: state $(job_field "$check_id" JobState), expected FAILED"
[[ $(job_field "$check_id" ExitCode) == 1:0 ]] || fail "check job exit code $(job_field "$check_id" ExitCode), expected 1:0"
expect_match "$work/logs/zt-check-$check_id.out" '^# zt check: FAIL' "check verdict"
wait_state "$train_id" 60 CANCELLED COMPLETED FAILED RUNNING
[[ $(job_field "$train_id" JobState) == CANCELLED ]] || fail "train job $train_id: state $(job_field "$train_id" JobState), expected CANCELLED"
[[ ! -e "$work/logs/zt-chain-bad-$train_id.out" ]] || fail "the train job started although its check failed"
[[ ! -e "$ckpt_dir/zt-chain-bad" ]] || fail "the train job wrote checkpoints although its check failed"
log "chain 2: ok (check $check_id FAILED 1:0, train $train_id CANCELLED, never started)"
rm -rf "$work"
echo "PASS"
