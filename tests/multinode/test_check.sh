#!/usr/bin/env bash
# tests/multinode/test_check.sh ZT: `zt check` over 3 simulated nodes (network namespaces,
# 2 ranks each: shared memory inside a node, TCP between nodes). First with every link
# alike: no node's pairs are far slower than the others'. Then with node 1's link
# throttled to 200 Mbit/s (tc tbf):
# the report names node 1 (host ztnode1) as the slow node and a pair with node 1 as the
# slowest pair, and node 1's verdict line gives the reason.
set -euo pipefail
zt=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
require_netns 3
work=$(mktemp -d /tmp/zt-netns-check.XXXXXX)
args=(check --ops all_reduce --min-bytes 64K --max-bytes 1M --iters 3 --warmup 1
      --pair-bytes 8M --pair-iters 3)

run_check() {  # run_check NAME: zt check over 3 nodes x 2 ranks; report in $work/NAME
  local rc=0
  (cd "$work" && mn_mpirun 3 2 "$zt" "${args[@]}" --report "$work/$1") > "$work/$1.out" 2>&1 || rc=$?
  ((rc == 0 || rc == 1)) || { cat "$work/$1.out" >&2; fail "zt check ($1) exited $rc"; }
  [[ -s "$work/$1/report.json" ]] || { cat "$work/$1.out" >&2; fail "no report.json ($1)"; }
  grep -E '^#   (slowest pair|slow node)|^# zt check' "$work/$1.out" || true
}

# report_field NAME PYTHON-EXPRESSION-ON-r: evaluate on the parsed report.json
report_field() {
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$work/$1/report.json"
}

log "3 nodes, no throttle"
run_check even
hosts=$(report_field even "','.join(sorted({x['hostname'] for x in r['nodes']}))")
[[ "$hosts" == "ztnode0,ztnode1,ztnode2" ]] || fail "nodes seen: '$hosts', expected ztnode0,ztnode1,ztnode2"
[[ $(report_field even "r['pairs']['ran']") == True ]] || fail "the pair test did not run"
# With every link alike no node may look like the throttled one will: each node's best
# pair within 5x of the median node's (the throttle makes it 10x or more). The checklist's
# own rule (half the median) can fire on a loaded 2-core machine, where TCP through the
# bridge competes with 5 other ranks for the CPU: that is a warning there, not tested here.
ratio=$(report_field even "round((lambda g: (lambda b: min(b) / sorted(b)[len(b)//2])([max(row) for row in g]))(r['pairs']['gbs']), 3)")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.2 else 1)" "$ratio" ||
  fail "with every link alike a node's best pair is $ratio of the median node's (expected > 0.2)"
log "even links: slowest node's best pair = $ratio x the median; checklist's slow nodes: $(report_field even "r['pairs']['slow_nodes']")"

log "node 1 throttled to 200mbit"
bash "$here_mn/netns.sh" throttle 1 200mbit
run_check throttled
slow=$(report_field throttled "r['pairs']['slow_nodes']")
[[ "$slow" == "[1]" ]] || fail "slow nodes $slow, expected [1] (the throttled node)"
pair=$(report_field throttled "sorted(r['pairs']['slowest'])")
[[ "$pair" == "[0, 1]" || "$pair" == "[1, 2]" ]] || fail "slowest pair $pair does not include node 1"
grep -Eq '^#   slow node: node 1 \(ztnode1' "$work/throttled.out" || fail "the table does not name node 1 (ztnode1) as slow"
ratio=$(report_field throttled "round((lambda g: (lambda b: b[1] / sorted(b)[len(b)//2])([max(row) for row in g]))(r['pairs']['gbs']), 3)")
log "throttled: node 1's best pair = $ratio x the median"
reason=$(report_field throttled "[n for n in r['nodes'] if n['node'] == 1][0]['line']")
[[ "$reason" == *"slow network"* ]] || fail "node 1's verdict line gives no slow-network reason: $reason"
log "named: slow node 1 (ztnode1), slowest pair $pair"
rm -rf "$work"
echo PASS
