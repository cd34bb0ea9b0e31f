#!/usr/bin/env bash
# The GPU kit's accounting (scripts/gpu-kit.sh), without a GPU:
#   1. `plan`: the first call's lines fit the 480 s budget by their expected times, and a
#      budget below their sum is refused (exit 1);
#   2. a line the budget leaves out is "NOT RUN", the run exits non-zero, and the summary
#      counts PASS / FAIL / SKIP / NOT RUN.
# Usage: plan_test.sh BUILD_DIR REPO
set -uo pipefail
build=$1 repo=$2
kit=$repo/scripts/gpu-kit.sh
fail() { echo "FAIL: $*"; exit 1; }
out=$(bash "$kit" plan) || fail "plan refused the default budget: $out"
echo "$out"
ZT_KIT_BUDGET=400 bash "$kit" plan >/dev/null && fail "plan accepted a budget below the first call's expected time"
echo "ok: a 400 s budget is refused"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_KIT_GPU=0
ZT_KIT_ZT=$build/src/apps/zt ZT_KIT_WORK=$work ZT_KIT_BUDGET=14 bash "$kit" lines launcher >"$work/out" 2>&1
rc=$?
cat "$work/out"
((rc != 0)) || fail "a run with a line left out by the budget exited 0"
grep -q '^NOT RUN launcher: out of the run.s budget' "$work/out" || fail "launcher is not NOT RUN"
grep -qE '^(SKIP|PASS) launcher' "$work/out" && fail "a line left out by the budget reads as SKIP"
s=$(bash -c "source <(sed -n '/^summary() {/,/^}/p' '$kit'); summary '$work/out'")
echo "$s"
grep -qE '^summary: [0-9]+ PASS, [0-9]+ FAIL, [0-9]+ SKIP, 1 NOT RUN$' <<<"$s" || fail "the summary does not count the NOT RUN line: $s"
echo PASS
