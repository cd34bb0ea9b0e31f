# slurm/fabric.sh: the one place where zt jobs choose their network settings.
# Sourced by slurm/check.sbatch and slurm/train.sbatch (and by hand: `source slurm/fabric.sh`)
# before `srun`, so `zt check` measures exactly the fabric `zt train` will use.
#
# Inputs (environment; all optional):
#   ZT_FABRIC        auto (default) | efa | ib | tcp
#                    auto: efa when `fi_info -p efa` finds an EFA device, else ib when
#                    /sys/class/infiniband has a device, else tcp
#   ZT_NET_IFNAME    network interface(s) for sockets: NCCL bootstrap and socket transport
#                    (NCCL_SOCKET_IFNAME) and Open MPI's TCP traffic; e.g. "eth0", "ens5",
#                    "^lo,docker" (NCCL syntax; a leading ^ excludes). Default: unset
#                    (NCCL and Open MPI choose) except tcp: "^lo,docker0"
#   ZT_IB_HCA        InfiniBand HCAs for NCCL (NCCL_IB_HCA), e.g. "mlx5" or "=mlx5_0:1,mlx5_1:1";
#                    default "mlx5"
#   ZT_NCCL_PLUGIN   NCCL net plugin for EFA (NCCL_NET_PLUGIN: NCCL loads libnccl-net-<name>.so);
#                    default "ofi" (aws-ofi-nccl)
#   ZT_LOG_DIR       where NCCL writes one debug file per process (NCCL_DEBUG_FILE);
#                    default "." (the job's working directory)
#   NCCL_DEBUG       kept when already set; default WARN (INFO to see the transport chosen)
# Outputs: exported NCCL_*, FI_*, OMPI_MCA_* variables, and ZT_FABRIC set to the choice made.
# A value the caller already exported for one of those variables is never overwritten.

zt_fabric_set() {  # zt_fabric_set NAME VALUE: export NAME=VALUE unless NAME is already set
  if [[ -z "${!1+x}" ]]; then export "$1=$2"; fi
}

zt_fabric_detect() {
  if command -v fi_info >/dev/null 2>&1 && fi_info -p efa >/dev/null 2>&1; then
    echo efa
  elif compgen -G "/sys/class/infiniband/*" >/dev/null; then
    echo ib
  else
    echo tcp
  fi
}

ZT_FABRIC="${ZT_FABRIC:-auto}"
if [[ "$ZT_FABRIC" == "auto" ]]; then ZT_FABRIC="$(zt_fabric_detect)"; fi
export ZT_FABRIC

case "$ZT_FABRIC" in
  efa)
    # AWS Elastic Fabric Adapter: libfabric's efa provider under NCCL through the
    # aws-ofi-nccl plugin. NCCL_NET names the plugin's transport, so NCCL fails at start-up
    # when the plugin is missing instead of falling back to sockets silently.
    zt_fabric_set FI_PROVIDER efa
    zt_fabric_set FI_EFA_USE_DEVICE_RDMA 1      # GPUDirect RDMA (p4d, p5)
    zt_fabric_set RDMAV_FORK_SAFE 1
    zt_fabric_set NCCL_NET_PLUGIN "${ZT_NCCL_PLUGIN:-ofi}"
    zt_fabric_set NCCL_NET "AWS Libfabric"
    zt_fabric_set OMPI_MCA_mtl ofi               # host-side MPI over libfabric too
    zt_fabric_set OMPI_MCA_mtl_ofi_provider_include efa
    ;;
  ib)
    # InfiniBand / RoCE: NCCL's built-in IB transport on the named HCAs; Open MPI over UCX.
    zt_fabric_set NCCL_NET IB
    zt_fabric_set NCCL_IB_HCA "${ZT_IB_HCA:-mlx5}"
    zt_fabric_set OMPI_MCA_pml ucx
    ;;
  tcp)
    # Plain Ethernet: NCCL's socket transport, Open MPI's TCP BTL (shared memory inside a node).
    zt_fabric_set NCCL_NET Socket
    zt_fabric_set OMPI_MCA_btl "self,vader,tcp"
    ZT_NET_IFNAME="${ZT_NET_IFNAME:-^lo,docker0}"
    ;;
  *)
    echo "fabric.sh: ZT_FABRIC='$ZT_FABRIC' is not one of auto, efa, ib, tcp" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac

if [[ -n "${ZT_NET_IFNAME:-}" ]]; then
  zt_fabric_set NCCL_SOCKET_IFNAME "$ZT_NET_IFNAME"
  # Open MPI: an include list, or an exclude list when NCCL's syntax starts with ^
  # (setting an exclude list replaces Open MPI's default one, which is loopback: keep lo in it).
  if [[ "$ZT_NET_IFNAME" == ^* ]]; then
    zt_exclude="${ZT_NET_IFNAME#^}"
    [[ ",$zt_exclude," == *",lo,"* ]] || zt_exclude="lo,$zt_exclude"
    zt_fabric_set OMPI_MCA_btl_tcp_if_exclude "$zt_exclude"
    zt_fabric_set OMPI_MCA_oob_tcp_if_exclude "$zt_exclude"
    unset zt_exclude
  else
    zt_fabric_set OMPI_MCA_btl_tcp_if_include "$ZT_NET_IFNAME"
    zt_fabric_set OMPI_MCA_oob_tcp_if_include "$ZT_NET_IFNAME"
  fi
fi

zt_fabric_set NCCL_DEBUG WARN
zt_fabric_set NCCL_DEBUG_FILE "${ZT_LOG_DIR:-.}/nccl-%h-%p.log"   # %h host, %p pid (NCCL expands them)

zt_fabric_summary() {  # one line for the job log
  echo "fabric: $ZT_FABRIC | NCCL_NET=${NCCL_NET:-} NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN:-} FI_PROVIDER=${FI_PROVIDER:-} NCCL_IB_HCA=${NCCL_IB_HCA:-} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-} NCCL_DEBUG=$NCCL_DEBUG NCCL_DEBUG_FILE=$NCCL_DEBUG_FILE"
}
