#!/usr/bin/env bash
# tests/multinode/rsh-agent.sh: Open MPI's "ssh" into a simulated node (netns.sh).
# mpirun runs `rsh-agent.sh [options] HOST COMMAND...` to start its daemon on HOST, as it
# would run ssh. HOST is a node's address 10.77.0.(I+1) or its name ztnodeI; the command
# runs in namespace zt-nI under the hostname ztnodeI (its own UTS namespace), through a
# shell, as ssh would run it.
set -euo pipefail
while [[ "${1:-}" == -* ]]; do shift; done   # ssh-style options, if any
host="$1"; shift
case "$host" in
  10.77.0.*) i=$(( ${host##*.} - 1 )) ;;
  ztnode*) i="${host#ztnode}" ;;
  *) echo "rsh-agent.sh: '$host' is not a simulated node (10.77.0.N or ztnodeI)" >&2; exit 2 ;;
esac
exec ip netns exec "zt-n$i" unshare --uts sh -c "hostname ztnode$i && $*"
