#!/usr/bin/env bash
# tests/multinode/mpirun.sh: mpirun over the simulated nodes of netns.sh.
#   mpirun.sh NODES RANKS_PER_NODE [mpirun options...] PROGRAM [args...]
# Writes a hostfile naming nodes 10.77.0.1 .. 10.77.0.NODES with RANKS_PER_NODE slots each
# and starts NODES x RANKS_PER_NODE ranks, placed node by node (ranks 0..K-1 on node 0).
# Open MPI starts one daemon per node through rsh-agent.sh (no tree spawn: every daemon
# is started from the host side), keeps its own traffic and the TCP BTL on the bridge's
# subnet, and uses shared memory (vader) only between ranks of the same node.
set -euo pipefail
# ZT_NETNS_ID=K (1-9; default 0 = the names above) selects a separate set of nodes: namespaces
# ztK-nI, bridge ztK-br0, veths ztK-hI, subnet 10.(77+K).0, so a benchmark on a shared
# machine neither tears down nor counts the traffic of another user's nodes.
id="${ZT_NETNS_ID:-0}"
[[ "$id" =~ ^[0-9]$ ]] || { echo "ZT_NETNS_ID must be 0-9, got '$id'" >&2; exit 2; }
if ((id)); then P="zt$id-"; else P="zt-"; fi
SUBNET="10.$((77 + id)).0"
here="$(cd "$(dirname "$0")" && pwd)"
nodes="$1" per_node="$2"; shift 2
hostfile=$(mktemp /tmp/zt-netns-hosts.XXXXXX)
trap 'rm -f "$hostfile"' EXIT
for ((i = 1; i <= nodes; i++)); do echo "$SUBNET.$i slots=$per_node"; done > "$hostfile"
root=()
if [[ $(id -u) -eq 0 ]]; then root=(--allow-run-as-root); fi
# Not exec: the trap removes the hostfile afterwards. setpgid warnings of the rsh launcher
# (harmless: the agent is not a session leader) are filtered out.
mpirun "${root[@]}" --oversubscribe --bind-to none -np $((nodes * per_node)) --map-by ppr:"$per_node":node \
  --hostfile "$hostfile" \
  --mca plm_rsh_agent "$here/rsh-agent.sh" --mca plm_rsh_no_tree_spawn 1 \
  --mca btl self,vader,tcp --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24" \
  -x OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
  "$@" 2> >(grep -v 'plm:rsh: Warning: setpgid' >&2)
