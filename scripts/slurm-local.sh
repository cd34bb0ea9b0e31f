#!/usr/bin/env bash
# Brings up (or tears down) a real single-node Slurm on this machine for testing job
# scripts: munge, slurmctld and slurmd with one node that has this machine's CPUs.
# Usage: scripts/slurm-local.sh up|down|status
# Needs root and Debian's slurm-wlm + munge (scripts/install-deps.sh --slurm).
set -euo pipefail
action="${1:-up}"
state=/var/lib/zt-slurm
conf=/etc/slurm/slurm.conf

down() {
  pkill -x slurmd 2>/dev/null || true
  pkill -x slurmctld 2>/dev/null || true
  for _ in $(seq 50); do pgrep -x slurmd >/dev/null || pgrep -x slurmctld >/dev/null || break; sleep 0.1; done
}

if [[ "$action" == "down" ]]; then down; exit 0; fi
if [[ "$action" == "status" ]]; then sinfo && squeue; exit 0; fi

[[ $(id -u) -eq 0 ]] || { echo "slurm-local: must run as root" >&2; exit 2; }
command -v slurmctld >/dev/null || bash "$(dirname "$0")/install-deps.sh" --slurm

host=$(hostname -s)
node_line=$(slurmd -C | head -1)   # NodeName=<host> CPUs=... RealMemory=...
mkdir -p /etc/slurm "$state"/{ctld,d} /var/log/slurm /run/munge
cat > "$conf" <<CONF
# Written by zt scripts/slurm-local.sh: single-node test cluster.
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
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
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
