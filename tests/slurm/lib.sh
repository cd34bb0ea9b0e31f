# tests/slurm/lib.sh: shared set-up of the Slurm job tests (sourced). A real single-node
# Slurm (munge, slurmctld, slurmd; scripts/slurm-local.sh) runs the jobs of slurm/.
# Exit code 77 = skipped (CTest SKIP_RETURN_CODE): not root, or Slurm not installed.
set -euo pipefail

ZT_SKIP=77
skip() { echo "SKIPPED: $*"; exit "$ZT_SKIP"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "[$(date +%T)] $*"; }

# require_slurm SRC_DIR: skip unless root with Slurm + munge installed; bring Slurm up and
# take it down again when the test exits (whatever the outcome).
require_slurm() {
  local src="$1"
  [[ $(id -u) -eq 0 ]] || skip "needs root to run munge, slurmctld and slurmd (run as root, or see docs/operations.md)"
  for b in slurmctld slurmd munged sbatch scontrol; do
    command -v "$b" >/dev/null || skip "'$b' not installed (scripts/install-deps.sh --slurm)"
  done
  trap 'bash "'"$src"'/scripts/slurm-local.sh" down >/dev/null 2>&1 || true' EXIT
  timeout 60 bash "$src/scripts/slurm-local.sh" up >/dev/null || fail "scripts/slurm-local.sh up failed (see /var/log/slurm/)"
}

# job_field ID FIELD: one field of `scontrol show job` (e.g. JobState, ExitCode, Restarts).
job_field() {
  scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# wait_state ID TIMEOUT_S STATE...: wait until the job is in one of the states; fail on timeout.
wait_state() {
  local id="$1" limit="$2"; shift 2
  local deadline=$((SECONDS + limit)) st=""
  while ((SECONDS < deadline)); do
    st=$(job_field "$id" JobState)
    for want in "$@"; do [[ "$st" == "$want" ]] && return 0; done
    sleep 0.5
  done
  scontrol show job "$id" >&2 || true
  fail "job $id: state '$st' after ${limit}s, expected one of: $*"
}

# wait_file_match FILE REGEX TIMEOUT_S: wait until FILE has a line matching REGEX.
wait_file_match() {
  local file="$1" re="$2" limit="$3"
  local deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    [[ -f "$file" ]] && grep -Eq "$re" "$file" && return 0
    sleep 0.2
  done
  [[ -f "$file" ]] && tail -n 20 "$file" >&2
  fail "no line matching '$re' in $file after ${limit}s"
}

# expect_match FILE REGEX WHAT: fail naming WHAT unless FILE has a line matching REGEX.
expect_match() {
  grep -Eq "$2" "$1" || { tail -n 30 "$1" >&2; fail "$3: no line matching '$2' in $1"; }
}

# has_ckpt ZT: whether this zt build knows the ckpt.* keys.
has_ckpt() {
  # Not `grep -q`: it exits at the first match, zt then dies of SIGPIPE writing the rest,
  # and pipefail turns that into "no ckpt keys" (slurm.requeue skipped itself at random).
  "$1" train --help-config 2>/dev/null | grep 'ckpt\.dir' >/dev/null
}
