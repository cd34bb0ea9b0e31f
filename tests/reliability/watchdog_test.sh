#!/usr/bin/env bash
# runtime::Watchdog: a step blocked for 30 s under a 500 ms watchdog ends the job (exit
# code 1 from MPI_Abort, 2 ranks) within a few seconds, with a message naming the step,
# the rank and the limit; a step that ends in time (1 s under a 10 s limit) exits 0.
# Usage: watchdog_test.sh WATCHDOG_MAIN
set -uo pipefail
bin="$1"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s.%N)
mpirun -np 2 --oversubscribe --bind-to none "$bin" 500 30 </dev/null >"$log" 2>&1
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
echo "watchdog_test: stuck step: exit $rc after ${elapsed} s"
[[ $rc -ne 0 ]] || fail "exit 0"
(($(echo "$elapsed < 20" | bc))) || fail "took ${elapsed} s (the step sleeps 30 s)"
grep -q "ERROR: the test's blocking step did not finish within 500 ms on rank [01] (host " "$log" ||
  fail "no message naming the step"
mpirun -np 2 --oversubscribe --bind-to none "$bin" 10000 1 </dev/null >"$log" 2>&1 || fail "a step in time failed"
echo "watchdog_test: step in time: exit 0"
echo "PASS"
