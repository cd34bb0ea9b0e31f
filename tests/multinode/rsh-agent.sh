#!/usr/bin/env bash
# tests/multinode/rsh-agent.sh: Open MPI's "ssh" into a simulated node (netns.sh).
# mpirun runs `rsh-agent.sh [options] HOST COMMAND...` to start its daemon on HOST, as it
# would run ssh. HOST is a node's address 10.77.0.(I+1) or its name ztnodeI; the command
# runs in namespace zt-nI under the hostname ztnodeI (its own UTS namespace), through a
# shell, as ssh would run it.
set -euo pipefail
# ZT_NETNS_ID=K (1-9; default 0 = the names above) selects a separate set of nodes: namespaces
# ztK-nI, bridge ztK-br0, veths ztK-hI, subnet 10.(77+K).0, so a benchmark on a shared
# machine neither tears down nor counts the traffic of another user's nodes.
id="${ZT_NETNS_ID:-0}"
[[ "$id" =~ ^[0-9]$ ]] || { echo "ZT_NETNS_ID must be 0-9, got '$id'" >&2; exit 2; }
if ((id)); then P="zt$id-"; else P="zt-"; fi
SUBNET="10.$((77 + id)).0"
while [[ "${1:-}" == -* ]]; do shift; done   # ssh-style options, if any
host="$1"; shift
case "$host" in
  "$SUBNET".*) i=$(( ${host##*.} - 1 )) ;;
  ztnode*) i="${host#ztnode}" ;;
  *) echo "rsh-agent.sh: '$host' is not a simulated node ($SUBNET.N or ztnodeI)" >&2; exit 2 ;;
esac
exec ip netns exec "${P}n$i" unshare --uts sh -c "hostname ztnode$i && $*"
