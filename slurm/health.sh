#!/usr/bin/env bash
# slurm/health.sh prolog|epilog: the quick tier of `zt check` on this node, for Slurm's
# Prolog= and Epilog= (slurm/prolog.sh, slurm/epilog.sh; docs/operations.md). It runs as
# root on slurmd's node, one zt process (no srun: a prolog runs before the job's tasks).
#
# zt's exit code (--exit-codes nagios) decides:
#   0 healthy, 1 warning   the job runs; warnings are logged
#   2 unhealthy            the node is drained: scontrol update NodeName=$SLURMD_NODENAME
#                          State=DRAIN Reason="zt: <first failed check> [<action>]"; the
#                          script then exits 1 so Slurm requeues the job elsewhere
#                          (ZT_HEALTH_FAIL_JOB=0: exit 0, the job runs on the drained node)
#   3 unknown, or zt did not finish in ZT_HEALTH_TIMEOUT s (default 60)
#                          logged; drained as above only with ZT_HEALTH_DRAIN_UNKNOWN=1
#   64 bad usage, or any other code
#                          zt itself is misconfigured: logged as a usage error, never drained
# Only an unhealthy verdict drains: a 2 without zt's "# FAILED:" line is not one (logged as
# a usage error). Settings that are not what they must be (ZT_HEALTH_TIMEOUT a whole number
# of seconds, ZT_HEALTH_FAIL_JOB and ZT_HEALTH_DRAIN_UNKNOWN 0 or 1, no --exit-codes or
# --report in ZT_HEALTH_ARGS: this script owns them) are usage errors too: logged, exit 0,
# zt not run.
#
# Environment: ZT_BIN (default: zt on PATH), ZT_HEALTH_ARGS (more zt check flags, e.g.
# "--gpus-per-node 8"), ZT_HEALTH_DIR (reports, default /var/log/zt-health; one folder per
# job and stage), ZT_HEALTH_TIMEOUT, ZT_HEALTH_FAIL_JOB, ZT_HEALTH_DRAIN_UNKNOWN.
set -uo pipefail
stage="${1:?usage: health.sh prolog|epilog}"
node="${SLURMD_NODENAME:-$(hostname -s)}"
job="${SLURM_JOB_ID:-none}"
zt="${ZT_BIN:-zt}"
dir="${ZT_HEALTH_DIR:-/var/log/zt-health}/$stage-$job"
limit="${ZT_HEALTH_TIMEOUT:-60}"
say() { echo "zt-health $stage node $node job $job: $*" >&2; }

usage_error() { say "usage error, node not drained: $*"; exit 0; }
[[ "$limit" =~ ^[0-9]{1,6}$ && "$limit" != 0 ]] ||
  usage_error "ZT_HEALTH_TIMEOUT='$limit' is not a whole number of seconds (1 to 999999)"
for v in ZT_HEALTH_FAIL_JOB ZT_HEALTH_DRAIN_UNKNOWN; do
  [[ -z "${!v:-}" || "${!v}" == 0 || "${!v}" == 1 ]] || usage_error "$v='${!v}' must be 0 or 1"
done
for word in ${ZT_HEALTH_ARGS:-}; do
  case "$word" in
    --exit-codes*|--report*) usage_error "ZT_HEALTH_ARGS='$ZT_HEALTH_ARGS' sets ${word%%=*}, which this script sets" ;;
  esac
done

mkdir -p "$dir" || { say "cannot create $dir"; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck disable=SC2086  # ZT_HEALTH_ARGS is a list of flags
timeout "$limit" "$zt" check --tier quick --exit-codes nagios --report "$dir" ${ZT_HEALTH_ARGS:-} \
  > "$dir/check.out" 2>&1
rc=$?

drain() {
  local reason="zt: $1"
  reason="${reason:0:240}"
  reason="${reason//\"/\'}"
  if scontrol update NodeName="$node" State=DRAIN Reason="$reason"; then
    say "drained: $reason"
  else
    say "scontrol could not drain the node (reason: $reason)"
  fi
}

# The first failed check, from zt's own summary lines ("# FAILED: health gpu.ecc GPU 3 ...").
first_line() { grep -m1 -E "^# $1: " "$dir/check.out" | sed -E "s/^# $1: (health )?//"; }

case "$rc" in
  0) exit 0 ;;
  1) say "warnings (see $dir/report.md)"; exit 0 ;;
  2)
    what=$(first_line FAILED)
    # An unhealthy verdict names its failed check; a 2 without one is not a verdict.
    [[ -n "$what" ]] || usage_error "zt check exited 2 without a failed check: $(grep -m1 -v '^[[:space:]]*$' "$dir/check.out" | cut -c1-160) (see $dir/check.out)"
    drain "$what"
    [[ "${ZT_HEALTH_FAIL_JOB:-1}" == 1 ]] && exit 1
    exit 0 ;;
  3|124|137)
    what=$(first_line UNKNOWN)
    [[ "$rc" != 3 ]] && what="zt check did not finish in ${limit}s"
    say "could not check: ${what:-see $dir/check.out}"
    if [[ "${ZT_HEALTH_DRAIN_UNKNOWN:-0}" == 1 ]]; then
      drain "could not check: ${what:-see $dir/check.out}"
      [[ "${ZT_HEALTH_FAIL_JOB:-1}" == 1 ]] && exit 1
    fi
    exit 0 ;;
  *) usage_error "zt check exited $rc: $(grep -m1 -v '^[[:space:]]*$' "$dir/check.out" | cut -c1-160) (ZT_HEALTH_ARGS='${ZT_HEALTH_ARGS:-}'; see $dir/check.out)" ;;
esac
