// --thresholds auto: which shipped tables fit this node, and gates that fall outside the
// sweep (include/zt/check/thresholds.hpp).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "zt/check/environment.hpp"
#include "zt/check/nccl_log.hpp"
#include "zt/check/thresholds.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

// Where the shipped thresholds tables are: $ZT_THRESHOLDS_DIR, else the source tree's.
std::string thresholds_dir() {
  const char* env = std::getenv("ZT_THRESHOLDS_DIR");
  return env != nullptr && *env != '\0' ? env : ZT_THRESHOLDS_DIR;
}

// First /sys/class/infiniband/*/ports/1/rate ("400 Gb/sec (4X NDR)"), or "".
std::string infiniband_rate() {
  std::error_code ec;
  for (const auto& dev : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    std::ifstream in(dev.path() / "ports" / "1" / "rate");
    std::string rate;
    if (std::getline(in, rate)) return rate;
  }
  return {};
}

}  // namespace

std::vector<std::string> select_threshold_files(const std::string& dir, const std::string& device_name,
                                                const std::string& expected_network,
                                                const std::string& ib_rate) {
  std::vector<std::string> files;
  const std::string gpu = upper(device_name);
  if (gpu.empty()) {
    files.push_back(dir + "/cpu-local.toml");
    return files;
  }
  if (gpu.find("H200") != std::string::npos) files.push_back(dir + "/gpu-h200.toml");
  else if (gpu.find("H100") != std::string::npos) files.push_back(dir + "/gpu-h100.toml");
  else if (gpu.find("A100") != std::string::npos) files.push_back(dir + "/gpu-a100.toml");
  if (expected_network == "efa") files.push_back(dir + "/fabric-efa.toml");
  if (expected_network == "ib")
    files.push_back(dir + (upper(ib_rate).find("HDR") != std::string::npos ? "/fabric-ib-hdr.toml"
                                                                           : "/fabric-ib-ndr.toml"));
  return files;
}

void drop_gates_outside(Thresholds& t, const std::vector<uint64_t>& sweep) {
  auto in_sweep = [&](uint64_t size) { return std::find(sweep.begin(), sweep.end(), size) != sweep.end(); };
  for (OpThresholds& op : t.ops) {
    const std::string name(check_op_name(op.op));
    if (op.busbw && !in_sweep(op.busbw->size)) {
      t.dropped.push_back(strf("gate %s busbw @ %s not evaluated: not a size of the sweep", name.c_str(),
                               format_size(op.busbw->size).c_str()));
      op.busbw.reset();
    }
    if (op.latency && !in_sweep(op.latency->size)) {
      t.dropped.push_back(strf("gate %s latency @ %s not evaluated: not a size of the sweep", name.c_str(),
                               format_size(op.latency->size).c_str()));
      op.latency.reset();
    }
  }
  t.ops.erase(std::remove_if(t.ops.begin(), t.ops.end(),
                             [](const OpThresholds& op) { return !op.busbw && !op.latency; }),
              t.ops.end());
}

// --thresholds auto: the shipped tables for rank 0's GPU and fabric, merged; gates at
// sizes outside the sweep are dropped with a note.
Thresholds auto_thresholds(const Environment& env, const std::vector<uint64_t>& sweep) {
  FabricFacts facts;
  facts.providers = env.fabric_providers;
  facts.infiniband_sysfs = !infiniband_rate().empty();
  const std::string device = env.ranks.empty() ? "" : env.ranks[0].device_name;
  const std::vector<std::string> files = select_threshold_files(
      thresholds_dir(), device, expected_network(facts), infiniband_rate());
  if (files.empty())
    throw InputError("--thresholds auto: zt ships no table for GPU '" + device + "'",
                     "give --thresholds FILE (checklist/thresholds/ has examples)");
  Thresholds t = parse_thresholds_file(files[0]);
  for (size_t i = 1; i < files.size(); ++i) t = merge_thresholds(t, parse_thresholds_file(files[i]));
  drop_gates_outside(t, sweep);
  return t;
}

}  // namespace zt::check
