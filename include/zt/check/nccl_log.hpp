#pragma once
// Reading NCCL's own account of the network it chose. `zt check` runs a small NCCL
// collective with NCCL_DEBUG=INFO written to a file, then reads these lines from it
// (formats from NCCL's src/init.cc, src/transport/net.cc, src/graph/topo.cc and the
// aws-ofi-nccl plugin; each line starts "host:pid:tid [dev] NCCL INFO "):
//
//   NET/Plugin: Loaded net plugin AWS Libfabric (v7)          a network plugin was loaded
//   NET/OFI Selected provider is efa, fabric is efa (found 4 nics)   libfabric provider
//   NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>
//   NET/Socket : Using [0]eth0:10.0.0.1<0>
//   Using network IB | Socket | AWS Libfabric | Libfabric     the network NCCL uses
//   NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'
//   Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA     one connection over the net
//
// Parsing is a pure function of the text, so it is tested on sample logs.
#include <string>
#include <string_view>
#include <vector>

namespace zt::check {

// What kind of network a "Using network NAME" line names.
enum class NetKind : uint8_t { kUnknown, kSocket, kIB, kLibfabric, kOther };
std::string_view net_kind_name(NetKind k);  // unknown, socket, ib, libfabric, other

NetKind classify_network(std::string_view name);

struct NcclNetworkInfo {
  std::string network;       // from "Using network X"; "" when absent
  NetKind kind = NetKind::kUnknown;
  std::string plugin;        // from "NET/Plugin: Loaded net plugin X (vN)"; "" when none
  std::string ofi_provider;  // from "NET/OFI Selected provider is X"; "" when none
  std::string devices;       // the "NET/IB : Using ..." or "NET/Socket : Using ..." list
  int net_channels = 0;      // "Channel ... via NET/..." lines
  int gdr_channels = 0;      // ... of which use GPU Direct RDMA ("/GDRDMA")
  int gdr_enabled_hcas = 0;  // "GPU Direct RDMA Enabled for HCA"
  int gdr_disabled_hcas = 0; // "GPU Direct RDMA Disabled for HCA"
  std::vector<std::string> warnings;  // "NCCL WARN" lines, verbatim after the prefix
};

NcclNetworkInfo parse_nccl_log(std::string_view text);

// What the node offers: libfabric providers (fi_getinfo prov_name) and whether
// /sys/class/infiniband has devices.
struct FabricFacts {
  std::vector<std::string> providers;
  bool infiniband_sysfs = false;
};

// The network NCCL must use on such a node: "efa" when a provider is efa, "ib" when a
// provider is verbs or /sys/class/infiniband has devices, else "any" (sockets are fine).
std::string expected_network(const FabricFacts& facts);

enum class FabricStatus : uint8_t { kPass, kWarn, kFail };

struct FabricJudgement {
  FabricStatus status = FabricStatus::kPass;
  std::string message;  // one line: what NCCL used, what the node offers, why it is judged so
};

// FAIL: EFA present but NCCL did not use libfabric with efa, IB present but NCCL used
// sockets (or no RDMA network), or no "Using network" line at all on a node that has
// an RDMA fabric. WARN: the RDMA network is used but no connection uses GPU Direct
// RDMA although some went over the network, or no "Using network" line on a node
// without one. PASS otherwise.
FabricJudgement judge_fabric(const FabricFacts& facts, const NcclNetworkInfo& info);

}  // namespace zt::check
