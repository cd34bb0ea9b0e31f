#!/usr/bin/env bash
# jobs/run-local.sh: run a job file on this machine with mpirun, no Slurm.
#   jobs/run-local.sh [-np N] JOB.toml [zt train args...]
#   jobs/run-local.sh -np 4 jobs/tiny-zero3.toml --set train.steps=50
# N ranks (default 2) of the zt built in build/ (or $ZT_BUILD_DIR), through
# scripts/zt-mpirun. Checkpoints go to ckpt/<job file name> (or $ZT_CKPT_DIR) and a
# second run resumes from the newest one (ckpt.resume=auto); `kill -USR1 <mpirun pid>`
# (mpirun forwards it to every rank) makes the ranks save at the next step boundary and
# exit 0.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
np=2
if [[ "${1:-}" == "-np" ]]; then np="$2"; shift 2; fi
[[ $# -ge 1 && -f "$1" ]] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
job="$1"; shift
zt="${ZT_BUILD_DIR:-$here/build}/src/apps/zt"
[[ -x "$zt" ]] || { echo "run-local: $zt not found; build first (bash scripts/setup.sh)" >&2; exit 2; }

ckpt_dir="${ZT_CKPT_DIR:-ckpt/$(basename "$job" .toml)}"
args=(train --config "$job" "$@" --set "ckpt.dir=$ckpt_dir")
if [[ -e "$ckpt_dir/latest" ]]; then   # an earlier run stopped: continue it (not ckpt.init_from)
  args+=(--set ckpt.resume=auto --set ckpt.init_from=)
fi
exec "$here/scripts/zt-mpirun" -np "$np" zt "${args[@]}"
