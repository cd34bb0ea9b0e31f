#!/usr/bin/env bash
# bench/multinode/hpz_vs_zero3.sh: hpZ against plain ZeRO-3 across 2 simulated nodes
# (tests/multinode/netns.sh: network namespaces on a bridge, 2 ranks per node, shared
# memory inside a node, TCP between nodes), with node 1's link throttled by tc, so the
# cross-node link is the bottleneck, and with every link at full speed for comparison.
# Runs are interleaved (hpZ, ZeRO-3, hpZ, ...) so load on the machine hits both alike.
#
#   bench/multinode/hpz_vs_zero3.sh [--zt PATH] [--rate 100mbit] [--rounds 3] [--steps 6]
#                                   [--out bench/results/hpz-vs-zero3-netns.md]
# Needs root (namespaces, tc). Step times: median of every step but the first of every
# round (measured); bytes: zt's per-step counters (bytes this rank sent, per communicator),
# modelled from the calls (the ring formula on each call's arguments), not measured on the link.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
zt="$root/build/src/apps/zt" rate=100mbit rounds=3 steps=6 out="$root/bench/results/hpz-vs-zero3-netns.md"
source "$root/bench/flags.sh"
bench_flags 2,13p "$@"
zt="$(realpath "$zt")"
mn="$root/tests/multinode"
why=$(bash "$mn/netns.sh" can) || { echo "hpz_vs_zero3: needs network namespaces: $why" >&2; exit 2; }
work=$(mktemp -d /tmp/zt-hpz-bench.XXXXXX)
trap 'bash "$mn/netns.sh" down >/dev/null 2>&1 || true' EXIT

# tiny model, ZeRO-3, micro 2 x 4 ranks x accumulation 4 = global 32 sequences of 128 tokens
args=(train --set train.steps="$steps" --set train.micro_batch=2 --set train.global_batch=32
      --set eval.every=0 --set sample.tokens=0 --set train.threads=1 --set zero.stage=3
      --set ckpt.save_final=false)
run() {  # run LINK CONFIG ROUND
  local hpz=0; [[ "$2" == zero3 ]] && hpz=1
  local name="$1-$2-$3"
  echo "[$(date +%T)] $name"
  (cd "$work" && timeout 900 bash "$mn/mpirun.sh" 2 2 "$zt" "${args[@]}" \
     --set zero.hpz_partition_size=$hpz --set log.metrics="$work/$name.jsonl") > "$work/$name.out" 2>&1 ||
    { tail -n 20 "$work/$name.out" >&2; echo "hpz_vs_zero3: run $name failed" >&2; exit 1; }
}

bash "$mn/netns.sh" up 2
for link in full throttled; do
  if [[ $link == throttled ]]; then bash "$mn/netns.sh" throttle 1 "$rate"; fi
  for ((r = 1; r <= rounds; r++)); do
    run "$link" hpz "$r"
    run "$link" zero3 "$r"
  done
done

commit=$(git -C "$root" rev-parse --short HEAD)
dirty=$(git -C "$root" status --porcelain -- src include checklist | head -1)
version="$("$zt" --version) at HEAD $commit${dirty:+ (the working tree had uncommitted changes in src/include/checklist)}"
cmd="bench/multinode/hpz_vs_zero3.sh --rate $rate --rounds $rounds --steps $steps"
python3 - "$work" "$rounds" "$rate" "$version" "$cmd" "$(nproc)" > "$out" <<'PY'
import json, re, statistics, sys
work, rounds, rate, commit, cmd, cores = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
def load(name):
    return [r for r in map(json.loads, open(f"{work}/{name}.jsonl")) if "loss" in r]
rows, med = [], {}
for link in ("full", "throttled"):
    for cfg in ("hpz", "zero3"):
        times, per_round = [], []
        for r in range(1, rounds + 1):
            m = load(f"{link}-{cfg}-{r}")
            t = [s["step_time_s"] for s in m[1:]]
            times += t
            per_round.append(statistics.median(t))
        last = m[-1]
        med[link, cfg] = statistics.median(times)
        rows.append((link, cfg, med[link, cfg], per_round, last["comm_inter_node_bytes"],
                     last["comm_intra_node_bytes"], last["comm_bytes"], last["loss"]))
print("# hpZ vs plain ZeRO-3 across 2 simulated nodes, cross-node link throttled\n")
print(f"Machine: this project's dev VM, {cores} cores, no GPU; nodes are network namespaces "
      "(tests/multinode/netns.sh): 2 nodes x 2 ranks, shared memory (vader) inside a node, "
      "TCP over veth + bridge between nodes.  ")
print(f"zt: {commit}  ")
print(f"Command: `{cmd}` (as root)  ")
print(f"Link: `full` = veth at full speed; `throttled` = node 1's veth limited to {rate} "
      "both ways (`tc qdisc ... tbf rate " + rate + " burst 32kbit latency 50ms`), so every "
      "cross-node byte crosses a link of that speed.  ")
print("Job: tiny preset (1.05M parameters, fp32 on CPU), zero.stage 3, micro batch 2 x 4 ranks x "
      "accumulation 4 = 32 sequences x 128 tokens per step; hpZ = `zero.hpz_partition_size=0` "
      "(secondary copy per node), ZeRO-3 = `zero.hpz_partition_size=1`. Runs interleaved "
      "hpZ, ZeRO-3, hpZ, ... on a shared 2-core machine; step time = median over every step "
      "but the first of each run. The MB columns are modelled from the calls (zt's comm "
      "counters: the ring formula applied to each call's arguments), not measured on the link.\n")
print("| link | config | median step (s) | per-run medians (s) | inter-node MB/step/rank | intra-node MB/step/rank | of which hpZ group | final loss |")
print("|---|---|---|---|---|---|---|---|")
for link, cfg, m, pr, inter, intra, cb, loss in rows:
    print(f"| {link} | {'hpZ' if cfg == 'hpz' else 'ZeRO-3'} | {m:.3f} | {', '.join(f'{x:.3f}' for x in pr)} | "
          f"{inter/1e6:.2f} | {intra/1e6:.2f} | {cb['hpz']/1e6:.2f} | {loss:.4f} |")
inter = {(l, c): i for l, c, _, _, i, _, _, _ in rows}
print()
for link in ("full", "throttled"):
    print(f"- {link} link: hpZ step time / ZeRO-3 = {med[link,'hpz']/med[link,'zero3']:.2f} "
          f"(ZeRO-3 / hpZ = {med[link,'zero3']/med[link,'hpz']:.2f}x); inter-node bytes hpZ / ZeRO-3 = "
          f"{inter[link,'hpz']/inter[link,'zero3']:.3f}")
print(f"- throttling the link costs ZeRO-3 {med['throttled','zero3']-med['full','zero3']:+.3f} s per step "
      f"and hpZ {med['throttled','hpz']-med['full','hpz']:+.3f} s.")
num, unit = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate.lower()).groups()
bytes_per_s = float(num) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[unit] / 8
print(f"- the link alone: node 1's 2 ranks send (and receive) 2 x the inter-node bytes per rank "
      f"each step; at {rate} that takes {2*inter['throttled','zero3']/bytes_per_s:.2f} s for ZeRO-3 and "
      f"{2*inter['throttled','hpz']/bytes_per_s:.2f} s for hpZ (a lower bound: bytes / rate, no TCP or tbf overhead).")
PY
echo "wrote $out (raw runs: $work)"
cat "$out"
