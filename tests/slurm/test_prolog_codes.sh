#!/usr/bin/env bash
# tests/slurm/test_prolog_codes.sh ZT SRC_DIR FAKE_NVML: how slurm/prolog.sh maps zt's exit
# codes, without Slurm (scontrol is a stand-in that records its calls). Only an unhealthy
# verdict drains; every usage error (in ZT_HEALTH_ARGS or the script's own settings, or a
# zt that exits 2 with no failed check) is logged as a usage error, exit 0, no drain.
set -uo pipefail
zt=$(realpath "$1") src=$(realpath "$2") fake=$(realpath "$3")
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/zt-prolog-codes.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
printf '#!/bin/sh\necho "$*" >> "%s/drains"\n' "$work" > "$work/bin/scontrol"
printf '#!/bin/sh\necho "usage trouble somewhere"\nexit 2\n' > "$work/bin/zt-exit2"
chmod +x "$work/bin/scontrol" "$work/bin/zt-exit2"
export PATH="$work/bin:$PATH" ZT_HEALTH_DIR="$work/reports" ZT_NVML_LIBRARY="$fake" SLURMD_NODENAME=n1
healthy="--gpus-per-node 8 --burn-seconds 0 --sysfs-root $src/tests/checklist/data/sysfs/healthy"
n=0
# case NAME WANT_RC DRAIN(yes|no) LOG_REGEX VAR=VALUE...: prolog.sh with these settings.
case_() {
  local name="$1" want="$2" drain="$3" regex="$4"; shift 4
  rm -f "$work/drains"
  n=$((n + 1))
  local out rc
  out=$(env ZT_BIN="$zt" SLURM_JOB_ID="$n" ZT_FAKE_NVML_SCENARIO="$src/tests/checklist/data/nvml/healthy.json" \
        ZT_HEALTH_ARGS="$healthy" "$@" bash "$src/slurm/prolog.sh" 2>&1)
  rc=$?
  echo "$name: rc $rc: $out"
  [[ "$rc" == "$want" ]] || fail "$name: prolog exited $rc, expected $want"
  if [[ "$drain" == yes ]]; then [[ -s "$work/drains" ]] || fail "$name: the node was not drained"
  else [[ ! -e "$work/drains" ]] || fail "$name: drained a node that is not unhealthy: $(cat "$work/drains")"; fi
  [[ "$out" =~ $regex ]] || fail "$name: the log does not match '$regex'"
}
case_ healthy 0 no '.*'
case_ sick 1 yes 'drained: zt: gpu.ecc GPU 3' ZT_FAKE_NVML_SCENARIO="$src/tests/checklist/data/nvml/ecc_errors.json"
case_ unknown_flag 0 no 'usage error, node not drained: zt check exited 64: .*bogus' ZT_HEALTH_ARGS="$healthy --bogus"
case_ bad_number 0 no 'usage error.*--gpus-per-node' ZT_HEALTH_ARGS="$healthy --gpus-per-node abc"
case_ codes_zt 0 no "usage error.*sets --exit-codes" ZT_HEALTH_ARGS="$healthy --exit-codes zt"
case_ codes_zt_eq 0 no "usage error.*sets --exit-codes" ZT_HEALTH_ARGS="$healthy --exit-codes=zt"
case_ report 0 no "usage error.*sets --report" ZT_HEALTH_ARGS="$healthy --report /tmp"
case_ exit2_no_verdict 0 no 'usage error.*exited 2 without a failed check' ZT_BIN="$work/bin/zt-exit2"
case_ timeout_junk 0 no "usage error.*ZT_HEALTH_TIMEOUT='abc'" ZT_HEALTH_TIMEOUT=abc
case_ timeout_zero 0 no "usage error.*ZT_HEALTH_TIMEOUT='0'" ZT_HEALTH_TIMEOUT=0
case_ fail_job_junk 0 no "usage error.*ZT_HEALTH_FAIL_JOB='yes'" ZT_HEALTH_FAIL_JOB=yes
case_ drain_unknown_junk 0 no "usage error.*ZT_HEALTH_DRAIN_UNKNOWN='2'" ZT_HEALTH_DRAIN_UNKNOWN=2
echo "PASS: $n cases"
