#!/usr/bin/env bash
# The "On a GPU" lines of issue 17 (docs/gpu-verification.md): `zt train` with the ZeRO
# engine on the device space against the same runs on the CPU engine. Two commands, each
# well within one 10-minute device call on a 16-core H100 box:
#   tests/train/engine_on_device.sh build   configure build-gpu for the local GPU, build zt
#                                           (and the kernels' tests: their build stage)
#   tests/train/engine_on_device.sh run     the lines below; one PASS/FAIL/REFUSED line each
# (the kernels' own tests: tests/kernels_cuda/run_on_device.sh, same build-gpu folder).
# The lines themselves are scripts/gpu-kit.sh's (one definition: the kit runs them too); this
# script runs them with build-gpu's zt (ZT_GPU_BUILD: another build) and the mpirun on PATH.
# ZT_KIT_DEVICE=cpu replaces the device by the CPU (the dry run, tests/kit: label kit).
# Logs and metrics go to $OUT (the device tool's folder) or ./gpu-logs.
#
#   A  tiny fp32, stage 0, 1 rank: 10 steps on the GPU == the CPU engine within 1e-5
#   B  tiny fp32, stage 3 + hpZ, 4 ranks sharing the GPU over the MPI backend (2 simulated
#      nodes of 2: hpZ groups of 2), staged through pinned host memory: within 1e-5
#   C  tiny fp32, stage 3, 1 rank over NCCL: within 1e-5
#   D  bf16-mixed, stage 3 over NCCL, 50 steps (bf16 weights cast from the fp32 master,
#      bf16 gathers on the NCCL stream, ordered against compute by events), tracking the
#      fp32 losses of the same run within 2e-2
#   D2 bf16-mixed with offload.optimizer = cpu and offload.params = cpu, stage 3, 50 steps
#      (the CPU AdamW, no fp32 parameters on the GPU), tracking line D within 1e-2
#   D3 bf16-true, stage 3 over NCCL, 50 steps (bf16 parameter shards, no fp32 master,
#      AdamW widened and rounded back), tracking line D's bf16-mixed losses within 2e-2
#   D4 bf16-mixed with offload.optimizer = cpu, stages 2 and 3, 50 steps (the CPU AdamW's
#      bf16 rounding copied up into the bf16 compute weights, overlapping the next work,
#      ordered by events): every step's h2d_bytes is half its d2h_bytes (bf16 up, fp32
#      gradients down), and the losses track line D within 1e-2
#   E  a GPU checkpoint (stage 3, step 10 of 20) resumed on the CPU: steps 11-20 within
#      1e-4 of a CPU run of all 20 steps
#   L  LoRA and QLoRA (issue 22; all 8 targets, dropout 0.1), fp32, stage 3 over NCCL: the
#      GPU model's adapters behind the engine's adapters' unit, within 1e-5 of the CPU's
#   H  Qwen3.5's hybrids (issue 56): tiny qwen3_5_text (Gated DeltaNet layers l l l, then a
#      full one with the output gate and partial RoPE) and qwen3_5_moe_text on rows of 150
#      tokens, stage 0: within 1e-4 of the CPU's
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
stage=${1:-run}
logs=${OUT:-$PWD/gpu-logs}
mkdir -p "$logs"
build=${ZT_GPU_BUILD:-build-gpu}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=2

# The kernels' build stage (same build-gpu folder, flags and log), plus zt.
do_build() {
  ZT_EXTRA_TARGETS=zt tests/kernels_cuda/run_on_device.sh build
}

do_run() {
  [ -x "$build/src/apps/zt" ] || { echo "no $build/src/apps/zt: run '$0 build' first" >&2; return 2; }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1
  git log -1 --format='commit %h %s' 2>/dev/null || true
  ZT_KIT_ZT=$(cd "$build" && pwd)/src/apps/zt ZT_KIT_WORK=$logs scripts/gpu-kit.sh lines A B C D D2 D3 D4 E L Q H P M
  local rc=$?
  for f in "$logs"/*_gpu.log; do  # the banner of each GPU run, for the record
    [ -f "$f" ] && echo "$(basename "$f" .log): $(grep -m1 -o 'device cuda.*' "$f" || tail -2 "$f" | tr '\n' ' ')"
  done
  return "$rc"
}

case "$stage" in
  build) do_build ;;
  run) do_run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
