#!/usr/bin/env bash
# zt opens no listening socket of its own.
#  1. Static: no zt library (libzt_*.a) and no zt object in the `zt` binary references
#     listen, bind, accept or accept4 (nm -u on zt's own archives).
#  2. Running: two ranks of `zt train` are inspected while they train. Every socket a zt
#     process holds (/proc/PID/fd -> socket:[inode]) is looked up in /proc/PID/net/tcp,
#     tcp6 (state 0A = LISTEN) and /proc/PID/net/unix (flag 00010000 = listening).
#     With Open MPI's shared-memory transports only (--mca btl self,vader) a zt process
#     must hold no listening socket at all. With the default transports the listeners that
#     appear are Open MPI's TCP BTL's (reported, not failed): its own component, not zt.
# Usage: no_listen_test.sh BUILD_DIR
set -uo pipefail
build="$1"
zt="$build/src/apps/zt"
fail() { echo "FAIL: $*"; exit 1; }

# ---- 1. static ------------------------------------------------------------------------
libs=$(find "$build" -name 'libzt_*.a' | sort)
[[ -n "$libs" ]] || fail "no libzt_*.a under $build"
bad=$(for l in $libs; do nm -u "$l" 2>/dev/null | awk '{print $NF}' | grep -xE 'listen|bind|accept|accept4' | sed "s|^|$(basename "$l"): |"; done | sort -u)
[[ -z "$bad" ]] || fail "zt libraries reference socket server calls: $bad"
echo "no_listen_test: $(echo "$libs" | wc -l) zt libraries reference none of listen/bind/accept/accept4"

# ---- 2. running -----------------------------------------------------------------------
listeners() {  # PID -> one line per listening socket it holds: "tcp PORT" / "unix PATH"
  local pid=$1 inode
  for fd in /proc/"$pid"/fd/*; do
    inode=$(readlink "$fd" 2>/dev/null | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
    [[ -n "$inode" ]] || continue
    awk -v ino="$inode" 'NR > 1 && $4 == "0A" && $10 == ino { split($2, a, ":"); print "tcp port 0x" a[2] }' \
      /proc/"$pid"/net/tcp /proc/"$pid"/net/tcp6 2>/dev/null
    awk -v ino="$inode" 'NR > 1 && $7 == ino && $4 == "00010000" { print "unix " ($8 == "" ? "(unnamed)" : $8) }' \
      /proc/"$pid"/net/unix 2>/dev/null
  done
}

# Control: the inspection must see a process that does listen (a TCP and a unix socket).
ctl_dir=$(mktemp -d)
python3 -c "
import socket, sys, os
t = socket.socket(); t.bind(('127.0.0.1', 0)); t.listen()
u = socket.socket(socket.AF_UNIX); u.bind(sys.argv[1] + '/ctl.sock'); u.listen()
sys.stdout.write('ready\n'); sys.stdout.flush(); sys.stdin.read()
" "$ctl_dir" > "$ctl_dir/out" < <(sleep 30) &
ctl_pid=$!
for _ in $(seq 1 100); do grep -q ready "$ctl_dir/out" 2>/dev/null && break; sleep 0.1; done
control=$(listeners "$ctl_pid")
kill "$ctl_pid" 2>/dev/null
wait "$ctl_pid" 2>/dev/null
rm -rf "$ctl_dir"
[[ $(echo "$control" | grep -c "^tcp port") -eq 1 && $(echo "$control" | grep -c "^unix .*ctl.sock") -eq 1 ]] ||
  fail "the inspection does not see a listening python process: '$control'"
echo "no_listen_test: control: the inspection sees a python process's 2 listeners ($(echo $control))"

run_and_inspect() {  # MCA-ARGS... ; prints the listeners of every rank, one per line
  local log pid mpirun_pid
  log=$(mktemp)
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -np 2 --oversubscribe --bind-to none "$@" "$zt" train --set train.steps=100000 \
    --set log.every=1 --set sample.tokens=0 --set eval.every=0 --set data.eval_fraction=0 \
    --set train.peak_tflops=1 --set train.threads=1 --set train.micro_batch=2 \
    --set train.global_batch=4 --set train.seq_len=32 --set ckpt.dir="$log.ck" </dev/null >"$log" 2>&1 &
  mpirun_pid=$!
  for _ in $(seq 1 600); do
    [[ $(grep -c "step " "$log") -ge 2 ]] && break
    kill -0 "$mpirun_pid" 2>/dev/null || { cat "$log"; fail "zt train ended early"; }
    sleep 0.2
  done
  local n=0
  for pid in $(pgrep -P "$mpirun_pid"); do
    n=$((n + 1))
    listeners "$pid" | sed "s/^/rank pid $pid: /"
  done
  kill -TERM "$mpirun_pid" 2>/dev/null
  wait "$mpirun_pid" 2>/dev/null
  rm -rf "$log" "$log.ck"  # the SIGTERM made the ranks save a checkpoint there
  [[ $n -eq 2 ]] || fail "expected 2 zt processes under mpirun, found $n"
}

shm=$(run_and_inspect --mca btl self,vader)
if [[ -n "$shm" ]]; then echo "$shm"; fail "zt processes hold listening sockets with TCP off"; fi
echo "no_listen_test: --mca btl self,vader: 2 zt processes, 0 listening sockets"
default=$(run_and_inspect)
echo "no_listen_test: default transports: $(echo -n "$default" | grep -c . ) listening socket(s) (Open MPI's TCP BTL):"
[[ -n "$default" ]] && echo "$default"
echo "PASS"
