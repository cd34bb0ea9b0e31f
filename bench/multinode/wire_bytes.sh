#!/usr/bin/env bash
# bench/multinode/wire_bytes.sh: the cross-node bytes of hpZ and plain ZeRO-3 as the wire
# counts them, beside zt's modelled counters (ring formula on each call's arguments).
# 2 network-namespace nodes x 2 ranks (tests/multinode/netns.sh, nodes of our own:
# ZT_NETNS_ID, default 6), the job of bench/multinode/hpz_vs_zero3.sh at full link speed.
# Wire bytes: what the nodes sent (host-side veth rx_bytes of both nodes, before and
# after each run); per step = (LONG-step run - SHORT-step run) / (LONG - SHORT), so
# start-up traffic (mpirun's daemons, wire-up, the initial broadcast) cancels out.
# Modelled: rank 0's comm_inter_node_bytes per step x 4 ranks (every rank has the same
# cross-node calls). Interleaved hpZ, ZeRO-3, hpZ, ...
#
#   bench/multinode/wire_bytes.sh [--zt PATH] [--rounds 3] [--steps 6] [--short 2]
#                                 [--out bench/results/hpz-vs-zero3-wire-bytes.md]
# Needs root (namespaces).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
zt="$root/build/src/apps/zt" rounds=3 steps=6 short=2 out="$root/bench/results/hpz-vs-zero3-wire-bytes.md"
source "$root/bench/flags.sh"
bench_flags 2,14p "$@"
zt="$(realpath "$zt")"
mn="$root/tests/multinode"
export ZT_NETNS_ID="${ZT_NETNS_ID:-6}"
why=$(bash "$mn/netns.sh" can) || { echo "wire_bytes: needs network namespaces: $why" >&2; exit 2; }
work=$(mktemp -d /tmp/zt-wire-bench.XXXXXX)
trap 'bash "$mn/netns.sh" down >/dev/null 2>&1 || true' EXIT
wire() { bash "$mn/netns.sh" wire; }  # "BYTES FRAMES" the nodes have sent (host-side veth rx)
args=(train --set train.micro_batch=2 --set train.global_batch=32 --set eval.every=0
      --set sample.tokens=0 --set train.threads=1 --set zero.stage=3 --set ckpt.save_final=false
      --set train.peak_tflops=1)
run() {  # run CONFIG NAME STEPS
  local hpz=0 b0 w0 b1 w1; [[ "$1" == zero3 ]] && hpz=1
  echo "[$(date +%T)] $2"
  read -r b0 w0 < <(wire)
  (cd "$work" && XDG_CACHE_HOME="$work/cache" timeout 900 bash "$mn/mpirun.sh" 2 2 "$zt" "${args[@]}" \
     --set train.steps="$3" --set zero.hpz_partition_size=$hpz --set log.metrics="$work/$2.jsonl") \
     > "$work/$2.out" 2>&1 || { tail -n 20 "$work/$2.out" >&2; echo "wire_bytes: run $2 failed" >&2; exit 1; }
  read -r b1 w1 < <(wire)
  echo "$((b1 - b0)) $((w1 - w0))" > "$work/$2.wire"
}

bash "$mn/netns.sh" up 2
run hpz warmup 1  # converts the corpus into $work/cache once
for ((r = 1; r <= rounds; r++)); do
  for cfg in hpz zero3; do
    run $cfg "$cfg-$r" "$steps"
    run $cfg "$cfg-short-$r" "$short"
  done
done

commit=$(git -C "$root" rev-parse --short HEAD)
dirty=$(git -C "$root" status --porcelain -- src include checklist | head -1)
version="$("$zt" --version) at HEAD $commit${dirty:+ (the working tree had uncommitted changes in src/include/checklist)}"
cmd="bench/multinode/wire_bytes.sh --rounds $rounds --steps $steps --short $short"
python3 - "$work" "$rounds" "$steps" "$short" "$version" "$cmd" "$(nproc)" > "$out" <<'PY'
import json, statistics as st, sys
work, rounds, steps, short = sys.argv[1], *map(int, sys.argv[2:5])
version, cmd, cores = sys.argv[5:]
def wire(n): return int(open(f"{work}/{n}.wire").read().split()[0])
def pkts(n): return int(open(f"{work}/{n}.wire").read().split()[1])
HDR = 66  # bytes of Ethernet (14) + IPv4 (20) + TCP with timestamps (32) per frame
print("# hpZ vs plain ZeRO-3: cross-node bytes on the wire beside zt's modelled counters\n")
print(f"Machine: this project's dev VM, {cores} cores, no GPU; 2 network-namespace nodes x 2 ranks "
      "(tests/multinode/netns.sh with ZT_NETNS_ID), shared memory (vader) inside a node, TCP over "
      "veth + bridge between nodes, link at full speed.  ")
print(f"zt: {version}  ")
print(f"Command: `{cmd}` (as root)  ")
print("Job: the one of hpz-vs-zero3-netns.md: tiny preset, zero.stage 3, micro batch 2 x 4 ranks x "
      "accumulation 4 = 32 x 128 tokens per step; hpZ = `zero.hpz_partition_size=0`, ZeRO-3 = `=1`.  ")
print(f"Wire: bytes both nodes sent (host-side veth `rx_bytes`, read before and after each run; "
      f"Ethernet frames: payload + TCP/IP/Ethernet headers, ACKs, Open MPI's TCP BTL headers), per step = "
      f"({steps}-step run - {short}-step run) / {steps - short}. Modelled: zt's `comm_inter_node_bytes` "
      "(bytes one rank sends across nodes per step, the ring formula on each call's arguments; "
      "docs/zero.md) x 4 ranks. The peer here is the wire itself: the kernel's interface counters.\n")
print("| config | wire MB/step (both nodes) | per round | frames/step | wire less 66 B/frame (MB) | modelled MB/step (4 ranks) | wire / modelled | less headers / modelled |")
print("|---|---|---|---|---|---|---|---|")
res = {}
for cfg in ("hpz", "zero3"):
    w = [(wire(f"{cfg}-{r}") - wire(f"{cfg}-short-{r}")) / (steps - short) for r in range(1, rounds + 1)]
    pk = st.median((pkts(f"{cfg}-{r}") - pkts(f"{cfg}-short-{r}")) / (steps - short) for r in range(1, rounds + 1))
    pay = st.median(w) - HDR * pk
    m = [r for r in map(json.loads, open(f"{work}/{cfg}-1.jsonl")) if "loss" in r]
    mod = 4 * st.median(s["comm_inter_node_bytes"] for s in m)
    res[cfg] = (st.median(w), mod)
    print(f"| {'hpZ' if cfg == 'hpz' else 'ZeRO-3'} | {st.median(w)/1e6:.3f} | {', '.join(f'{x/1e6:.3f}' for x in w)} | "
          f"{pk:.0f} | {pay/1e6:.3f} | {mod/1e6:.3f} | {st.median(w)/mod:.3f} | {pay/mod:.3f} |")
print()
print(f"- hpZ / ZeRO-3 cross-node bytes: wire {res['hpz'][0]/res['zero3'][0]:.3f}, "
      f"modelled {res['hpz'][1]/res['zero3'][1]:.3f}")
PY
echo "wrote $out (raw runs: $work)"
cat "$out"
