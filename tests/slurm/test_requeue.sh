#!/usr/bin/env bash
# tests/slurm/test_requeue.sh ZT SRC_DIR: preemption of slurm/train.sbatch on a real
# single-node Slurm. While the train job runs, USR1 goes to its batch shell, as
# `--signal=B:USR1@120` sends it before the time limit (`scancel --signal=USR1 --batch`).
# Expected: the shell forwards it to the srun step, every rank saves a checkpoint at the
# next step boundary and exits 0, the shell requeues the job; the job runs again (Slurm
# holds a requeued job ~2 minutes, the test releases it sooner), resumes from that
# checkpoint and finishes every step. Its final loss must equal that of the same run
# done in one go with mpirun (the independent reference).
set -euo pipefail
zt=$(realpath "$1") src=$(realpath "$2")
source "$src/tests/slurm/lib.sh"
has_ckpt "$zt" || skip "this zt has no ckpt.* keys (checkpoints), so a preempted job cannot resume"
require_slurm "$src"

work=$(mktemp -d /tmp/zt-slurm-requeue.XXXXXX)
export ZT_BIN="$zt"
steps=60
train_args=(--set train.steps=$steps --set eval.every=0 --set sample.tokens=0 --set train.threads=1
            --set train.micro_batch=4 --set train.global_batch=8 --set train.seq_len=64
            --set ckpt.save_final=false)

# --- the reference: the same job in one go, outside Slurm --------------------------------
log "reference run: $steps steps with mpirun"
(cd "$work" && timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 \
   "$zt" train --config "$src/jobs/tiny.toml" "${train_args[@]}" --set ckpt.dir="$work/ckpt-ref") \
   > "$work/reference.out" 2>&1 || { cat "$work/reference.out" >&2; fail "the reference run failed"; }
ref=$(sed -n 's/^done: .*final loss \([0-9.]*\).*/\1/p' "$work/reference.out")
[[ -n "$ref" ]] || fail "no final loss in the reference run"

# --- the Slurm job, preempted once ---------------------------------------------------------
out=$(cd "$work" && bash "$src/slurm/submit.sh" --no-check --config "$src/jobs/tiny.toml" --cpu \
        --tasks-per-node 2 --cpus-per-task 1 --time 10 --job-name zt-requeue \
        --log-dir "$work/logs" --ckpt-dir "$work/ckpt" -- "${train_args[@]}")
id=$(sed -n 's/^train job \([0-9]*\)$/\1/p' <<<"$out")
[[ -n "$id" ]] || fail "submit.sh printed no job id: $out"
tlog="$work/logs/zt-requeue-$id.out"
log "job $id: waiting for step 3"
wait_file_match "$tlog" "^step +3/$steps " 120
log "job $id: USR1 to the batch shell"
scancel --signal=USR1 --batch "$id"

# The first run ends with a checkpoint and a requeue: the job goes back to PENDING.
deadline=$((SECONDS + 120))
until [[ "$(job_field "$id" Restarts)" == 1 && "$(job_field "$id" JobState)" == PENDING ]]; do
  ((SECONDS < deadline)) || { cat "$tlog" >&2; fail "job $id was not requeued (state $(job_field "$id" JobState), restarts $(job_field "$id" Restarts))"; }
  [[ "$(job_field "$id" JobState)" =~ ^(FAILED|CANCELLED|COMPLETED|TIMEOUT)$ ]] &&
    { cat "$tlog" >&2; fail "job $id ended ($(job_field "$id" JobState)) instead of being requeued"; }
  sleep 0.5
done
expect_match "$tlog" '^train: USR1' "the batch shell's trap"
expect_match "$tlog" '^ckpt: step [0-9]+ -> .*step-[0-9]+\.h5' "the checkpoint written on USR1"
saved=$(sed -n 's/^ckpt: step \([0-9]*\) -> .*/\1/p' "$tlog" | tail -1)
((saved >= 3 && saved < steps)) || fail "checkpoint at step $saved, expected one between 3 and $((steps - 1))"
expect_match "$tlog" "^train: checkpoint written; requeueing job $id" "the requeue"
# Slurm holds a requeued job for about 2 minutes (its begin time), partly so that the node
# has cleaned up after the first run: slurmd refuses to start a job whose credential is
# not newer than the first run's revocation (1 s granularity). Release it once the node
# is idle again, 2 s later.
log "job $id: requeued after a checkpoint at step $saved; releasing it once the node is idle"
deadline=$((SECONDS + 60))
until sinfo -h -o '%T' | grep -qx idle; do
  ((SECONDS < deadline)) || fail "the node did not become idle after job $id's first run"
  sleep 0.5
done
scontrol update jobid="$id" StartTime=now+2

wait_state "$id" 240 COMPLETED FAILED CANCELLED TIMEOUT
[[ $(job_field "$id" JobState) == COMPLETED ]] || { cat "$tlog" >&2; fail "job $id: $(job_field "$id" JobState) after the requeue"; }
[[ $(job_field "$id" ExitCode) == 0:0 ]] || fail "job $id exit code $(job_field "$id" ExitCode)"
expect_match "$tlog" "^train: job $id run 2," "the second run"
expect_match "$tlog" "^ckpt: resumed from .*step-$saved\.h5 at step $saved " "the resume"
expect_match "$tlog" "^step +$steps/$steps " "the last step"
got=$(sed -n 's/^done: .*final loss \([0-9.]*\).*/\1/p' "$tlog" | tail -1)
[[ "$got" == "$ref" ]] || fail "final loss after preemption and resume $got != $ref without"
log "job $id: resumed at step $saved, final loss $got = reference $ref"
rm -rf "$work"
echo "PASS"
