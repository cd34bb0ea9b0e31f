// NIC health from sysfs (the fake trees in data/sysfs) and its counter growth between two
// snapshots; the kernel log's Xid lines.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "node_files.hpp"
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
  EXPECT_EQ(ports[0].counters.size(), 8u);
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

// Health inputs that cannot be read (one test over the class): every kind of bad kernel
// file makes its check UNKNOWN naming the file, never PASS; none blocks (a FIFO) or is read
// without bound (/dev/zero); the port's good counters are still read.
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A port whose facts and counters are all healthy.
fs::path good_port(const fs::path& root, const std::string& device) {
  const fs::path port = root / "sys/class/infiniband" / device / "ports/1";
  put(port / "state", "4: ACTIVE\n");
  put(port / "phys_state", "5: LinkUp\n");
  put(port / "rate", "400 Gb/sec (4X NDR)\n");
  put(port / "link_layer", "InfiniBand\n");
  for (const char* c : {"symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
                        "port_xmit_discards", "port_rcv_remote_physical_errors",
                        "local_link_integrity_errors", "excessive_buffer_overrun_errors"})
    put(port / "counters" / c, "0\n");
  return port;
}

struct TempRoot {
  fs::path path;
  TempRoot() {
    std::string t = (fs::temp_directory_path() / "zt-health-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempRoot() { fs::remove_all(path); }
};

}  // namespace

TEST(NicHealth, EveryUnreadableCounterIsUnknownNamingTheFile) {
  TempRoot root;
  // device -> (file under the port, how it is spoiled); the file is named in the message.
  using Spoil = void (*)(const fs::path&);
  const std::map<std::string, std::pair<std::string, Spoil>> cases = {
      {"abc", {"counters/symbol_error", [](const fs::path& f) { put(f, "abc\n"); }}},
      {"past_2_64", {"counters/link_downed", [](const fs::path& f) { put(f, "18446744073709551616\n"); }}},
      {"negative", {"counters/port_rcv_errors", [](const fs::path& f) { put(f, "-5\n"); }}},
      {"exponent", {"counters/port_xmit_discards", [](const fs::path& f) { put(f, "1.5e3\n"); }}},
      {"plus", {"counters/symbol_error", [](const fs::path& f) { put(f, "+7\n"); }}},
      {"hex", {"counters/symbol_error", [](const fs::path& f) { put(f, "0x10\n"); }}},
      {"trailing", {"counters/symbol_error", [](const fs::path& f) { put(f, "12abc\n"); }}},
      {"empty", {"counters/link_error_recovery", [](const fs::path& f) { put(f, ""); }}},
      {"huge", {"counters/symbol_error", [](const fs::path& f) { put(f, std::string(8192, '0')); }}},
      {"gone", {"counters/local_link_integrity_errors", [](const fs::path& f) { fs::remove(f); }}},
      {"no_folder", {"counters", [](const fs::path& f) { fs::remove_all(f); }}},
      {"folder_is_file", {"counters", [](const fs::path& f) { fs::remove_all(f); put(f, "0\n"); }}},
      {"fifo", {"counters/symbol_error", [](const fs::path& f) { fs::remove(f); ASSERT_EQ(::mkfifo(f.c_str(), 0600), 0); }}},
      {"dev_zero", {"counters/symbol_error", [](const fs::path& f) { fs::remove(f); fs::create_symlink("/dev/zero", f); }}},
      {"a_folder", {"counters/port_rcv_errors", [](const fs::path& f) { fs::remove(f); fs::create_directory(f); }}},
  };
  for (const auto& [device, spoil] : cases) spoil.second(good_port(root.path, device) / spoil.first);
  const auto ports = zc::read_nic_ports(root.path.string());
  const auto checks = zc::nic_health(ports, ports, 0, "h");
  size_t seen = 0;
  for (const zc::HealthCheck& c : checks) {
    if (c.name != "nic.errors") continue;
    const std::string device = c.subject.substr(0, c.subject.find(' '));
    ASSERT_TRUE(cases.count(device)) << c.subject;
    ++seen;
    EXPECT_EQ(c.status, zc::HealthStatus::kUnknown) << device << ": " << c.message;
    const std::string file = (root.path / "sys/class/infiniband" / device / "ports/1" / cases.at(device).first).string();
    EXPECT_NE(c.message.find("'" + file + "'"), std::string::npos) << device << ": " << c.message;
  }
  EXPECT_EQ(seen, cases.size());
  for (const zc::NicPort& p : ports) {  // the good counters of a spoiled port are still read
    if (p.device == "abc") {
      EXPECT_EQ(p.counters.size(), 7u);
    }
    if (p.device == "no_folder") {
      EXPECT_EQ(p.counters.size(), 0u);
    }
    EXPECT_TRUE(p.unreadable_facts.empty()) << p.device << ": " << p.unreadable_facts[0];
  }
  // A grown counter still FAILs beside an unreadable one.
  auto before = ports;
  auto after = ports;
  for (zc::NicPort& p : after)
    for (auto& [name, value] : p.counters) value += 3;
  EXPECT_EQ(named(zc::nic_health(before, after, 0, "h"), "nic.errors").status, zc::HealthStatus::kFail);
}

TEST(NicHealth, UnreadablePortFactsAreUnknownNotDown) {
  TempRoot root;
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"state_gone", {"state", ""}}, {"phys_fifo", {"phys_state", "fifo"}},
      {"rate_junk", {"rate", "inf Gb/sec (4X NDR)\n"}}, {"rate_word", {"rate", "fast\n"}},
      {"layer_zero", {"link_layer", "zero"}},
  };
  for (const auto& [device, spoil] : cases) {
    const fs::path f = good_port(root.path, device) / spoil.first;
    fs::remove(f);
    if (spoil.second == "fifo") ASSERT_EQ(::mkfifo(f.c_str(), 0600), 0);
    else if (spoil.second == "zero") fs::create_symlink("/dev/zero", f);
    else if (!spoil.second.empty()) put(f, spoil.second);
  }
  put(root.path / "sys/class/infiniband/no_ports/ports", "not a folder\n");
  const auto checks = zc::nic_health({}, zc::read_nic_ports(root.path.string()), 0, "h");
  size_t seen = 0;
  for (const zc::HealthCheck& c : checks) {
    if (c.name != "nic.port") continue;
    ++seen;
    const std::string device = c.subject.substr(0, c.subject.find(' '));
    EXPECT_EQ(c.status, zc::HealthStatus::kUnknown) << device << ": " << c.message;
    const std::string file = device == "no_ports" ? "ports" : "ports/1/" + cases.at(device).first;
    EXPECT_NE(c.message.find(device + "/" + file + "'"), std::string::npos) << device << ": " << c.message;
  }
  EXPECT_EQ(seen, cases.size() + 1);
}

TEST(NodeFiles, WholeNumbersOnly) {
  const std::map<std::string, std::optional<uint64_t>> table = {
      {"0", 0}, {"17", 17}, {"18446744073709551615", UINT64_MAX}, {"00042", 42},
      {"18446744073709551616", std::nullopt}, {"99999999999999999999", std::nullopt},
      {"-5", std::nullopt}, {"+5", std::nullopt}, {"1.5e3", std::nullopt}, {"1e3", std::nullopt},
      {"", std::nullopt}, {" 5", std::nullopt}, {"5 ", std::nullopt}, {"0x10", std::nullopt},
      {"abc", std::nullopt}, {"8 GPUs", std::nullopt}, {"１", std::nullopt}};
  for (const auto& [text, want] : table) EXPECT_EQ(zc::parse_whole_number(text), want) << "'" << text << "'";
}

TEST(NodeFiles, SlurmGpusOnNodeIsReadStrictly) {
  zc::HealthOptions o;
  const std::map<std::string, int> table = {{"8", 8}, {"0", 0}, {"1023", 1023}, {"abc", -1}, {"8 GPUs", -1},
                                            {"-1", -1}, {"1e3", -1}, {"1024", -1}, {"99999999999999999999", -1}};
  for (const auto& [text, want] : table) {
    ::setenv("SLURM_GPUS_ON_NODE", text.c_str(), 1);
    std::string why;
    EXPECT_EQ(zc::expected_gpus(o, &why), want) << text;
    EXPECT_EQ(why.empty(), want >= 0) << text << ": " << why;
    if (want < 0) {
      EXPECT_NE(why.find("SLURM_GPUS_ON_NODE='" + text + "'"), std::string::npos) << why;
    }
  }
  ::unsetenv("SLURM_GPUS_ON_NODE");
  std::string why;
  EXPECT_EQ(zc::expected_gpus(o, &why), -1);
  EXPECT_TRUE(why.empty()) << why;  // unset: not checked, nothing wrong
  o.gpus_per_node = 4;
  ::setenv("SLURM_GPUS_ON_NODE", "junk", 1);
  EXPECT_EQ(zc::expected_gpus(o, &why), 4);  // the option wins; the variable is not read
  ::unsetenv("SLURM_GPUS_ON_NODE");
}
