#!/usr/bin/env bash
# tests/slurm/test_prolog.sh ZT SRC_DIR FAKE_NVML: slurm/prolog.sh and slurm/epilog.sh on
# a real single-node Slurm, with NVML answered by the test double (fake_nvml.cpp).
# A healthy node is left alone (state stays idle, prolog exits 0); a GPU with
# uncorrectable ECC errors drains the node with Reason "zt: gpu.ecc GPU 3 ... [RESET_GPU]"
# and the prolog exits 1 (Slurm requeues the job). The node is resumed at the end.
set -euo pipefail
zt=$(realpath "$1") src=$(realpath "$2") fake=$(realpath "$3")
source "$src/tests/slurm/lib.sh"
require_slurm "$src"

node=$(hostname -s)
work=$(mktemp -d /tmp/zt-slurm-prolog.XXXXXX)
trap 'scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true; bash "'"$src"'/scripts/slurm-local.sh" down >/dev/null 2>&1 || true' EXIT
node_field() { scontrol -o show node "$node" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
for _ in $(seq 60); do [[ "$(node_field State)" == IDLE* ]] && break; sleep 0.5; done
[[ "$(node_field State)" == IDLE* ]] || fail "node $node not idle before the test: $(node_field State)"

export ZT_BIN="$zt" ZT_HEALTH_DIR="$work" ZT_NVML_LIBRARY="$fake" SLURMD_NODENAME="$node"
# --burn-seconds 0: the NVML double shows 8 GPUs that CUDA does not, so the GPU stress would be
# UNKNOWN (exit 3, "could not check") rather than healthy; its own tests are checklist_health.stress_*.
export ZT_HEALTH_ARGS="--gpus-per-node 8 --burn-seconds 0 --sysfs-root $src/tests/checklist/data/sysfs/healthy"

log "healthy node: prolog"
export ZT_FAKE_NVML_SCENARIO="$src/tests/checklist/data/nvml/healthy.json" SLURM_JOB_ID=101
start=$SECONDS
bash "$src/slurm/prolog.sh" || fail "prolog exited $? on a healthy node ($(cat "$work/prolog-101/check.out"))"
log "prolog took $((SECONDS - start)) s"
((SECONDS - start <= 60)) || fail "the quick tier took more than 60 s"
state=$(node_field State)
[[ "$state" == IDLE* && "$state" != *DRAIN* ]] || fail "a healthy node's state is $state, not IDLE"
[[ -s "$work/prolog-101/report.json" ]] || fail "no report.json in $work/prolog-101"

log "sick node (ECC errors on GPU 3): epilog"
export ZT_FAKE_NVML_SCENARIO="$src/tests/checklist/data/nvml/ecc_errors.json" SLURM_JOB_ID=102
if bash "$src/slurm/epilog.sh"; then fail "the epilog exited 0 on a sick node"; fi
state=$(node_field State) reason=$(scontrol -o show node "$node" | sed -n 's/.*Reason=\(.*\) \[.*/\1/p')
log "state $state, reason: $reason"
[[ "$state" == *DRAIN* ]] || fail "the sick node was not drained: state $state"
[[ "$reason" == "zt: gpu.ecc GPU 3 (NVIDIA H100 80GB HBM3) on "*"FAIL [RESET_GPU]"* ]] ||
  fail "drain reason '$reason' does not name the check and its action"
echo "PASS: healthy node left idle, sick node drained with reason: $reason"
