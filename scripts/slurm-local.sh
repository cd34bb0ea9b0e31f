#!/usr/bin/env bash
# Brings up (or tears down) a real single-node Slurm on this machine for testing job
# scripts: munge, slurmctld and slurmd with one node that has this machine's CPUs.
# Usage: scripts/slurm-local.sh up|down|status
# Needs root and Debian's slurm-wlm + munge (scripts/install-deps.sh --slurm).
#
# Safe on a machine that already has a Slurm of its own (a real cluster node): `up`
# refuses (exit 2) when /etc/slurm/slurm.conf exists and is not one this script wrote
# (its first line is $marker), or when a slurmctld or slurmd it did not start is running;
# `down` stops only the daemons whose pid files this script's configuration names
# (/run/zt-slurm/), never others of the same name.
set -euo pipefail
action="${1:-up}"
state=/var/lib/zt-slurm
conf=/etc/slurm/slurm.conf
marker="# Written by zt scripts/slurm-local.sh: single-node test cluster."
piddir=/run/zt-slurm

# The pid in $piddir/NAME.pid when that process is alive and is NAME (not a reused pid).
our_pid() {
  local pid
  pid=$(cat "$piddir/$1.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$1" ]] && echo "$pid"
}

down() {
  local d pid pids=()
  for d in slurmd slurmctld; do
    if pid=$(our_pid "$d"); then kill "$pid" 2>/dev/null || true; pids+=("$pid"); fi
  done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${pids[@]}"; do [[ -d /proc/$pid ]] && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  rm -f "$piddir"/slurmd.pid "$piddir"/slurmctld.pid
}

if [[ "$action" == "down" ]]; then down; exit 0; fi
if [[ "$action" == "status" ]]; then sinfo && squeue; exit 0; fi

[[ $(id -u) -eq 0 ]] || { echo "slurm-local: must run as root" >&2; exit 2; }
if [[ -e "$conf" && "$(head -1 "$conf")" != "$marker" ]]; then
  echo "slurm-local: $conf exists and was not written by this script: this machine has a" \
       "Slurm of its own, which 'up' would overwrite and stop. Run it on a test machine" \
       "without Slurm (or move $conf away yourself if that Slurm is not needed)." >&2
  exit 2
fi
for d in slurmctld slurmd; do
  for pid in $(pgrep -x "$d" || true); do
    if [[ "$pid" != "$(our_pid "$d" || true)" ]]; then
      echo "slurm-local: $d (pid $pid) is running and was not started by this script:" \
           "this machine runs a Slurm of its own; not touching it. Stop it yourself, or use a" \
           "test machine." >&2
      exit 2
    fi
  done
done
command -v slurmctld >/dev/null || bash "$(dirname "$0")/install-deps.sh" --slurm

host=$(hostname -s)
node_line=$(slurmd -C | head -1)   # NodeName=<host> CPUs=... RealMemory=...
mkdir -p /etc/slurm "$state"/{ctld,d} /var/log/slurm /run/munge "$piddir"
cat > "$conf" <<CONF
$marker
ClusterName=zt-local
SlurmctldHost=$host
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPidFile=$piddir/slurmctld.pid
SlurmdPidFile=$piddir/slurmd.pid
SlurmdSpoolDir=$state/d
StateSaveLocation=$state/ctld
SlurmUser=root
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobRequeue=1
KillWait=10
MinJobAge=600
$node_line State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF

# munge: a key, then the daemon.
if [[ ! -s /etc/munge/munge.key ]]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged

down
slurmctld
slurmd
for _ in $(seq 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; then
    sinfo
    exit 0
  fi
  sleep 0.2
done
echo "slurm-local: the node did not become idle; see /var/log/slurm/slurmd.log" >&2
sinfo >&2 || true
exit 1
