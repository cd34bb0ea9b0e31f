#!/usr/bin/env bash
# runtime::Watchdog and CallWatchdog (2 ranks):
#  - a step blocked for 30 s under a 500 ms Watchdog ends the job (exit code 1 from
#    MPI_Abort) within a few seconds, with a message naming the step, rank and limit;
#  - a blocking all_reduce (MpiComm blocking_collectives) whose peer is 30 s late ends
#    the job the same way under a 500 ms comm timeout, naming the all_reduce;
#  - a step and an all_reduce that end in time (1 s under 10 s) exit 0.
# Usage: watchdog_test.sh WATCHDOG_MAIN
set -uo pipefail
bin="$1"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { mpirun -np 2 --oversubscribe --bind-to none "$bin" "$@" </dev/null >"$log" 2>&1; }

for mode in step all_reduce; do
  start=$(date +%s.%N)
  run "$mode" 500 30
  rc=$?
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  echo "watchdog_test: stuck $mode: exit $rc after ${elapsed} s"
  [[ $rc -ne 0 ]] || fail "$mode: exit 0"
  (($(echo "$elapsed < 20" | bc))) || fail "$mode took ${elapsed} s (the stuck rank sleeps 30 s)"
  case "$mode" in
    step) want="ERROR: the test's blocking step did not finish within 500 ms on rank [01] (host " ;;
    all_reduce) want="ERROR: all_reduce (sum) of 1 x int32 (4 bytes) did not finish within 500 ms on rank 0 (host " ;;
  esac
  grep -q "$want" "$log" || fail "$mode: no message matching: $want"
  run "$mode" 10000 1 || fail "$mode in time failed"
  echo "watchdog_test: $mode in time: exit 0"
done
echo "PASS"
