#!/bin/sh
# run_stages.sh [ZT] [OUT.md]
# Step time and bytes moved per optimizer step of `zt train` (model tiny) with the ZeRO
# engine at stages 0-3 and stage 3 + hpZ, at 2 ranks (one node) and 4 ranks (two
# simulated nodes of 2: --ranks-per-node 2), on CPU through MpiComm. Each run is STEPS
# optimizer steps with accumulation 1 (global batch = micro batch x ranks = 16 sequences
# of 128 tokens); the table gives medians over steps 2..STEPS of the metrics JSONL
# (step_time_s; bytes sent per rank per step, the maximum over ranks, split by the links
# they cross; the bytes are modelled from the calls: the comm counters apply the ring
# formula to each call's arguments, they are not measured on a wire) beside the theory of docs/zero.md. Stage 0 of the engine is plain DDP (one
# all-reduce of the gradients): it is the baseline the other stages are compared with.
#
# Environment: STEPS (default 20), MPIRUN (default mpirun), OMP_NUM_THREADS (default 1:
# ranks share the cores; spinning OpenMP threads make oversubscribed runs crawl).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
zt=${1:-$root/build-wire/src/apps/zt}
out=${2:-$root/bench/results/zero-stages-cpu.md}
steps=${STEPS:-20}
mpirun=${MPIRUN:-mpirun}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/zt-zero-stages.XXXXXX)
trap 'rm -rf "$work"' EXIT

common="--set train.steps=$steps --set train.seq_len=128 --set train.global_batch=16 \
--set train.warmup=5 --set eval.every=0 --set data.eval_fraction=0 --set sample.tokens=0 \
--set train.peak_tflops=1 --set log.every=1000"

# name np ranks_per_node extra-keys...
configs="s0-np2 2 0 --set zero.stage=0
s1-np2 2 0 --set zero.stage=1
s2-np2 2 0 --set zero.stage=2
s3-np2 2 0 --set zero.stage=3 --set zero.hpz_partition_size=1
s0-np4 4 2 --set zero.stage=0
s1-np4 4 2 --set zero.stage=1
s2-np4 4 2 --set zero.stage=2
s3-np4 4 2 --set zero.stage=3 --set zero.hpz_partition_size=1
s3hpz-np4 4 2 --set zero.stage=3 --set zero.hpz_partition_size=2"

: > "$work/commands"
printf '%s\n' "$configs" | while read -r name np rpn extra; do
  micro=$((16 / np))
  cmd="$mpirun --oversubscribe --bind-to none -np $np $zt train --ranks-per-node $rpn $common \
--set train.micro_batch=$micro $extra --set log.metrics=$work/$name.jsonl"
  printf '%s\n' "$name: $cmd" | sed "s|$work|\$W|g; s|$root/||g" >> "$work/commands"
  echo "== $name" >&2
  # shellcheck disable=SC2086
  $cmd < /dev/null > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
done || exit 1

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$root" status --porcelain --untracked-files=no -- src include CMakeLists.txt cmake 2>/dev/null | head -1)
[ -n "$dirty" ] && commit="$commit (with local changes)"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
cores=$(lscpu | sed -n 's/^CPU(s): *//p' | head -1)
load=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$work" "$out" "$steps" "$commit" "$cpu" "$cores" "$load" <<'PY'
import json, statistics, sys, datetime
work, out, steps, commit, cpu, cores, load = sys.argv[1:]
# tiny: vocab 256, hidden 128, untied; the head unit (final norm + lm_head) is
# 128 + 256*128 elements. Bytes in fp32.
P = 1049728 * 4
P_head = (128 + 256 * 128) * 4
def theory(name):
    stage = name.split("-")[0]
    n = 2 if name.endswith("np2") else 4
    N, K = (1, 2) if n == 2 else (2, 2)
    f = (n - 1) / n
    a = 1
    if stage in ("s0", "s1"): return 2 * P * f, 2 * P * f
    if stage == "s2": return (a + 1) * P * f, 2 * P * f
    if stage == "s3": return a * (3 * P - P_head) * f, 3 * P * f
    # stage 3 + hpZ (h = 2): inter (1+a) P (N-1)/n, intra (1+a) P (K-1)/K + (a(2P - P_head) - P)(h-1)/h
    h = 2
    return ((1 + a) * P * (N - 1) / n + (1 + a) * P * (K - 1) / K
            + (a * (2 * P - P_head) - P) * (h - 1) / h), None
def med(rows, key, sub=None):
    vals = [(r[key][sub] if sub else r[key]) for r in rows[1:]]
    return statistics.median(vals)
names = ["s0-np2", "s1-np2", "s2-np2", "s3-np2", "s0-np4", "s1-np4", "s2-np4", "s3-np4", "s3hpz-np4"]
label = {"s0": "0 (DDP baseline)", "s1": "1", "s2": "2", "s3": "3", "s3hpz": "3 + hpZ (h = 2)"}
rows = {}
for nm in names:
    rows[nm] = [r for r in map(json.loads, open(f"{work}/{nm}.jsonl")) if "loss" in r]
MB = 1e6
lines = []
lines.append("| ranks (nodes x ranks) | stage | step time median (s) | vs stage 0 | intra-node MB/step | inter-node MB/step | total MB/step | engine formula MB | textbook MB (2Ψ or 3Ψ)(n-1)/n | modelled / formula | model states MiB/rank | peak engine MiB/rank |")
lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
for nm in names:
    r = rows[nm]
    n = 2 if nm.endswith("np2") else 4
    base = "s0-np2" if n == 2 else "s0-np4"
    t = med(r, "step_time_s")
    tb = med(rows[base], "step_time_s")
    intra = med(r, "comm_intra_node_bytes")
    inter = med(r, "comm_inter_node_bytes")
    tot = intra + inter
    form, text = theory(nm)
    ms = statistics.median([x["memory"]["model_states"] for x in r]) / 2**20
    pk = r[-1]["memory"]["peak_total"] / 2**20
    topo = "2 (1 x 2)" if n == 2 else "4 (2 x 2)"
    lines.append(f"| {topo} | {label[nm.split('-')[0]]} | {t:.3f} | {t / tb:.2f} | {intra / MB:.3f} | "
                 f"{inter / MB:.3f} | {tot / MB:.3f} | {form / MB:.3f} | "
                 f"{'' if text is None else f'{text / MB:.3f}'} | {tot / form:.4f} | {ms:.2f} | {pk:.1f} |")
split = ["", "Per communicator (median bytes per step, MB; world/node/cross/hpz are the engine's",
         "private communicators):", "",
         "| run | world | node | cross | hpz |", "|---|---|---|---|---|"]
for nm in names:
    r = rows[nm]
    split.append(f"| {nm} | " + " | ".join(f"{med(r, 'comm_bytes', g) / MB:.3f}" for g in ("world", "node", "cross", "hpz")) + " |")
cmds = open(f"{work}/commands").read()
text = f"""# ZeRO stages on CPU: step time and bytes per step (`zt train`, model tiny)

Generated by `bench/zero/run_stages.sh` on {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC.

- machine: {cpu}, {cores} cores (shared with other jobs; load average at the end {load})
- commit: {commit}
- model tiny (Ψ = 1,049,728 parameters = {P / MB:.3f} MB in fp32; head unit Ψ_head = {P_head / MB:.4f} MB),
  {steps} steps, global batch 16 x 128 tokens, accumulation a = 1, one OpenMP thread per rank,
  MpiComm (Open MPI shared memory). 4 ranks run as 2 simulated nodes of 2 (`--ranks-per-node 2`),
  so node traffic is "intra" and cross traffic "inter"; 2 ranks are one node (all intra).
- figures: medians over steps 2..{steps} of the metrics JSONL; bytes are what each rank sends
  (the comm layer's ring-algorithm counters, maximum over ranks), per optimizer step,
  **modelled from the calls**: the counters apply the ring formula to each call's arguments,
  so "modelled / formula" compares the calls the engine made, counted by a formula, with
  the formula of the calls the theory expects (it checks the calls, not the wire).
- engine formula (docs/zero.md): stages 0-1 2Ψ(n-1)/n; stage 2 (a+1)Ψ(n-1)/n; stage 3
  a(3Ψ - Ψ_head)(n-1)/n (the head unit is gathered once per micro-batch); hpZ (h ranks)
  (1+a)Ψ(N-1)/n inter + (1+a)Ψ(K-1)/K + (a(2Ψ - Ψ_head) - Ψ)(h-1)/h intra. The textbook
  column is ZeRO's 2Ψ (stages 0-2) and 3Ψ (stage 3) times (n-1)/n. The small excess of the
  modelled bytes is the step's 16-byte norm/loss all-reduce and shard padding.
- peer: the engine's stage 0 is the DDP baseline (the step-time ratio column is against it).
  On a 2-core machine running 4 ranks, times measure host compute and MPI shared-memory
  copies under oversubscription, not network links: read them as relative costs only.

{chr(10).join(lines)}
{chr(10).join(split)}

Stage 3 + hpZ at 2 ranks: not run. With one node the hpZ group would be the whole world
(the primary partition again, a no-op); with 2 nodes of 1 rank the group size must divide
1. hpZ needs at least 2 nodes of at least 2 ranks.

## Commands

($W is a temporary folder; `zt` is `build-wire/src/apps/zt`, Release, `-DZT_CUDA=OFF`;
OMP_NUM_THREADS=1.)

```
{cmds}```
"""
open(out, "w").write(text)
print(text)
PY
