#!/usr/bin/env bash
# bench/peers/fsdp2_vs_zt.sh: zt's ZeRO-3 beside PyTorch FSDP2 (fully_shard, gloo, CPU) on
# the same model (zt's tiny shapes; FSDP2 trains transformers' LlamaForCausalLM built from
# them: bench/peers/fsdp2_llama.py), same batch, sequence length and ranks: 2 ranks, one per
# network-namespace node (tests/multinode/netns.sh), so every byte between ranks crosses
# the nodes' veth links. Per run: step time, peak RSS per rank (/usr/bin/time %M) and the
# bytes the nodes sent on the wire (host-side veth rx_bytes of both nodes, read before and
# after the run). Wire bytes per step = (bytes of a LONG-step run - bytes of a SHORT-step
# run) / (LONG - SHORT): start-up (mpirun's daemons, rendezvous, the initial broadcast)
# cancels out. Runs are interleaved zt, FSDP2, zt, ... so load hits both alike.
#
#   bench/peers/fsdp2_vs_zt.sh [--zt PATH] [--rounds 3] [--steps 8] [--short 3]
#                              [--out bench/results/fsdp2-vs-zt-zero3-netns.md]
# Needs root (namespaces), python3 with torch + transformers (scripts/install-deps.sh --hf-peers).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
zt="$root/build/src/apps/zt" rounds=3 steps=8 short=3 out="$root/bench/results/fsdp2-vs-zt-zero3-netns.md"
source "$root/bench/flags.sh"
bench_flags 2,15p "$@"
zt="$(realpath "$zt")"
mn="$root/tests/multinode"
# Nodes of our own (tests/multinode/netns.sh's ZT_NETNS_ID): the tests' nodes zt-n* may be
# torn down by a test run beside us, and their traffic must not reach our counters.
export ZT_NETNS_ID="${ZT_NETNS_ID:-5}"
P="zt$ZT_NETNS_ID-" SUBNET="10.$((77 + ZT_NETNS_ID)).0"
why=$(bash "$mn/netns.sh" can) || { echo "fsdp2_vs_zt: needs network namespaces: $why" >&2; exit 2; }
python3 -c "import torch, transformers" || { echo "fsdp2_vs_zt: needs torch + transformers" >&2; exit 2; }
work=$(mktemp -d /tmp/zt-fsdp2-bench.XXXXXX)
trap 'bash "$mn/netns.sh" down >/dev/null 2>&1 || true' EXIT

wire() { bash "$mn/netns.sh" wire; }  # "BYTES FRAMES" the nodes have sent (host-side veth rx)
# the default job's batch: micro 16 x 2 ranks = global 32 sequences of 128 tokens, 1 thread per rank
zt_args=(train --set train.micro_batch=16 --set train.global_batch=32 --set train.seq_len=128
         --set eval.every=0 --set sample.tokens=0 --set train.threads=1 --set zero.stage=3
         --set ckpt.save_final=false --set train.peak_tflops=1
         --set train.lr=3e-3 --set train.min_lr=3e-3 --set train.warmup=0)  # FSDP2's constant lr
port=29600
run() {  # run IMPL NAME STEPS
  local impl="$1" name="$2" n="$3" b0 b1
  echo "[$(date +%T)] $name"
  local w0; read -r b0 w0 < <(wire)
  if [[ $impl == zt ]]; then
    (cd "$work" && XDG_CACHE_HOME="$work/cache" timeout 900 bash "$mn/mpirun.sh" 2 1 \
       bash -c '/usr/bin/time -f %M -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$@"' "$work/$name" \
       "$zt" "${zt_args[@]}" --set train.steps="$n" --set log.metrics="$work/$name.jsonl") \
       > "$work/$name.out" 2>&1 || { tail -n 20 "$work/$name.out" >&2; exit 1; }
  else
    port=$((port + 1))
    local pids=() rk
    for rk in 0 1; do
      ip netns exec "${P}n$rk" env GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
        timeout 900 /usr/bin/time -f %M -o "$work/$name.rss.$rk" \
        python3 "$root/bench/peers/fsdp2_llama.py" --rank $rk --world 2 --master "$SUBNET.1" --port $port \
        --steps "$n" --micro-batch 16 --seq 128 --out "$work/$name.json" > "$work/$name.out.$rk" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { tail -n 20 "$work/$name".out.* >&2; exit 1; }; done
  fi
  local w1; read -r b1 w1 < <(wire)
  echo "$((b1 - b0)) $((w1 - w0))" > "$work/$name.wire"
}

bash "$mn/netns.sh" up 2
run zt warmup-zt 2   # converts the corpus into $work/cache once, outside the timed runs
for ((r = 1; r <= rounds; r++)); do
  run zt "zt-$r" "$steps"
  run fsdp2 "fsdp2-$r" "$steps"
  run zt "zt-short-$r" "$short"
  run fsdp2 "fsdp2-short-$r" "$short"
done

commit=$(git -C "$root" rev-parse --short HEAD)
dirty=$(git -C "$root" status --porcelain -- src include checklist | head -1)
version="$("$zt" --version) at HEAD $commit${dirty:+ (the working tree had uncommitted changes in src/include/checklist)}"
torchv=$(python3 -c "import torch, transformers; print(f'torch {torch.__version__}, transformers {transformers.__version__}')")
cmd="bench/peers/fsdp2_vs_zt.sh --rounds $rounds --steps $steps --short $short"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
python3 - "$work" "$rounds" "$steps" "$short" "$version" "$torchv" "$cmd" "$(nproc)" "$cpu" > "$out" <<'PY'
import json, statistics as st, sys
work, rounds, steps, short = sys.argv[1], *map(int, sys.argv[2:5])
version, torchv, cmd, cores, cpu = sys.argv[5:]
def wire(n): return int(open(f"{work}/{n}.wire").read().split()[0])
def pkts(n): return int(open(f"{work}/{n}.wire").read().split()[1])
HDR = 66  # bytes of Ethernet (14) + IPv4 (20) + TCP with timestamps (32) per frame
def rss(n): return [int(open(f"{work}/{n}.rss.{r}").read().split()[-1]) * 1024 for r in (0, 1)]
R = {}
for impl in ("zt", "fsdp2"):
    times, per_round, peak, wb, pk, loss = [], [], [], [], [], []
    for r in range(1, rounds + 1):
        n = f"{impl}-{r}"
        if impl == "zt":
            m = [r for r in map(json.loads, open(f"{work}/{n}.jsonl")) if "loss" in r]
            t = [s["step_time_s"] for s in m[1:]]
            loss.append(m[-1]["loss"])
            modelled = st.median(s["comm_inter_node_bytes"] for s in m)
        else:
            j = json.load(open(f"{work}/{n}.json"))
            t = j["step_time_s"][1:]
            loss.append(j["loss"][-1])
        times += t
        per_round.append(st.median(t))
        peak.append(max(rss(n)))
        wb.append((wire(n) - wire(f"{impl}-short-{r}")) / (steps - short))
        pk.append((pkts(n) - pkts(f"{impl}-short-{r}")) / (steps - short))
    R[impl] = dict(med=st.median(times), lo=min(per_round), hi=max(per_round), per_round=per_round,
                   rss=st.median(peak), rss_all=peak, wire=st.median(wb), wire_all=wb, loss=loss,
                   payload=st.median(b - HDR * p for b, p in zip(wb, pk)), pkts=st.median(pk))
    if impl == "zt":
        R[impl]["modelled"] = modelled
z, f = R["zt"], R["fsdp2"]
print("# zt ZeRO-3 vs PyTorch FSDP2, 2 ranks on 2 network-namespace nodes (CPU)\n")
print(f"Machine: this project's dev VM, {cores} cores ({cpu}), no GPU; nodes are network namespaces "
      "(tests/multinode/netns.sh), one rank per node, TCP over veth + bridge between them.  ")
print(f"zt: {version}  ")
print(f"Peer: PyTorch FSDP2 (`torch.distributed.fsdp.fully_shard`, gloo), {torchv}, "
      "bench/peers/fsdp2_llama.py, run in the same session, interleaved with zt.  ")
print(f"Command: `{cmd}` (as root)  ")
print("Job (both): zt's tiny shapes (vocab 256, hidden 128, 4 layers, 4 heads, 2 KV heads, SwiGLU 512; "
      "1.05M parameters), fp32, micro batch 16 x 128 tokens per rank, 2 ranks (global 32), "
      "1 thread per rank, AdamW + clipping at 1.0. zt: `zero.stage=3` (units gathered before use, "
      "released after; reduce-scatter of gradients); FSDP2: `fully_shard` per decoder layer + root, "
      "`reshard_after_forward=True`.  ")
print(f"Step time: median over every step but the first of {rounds} runs of {steps} steps each "
      "(zt: its metrics' `step_time_s`; FSDP2: wall time of each step on rank 0). Peak RSS: "
      "`/usr/bin/time %M` of each rank, the larger rank per run, median of the runs. Wire bytes "
      "per step: bytes both nodes sent (host-side veth `rx_bytes` of both nodes, read before "
      f"and after each run), ({steps}-step run - {short}-step run) / {steps - short}, median of the rounds.\n")
print("| | median step (s) | per-run medians (s) | peak RSS per rank (MB) | wire bytes per step (MB, both nodes) | frames per step | wire less frame headers (MB) | final loss per run |")
print("|---|---|---|---|---|---|---|---|")
for name, x in (("zt ZeRO-3", z), ("FSDP2", f)):
    print(f"| {name} | {x['med']:.3f} | {', '.join(f'{v:.3f}' for v in x['per_round'])} | "
          f"{x['rss']/1e6:.0f} ({', '.join(f'{v/1e6:.0f}' for v in x['rss_all'])}) | "
          f"{x['wire']/1e6:.2f} ({', '.join(f'{v/1e6:.2f}' for v in x['wire_all'])}) | "
          f"{x['pkts']:.0f} | {x['payload']/1e6:.2f} | "
          f"{', '.join(f'{v:.3f}' for v in x['loss'])} |")
print()
print(f"- step time zt / FSDP2 = {z['med']/f['med']:.2f} (per-run medians: zt {z['lo']:.3f}-{z['hi']:.3f} s, "
      f"FSDP2 {f['lo']:.3f}-{f['hi']:.3f} s)")
print(f"- peak RSS zt / FSDP2 = {z['rss']/f['rss']:.2f}")
print(f"- wire bytes per step zt / FSDP2 = {z['wire']/f['wire']:.2f}")
mod = z["modelled"]
print(f"- zt's modelled inter-node bytes (its counters: ring formula on each call's arguments; bytes "
      f"one rank sends across nodes per step): {mod/1e6:.3f} MB; x 2 ranks = {2*mod/1e6:.3f} MB per step; "
      f"measured on the wire / modelled = {z['wire']/(2*mod):.3f}; less {HDR} bytes of Ethernet/IPv4/TCP "
      f"header per frame (ACK frames included) / modelled = {z['payload']/(2*mod):.3f}")
PY
echo "wrote $out (raw runs: $work)"
cat "$out"
