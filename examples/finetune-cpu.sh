#!/bin/sh
# Fine-tune on the CPU (docs/finetune.md): the `tiny` model is pre-trained briefly on the
# shipped corpus, then fine-tuned on the shipped instruction set data/instructions-small.jsonl
# (Alpaca format) with the prompt masked out of the loss and examples packed two or three
# to a row; the held-out masked loss (the tail of the instruction rows) is printed at
# every evaluation and falls. One tokenizer for both: examples/tokenizer-bytes (the bytes
# 0-255 plus </s> = 256, so model.vocab = 257).
#
#   examples/finetune-cpu.sh [OUT_DIR]      (a few minutes on 2 cores)
# Environment: ZT (the binary; default build-cpu/src/apps/zt), PRE_STEPS (150), FT_STEPS
# (60), EVAL_EVERY (10), NP (ranks; 1 runs without mpirun), FT_METHOD (full, or lora /
# qlora: adapters of rank 16 on every block projection, the base frozen; docs/finetune.md
# "LoRA and QLoRA"), PRETRAIN (an existing pre-trained checkpoint: step 2 is skipped).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
ZT=${ZT:-$here/build-cpu/src/apps/zt}
OUT=${1:-finetune-cpu-out}
PRE_STEPS=${PRE_STEPS:-150}
FT_STEPS=${FT_STEPS:-60}
EVAL_EVERY=${EVAL_EVERY:-10}
NP=${NP:-1}
FT_METHOD=${FT_METHOD:-full}
PRETRAIN=${PRETRAIN:-}
TOK=$here/examples/tokenizer-bytes
mkdir -p "$OUT"
cd "$OUT"
run() { if [ "$NP" -gt 1 ]; then mpirun -np "$NP" "$ZT" "$@"; else "$ZT" "$@"; fi; }
# the same model for both runs: tiny with the tokenizer's 257 ids and room for rows of 512
model="--set model.preset=tiny --set model.vocab=257 --set model.context=512 --set sample.tokens=0"

# 1. token files: the corpus as text, the instructions as masked, packed rows of 513
"$ZT" convert text-to-tokens --force --tokenizer "$TOK" "$here/data/tinyshakespeare.txt" text.h5
"$ZT" convert sft-to-tokens --force --tokenizer "$TOK" --format alpaca --seq-len 512 \
  "$here/data/instructions-small.jsonl" sft.h5

# 2. pre-train on the corpus (plain next-token loss)
if [ -z "$PRETRAIN" ]; then
run train $model --set data.path=text.h5 --set train.steps="$PRE_STEPS" \
  --set train.seq_len=128 --set train.micro_batch=8 --set train.global_batch=8 \
  --set train.lr=3e-3 --set train.warmup=10 --set eval.every=0 \
  --set ckpt.dir=pretrain --set ckpt.overwrite=true
pre=pretrain/$(cat pretrain/latest)
else
pre=$PRETRAIN
fi

# 3. fine-tune from it on the instructions: loss on the responses only; the held-out
#    loss is the same masked mean over the last 10% of the rows
#    (lora / qlora: only the adapters train; the checkpoints hold them alone)
ft=finetune
adapters=""
if [ "$FT_METHOD" != full ]; then
  ft=finetune-$FT_METHOD
  adapters="--set finetune.method=$FT_METHOD --set lora.rank=16 --set lora.alpha=32 --set lora.targets=q,k,v,o,gate,up,down"
fi
run train $model $adapters --set data.path=sft.h5 --set ckpt.init_from="$pre" \
  --set train.steps="$FT_STEPS" --set train.seq_len=512 --set train.micro_batch=4 \
  --set train.global_batch=4 --set train.lr=2e-3 --set train.min_lr=2e-4 --set train.warmup=5 \
  --set eval.every="$EVAL_EVERY" --set eval.batches=5 --set log.every=10 \
  --set log.metrics=$ft.jsonl --set ckpt.dir=$ft --set ckpt.overwrite=true
echo "fine-tuned: $OUT/$ft/$(cat $ft/latest); held-out losses: $OUT/$ft.jsonl (eval_loss)"
