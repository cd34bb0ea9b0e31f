#!/usr/bin/env bash
# slurm/submit.sh: submit `zt check` then `zt train` as two chained jobs. The train job
# depends on the check job with --dependency=afterok, so it starts only when every check
# passed, and is cancelled (--kill-on-invalid-dep=yes) when one failed.
#
# Usage: slurm/submit.sh --config JOB.toml [options] [-- zt train args...]
#   --config FILE         the training job (jobs/*.toml)                      (required)
#   --nodes N             nodes (default 1)
#   --tasks-per-node G    tasks per node = GPUs per node (default 8)
#   --cpus-per-task C     cores per task (default: Slurm's default)
#   --cpu                 no GPUs (--gpus-per-task=0): CPU ranks, for tests and laptops
#   --time T              train job time limit (default 04:00:00)
#   --partition P, --account A, --reservation R   passed to both jobs
#   --nodelist LIST       run both jobs on these nodes (so the checked nodes are the ones that train)
#   --ckpt-dir DIR        checkpoint directory (default ckpt/<job name>; "none": no checkpoints)
#   --job-name NAME       train job name (default zt-train)
#   --thresholds FILE     gates for zt check (docs/checklist.md); default auto (zt's table for
#                         the GPU and fabric it finds), none: no gates
#   --check-args "ARGS"   extra zt check arguments, e.g. "--max-bytes 1G --iters 50"
#   --log-dir DIR         job output files and NCCL debug files (default logs)
#   --no-check            submit only the train job
# Prints "check job ID" and "train job ID", then `train=ID` as its last line.
# Environment: ZT_BIN (the zt executable), ZT_FABRIC, ZT_NET_IFNAME, ZT_IB_HCA (slurm/fabric.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export ZT_ROOT="${ZT_ROOT:-$(dirname "$here")}"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

config="" nodes=1 tasks=8 cpus="" cpu=0 time_limit="04:00:00" ckpt="" name="zt-train"
thresholds="" check_args="" log_dir="logs" do_check=1 common=()
while (($#)); do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --tasks-per-node) tasks="$2"; shift 2 ;;
    --cpus-per-task) cpus="$2"; shift 2 ;;
    --cpu) cpu=1; shift ;;
    --time) time_limit="$2"; shift 2 ;;
    --partition|--account|--reservation|--nodelist) common+=("$1=$2"); shift 2 ;;
    --ckpt-dir) ckpt="$2"; shift 2 ;;
    --job-name) name="$2"; shift 2 ;;
    --thresholds) thresholds="$2"; shift 2 ;;
    --check-args) check_args="$2"; shift 2 ;;
    --log-dir) log_dir="$2"; shift 2 ;;
    --no-check) do_check=0; shift ;;
    -h|--help) usage ;;
    --) shift; break ;;
    *) echo "submit.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$config" ]] || { echo "submit.sh: --config JOB.toml is required" >&2; exit 2; }
[[ -f "$config" ]] || { echo "submit.sh: config file '$config' not found" >&2; exit 2; }

mkdir -p "$log_dir"
export ZT_LOG_DIR="$(cd "$log_dir" && pwd)"
[[ -n "$ckpt" ]] && export ZT_CKPT_DIR="$ckpt"
[[ -n "$thresholds" ]] && export ZT_THRESHOLDS="$thresholds"
export ZT_REPORT_DIR="${ZT_REPORT_DIR:-$ZT_LOG_DIR/reports}"

shape=(--nodes="$nodes" --ntasks-per-node="$tasks")
[[ -n "$cpus" ]] && shape+=(--cpus-per-task="$cpus")
((cpu)) && shape+=(--gpus-per-task=0)

dependency=()
if ((do_check)); then
  # shellcheck disable=SC2086  # check_args is a list of words on purpose
  check_id=$(sbatch --parsable "${shape[@]}" "${common[@]}" \
               --output="$ZT_LOG_DIR/zt-check-%j.out" \
               "$ZT_ROOT/slurm/check.sbatch" $check_args)
  check_id="${check_id%%;*}"
  echo "check job $check_id"
  dependency=(--dependency="afterok:$check_id" --kill-on-invalid-dep=yes)
fi
train_id=$(sbatch --parsable "${shape[@]}" "${common[@]}" "${dependency[@]}" \
             --job-name="$name" --time="$time_limit" \
             --output="$ZT_LOG_DIR/$name-%j.out" \
             "$ZT_ROOT/slurm/train.sbatch" --config "$config" "$@")
train_id="${train_id%%;*}"
echo "train job $train_id"
echo "train=$train_id"
