#!/usr/bin/env bash
# The "On a GPU" lines of issue 17 (docs/gpu-verification.md): `zt train` with the ZeRO
# engine on the device space against the same runs on the CPU engine. Two commands, each
# well within one 10-minute device call on a 16-core H100 box:
#   tests/train/engine_on_device.sh build   configure build-gpu for the local GPU, build zt
#                                           (and the kernels' tests: their build stage)
#   tests/train/engine_on_device.sh run     the lines below; one PASS/FAIL/REFUSED line each
# (the kernels' own tests: tests/kernels_cuda/run_on_device.sh, same build-gpu folder).
# Logs and metrics go to $OUT (the device tool's folder) or ./gpu-logs.
#
#   A  tiny fp32, stage 0, 1 rank: 10 steps on the GPU == the CPU engine within 1e-5
#   B  tiny fp32, stage 3 + hpZ, 4 ranks sharing the GPU over the MPI backend (2 simulated
#      nodes of 2: hpZ groups of 2), staged through pinned host memory: within 1e-5
#   C  tiny fp32, stage 3, 1 rank over NCCL: within 1e-5
#   D  bf16-mixed, stage 3 over NCCL, 50 steps (bf16 weights cast from the fp32 master,
#      bf16 gathers on the NCCL stream, ordered against compute by events), tracking the
#      fp32 losses of the same run within 2e-2
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
set -uo pipefail
cd "$(dirname "$0")/../.."
stage=${1:-run}
logs=${OUT:-$PWD/gpu-logs}
mkdir -p "$logs"
jobs=$(nproc)
zt=$PWD/build-gpu/src/apps/zt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=2
export XDG_CACHE_HOME=$logs/cache

# The kernels' build stage (same build-gpu folder, flags and log), plus zt.
do_build() {
  ZT_EXTRA_TARGETS=zt tests/kernels_cuda/run_on_device.sh build
}

common=(--set train.steps=10 --set train.seq_len=64 --set train.micro_batch=4
        --set train.global_batch=16 --set eval.every=0 --set eval.batches=1
        --set sample.tokens=0 --set ckpt.save_final=false --set train.peak_tflops=989)

# train NAME NP ARGS...: one run, metrics to $logs/NAME.jsonl, output to $logs/NAME.log.
train() {
  local name=$1 np=$2
  shift 2
  mpirun --oversubscribe -np "$np" "$zt" train "${common[@]}" "$@" \
    --set "log.metrics=$logs/$name.jsonl" </dev/null >"$logs/$name.log" 2>&1
}

losses() { grep -o '"loss":[-0-9.eE+]*' "$1" | cut -d: -f2; }

# compare LINE GOT REF TOL [LAST]: max relative loss difference per step (the last LAST
# steps of REF when given), PASS below TOL.
# half_up LINE METRICS: every step of an offloaded run (offload.params = none) copied
# up half the bytes it copied down (bf16 parameters up, fp32 gradients down); prints the
# stall the engine still waited for.
half_up() {
  paste <(grep -o '"d2h_bytes":[0-9]*' "$2" | cut -d: -f2) \
        <(grep -o '"h2d_bytes":[0-9]*' "$2" | cut -d: -f2) \
        <(grep -o '"stall_s":[-0-9.eE+]*' "$2" | cut -d: -f2) | awk -v line="$1" '
    { n++; if ($1 == 0 || 2 * $2 != $1) bad++; s += $3 }
    END { ok = n > 0 && bad == 0
          printf "%s %s: h2d = d2h / 2 in %d of %d steps, stall %.3f s in all\n", ok ? "PASS" : "FAIL", line, n - bad, n, s
          exit !ok }'
}

compare() {
  local line=$1 got=$2 ref=$3 tol=$4 last=${5:-0}
  local r
  if [ "$last" -gt 0 ]; then r=$(losses "$ref" | tail -n "$last"); else r=$(losses "$ref"); fi
  paste <(losses "$got") <(echo "$r") | awk -v line="$line" -v tol="$tol" '
    { d = $1 - $2; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2; x = d / s; if (x > m) m = x; n++ }
    END { ok = n > 0 && m < tol
          printf "%s %s: %d steps, max rel loss diff %.2e (tol %s)\n", ok ? "PASS" : "FAIL", line, n, m, tol
          exit !ok }'
}

do_run() {
  local rc=0
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1
  git log -1 --format='commit %h %s' 2>/dev/null || true
  train a_cpu 1 --set train.device=cpu --set zero.stage=0 &&
    train a_gpu 1 --set train.device=cuda --set zero.stage=0 &&
    compare "A stage 0, 1 rank" "$logs/a_gpu.jsonl" "$logs/a_cpu.jsonl" 1e-5 || rc=1
  train b_cpu 4 --ranks-per-node 2 --set train.device=cpu --set zero.stage=3 &&
    train b_gpu 4 --ranks-per-node 2 --set train.device=cuda --set train.share_gpu=true \
      --set comm.backend=mpi --set zero.stage=3 &&
    compare "B stage 3 + hpZ, 4 ranks on one GPU, MPI" "$logs/b_gpu.jsonl" "$logs/b_cpu.jsonl" 1e-5 || rc=1
  train c_cpu 1 --set train.device=cpu --set zero.stage=3 &&
    train c_gpu 1 --set train.device=cuda --set comm.backend=nccl --set zero.stage=3 &&
    compare "C stage 3, 1 rank, NCCL" "$logs/c_gpu.jsonl" "$logs/c_cpu.jsonl" 1e-5 || rc=1
  d=(--set train.device=cuda --set comm.backend=nccl --set zero.stage=3 --set train.steps=50)
  if train d_gpu 1 "${d[@]}" --set train.precision=bf16-mixed &&
     train d_ref 1 "${d[@]}"; then
    compare "D bf16-mixed, stage 3 NCCL, 50 steps vs fp32" "$logs/d_gpu.jsonl" "$logs/d_ref.jsonl" 2e-2 || rc=1
  else
    echo "FAIL D bf16-mixed: $(tail -3 "$logs/d_gpu.log" "$logs/d_ref.log" | tr '\n' ' ')"
    rc=1
  fi
  if [ -f "$logs/d_gpu.jsonl" ] && train d3_gpu 1 "${d[@]}" --set train.precision=bf16-true; then
    compare "D3 bf16-true, stage 3 NCCL, 50 steps vs bf16-mixed" "$logs/d3_gpu.jsonl" \
      "$logs/d_gpu.jsonl" 2e-2 || rc=1
  else
    echo "FAIL D3 bf16-true: $(tail -3 "$logs/d3_gpu.log" 2>/dev/null | tr '\n' ' ')"
    rc=1
  fi
  ulimit -l unlimited 2>/dev/null || echo "memlock $(ulimit -l) KiB: D4's pinned pool may be refused"
  for st in 2 3; do
    if [ -f "$logs/d_gpu.jsonl" ] && train "d4_s${st}_gpu" 1 "${d[@]}" --set zero.stage="$st" \
         --set train.precision=bf16-mixed --set offload.optimizer=cpu; then
      compare "D4 bf16-mixed + offload.optimizer=cpu, stage $st, 50 steps vs D" \
        "$logs/d4_s${st}_gpu.jsonl" "$logs/d_gpu.jsonl" 1e-2 || rc=1
      half_up "D4 stage $st bf16 copy up" "$logs/d4_s${st}_gpu.jsonl" || rc=1
    else
      echo "FAIL D4 stage $st: $(tail -3 "$logs/d4_s${st}_gpu.log" 2>/dev/null | tr '\n' ' ')"
      rc=1
    fi
  done
  rm -rf "$logs/e_ckpt"
  train e_gpu 1 --set train.device=cuda --set zero.stage=3 --set train.steps=20 \
      --set ckpt.stop_after=10 --set "ckpt.dir=$logs/e_ckpt" &&
    train e_cpu 1 --set train.device=cpu --set zero.stage=3 --set train.steps=20 \
      --set ckpt.resume=auto --set "ckpt.dir=$logs/e_ckpt" &&
    train e_ref 1 --set train.device=cpu --set zero.stage=3 --set train.steps=20 &&
    compare "E GPU checkpoint resumed on the CPU, steps 11-20" "$logs/e_cpu.jsonl" \
      "$logs/e_ref.jsonl" 1e-4 10 || rc=1
  lora=(--set zero.stage=3 --set lora.targets=q,k,v,o,gate,up,down,lm_head --set lora.dropout=0.1)
  for m in lora qlora; do
    train "l_${m}_cpu" 1 --set train.device=cpu --set finetune.method=$m "${lora[@]}" &&
      train "l_${m}_gpu" 1 --set train.device=cuda --set comm.backend=nccl \
        --set finetune.method=$m "${lora[@]}" &&
      compare "L $m, stage 3, 1 rank, NCCL" "$logs/l_${m}_gpu.jsonl" "$logs/l_${m}_cpu.jsonl" 1e-5 ||
      rc=1
  done
  for f in "$logs"/*_gpu.log; do  # the banner of each GPU run, for the record
    echo "$(basename "$f" .log): $(grep -m1 -o 'device cuda.*' "$f" || tail -2 "$f" | tr '\n' ' ')"
  done
  return "$rc"
}

case "$stage" in
  build) do_build ;;
  run) do_run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
