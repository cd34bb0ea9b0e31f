// Thresholds TOML file -> gates, and the pass/warn/fail rules (include/zt/check/thresholds.hpp).
#include "join.hpp"
#include "number_rule.hpp"
#include "zt/check/thresholds.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <utility>
#include <toml++/toml.h>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

constexpr std::string_view kSchemaHint =
    "see docs/checklist.md (thresholds): one table per op ([all_reduce], [all_gather], "
    "[reduce_scatter], [broadcast], [sendrecv]) with keys size, min_busbw_gbs or min_busbw, "
    "warn_band, latency_size, max_latency_us or max_latency; stage tables [pairs], [h2d], "
    "[d2h], [io_write] with min_bw, warn_band; [intra_node_all_reduce] with size, min_busbw; "
    "top level: warn_band, description; units GB/s MB/s TB/s Gb/s Gbit/s Gbps, ns us ms s";

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw InputError("thresholds file " + source + ": " + what, std::string(kSchemaHint));
}

// "file, line N: what" when the node knows where it came from.
[[noreturn]] void bad_at(const std::string& source, const toml::source_region& where,
                         const std::string& what) {
  if (where.begin.line == 0) bad(source, what);
  bad(source, strf("line %u: ", static_cast<unsigned>(where.begin.line)) + what);
}

// Every number of the file passes here: finite and in its key's range (number_rule.hpp).
double in_range(double v, const NumberRange& range, const toml::node& node, const std::string& source,
                const std::string& key) {
  const std::string problem = number_problem(v, range);
  if (!problem.empty()) bad_at(source, node.source(), "'" + key + "' " + problem);
  return v;
}

double number_at(const toml::node& node, const std::string& source, const std::string& key,
                 const NumberRange& range) {
  if (!node.is_number()) bad_at(source, node.source(), "'" + key + "' must be a number");
  return in_range(node.value<double>().value_or(0.0), range, node, source, key);
}

// A number with a unit, in a string: "360 GB/s". `parse` converts it (bandwidth or latency).
double unit_at(const toml::node& node, const std::string& source, const std::string& key,
               double (*parse)(std::string_view), const NumberRange& range) {
  if (!node.is_string())
    bad_at(source, node.source(), "'" + key + "' must be a string with a unit such as \"360 GB/s\"");
  double v = 0.0;
  try {
    v = parse(node.value<std::string>().value_or(""));
  } catch (const InputError& e) {
    bad_at(source, node.source(), "'" + key + "': " + e.message());
  }
  return in_range(v, range, node, source, key);
}

uint64_t size_at(const toml::node& node, const std::string& source, const std::string& key) {
  if (node.is_integer()) {
    const int64_t v = node.value<int64_t>().value_or(-1);
    if (v < 1) bad_at(source, node.source(), "'" + key + "' must be a positive number of bytes");
    return static_cast<uint64_t>(v);
  }
  if (!node.is_string())
    bad_at(source, node.source(), "'" + key + "' must be a size string such as \"64M\"");
  try {
    return parse_size(node.value<std::string>().value_or(""));
  } catch (const InputError& e) {
    bad_at(source, node.source(), "'" + key + "': " + e.message());
  }
}

double warn_band_at(const toml::node& node, const std::string& source, const std::string& key) {
  return number_at(node, source, key, kWarnBand);
}

OpThresholds parse_op_table(CheckOp op, const toml::table& table, const std::string& source,
                            double default_band) {
  const std::string name(check_op_name(op));
  OpThresholds t;
  t.op = op;
  t.warn_band = default_band;
  std::optional<uint64_t> size, latency_size;
  std::optional<double> min_busbw, max_latency;
  for (auto&& [key_node, value] : table) {
    const std::string key(key_node.str());
    const std::string full = name + "." + key;
    if (key == "size") {
      size = size_at(value, source, full);
    } else if (key == "min_busbw_gbs") {
      min_busbw = number_at(value, source, full, kBandwidthGbs);
    } else if (key == "min_busbw") {
      min_busbw = unit_at(value, source, full, parse_bandwidth_gbs, kBandwidthGbs);
    } else if (key == "warn_band") {
      t.warn_band = warn_band_at(value, source, full);
    } else if (key == "latency_size") {
      latency_size = size_at(value, source, full);
    } else if (key == "max_latency_us") {
      max_latency = number_at(value, source, full, kLatencyUs);
    } else if (key == "max_latency") {
      max_latency = unit_at(value, source, full, parse_latency_us, kLatencyUs);
    } else {
      bad_at(source, key_node.source(), "unknown key '" + full + "'");
    }
  }
  const toml::source_region& where = table.source();
  if (size.has_value() != min_busbw.has_value())
    bad_at(source, where, "[" + name + "] needs both 'size' and 'min_busbw_gbs' (or neither)");
  if (latency_size.has_value() != max_latency.has_value())
    bad_at(source, where, "[" + name + "] needs both 'latency_size' and 'max_latency_us' (or neither)");
  if (!size && !latency_size)
    bad_at(source, where, "[" + name + "] has no gate: give size + min_busbw_gbs or latency_size + max_latency_us");
  if (size) t.busbw = BusbwGate{*size, *min_busbw};
  if (latency_size) t.latency = LatencyGate{*latency_size, *max_latency};
  return t;
}

// [pairs], [h2d], [d2h], [io_write]: min_bw (+ warn_band); [intra_node_all_reduce]:
// size + min_busbw (or min_busbw_gbs) (+ warn_band).
StageThresholds parse_stage_table(Stage stage, const toml::table& table, const std::string& source,
                                  double default_band) {
  const std::string name(stage_name(stage));
  const bool busbw = stage == Stage::kIntraNodeAllReduce;
  StageThresholds t;
  t.stage = stage;
  t.warn_band = default_band;
  std::optional<double> minimum;
  for (auto&& [key_node, value] : table) {
    const std::string key(key_node.str());
    const std::string full = name + "." + key;
    if (key == "warn_band") {
      t.warn_band = warn_band_at(value, source, full);
    } else if (busbw && key == "size") {
      t.size = size_at(value, source, full);
    } else if (busbw && key == "min_busbw_gbs") {
      minimum = number_at(value, source, full, kBandwidthGbs);
    } else if (key == (busbw ? "min_busbw" : "min_bw")) {
      minimum = unit_at(value, source, full, parse_bandwidth_gbs, kBandwidthGbs);
    } else {
      bad_at(source, key_node.source(), "unknown key '" + full + "'");
    }
  }
  if (!minimum)
    bad_at(source, table.source(),
           "[" + name + "] has no gate: give " + (busbw ? "min_busbw" : "min_bw") + " = \"N GB/s\"");
  t.min_gbs = *minimum;
  return t;
}

// A number followed by a unit from `units` (name, factor to the result unit).
double number_with_unit(std::string_view text, const char* what,
                        std::initializer_list<std::pair<std::string_view, double>> units,
                        const char* unit_list) {
  const std::string s(text);
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(s, &used);
    // Plain decimal only: stod also reads "inf", "nan" and hex ("0x1p4").
    if (s.substr(0, used).find_first_not_of("0123456789.eE+- ") != std::string::npos)
      throw std::invalid_argument(s);
  } catch (const std::exception&) {
    throw InputError(strf("'%s' is not a %s (a number and a unit)", s.c_str(), what),
                     std::string("write it as e.g. \"") + (what[0] == 'b' ? "360 GB/s" : "50 us") + "\"");
  }
  std::string unit = s.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  unit.erase(unit.find_last_not_of(' ') + 1);
  for (const auto& [name, factor] : units)
    if (unit == name) return value * factor;
  throw InputError(strf("unknown unit '%s' in '%s'", unit.c_str(), s.c_str()),
                   std::string("use one of: ") + unit_list);
}

}  // namespace

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::kIntraNodeAllReduce: return "intra_node_all_reduce";
    case Stage::kPairs: return "pairs";
    case Stage::kH2D: return "h2d";
    case Stage::kD2H: return "d2h";
    case Stage::kIoWrite: return "io_write";
  }
  return "?";
}

double parse_bandwidth_gbs(std::string_view text) {
  // bytes: GB/s = 1e9 B/s; bits: Gb/s = 1e9 bit/s = 0.125 GB/s.
  return number_with_unit(text, "bandwidth",
                          {{"GB/s", 1.0}, {"MB/s", 1e-3}, {"TB/s", 1e3}, {"Gb/s", 0.125},
                           {"Gbit/s", 0.125}, {"Gbps", 0.125}},
                          "GB/s, MB/s, TB/s (bytes), Gb/s, Gbit/s, Gbps (bits)");
}

double parse_latency_us(std::string_view text) {
  return number_with_unit(text, "latency", {{"ns", 1e-3}, {"us", 1.0}, {"ms", 1e3}, {"s", 1e6}},
                          "ns, us, ms, s");
}

Thresholds merge_thresholds(Thresholds a, const Thresholds& b) {
  for (const OpThresholds& t : b.ops) {
    auto same = std::find_if(a.ops.begin(), a.ops.end(), [&](const OpThresholds& x) { return x.op == t.op; });
    if (same != a.ops.end()) *same = t;
    else a.ops.push_back(t);
  }
  for (const StageThresholds& t : b.stages) {
    auto same = std::find_if(a.stages.begin(), a.stages.end(),
                             [&](const StageThresholds& x) { return x.stage == t.stage; });
    if (same != a.stages.end()) *same = t;
    else a.stages.push_back(t);
  }
  std::sort(a.ops.begin(), a.ops.end(), [](const OpThresholds& x, const OpThresholds& y) { return x.op < y.op; });
  std::sort(a.stages.begin(), a.stages.end(),
            [](const StageThresholds& x, const StageThresholds& y) { return x.stage < y.stage; });
  a.source += " + " + b.source;
  if (!b.description.empty()) a.description = join({a.description, b.description}, "; ");
  return a;
}

Thresholds parse_thresholds_text(std::string_view text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    bad(source, strf("malformed TOML at line %u: %s",
                     static_cast<unsigned>(e.source().begin.line),
                     std::string(e.description()).c_str()));
  }

  double default_band = kDefaultWarnBand;
  if (const toml::node* band = root.get("warn_band")) default_band = warn_band_at(*band, source, "warn_band");

  Thresholds thresholds;
  thresholds.source = source;
  for (auto&& [key_node, value] : root) {
    const std::string key(key_node.str());
    if (key == "warn_band") continue;
    if (key == "description") {
      if (!value.is_string()) bad_at(source, value.source(), "'description' must be a string");
      thresholds.description = value.value<std::string>().value_or("");
      continue;
    }
    const auto op = std::find_if(std::begin(kAllCheckOps), std::end(kAllCheckOps),
                                 [&](CheckOp c) { return check_op_name(c) == key; });
    const auto stage = std::find_if(std::begin(kAllStages), std::end(kAllStages),
                                    [&](Stage c) { return stage_name(c) == key; });
    if (op == std::end(kAllCheckOps) && stage == std::end(kAllStages))
      bad_at(source, key_node.source(), "unknown key or op '" + key + "'");
    if (!value.is_table()) bad_at(source, value.source(), "'" + key + "' must be a table: [" + key + "]");
    if (op != std::end(kAllCheckOps))
      thresholds.ops.push_back(parse_op_table(*op, *value.as_table(), source, default_band));
    else
      thresholds.stages.push_back(parse_stage_table(*stage, *value.as_table(), source, default_band));
  }
  if (thresholds.ops.empty() && thresholds.stages.empty())
    bad(source, "it has no gates (no op table such as [all_reduce])");
  // TOML tables have no order; gates are listed in run order (all_reduce first).
  std::sort(thresholds.ops.begin(), thresholds.ops.end(),
            [](const OpThresholds& a, const OpThresholds& b) { return a.op < b.op; });
  std::sort(thresholds.stages.begin(), thresholds.stages.end(),
            [](const StageThresholds& a, const StageThresholds& b) { return a.stage < b.stage; });
  return thresholds;
}

Thresholds parse_thresholds_file(const std::string& path) {
  // A directory, device or FIFO is refused before reading (issue 20).
  return parse_thresholds_text(
      read_regular_file(path, "thresholds file",
                        "give a TOML file (or 'auto'); checklist/thresholds/ has examples"),
      path);
}

std::string_view gate_status_name(GateStatus s) {
  switch (s) {
    case GateStatus::kPass: return "pass";
    case GateStatus::kWarn: return "warn";
    case GateStatus::kFail: return "fail";
  }
  return "?";
}

GateStatus judge_minimum(double measured, double minimum, double warn_band) {
  if (!(measured >= minimum)) return GateStatus::kFail;  // NaN fails too
  if (measured < minimum * (1.0 + warn_band)) return GateStatus::kWarn;
  return GateStatus::kPass;
}

GateStatus judge_maximum(double measured, double maximum, double warn_band) {
  if (!(measured <= maximum)) return GateStatus::kFail;
  if (measured > maximum * (1.0 - warn_band)) return GateStatus::kWarn;
  return GateStatus::kPass;
}

}  // namespace zt::check
