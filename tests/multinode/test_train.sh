#!/usr/bin/env bash
# tests/multinode/test_train.sh ZT: `zt train` at ZeRO stage 3 over 2 simulated nodes
# (network namespaces, 2 ranks each). zt finds the nodes itself (MPI_Comm_split_type
# SHARED follows Open MPI's hosts), so hpZ's groups are the real nodes. References:
#   - the same job on one host with --ranks-per-node 2 (nodes simulated inside zt): the
#     same losses and the same bytes on every communicator, step by step;
#   - plain ZeRO-3 (hpZ off) over the same 2 nodes: the same losses, no hpZ traffic, and
#     more inter-node bytes than with hpZ.
set -euo pipefail
zt=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
require_netns 2
work=$(mktemp -d /tmp/zt-netns-train.XXXXXX)
args=(train --set train.steps=3 --set train.micro_batch=2 --set train.global_batch=16
      --set train.seq_len=64 --set eval.every=0 --set sample.tokens=0 --set train.threads=1
      --set zero.stage=3 --set ckpt.save_final=false)

log "hpZ over 2 namespace nodes"
(cd "$work" && mn_mpirun 2 2 "$zt" "${args[@]}" --set zero.hpz_partition_size=0 \
   --set log.metrics="$work/hpz-netns.jsonl") > "$work/hpz-netns.out" 2>&1 ||
  { cat "$work/hpz-netns.out" >&2; fail "zt train (hpZ, namespaces) failed"; }
grep -q "2 nodes x 2 ranks" "$work/hpz-netns.out" ||
  { grep zero: "$work/hpz-netns.out" >&2; fail "zt did not see 2 nodes of 2 ranks"; }
log "plain ZeRO-3 over 2 namespace nodes"
(cd "$work" && mn_mpirun 2 2 "$zt" "${args[@]}" --set zero.hpz_partition_size=1 \
   --set log.metrics="$work/zero3-netns.jsonl") > "$work/zero3-netns.out" 2>&1 ||
  { cat "$work/zero3-netns.out" >&2; fail "zt train (ZeRO-3, namespaces) failed"; }
log "hpZ on one host, --ranks-per-node 2"
root=(); [[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
(cd "$work" && timeout 300 mpirun "${root[@]}" --oversubscribe --bind-to none -np 4 -x OMP_NUM_THREADS=1 \
   "$zt" "${args[@]}" --ranks-per-node 2 --set zero.hpz_partition_size=0 \
   --set log.metrics="$work/hpz-host.jsonl") > "$work/hpz-host.out" 2>&1 ||
  { cat "$work/hpz-host.out" >&2; fail "zt train (hpZ, one host) failed"; }

python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
def load(name):
    return [r for r in map(json.loads, open(f"{w}/{name}.jsonl")) if "loss" in r]
netns, host, zero3 = load("hpz-netns"), load("hpz-host"), load("zero3-netns")
assert len(netns) == len(host) == len(zero3) == 3, "3 steps each"
def close(a, b):  # fp32 sums: the same algorithms and order, so near-equal
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))
for s, (a, b, c) in enumerate(zip(netns, host, zero3), 1):
    assert close(a["loss"], b["loss"]), f"step {s}: loss {a['loss']} (namespaces) != {b['loss']} (one host)"
    assert close(a["loss"], c["loss"]), f"step {s}: loss {a['loss']} (hpZ) != {c['loss']} (ZeRO-3)"
    assert a["comm_bytes"] == b["comm_bytes"], f"step {s}: bytes {a['comm_bytes']} != {b['comm_bytes']}"
    assert a["comm_bytes"]["hpz"] > 0 and c["comm_bytes"]["hpz"] == 0, f"step {s}: hpz bytes"
    assert a["comm_inter_node_bytes"] < c["comm_inter_node_bytes"], f"step {s}: inter-node bytes"
a, c = netns[-1], zero3[-1]
print(f"losses equal over 3 steps; bytes per rank per step: hpZ inter {a['comm_inter_node_bytes']} "
      f"intra {a['comm_intra_node_bytes']}, ZeRO-3 inter {c['comm_inter_node_bytes']} "
      f"intra {c['comm_intra_node_bytes']} (inter ratio {a['comm_inter_node_bytes']/c['comm_inter_node_bytes']:.3f})")
PY
rm -rf "$work"
echo PASS
