#!/usr/bin/env bash
# Runs zt's bench_model (llama-small: hidden 512, 4 layers, 8 heads, 4 KV heads,
# intermediate 1376, vocab 256, batch 4 x 256; forward + backward + AdamW) and the
# PyTorch peer (bench/peers/llama_torch.py, same model and step) side by side, with the
# same thread count, alternating the two RUNS times, and writes the medians, the ratio,
# the machine and the commit to bench/results/model-cpu-vs-torch.md.
# MODEL=gpt-oss-small: the gpt_oss-shaped MoE (BM_TrainStep_GptOssSmall) against
# transformers' own GptOssForCausalLM (eager attention and experts), written to
# bench/results/model-cpu-vs-torch-gptoss.md, with both sides' parameter counts.
#
#   bench/model/run_vs_torch.sh                 # THREAD_LIST="2 1", RUNS=5
#   THREAD_LIST=2 RUNS=7 bench/model/run_vs_torch.sh
#   MODEL=gpt-oss-small bench/model/run_vs_torch.sh
# Needs: a C++ toolchain + the project's deps, python3 with torch (pip install torch);
# MODEL=gpt-oss-small also transformers (pip install transformers).
set -euo pipefail

ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
BUILD=${BUILD:-$ROOT/build-model}
RUNS=${RUNS:-5}
THREAD_LIST=${THREAD_LIST:-"2 1"}
MODEL=${MODEL:-llama-small}
case "$MODEL" in
  llama-small) BM=LlamaSmall; RESULT=model-cpu-vs-torch.md; PY_NEEDS=torch ;;
  gpt-oss-small) BM=GptOssSmall; RESULT=model-cpu-vs-torch-gptoss.md; PY_NEEDS=transformers ;;
  *) echo "run_vs_torch.sh: MODEL=$MODEL is not known. HINT: MODEL=llama-small or MODEL=gpt-oss-small" >&2
     exit 2 ;;
esac
OUT=${OUT:-$ROOT/bench/results/$RESULT}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

python3 -c "import torch, $PY_NEEDS" 2>/dev/null || {
  echo "run_vs_torch.sh: python3 cannot import torch, $PY_NEEDS. HINT: pip install torch $PY_NEEDS" >&2
  exit 2
}

CONFIGURE="cmake -S $ROOT -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=OFF"
BUILDCMD="cmake --build $BUILD --target bench_model dump_model -j2"
$CONFIGURE > "$TMP/configure.log"
$BUILDCMD > "$TMP/build.log"

ZT_CMD_T="OMP_NUM_THREADS=%s $BUILD/bench/model/bench_model --benchmark_filter='BM_TrainStep_$BM/' --benchmark_format=json"
WARMUP=${WARMUP:-3}
STEPS=${STEPS:-10}
TORCH_CMD_T="python3 $ROOT/bench/peers/llama_torch.py --model $MODEL --threads %s --batch 4 --seq 256 --warmup $WARMUP --steps $STEPS --runs 1"

# Same weights, same batch: zt's loss, gradients and logits against PyTorch in float64.
CHECK_CMD="$BUILD/bench/model/dump_model $TMP/dump tiny 2 64 && python3 $ROOT/bench/peers/llama_torch.py --check $TMP/dump"
if [ "$MODEL" = llama-small ]; then
  eval "$CHECK_CMD" 2> /dev/null | tail -1 > "$TMP/check.json"
fi

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for threads in $THREAD_LIST; do
  for i in $(seq 1 "$RUNS"); do
    # shellcheck disable=SC2059
    eval "$(printf "$ZT_CMD_T" "$threads")" > "$TMP/zt-$threads-$i.json" 2> /dev/null
    # shellcheck disable=SC2059
    eval "$(printf "$TORCH_CMD_T" "$threads")" > "$TMP/torch-$threads-$i.json" 2> /dev/null
    echo "threads $threads run $i/$RUNS done" >&2
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

export BUILD TMP ROOT OUT RUNS THREAD_LIST LOAD_BEFORE LOAD_AFTER MODEL BM WARMUP STEPS
export ZT_CMD_T TORCH_CMD_T CONFIGURE BUILDCMD CHECK_CMD
python3 - <<'PY'
import glob, json, os, statistics, subprocess

tmp, root, out = os.environ["TMP"], os.environ["ROOT"], os.environ["OUT"]
runs = int(os.environ["RUNS"])
model, bm_name = os.environ["MODEL"], "BM_TrainStep_" + os.environ["BM"] + "/"
threads_list = os.environ["THREAD_LIST"].split()

def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()

march = sh(f"sed -n 's/^ZT_MARCH:STRING=//p' {os.environ['BUILD']}/CMakeCache.txt")
cpu = sh("lscpu | sed -n 's/^Model name: *//p'")
cores = sh("nproc")
commit = sh(f"git -C {root} rev-parse --short=12 HEAD")
dirty = sh(f"git -C {root} status --porcelain -- src/kernels src/model include/zt/kernels include/zt/model bench/model bench/peers")
torch_version = None
rows, counts, impls, phases = [], set(), set(), {}
for t in threads_list:
    zt, pt, ztc, ptc = [], [], [], []
    for i in range(1, runs + 1):
        with open(f"{tmp}/zt-{t}-{i}.json") as f:
            bm = [b for b in json.load(f)["benchmarks"] if b["name"].startswith(bm_name)]
        zt.append(bm[0]["steps/s"])
        ztc.append(1e3 / bm[0]["cpu_time"])  # cpu_time in ms per step (process CPU time)
        with open(f"{tmp}/torch-{t}-{i}.json") as f:
            p = json.loads(f.read().strip().splitlines()[-1])
        pt.append(p["steps_per_s_median"])
        ptc.append(p["steps_per_cpu_s_median"])
        torch_version = p["torch"]
        counts.add((int(bm[0]["params"]), p["params"]))
        for k in ("fwd_ms", "head_ms", "bwd_ms", "adamw_ms"):
            phases.setdefault((t, "zt", k), []).append(bm[0][k])
        for k, v in p["phases_ms_median"].items():
            phases.setdefault((t, "peer", k), []).append(v)
        impls.add(json.dumps(p.get("implementation", {}), sort_keys=True))
    rows.append((t, statistics.median(zt), statistics.median(pt), zt, pt,
                 statistics.median(ztc), statistics.median(ptc)))

fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)
llama_head = [
    "# CPU training step: zt vs PyTorch",
    "",
    "Model: Llama-style, hidden 512, 4 layers, 8 heads, 4 KV heads (GQA), intermediate 1376,",
    "vocab 256, context 256, untied head: 11,866,624 parameters (both sides).",
    "Step: forward + backward + AdamW over all parameters, fp32, batch 4 x 256 tokens, fixed",
    "random batch. zt: `bench_model` (Eigen GEMMs + OpenMP, `-O3 -march=" + march + "`);",
    f"PyTorch {torch_version}: `bench/peers/llama_torch.py` (torch.nn, F.scaled_dot_product_attention",
    "with is_causal and enable_gqa, torch.optim.AdamW), same threads via torch.set_num_threads.",
]
peer, peer_s = "PyTorch", "PyTorch's"
gptoss_head = []
if model == "gpt-oss-small":
    import transformers
    peer, peer_s = "transformers", "transformers'"
    gptoss_head = [
    "# CPU training step: zt vs transformers, gpt-oss-shaped MoE",
    "",
    "Model: gpt_oss family, hidden 512, 4 layers (sliding window 128 / full alternating), 8 heads,",
    "2 KV heads, head_dim 64, 8 experts of width 512 with biases, 2 per token (router with bias,",
    "softmax over the 2 chosen logits, clamped SwiGLU, limit 7), attention biases and sinks, yarn",
    "(factor 32 over 4096, theta 150000), vocab 256, untied head.",
    "Step: forward + backward + AdamW over all parameters, fp32, batch 4 x 256 tokens, fixed",
    "random batch, cross-entropy only (no router loss on either side). zt: `bench_model`",
    "`BM_TrainStep_GptOssSmall` (Eigen GEMMs + OpenMP, `-O3 -march=" + march + "`);",
    f"transformers {transformers.__version__} (PyTorch {torch_version}): its own `GptOssForCausalLM`",
    "built by `bench/peers/llama_torch.py --model gpt-oss-small`, torch.optim.AdamW, same threads",
    "via torch.set_num_threads. Its implementations: "
    + "; ".join(", ".join(f"{k} {v}" for k, v in json.loads(i).items()) for i in sorted(impls)) + ".",
    "",
    "Same model on both sides, parameters counted by each (zt: `Config::num_params`,",
    "transformers: the sum of `numel` over `model.parameters()`): "
    + "; ".join(f"zt {z:,}, transformers {p:,}" for z, p in sorted(counts))
    + (" (equal)." if all(z == p for z, p in counts) else " (NOT EQUAL: the two sides built different models)."),
    ]
lines = (gptoss_head if model == "gpt-oss-small" else llama_head) + [
    "",
    f"- Machine: {cpu}, {cores} cores (`nproc`)",
    f"- Commit: {commit}" + (" (with uncommitted changes in the model/kernel sources)" if dirty else ""),
    f"- Load average (1/5/15 min) before: {os.environ['LOAD_BEFORE']}, after: {os.environ['LOAD_AFTER']}",
    "  (the machine is shared; the two programs were run alternately so that both see the same load)",
    f"- Runs: {runs} per side and thread count, alternating zt / {peer}; figures are medians",
    "",
    f"| threads | zt steps/s | {peer} steps/s | zt / {peer} |",
    "|---:|---:|---:|---:|",
]
for t, z, p, _, _, _, _ in rows:
    lines.append(f"| {t} | {z:.3f} | {p:.3f} | {z / p:.2f} |")
lines += [
    "",
    "Best run of each (interference from other work only ever slows a run down, so the best",
    "run is the least disturbed one):",
    "",
    f"| threads | zt best steps/s | {peer} best steps/s | zt / {peer} |",
    "|---:|---:|---:|---:|",
]
for t, _, _, zs, ps, _, _ in rows:
    lines.append(f"| {t} | {max(zs):.3f} | {max(ps):.3f} | {max(zs) / max(ps):.2f} |")
med = lambda t, side, k: statistics.median(phases[(t, side, k)])
lines += [
    "",
    "Where the time goes: wall ms per step by phase, medians over the runs. zt's forward is the",
    "embedding and blocks, its head the lm_head forward, loss and lm_head backward, its",
    f"backward the blocks and embedding; {peer_s} forward includes the head and loss:",
    "",
    f"| threads | zt forward | zt head | zt backward | zt AdamW | {peer} forward | {peer} backward | {peer} AdamW |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for t in threads_list:
    z = [med(t, "zt", k) for k in ("fwd_ms", "head_ms", "bwd_ms", "adamw_ms")]
    q = [med(t, "peer", k) for k in ("fwd_ms", "bwd_ms", "adamw_ms")]
    lines.append(f"| {t} | " + " | ".join(f"{x:.0f}" for x in z + q) + " |")
lines += ["", "All runs (steps/s):", ""]
for t, _, _, zs, ps, _, _ in rows:
    lines.append(f"- {t} thread(s): zt [{fmt(zs)}]; {peer} [{fmt(ps)}]")
one = [r for r in rows if r[0] == "1"]
if one:
    _, _, _, _, _, zc, pc = one[0]
    lines += [
        "",
        "Single thread, per second of process CPU time (not wall time): a busy machine",
        "delays both programs but does not change how much CPU a step needs, so this is the",
        "steadier comparison when the load average is high:",
        "",
        f"| threads | zt steps per CPU-s | {peer} steps per CPU-s | zt / {peer} |",
        "|---:|---:|---:|---:|",
        f"| 1 | {zc:.3f} | {pc:.3f} | {zc / pc:.2f} |",
    ]
lines += [
    "",
    "Commands (run by `bench/model/run_vs_torch.sh`):",
    "",
    "```",
    os.environ["CONFIGURE"],
    os.environ["BUILDCMD"],
    os.environ["ZT_CMD_T"].replace("%s", "<threads>"),
    os.environ["TORCH_CMD_T"].replace("%s", "<threads>"),
    "```",
    "",
    "zt's timing is Google Benchmark's real time per iteration (min 2 s per run, after its",
    f"own warm-up iteration); {peer_s} is wall time over {os.environ['STEPS']} steps after {os.environ['WARMUP']} warm-up steps.",
]
if model == "gpt-oss-small":
    lines += [
        "",
        "zt's numbers on this family are checked against the same transformers class elsewhere:",
        "logits and loss in `tests/ckpt/hf/gptoss_peer_test.py`, a LoRA step's gradients in",
        "`tests/model/hf/family_lora_peer_test.py`.",
    ]
chk = None
if model == "llama-small":
    with open(f"{tmp}/check.json") as f:
        chk = json.loads(f.read().strip().splitlines()[-1])
lines += [] if chk is None else [
    "",
    "## Same numbers as PyTorch",
    "",
    "`tiny` preset, batch 2 x 64, zt fp32 against the PyTorch peer in float64 on the same",
    "weights (loaded by Hugging Face name) and batch:",
    "",
    f"- loss: zt {chk['loss_zt']:.9f}, PyTorch {chk['loss_torch']:.9f} (relative error {chk['loss_rel_err']:.1e})",
    f"- gradients: worst tensor `{chk['grad_worst_tensor']}`, max error / max |grad| = {chk['grad_worst_rel_err']:.1e}",
    f"- last-position logits: max error / max |logit| = {chk['logits_last_rel_err']:.1e}",
    f"- within the fp32 tolerances (loss 1e-5, grads 1e-4, logits 1e-5): {chk['ok']}",
    "",
    "```",
    os.environ["CHECK_CMD"].replace(tmp, "$TMP"),
    "```",
]
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
if any(z != p for z, p in counts):
    raise SystemExit(f"run_vs_torch.sh: zt and the peer count different parameters {sorted(counts)}: "
                     f"they did not build the same model. HINT: make the peer's shape equal bench_model's ({out} says so too)")
PY
