#!/usr/bin/env bash
# The polled device wait on the host-staged space (device_wait_main.cpp): at each place
# where the device path's host waits for the device, a stuck collective in flight (a
# receive from rank 1, which sits in a blocking MPI_Recv and answers no liveness probe)
# must end the job within the timeout (+ a margin for start-up and MPI_Abort on a loaded
# 2-core box), with a non-zero exit and the CPU path's timeout message naming the lost
# rank by world rank, host and pid (the pid read here from /proc, independently of zt),
# and the hint naming the wait.
# With `gpu` (device_stuck_main.cpp, label gpu): the same on one GPU, the device space and
# its model, with a stuck event for the collective; exit 77 (no GPU visible) skips.
#
# Usage: device_wait_test.sh DEVICE_WAIT_MAIN [TIMEOUT_MS] [gpu]
set -uo pipefail
main="$1"
timeout_ms="${2:-3000}"
mode="${3:-host-staged}"
margin_s=40
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
host="$(hostname 2>/dev/null || uname -n)"  # (the GPU kit's bare root may lack hostname)
failed=0
# place -> what the hint must name
declare -A what=(
  [micro_step]="copying from the device to the host" [loss_and_grad]="reading the loss"
  [eval_loss]="reading the loss" [loss]="reading the loss"
  [row_logps]="reading the rows' log-probabilities" [release]="freeing a device buffer"
  [logits_last]="reading the last logits" [to_host]="copying from the device to the host"
  [from_host]="copying from the host to the device" [copier]="waiting for an offload copy")
places=(micro_step loss_and_grad eval_loss logits_last to_host from_host copier)
op="nccl recv of 1024 x float (4096 bytes) from rank 1"
if [[ $mode == gpu ]]; then
  places=(loss loss_and_grad row_logps to_host from_host release)
  op="nccl all_reduce of 1024 x float (4096 bytes) with rank 1"
fi
for place in "${places[@]}"; do
  log="$work/$place.log"
  start=$(date +%s.%N)
  # Each rank writes its pid first (read back from /proc/self by the shell: not zt's).
  timeout $((timeout_ms / 1000 + margin_s)) mpirun -np 2 --oversubscribe --bind-to none \
    bash -c 'echo $$ > '"$work"'/pid.$OMPI_COMM_WORLD_RANK; exec "$0" "$@"' \
    "$main" "$place" "$timeout_ms" </dev/null >"$log" 2>&1
  rc=$?
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')  # (no bc there either)
  victim_pid="$(cat "$work/pid.1" 2>/dev/null)"
  msg_ok=1
  grep -q "^$place reached" "$log" || msg_ok=0
  [[ $rc -eq 77 ]] && { echo "SKIP: no GPU visible"; exit 77; }
  grep -q "$op did not complete within $timeout_ms ms on rank 0 of 2" "$log" || msg_ok=0
  grep -q "world rank 1 (host $host, pid $victim_pid)" "$log" || msg_ok=0
  grep -q "the host was ${what[$place]}" "$log" || msg_ok=0
  if [[ $rc -eq 124 ]]; then
    echo "FAIL $place: still running after $((timeout_ms / 1000 + margin_s)) s (a hang)"; failed=1
  elif [[ $rc -eq 0 || $rc -eq 3 ]]; then
    echo "FAIL $place: exit $rc (the job must end with a failure)"; failed=1
  elif [[ $msg_ok -ne 1 ]]; then
    echo "FAIL $place: the message does not name the operation, rank 1 (pid $victim_pid on $host) and '${what[$place]}'"; failed=1
  else
    echo "ok $place: exit $rc after $took s (timeout $timeout_ms ms)"
  fi
  [[ $failed -eq 0 ]] || { echo "---- output ----"; cat "$log"; exit 1; }
done
echo PASS
