# tests/multinode/lib.sh: shared set-up of the simulated multi-node tests (sourced).
# Exit code 77 = skipped (CTest SKIP_RETURN_CODE): not root, or namespaces not permitted.
set -euo pipefail
ZT_SKIP=77
here_mn="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
skip() { echo "SKIPPED: $*"; exit "$ZT_SKIP"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "[$(date +%T)] $*"; }

# require_netns N: skip unless namespaces can be made here; create N nodes, removed at exit.
require_netns() {
  local why
  why=$(bash "$here_mn/netns.sh" can) || skip "simulated nodes need network namespaces: $why"
  trap 'bash "'"$here_mn"'/netns.sh" down >/dev/null 2>&1 || true' EXIT
  bash "$here_mn/netns.sh" up "$1" || fail "netns.sh up $1 failed"
}

# mn_mpirun NODES PER_NODE PROGRAM ARGS...: mpirun over the simulated nodes, bounded in time.
mn_mpirun() {
  timeout 300 bash "$here_mn/mpirun.sh" "$@"
}
