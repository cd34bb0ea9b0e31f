#!/usr/bin/env bash
# A rank of a running `zt train` is killed (kill -9) or stopped (kill -STOP) mid-training;
# every other rank must end the job with a non-zero exit within comm.timeout (+ a margin
# for start-up and teardown), and a survivor's message must name the lost rank by world
# rank, host and pid. The pid and host are read here from the process itself (/proc and
# `hostname`), independently of zt.
#
# Open MPI's mpirun kills the whole job as soon as one process dies, before the survivors
# could say anything (mode kill-mpirun checks that: non-zero, fast). Modes kill and stop
# set orte_enable_recovery=1, which keeps mpirun out of the way, so the survivors' own
# detection (zt's timeout + liveness probe) is what ends the job, as when a remote node
# goes silent. With recovery on, mpirun itself exits 0 whatever its ranks did, so each
# rank runs under a wrapper that records its own exit code in a file: every survivor
# that recorded one must have recorded a non-zero code, and at least one must have.
#
# Usage: dead_rank_test.sh ZT_BINARY kill|stop|kill-mpirun [NP] [TIMEOUT_S]
# DEAD_RANK_ARGS (environment): more `zt train` arguments, e.g. the GPU kit's
# "--set train.device=cuda --set comm.backend=nccl" (docs/gpu-verification.md, issue 44);
# DEAD_RANK_MARGIN_S: the seconds allowed past comm.timeout (60: a loaded 2-core box).
set -uo pipefail
zt="$1"
mode="$2"
np="${3:-3}"
timeout_s="${4:-6}"
margin_s="${DEAD_RANK_MARGIN_S:-60}"   # start-up of the probe, MPI_Abort and mpirun teardown on a loaded 2-core box
victim=1

work="$(mktemp -d)"
log="$work/out.log"
cleanup() {
  if [[ -n "${mpirun_pid:-}" ]] && kill -0 "$mpirun_pid" 2>/dev/null; then
    kill -CONT -- "${victim_pid:-0}" 2>/dev/null
    kill -KILL "$mpirun_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$log"; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[[ "$mode" == kill-mpirun ]] || export OMPI_MCA_orte_enable_recovery=1
mkdir -p "$work/rc"
# shellcheck disable=SC2016
mpirun -np "$np" --oversubscribe --bind-to none \
  bash -c '"$0" "$@"; echo $? > '"$work/rc"'/rank.$OMPI_COMM_WORLD_RANK' "$zt" train \
  --set train.steps=100000 --set comm.timeout="$timeout_s" --set log.every=1 \
  --set sample.tokens=0 --set eval.every=0 --set data.eval_fraction=0 \
  --set train.peak_tflops=1 --set train.threads=1 --set train.micro_batch=2 \
  --set train.global_batch=$((2 * np)) --set train.seq_len=32 --set ckpt.dir="$work/ck" \
  ${DEAD_RANK_ARGS:-} </dev/null >"$log" 2>&1 &
mpirun_pid=$!

# Wait until the ranks are training (a few steps logged).
for _ in $(seq 1 600); do
  [[ $(grep -c "^.*step " "$log") -ge 3 ]] && break
  kill -0 "$mpirun_pid" 2>/dev/null || fail "zt train ended before training"
  sleep 0.2
done
[[ $(grep -c "step " "$log") -ge 3 ]] || fail "zt train did not reach step 3 in 120 s"

# The victim: the zt process (a child of a wrapper under mpirun) of Open MPI rank $victim.
victim_pid=""
for w in $(pgrep -P "$mpirun_pid"); do
  for p in $(pgrep -P "$w"); do
    # grep without -q: exiting at the match would kill tr by SIGPIPE, and pipefail
    # would make the pipeline false.
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=$victim" >/dev/null; then
      victim_pid="$p"
    fi
  done
done
[[ -n "$victim_pid" ]] || fail "no process of rank $victim among mpirun's children"
host="$(hostname)"

start=$(date +%s.%N)
if [[ "$mode" == stop ]]; then kill -STOP "$victim_pid"; else kill -KILL "$victim_pid"; fi
echo "dead_rank_test: $mode world rank $victim (pid $victim_pid on $host) at step $(grep -c "step " "$log")"

# Wait for the job to end, bounded: a hang is a failure.
deadline=$((timeout_s + margin_s))
ended=0
for _ in $(seq 1 $((deadline * 5))); do
  if ! kill -0 "$mpirun_pid" 2>/dev/null; then ended=1; break; fi
  sleep 0.2
done
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
[[ $ended == 1 ]] || fail "the job still runs ${deadline} s after the $mode: a hang"
wait "$mpirun_pid"
rc=$?
echo "dead_rank_test: job ended ${elapsed} s after the $mode with exit code $rc (comm.timeout ${timeout_s} s)"
if [[ "$mode" == kill-mpirun ]]; then
  [[ $rc -ne 0 ]] || fail "mpirun exit code 0 after a lost rank"
  echo "PASS"
  exit 0
fi
recorded=0
for r in $(seq 0 $((np - 1))); do
  [[ $r == "$victim" ]] && continue
  f="$work/rc/rank.$r"
  if [[ -f "$f" ]]; then
    recorded=$((recorded + 1))
    echo "dead_rank_test: survivor rank $r exited with code $(cat "$f")"
    [[ $(cat "$f") != 0 ]] || fail "survivor rank $r exited 0"
  else
    echo "dead_rank_test: survivor rank $r was ended by the launcher (no exit code of its own)"
  fi
done
[[ $recorded -ge 1 ]] || fail "no survivor recorded its exit code"
expected="world rank $victim (host $host, pid $victim_pid)"
grep -q "no answer to a liveness probe.*$expected" "$log" ||
  fail "no survivor named the lost rank as '$expected'"
survivors=$(grep -c "no answer to a liveness probe" "$log")
echo "dead_rank_test: $survivors survivor message(s) name $expected"
grep -m1 "no answer to a liveness probe" "$log"
echo "PASS"
