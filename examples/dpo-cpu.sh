#!/usr/bin/env bash
# DPO (or ORPO) on the CPU: the shipped preference set data/preferences-small.jsonl (240
# original pairs, examples/make_preferences.py) tokenized with the byte tokenizer of
# examples/, then `zt train` with finetune.objective = dpo on the tiny preset. The held-out
# pairs' eval_rewards/accuracies (TRL's name) starts at 0 (policy = reference: no margin)
# and rises. docs/finetune.md "DPO and ORPO".
# Usage: examples/dpo-cpu.sh [WORKDIR]   (env: ZT=path/to/zt, OBJECTIVE=dpo|orpo,
#        FT_METHOD=full|lora|qlora, STEPS=40)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-dpo-cpu}
zt=${ZT:-zt}
mkdir -p "$work"
cd "$work"
"$zt" convert pairs-to-tokens --force --tokenizer "$here/tokenizer-bytes" --seq-len 63 \
  "$here/../data/preferences-small.jsonl" prefs.h5
adapters=""
if [ "${FT_METHOD:-full}" != full ]; then
  adapters="--set finetune.method=$FT_METHOD --set lora.rank=16 --set lora.alpha=32 --set lora.targets=q,k,v,o,gate,up,down"
fi
# shellcheck disable=SC2086
"$zt" train --set model.preset=tiny --set model.vocab=257 --set sample.tokens=0 $adapters \
  --set data.path=prefs.h5 --set data.eval_fraction=0.2 --set finetune.objective="${OBJECTIVE:-dpo}" \
  --set train.seq_len=63 --set train.micro_batch=16 --set train.global_batch=16 \
  --set train.steps="${STEPS:-40}" --set train.lr=3e-3 --set train.warmup=4 \
  --set eval.every=20 --set eval.batches=3 --set log.every=10 \
  --set log.metrics=metrics.jsonl --set ckpt.dir=ckpt --set ckpt.overwrite=true
