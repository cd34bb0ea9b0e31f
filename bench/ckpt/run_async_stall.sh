#!/bin/sh
# run_async_stall.sh BUILD_DIR WORK_DIR [LAYERS...]
#
# ckpt.async's training stall against the size of the state: `zt train` at 2 ranks on a
# preset cut to each LAYERS (default 1 4 8; tinyllama-1.1b's shapes, 22 layers: the whole
# 1.1B state, 13.2 GB, plus its 13.2 GB snapshot), 3 steps with an async save after each,
# the stall read from the log lines exactly as a training run prints them: on the CPU the
# save is in place (no snapshot) and the stall is the one the line `ckpt: step N -> ...
# written in the background (...; training stalled T s: S s at the start + C s copying M MB
# on reach + W s waited)` gives (copy on reach: a step that reaches a unit not yet written
# copies it); with a snapshot (device/offloaded state) the
# line `ckpt: step N snapshot taken ... (training stalled X s)`. Prints per run the state's
# bytes per rank, each save's stall (and with a snapshot the copy bandwidth it implies:
# bytes per rank / stall), and the load average before and after. EXTRA (environment):
# more --set options for zt train (e.g. "--set train.seq_len=64").
# PRESET (environment, default tinyllama-1.1b) picks the shapes.
set -eu
build=$1
work=$2
shift 2
layers=${*:-1 4 8}
preset=${PRESET:-tinyllama-1.1b}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
zt="$build/src/apps/zt"
[ -x "$zt" ] || { echo "build zt first (cmake --build $build --target zt)"; exit 2; }
echo "# machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | tr -s ' '); commit $(git -C "$(dirname "$0")" rev-parse --short=12 HEAD)"
for l in $layers; do
  rm -rf "$work"; mkdir -p "$work"
  echo "## $preset, $l layers (load average before: $(cut -d' ' -f1-3 /proc/loadavg))"
  out=$(mpiexec -n 2 --oversubscribe --bind-to none "$zt" train --set model.preset="$preset" \
        --set model.layers="$l" --set train.seq_len=8 --set train.micro_batch=1 --set train.global_batch=2 \
        --set train.steps=3 --set train.warmup=1 --set ckpt.every=1 --set ckpt.async=true \
        --set ckpt.dir="$work" --set eval.every=0 --set sample.tokens=0 --set train.peak_tflops=1 \
        --set zero.stage=3 ${EXTRA:-} </dev/null 2>&1 | grep -v '^progress')
  params=$(echo "$out" | sed -n 's/.*(\([0-9]*\) parameters).*/\1/p' | head -1)
  per_rank=$(awk -v p="$params" 'BEGIN { printf "%.0f", p * 12 / 2 }')
  echo "$out" | grep -E '^ckpt:' | sed 's/^/  /'
  if echo "$out" | grep -q ' on reach + '; then  # in place
    echo "$out" | sed -n 's/.*training stalled \([0-9.]*\) s: \([0-9.]*\) s at the start + \([0-9.]*\) s copying \([0-9.]*\) MB on reach + \([0-9.]*\) s waited.*/\1 \2 \3 \4 \5/p' |
      awk -v b="$per_rank" -v p="$params" '
      { printf "  stall %.3f s (start %.3f + copied on reach %.1f MB in %.3f s + waited %.3f) for %.3f GB per rank (%d parameters x 12 B / 2 ranks), in place\n", $1, $2, $4, $3, $5, b / 1e9, p }'
  else
    echo "$out" | sed -n 's/.*training stalled \([0-9.]*\) s.*/\1/p' | awk -v b="$per_rank" -v p="$params" '
      { printf "  stall %.3f s for %.3f GB per rank (%d parameters x 12 B / 2 ranks): %.2f GB/s\n", $1, b / 1e9, p, b / 1e9 / $1 }'
  fi
  echo "  (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
done
rm -rf "$work"
