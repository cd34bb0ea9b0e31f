// NCCL's INFO lines about the network it chose, parsed and judged against the fabric a
// node offers. The sample logs follow the formats of NCCL's src/init.cc ("Using network
// %s"), src/transport/net.cc ("Channel %02d/%d : %d[%d] -> %d[%d] [send] via
// NET/%s/%d%s" with "/GDRDMA"), src/graph/topo.cc ("NET/%s : GPU Direct RDMA %s for HCA
// %d '%s'"), src/transport/net_ib/init.cc, net_socket.cc, and aws-ofi-nccl's
// "NET/OFI Selected provider is ..." lines; they are written for this test.
#include <gtest/gtest.h>

#include "zt/check/nccl_log.hpp"

using zt::check::FabricFacts;
using zt::check::FabricStatus;
using zt::check::NetKind;

namespace {

// Two DGX-style nodes over InfiniBand with GPU Direct RDMA.
constexpr const char* kIbLog = R"(
dgx01:1234:1234 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>
dgx01:1234:1234 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so), using internal implementation
dgx01:1234:1290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>
dgx01:1234:1290 [0] NCCL INFO Using network IB
dgx01:1234:1290 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 16 cudaDev 0 busId 18000 - Init START
dgx01:1234:1290 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'
dgx01:1234:1290 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'
dgx01:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
dgx01:1234:1290 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [receive] via NET/IB/0/GDRDMA
dgx01:1234:1290 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1(1)/GDRDMA/Shared
)";

// The same cluster after a container without rdma-core: NCCL falls back to sockets.
constexpr const char* kSocketLog = R"(
dgx01:1234:1234 [0] NCCL INFO NET/IB : No device found.
dgx01:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]ib0:10.1.0.1<0>
dgx01:1234:1234 [0] NCCL INFO Using network Socket
dgx01:1234:1290 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [receive] via NET/Socket/0
dgx01:1234:1290 [0] NCCL WARN NET/Socket : message truncated
)";

// p5 with aws-ofi-nccl.
constexpr const char* kEfaLog = R"(
p5-01:77:77 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v7)
p5-01:77:77 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.7.4-aws
p5-01:77:77 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)
p5-01:77:77 [0] NCCL INFO Using network AWS Libfabric
p5-01:77:90 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/AWS Libfabric/0/GDRDMA
)";

FabricFacts facts(std::vector<std::string> providers, bool ib = false) {
  FabricFacts f;
  f.providers = std::move(providers);
  f.infiniband_sysfs = ib;
  return f;
}

}  // namespace

TEST(NcclLog, ReadsTheIbLines) {
  const auto info = zt::check::parse_nccl_log(kIbLog);
  EXPECT_EQ(info.network, "IB");
  EXPECT_EQ(info.kind, NetKind::kIB);
  EXPECT_EQ(info.plugin, "");
  EXPECT_EQ(info.devices, "[0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>");
  EXPECT_EQ(info.net_channels, 2);  // the P2P line is not a network connection
  EXPECT_EQ(info.gdr_channels, 2);
  EXPECT_EQ(info.gdr_enabled_hcas, 2);
  EXPECT_EQ(info.gdr_disabled_hcas, 0);
  EXPECT_TRUE(info.warnings.empty());
}

TEST(NcclLog, ReadsTheSocketAndEfaLines) {
  const auto socket = zt::check::parse_nccl_log(kSocketLog);
  EXPECT_EQ(socket.network, "Socket");
  EXPECT_EQ(socket.kind, NetKind::kSocket);
  EXPECT_EQ(socket.devices, "[0]eth0:10.0.0.1<0> [1]ib0:10.1.0.1<0>");
  EXPECT_EQ(socket.net_channels, 1);
  EXPECT_EQ(socket.gdr_channels, 0);
  ASSERT_EQ(socket.warnings.size(), 1u);
  EXPECT_EQ(socket.warnings[0], "NET/Socket : message truncated");

  const auto efa = zt::check::parse_nccl_log(kEfaLog);
  EXPECT_EQ(efa.network, "AWS Libfabric");
  EXPECT_EQ(efa.kind, NetKind::kLibfabric);
  EXPECT_EQ(efa.plugin, "AWS Libfabric");
  EXPECT_EQ(efa.ofi_provider, "efa");
  EXPECT_EQ(efa.gdr_channels, 1);
  // Newer plugins: lower-case "provider" and a fabric name after a comma.
  const auto newer = zt::check::parse_nccl_log(
      "h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)\n"
      "h:1:1 [0] NCCL INFO Using network Libfabric\n");
  EXPECT_EQ(newer.ofi_provider, "efa");
  EXPECT_EQ(newer.kind, NetKind::kLibfabric);
}

TEST(NcclLog, ClassifiesNetworkNames) {
  EXPECT_EQ(zt::check::classify_network("IB"), NetKind::kIB);
  EXPECT_EQ(zt::check::classify_network("Socket"), NetKind::kSocket);
  EXPECT_EQ(zt::check::classify_network("AWS Libfabric"), NetKind::kLibfabric);
  EXPECT_EQ(zt::check::classify_network("OFI"), NetKind::kLibfabric);
  EXPECT_EQ(zt::check::classify_network("Gin"), NetKind::kOther);
  EXPECT_EQ(zt::check::classify_network(""), NetKind::kUnknown);
}

TEST(NcclLog, ExpectedNetworkFromProviders) {
  EXPECT_EQ(zt::check::expected_network(facts({"efa", "shm", "tcp"})), "efa");
  EXPECT_EQ(zt::check::expected_network(facts({"verbs;ofi_rxm", "tcp"})), "ib");
  EXPECT_EQ(zt::check::expected_network(facts({"tcp"}, true)), "ib");
  EXPECT_EQ(zt::check::expected_network(facts({"shm", "tcp;ofi_rxm", "udp"})), "any");
}

TEST(NcclLog, SocketFallbackFailsWhereRdmaExists) {
  const auto socket = zt::check::parse_nccl_log(kSocketLog);
  const auto on_ib = zt::check::judge_fabric(facts({"verbs;ofi_rxm", "tcp"}, true), socket);
  EXPECT_EQ(on_ib.status, FabricStatus::kFail);
  EXPECT_NE(on_ib.message.find("fell back to TCP sockets"), std::string::npos) << on_ib.message;
  const auto on_efa = zt::check::judge_fabric(facts({"efa", "tcp"}), socket);
  EXPECT_EQ(on_efa.status, FabricStatus::kFail);
  // Without RDMA hardware, sockets are what there is.
  EXPECT_EQ(zt::check::judge_fabric(facts({"tcp", "shm"}), socket).status, FabricStatus::kPass);
}

TEST(NcclLog, RightNetworkPasses) {
  const auto ib = zt::check::judge_fabric(facts({"verbs;ofi_rxm"}, true), zt::check::parse_nccl_log(kIbLog));
  EXPECT_EQ(ib.status, FabricStatus::kPass) << ib.message;
  EXPECT_NE(ib.message.find("2 of 2 network connections use GPU Direct RDMA"), std::string::npos) << ib.message;
  const auto efa = zt::check::judge_fabric(facts({"efa", "shm"}), zt::check::parse_nccl_log(kEfaLog));
  EXPECT_EQ(efa.status, FabricStatus::kPass) << efa.message;
  // IB on an EFA node is not EFA.
  EXPECT_EQ(zt::check::judge_fabric(facts({"efa"}), zt::check::parse_nccl_log(kIbLog)).status, FabricStatus::kFail);
}

TEST(NcclLog, NoGdrWarnsAndNoNetworkLineFails) {
  std::string no_gdr = kIbLog;
  for (size_t at; (at = no_gdr.find("/GDRDMA")) != std::string::npos;) no_gdr.erase(at, 7);
  const auto j = zt::check::judge_fabric(facts({}, true), zt::check::parse_nccl_log(no_gdr));
  EXPECT_EQ(j.status, FabricStatus::kWarn);
  EXPECT_NE(j.message.find("0 of 2"), std::string::npos) << j.message;
  const auto empty = zt::check::parse_nccl_log("h:1:1 [0] NCCL INFO cudaDriverVersion 12040\n");
  EXPECT_EQ(zt::check::judge_fabric(facts({}, true), empty).status, FabricStatus::kFail);
  EXPECT_EQ(zt::check::judge_fabric(facts({"tcp"}), empty).status, FabricStatus::kWarn);
}
