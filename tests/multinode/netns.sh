#!/usr/bin/env bash
# tests/multinode/netns.sh: simulated nodes on one machine. Each node is a network
# namespace zt-nI with its own address 10.77.0.(I+1)/24 on a bridge zt-br0 (the host side
# is 10.77.0.254, where mpirun runs); inside a node ranks talk over shared memory, between
# nodes over TCP through the bridge. Ranks get into a node through rsh-agent.sh, which
# also gives them the hostname ztnodeI (a UTS namespace), so Open MPI, zt's topology and
# zt check's reports see N distinct hosts.
#
#   netns.sh up N              create nodes 0..N-1 (2 to 4); idempotent (recreates them)
#   netns.sh throttle I RATE   limit node I's link to RATE (tc tbf, both directions), e.g. 200mbit
#   netns.sh down              remove every zt-n* namespace and the bridge
#   netns.sh can               exit 0 when namespaces can be created here (root, ip netns)
#   netns.sh wire              "BYTES FRAMES" nodes 0-3 have sent so far (host-side veth rx
#                              counters): read before and after a run for its wire bytes
# Needs root, iproute2 (ip, tc) and util-linux (unshare).
set -euo pipefail
# ZT_NETNS_ID=K (1-9; default 0 = the names above) selects a separate set of nodes: namespaces
# ztK-nI, bridge ztK-br0, veths ztK-hI, subnet 10.(77+K).0, so a benchmark on a shared
# machine neither tears down nor counts the traffic of another user's nodes.
id="${ZT_NETNS_ID:-0}"
[[ "$id" =~ ^[0-9]$ ]] || { echo "ZT_NETNS_ID must be 0-9, got '$id'" >&2; exit 2; }
if ((id)); then P="zt$id-"; else P="zt-"; fi
SUBNET="10.$((77 + id)).0"
BR="${P}br0"

down() {
  for ns in $(ip netns list 2>/dev/null | awk -v p="^${P}n[0-9]" '$1 ~ p {print $1}'); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  done
  for i in 0 1 2 3; do ip link del "${P}h$i" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
}

up() {
  local n="$1"
  [[ "$n" =~ ^[2-4]$ ]] || { echo "netns.sh: up takes 2 to 4 nodes, got '$n'" >&2; exit 2; }
  down
  ip link add "$BR" type bridge
  ip addr add "$SUBNET.254/24" dev "$BR"
  ip link set "$BR" up
  for ((i = 0; i < n; i++)); do
    local ns="${P}n$i"
    ip netns add "$ns"
    ip link add "${P}h$i" type veth peer name "${P}e$i"
    ip link set "${P}e$i" netns "$ns"
    ip link set "${P}h$i" master "$BR"
    ip link set "${P}h$i" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "${P}e$i" name eth0
    ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  # The bridge must forward between its ports even where br_netfilter sends bridged
  # traffic through iptables (Docker hosts set FORWARD to DROP).
  if [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] && command -v iptables >/dev/null; then
    iptables -C FORWARD -i "$BR" -o "$BR" -j ACCEPT 2>/dev/null ||
      iptables -I FORWARD -i "$BR" -o "$BR" -j ACCEPT 2>/dev/null || true
  fi
  if command -v ping >/dev/null; then
    for ((i = 0; i < n; i++)); do
      ip netns exec "${P}n$i" ping -c 1 -W 2 "$SUBNET.254" >/dev/null ||
        { echo "netns.sh: node $i cannot reach the bridge" >&2; exit 1; }
    done
  fi
}

throttle() {
  local i="$1" rate="$2"
  # Egress of the host side = traffic into node i; egress of eth0 in the node = traffic out of it.
  tc qdisc replace dev "${P}h$i" root tbf rate "$rate" burst 32kbit latency 50ms
  ip netns exec "${P}n$i" tc qdisc replace dev eth0 root tbf rate "$rate" burst 32kbit latency 50ms
}

can() {
  [[ $(id -u) -eq 0 ]] || { echo "not root"; return 1; }
  command -v ip >/dev/null && command -v tc >/dev/null && command -v unshare >/dev/null ||
    { echo "ip, tc or unshare missing (iproute2, util-linux)"; return 1; }
  ip netns add "${P}probe" 2>/dev/null || { echo "'ip netns add' is not permitted here"; return 1; }
  ip netns del "${P}probe"
  unshare --uts true 2>/dev/null || { echo "'unshare --uts' is not permitted here"; return 1; }
}

wire() {
  local bytes=0 frames=0 i
  for i in 0 1 2 3; do
    [[ -e /sys/class/net/${P}h$i ]] || continue
    bytes=$((bytes + $(cat "/sys/class/net/${P}h$i/statistics/rx_bytes")))
    frames=$((frames + $(cat "/sys/class/net/${P}h$i/statistics/rx_packets")))
  done
  echo "$bytes $frames"
}

case "${1:-}" in
  up) up "${2:?netns.sh up N}" ;;
  down) down ;;
  throttle) throttle "${2:?node}" "${3:?rate}" ;;
  can) can ;;
  wire) wire ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
