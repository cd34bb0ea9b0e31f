#!/usr/bin/env bash
# tests/slurm/test_fabric.sh SRC_DIR: slurm/fabric.sh sets each fabric's variables, keeps
# what the caller exported, and refuses an unknown fabric. No Slurm needed.
set -euo pipefail
src="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }

# env_after ASSIGNMENTS...: the environment after sourcing fabric.sh in a clean shell
env_after() {
  env -i PATH="$PATH" "$@" bash -c "source '$src/slurm/fabric.sh' && env" | sort
}
expect() {  # expect ENV-LISTING NAME VALUE
  grep -qxF "$2=$3" <<<"$1" || fail "$2 should be '$3'; got: $(grep "^$2=" <<<"$1" || echo unset)"
}
expect_unset() { ! grep -q "^$2=" <<<"$1" || fail "$2 should be unset; got: $(grep "^$2=" <<<"$1")"; }

e=$(env_after ZT_FABRIC=efa ZT_LOG_DIR=/logs)
expect "$e" ZT_FABRIC efa
expect "$e" FI_PROVIDER efa
expect "$e" FI_EFA_USE_DEVICE_RDMA 1
expect "$e" NCCL_NET "AWS Libfabric"
expect "$e" NCCL_NET_PLUGIN ofi
expect "$e" NCCL_DEBUG WARN
expect "$e" NCCL_DEBUG_FILE "/logs/nccl-%h-%p.log"
expect_unset "$e" NCCL_IB_HCA
expect_unset "$e" NCCL_SOCKET_IFNAME

e=$(env_after ZT_FABRIC=ib ZT_IB_HCA==mlx5_0:1 ZT_NET_IFNAME=ib0)
expect "$e" NCCL_NET IB
expect "$e" NCCL_IB_HCA "=mlx5_0:1"
expect "$e" NCCL_SOCKET_IFNAME ib0
expect "$e" OMPI_MCA_btl_tcp_if_include ib0
expect "$e" OMPI_MCA_oob_tcp_if_include ib0
expect_unset "$e" FI_PROVIDER

e=$(env_after ZT_FABRIC=tcp)
expect "$e" NCCL_NET Socket
expect "$e" NCCL_SOCKET_IFNAME "^lo,docker0"
expect "$e" OMPI_MCA_btl_tcp_if_exclude "lo,docker0"
expect "$e" OMPI_MCA_btl "self,vader,tcp"

# The caller's own settings win.
e=$(env_after ZT_FABRIC=efa NCCL_DEBUG=INFO FI_PROVIDER=efa-direct NCCL_NET_PLUGIN=aws-ofi)
expect "$e" NCCL_DEBUG INFO
expect "$e" FI_PROVIDER efa-direct
expect "$e" NCCL_NET_PLUGIN aws-ofi

# auto picks one of the three.
e=$(env_after ZT_FABRIC=auto)
grep -Eqx 'ZT_FABRIC=(efa|ib|tcp)' <<<"$e" || fail "auto chose: $(grep ^ZT_FABRIC= <<<"$e")"

# An unknown fabric is an error (exit 2) naming the value.
rc=0; msg=$(env -i PATH="$PATH" ZT_FABRIC=myrinet bash -c "source '$src/slurm/fabric.sh'" 2>&1) || rc=$?
((rc == 2)) || fail "ZT_FABRIC=myrinet: exit $rc, expected 2"
[[ "$msg" == *myrinet* ]] || fail "the error does not name the value: $msg"
echo PASS
