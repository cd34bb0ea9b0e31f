// --thresholds auto: which shipped tables fit this node, and gates that fall outside the
// sweep (include/zt/check/thresholds.hpp).
#include <algorithm>
#include <cctype>

#include "zt/check/thresholds.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
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

}  // namespace zt::check
