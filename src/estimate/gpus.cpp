// Reading data/gpus.csv (see gpus.hpp): a plain comma-separated table we ship ourselves.
#include "zt/estimate/gpus.hpp"


#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/shipped.hpp"


namespace zt::estimate {
namespace fs = std::filesystem;
namespace {

constexpr const char* kHeader =
    "name,architecture,memory_gib,memory_bandwidth_gb_s,gpu_interconnect,interconnect_gb_s,"
    "bf16_dense_tflops,notes";

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    out.push_back(trim(std::string_view(line).substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

double number(const std::string& field, const char* column, const std::string& where) {
  if (field.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  if (end != field.c_str() + field.size() || v < 0)
    throw InputError(strf("%s: column %s holds '%s', not a number >= 0", where.c_str(), column,
                          field.c_str()),
                     "fix the row in gpus.csv (empty is allowed and reads as 0)");
  return v;
}

}  // namespace

uint64_t GpuSpec::memory_bytes() const {
  return static_cast<uint64_t>(memory_gib * 1024.0 * 1024.0 * 1024.0);
}

std::vector<GpuSpec> parse_gpus_csv(std::string_view text, const std::string& origin) {
  std::istringstream in{std::string(text)};
  std::string raw;
  int line_no = 0;
  bool header = false;
  std::vector<GpuSpec> out;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string line = trim(raw);
    if (line.empty()) continue;
    const std::string where = origin + ":" + std::to_string(line_no);
    if (!header) {
      if (line != kHeader)
        throw InputError(where + ": unexpected header '" + line + "'",
                         std::string("the first line of gpus.csv must be: ") + kHeader);
      header = true;
      continue;
    }
    const std::vector<std::string> f = split(line);
    if (f.size() != 8)
      throw InputError(strf("%s: %zu fields, expected 8", where.c_str(), f.size()),
                       std::string("columns: ") + kHeader + " (no commas inside fields)");
    GpuSpec g;
    g.name = f[0];
    if (g.name.empty()) throw InputError(where + ": empty name", "every row needs a name");
    g.architecture = f[1];
    g.memory_gib = number(f[2], "memory_gib", where);
    g.bandwidth_gb_s = number(f[3], "memory_bandwidth_gb_s", where);
    g.interconnect = f[4];
    g.interconnect_gb_s = number(f[5], "interconnect_gb_s", where);
    g.bf16_tflops = number(f[6], "bf16_dense_tflops", where);
    g.notes = f[7];
    if (g.memory_gib <= 0)
      throw InputError(where + ": memory_gib must be > 0", "fill in the GPU's memory in GiB");
    out.push_back(std::move(g));
  }
  if (!header) throw InputError(origin + ": empty file", std::string("expected the header ") + kHeader);
  return out;
}

std::vector<std::string> gpus_csv_candidates() {
  return shipped_file_candidates(fs::path(kShippedGpus).filename().string());
}

std::vector<GpuSpec> load_shipped_gpus() {
  std::string tried;
  const std::string c = find_shipped_file(fs::path(kShippedGpus).filename().string(), &tried);
  if (c.empty())
    throw InputError(std::string("the GPU table ") + kShippedGpus + " was not found; looked in:" + tried,
                     "run from a zt source checkout, or set ZT_DATA_DIR to the folder holding "
                     "gpus.csv; or give --gpu-mem instead of --gpu");
  std::ifstream f(c, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f && !f.eof()) throw InputError("cannot read " + c, "check the file's permissions");
  return parse_gpus_csv(ss.str(), c);
}

const GpuSpec& find_gpu(const std::vector<GpuSpec>& gpus, std::string_view name,
                        std::string_view flag) {
  const std::string want = lower(trim(name));
  for (const GpuSpec& g : gpus)
    if (lower(g.name) == want) return g;
  std::string valid;
  for (const GpuSpec& g : gpus) valid += (valid.empty() ? "" : ", ") + g.name;
  throw InputError(std::string(flag) + ": unknown GPU '" + std::string(name) + "'",
                   "valid names (data/gpus.csv): " + valid);
}

namespace {

// Device name words -> row of gpus.csv, the more specific rules first (gpu_for_device).
struct DeviceRule {
  std::vector<std::string_view> words;
  std::string_view row;
};
const std::vector<DeviceRule>& device_rules() {
  static const std::vector<DeviceRule> rules = {
      {{"H200", "NVL"}, "h200-nvl"},          {{"H200"}, "h200-sxm"},
      {{"H100", "PCIE"}, "h100-pcie"},        {{"H100", "NVL"}, "h100-nvl"},
      {{"H100"}, "h100-sxm"},                 {{"A100", "PCIE", "80GB"}, "a100-pcie-80"},
      {{"A100", "PCIE"}, "a100-pcie-40"},     {{"A100", "80GB"}, "a100-sxm-80"},
      {{"A100"}, "a100-sxm-40"},              {{"L40S"}, "l40s"},
      {{"L4"}, "l4"},                         {{"A30"}, "a30"},
      {{"A40"}, "a40"},                       {{"A6000"}, "rtx-a6000"},
      {{"A10"}, "a10"},                       {{"T4"}, "t4"},
      {{"V100", "32GB"}, "v100-sxm-32"}};
  return rules;
}

}  // namespace

const GpuSpec* gpu_for_device(const std::vector<GpuSpec>& gpus, std::string_view device_name) {
  std::string name(device_name.substr(0, device_name.find(" [")));
  for (char& c : name) c = static_cast<char>(c == '-' ? ' ' : std::toupper(static_cast<unsigned char>(c)));
  std::vector<std::string> words;
  std::istringstream in(name);
  for (std::string w; in >> w;) words.push_back(w);
  const auto has = [&words](std::string_view w) { return std::find(words.begin(), words.end(), w) != words.end(); };
  for (const DeviceRule& rule : device_rules()) {
    if (!std::all_of(rule.words.begin(), rule.words.end(), has)) continue;
    for (const GpuSpec& g : gpus)
      if (lower(g.name) == rule.row) return &g;
    return nullptr;  // the rule's row is not in this table
  }
  return nullptr;
}

}  // namespace zt::estimate
