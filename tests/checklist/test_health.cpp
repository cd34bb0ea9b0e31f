// NIC health from sysfs (the fake trees in data/sysfs) and its counter growth between two
// snapshots; the kernel log's Xid lines.
#include <gtest/gtest.h>

#include "zt/check/health.hpp"

namespace zc = zt::check;

namespace {

const std::string kData = std::string(ZT_SOURCE_DIR) + "/tests/checklist/data/sysfs/";

const zc::HealthCheck& named(const std::vector<zc::HealthCheck>& checks, const std::string& name) {
  for (const zc::HealthCheck& c : checks)
    if (c.name == name) return c;
  throw std::runtime_error("no check " + name);
}

double number(const zc::HealthCheck& c, const std::string& key) {
  for (const auto& [k, v] : c.numbers)
    if (k == key) return v;
  throw std::runtime_error("no number " + key);
}

}  // namespace

TEST(NicHealth, ReadsTheFakeTree) {
  const auto ports = zc::read_nic_ports(kData + "healthy");
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].device, "mlx5_0");
  EXPECT_EQ(ports[0].port, "1");
  EXPECT_EQ(ports[0].state, "4: ACTIVE");
  EXPECT_EQ(ports[0].rate, "400 Gb/sec (4X NDR)");
  EXPECT_EQ(ports[0].counters.size(), 5u);
  const auto checks = zc::nic_health(ports, ports, 0, "h");
  EXPECT_EQ(named(checks, "nic.port").status, zc::HealthStatus::kPass);
  EXPECT_EQ(named(checks, "nic.errors").status, zc::HealthStatus::kPass);
  EXPECT_EQ(number(named(checks, "nic.port"), "rate_gbps"), 400.0);
}

TEST(NicHealth, CounterGrowthDuringTheCheckFails) {
  auto before = zc::read_nic_ports(kData + "healthy");
  auto after = before;
  for (auto& [name, value] : before[0].counters)
    if (name == "symbol_error") value = 10;  // 10 before the check ...
  for (auto& [name, value] : after[0].counters)
    if (name == "symbol_error") value = 17;  // ... 17 after: 7 grew
  const auto checks = zc::nic_health(before, after, 0, "h");
  const zc::HealthCheck& e = named(checks, "nic.errors");
  EXPECT_EQ(e.status, zc::HealthStatus::kFail);
  EXPECT_EQ(e.action, zc::HealthAction::kCheckCable);
  EXPECT_EQ(number(e, "symbol_error_growth"), 7.0);
  EXPECT_NE(e.message.find("symbol_error +7"), std::string::npos) << e.message;
  // The same non-zero counter without growth: a WARN to watch.
  const auto steady = zc::nic_health(after, after, 0, "h");
  EXPECT_EQ(named(steady, "nic.errors").status, zc::HealthStatus::kWarn);
  EXPECT_EQ(named(steady, "nic.errors").action, zc::HealthAction::kMonitor);
}

TEST(NicHealth, PortDownAndSlowPort) {
  const auto down = zc::nic_health({}, zc::read_nic_ports(kData + "port_down"), 0, "h");
  EXPECT_EQ(named(down, "nic.port").status, zc::HealthStatus::kFail);
  EXPECT_EQ(named(down, "nic.port").action, zc::HealthAction::kCheckCable);
  auto ports = zc::read_nic_ports(kData + "healthy");
  ports.push_back(ports[0]);
  ports[1].port = "2";
  ports[1].rate = "200 Gb/sec (4X HDR)";
  const auto checks = zc::nic_health(ports, ports, 0, "h");
  EXPECT_EQ(checks[2].subject, "mlx5_0 port 2");
  EXPECT_EQ(checks[2].status, zc::HealthStatus::kWarn);
  EXPECT_EQ(zc::nic_health({}, {}, 0, "h")[0].status, zc::HealthStatus::kSkip);
}

TEST(KernelLog, XidLines) {
  std::string why;
  const auto lines = zc::kernel_xid_lines(kData + "port_down", &why);
  EXPECT_TRUE(why.empty()) << why;
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "NVRM: Xid (PCI:0000:1b:00): 79, pid=0, GPU has fallen off the bus.");
  EXPECT_TRUE(zc::kernel_xid_lines(kData + "healthy", &why).empty());
  zc::kernel_xid_lines(kData + "no-such-root", &why);
  EXPECT_NE(why.find("not readable"), std::string::npos);
}
