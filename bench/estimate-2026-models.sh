#!/usr/bin/env bash
# `zt estimate` for the Gemma 3 and gpt-oss presets: LoRA (bf16-true, rank 16 on every
# projection; gpt-oss: attention only, as the GPU model takes no adapters on the experts)
# and full fine-tuning (bf16-mixed), one node of 8 H100 80 GB, micro batch 1,
# recompute on, seq 4096 and 32768. Prints every table, then a summary: per case the first
# row that fits (fewest stages and offloads) and its GiB per GPU. PRESETS picks others
# (Qwen3.5: LoRA on the attention, the Gated DeltaNet projections and the dense MLP).
#   bench/estimate-2026-models.sh [ZT] > bench/results/estimate-2026-models.md
#   PRESETS="qwen3.5-0.8b ..." bench/estimate-2026-models.sh [ZT] > bench/results/estimate-qwen35.md
set -euo pipefail
zt=${1:-build-ci/src/apps/zt}
presets=${PRESETS:-"gemma-3-1b gemma-3-4b gemma-3-12b gemma-3-27b gpt-oss-20b gpt-oss-120b"}
args=(--gpu h100-sxm --gpus-per-node 8 --nodes 1 --set train.micro_batch=1 --set train.recompute=true)
case_args() {  # preset method seq
  local targets=q,k,v,o,gate,up,down
  [[ $1 == gpt-oss* ]] && targets=q,k,v,o
  [[ $1 == qwen3.[56]-* ]] && targets=q,k,v,o,in_proj_qkv,in_proj_z,out_proj,gate,up,down
  [[ $1 == qwen3.[56]-*-a3b ]] && targets=q,k,v,o,in_proj_qkv,in_proj_z,out_proj
  if [[ $2 == lora ]]; then
    echo "--set finetune.method=lora --set train.precision=bf16-true --set lora.targets=$targets --set train.seq_len=$3"
  else
    echo "--set train.precision=bf16-mixed --set train.seq_len=$3"
  fi
}
summary=""
for p in $presets; do
  for m in lora full; do
    for s in 4096 32768; do
      # shellcheck disable=SC2046
      a=("${args[@]}" --set model.preset="$p" $(case_args "$p" "$m" "$s"))
      echo "### $p $m seq $s"
      echo '```'
      echo "zt estimate ${a[*]}"
      "$zt" estimate "${a[@]}"
      echo '```'
      summary+="$("$zt" estimate "${a[@]}" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
fit = [r for r in d["rows"] if r["fits_recompute"]]
best = min(fit, key=lambda r: (r["offload_optimizer"] != "none") + (r["offload_params"] != "none")
           + 0.1 * r["stage"]) if fit else None
gib = 1024 ** 3
row = ("does not fit" if best is None else "stage %d%s, %.1f GiB" % (best["stage"],
       "" if best["offload_optimizer"] == "none" else ", optimizer offload " + best["offload_optimizer"]
       + ("" if best["offload_params"] == "none" else ", params " + best["offload_params"]),
       best["per_gpu"]["total_recompute"] / gib))
print("| %s | %s | %s | %s |" % (sys.argv[1], sys.argv[2], sys.argv[3], row))' "$p" "$m" "$s")"$'\n'
    done
  done
done
echo "## Summary (8 x H100 80 GB, micro batch 1, recompute)"
echo
echo "| preset | method | seq | first row that fits (GiB per GPU) |"
echo "|---|---|---|---|"
printf '%s' "$summary"
