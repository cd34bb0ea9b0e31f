// Reading a baseline (report.json of an earlier run) and checking that it describes the
// same kind of run (include/zt/check/baseline.hpp).
#include "join.hpp"
#include "number_rule.hpp"
#include "zt/check/baseline.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/log.hpp"

namespace zt::check {
namespace {

constexpr const char* kHint =
    "give --baseline the report.json of an earlier healthy `zt check --report DIR` run with "
    "the same ranks and --ops";

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw InputError("baseline file " + source + ": " + what, kHint);
}

// Every number of a baseline passes here: finite and in its range (number_rule.hpp).
double checked(const nlohmann::json& value, const NumberRange& range, const std::string& source,
               const std::string& key) {
  const double v = value.get<double>();
  const std::string problem = number_problem(v, range);
  if (!problem.empty()) bad(source, "'" + key + "' " + problem);
  return v;
}

std::string op_list(const std::vector<CheckOp>& ops) {
  std::vector<std::string> names;
  for (CheckOp op : ops) names.emplace_back(check_op_name(op));
  return join(names, ",");
}

// The worse busbw of the placements a result row has (null placements are skipped).
double worse_busbw(const nlohmann::json& row, const std::string& source) {
  double worst = -1.0;
  for (const char* place : {"out_of_place", "in_place"}) {
    const auto it = row.find(place);
    if (it == row.end() || it->is_null()) continue;
    if (!it->contains("bus_bw") || !(*it)["bus_bw"].is_number())
      bad(source, std::string("a result has no numeric ") + place + ".bus_bw");
    const double bw = checked((*it)["bus_bw"], kMeasuredGbs, source, std::string("results.") + place + ".bus_bw");
    worst = worst < 0.0 ? bw : std::min(worst, bw);
  }
  return worst;
}

}  // namespace

Baseline parse_baseline_text(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    bad(source, strf("not JSON (%s)", e.what()));
  }
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object())
    bad(source, "not a zt check report (no 'config' object)");
  const nlohmann::json& config = j["config"];
  if (!config.contains("nranks") || !config["nranks"].is_number_integer())
    bad(source, "not a zt check report (no integer 'config.nranks')");
  if (!config.contains("ops") || !config["ops"].is_array())
    bad(source, "not a zt check report (no 'config.ops' list)");
  if (!j.contains("results") || !j["results"].is_array())
    bad(source, "not a zt check report (no 'results' list)");

  Baseline b;
  b.source = source;
  b.nranks = static_cast<int>(checked(config["nranks"], kRanks, source, "config.nranks"));
  for (const auto& name : config["ops"]) {
    if (!name.is_string()) bad(source, "'config.ops' holds a value that is not a string");
    try {
      b.ops.push_back(parse_check_op(name.get<std::string>()));
    } catch (const InputError& e) {
      bad(source, "config.ops: " + e.message());
    }
  }
  for (const auto& row : j["results"]) {
    if (!row.is_object() || !row.contains("op") || !row.contains("nominal_size") ||
        !row["op"].is_string() || !row["nominal_size"].is_number_unsigned())
      bad(source, "a result has no 'op' or 'nominal_size'");
    BaselineRow r;
    try {
      r.op = parse_check_op(row["op"].get<std::string>());
    } catch (const InputError& e) {
      bad(source, "results: " + e.message());
    }
    r.nominal_size = row["nominal_size"].get<uint64_t>();
    r.bus_bw = worse_busbw(row, source);
    if (r.bus_bw >= 0.0) b.rows.push_back(r);
  }
  const auto pairs = j.find("pairs");
  if (pairs != j.end() && pairs->is_object() && pairs->value("ran", false) &&
      pairs->contains("slowest_gbs") && (*pairs)["slowest_gbs"].is_number())
    b.slowest_pair_gbs = checked((*pairs)["slowest_gbs"], kMeasuredGbs, source, "pairs.slowest_gbs");
  return b;
}

Baseline parse_baseline_file(const std::string& path) {
  // A device or FIFO would be read until memory runs out, or forever (issue 20).
  return parse_baseline_text(read_regular_file(path, "baseline file", kHint), path);
}

void check_baseline_ops(const Baseline& baseline, const std::vector<CheckOp>& ops) {
  if (baseline.ops != ops)
    throw InputError(strf("baseline file %s measured ops %s, this run measures %s",
                          baseline.source.c_str(), op_list(baseline.ops).c_str(),
                          op_list(ops).c_str()),
                     "run with the baseline's --ops, or record a new baseline with these ops");
}

void check_baseline_world(const Baseline& baseline, int nranks) {
  if (baseline.nranks != nranks)
    throw InputError(strf("baseline file %s comes from a %d-rank run, this run has %d ranks",
                          baseline.source.c_str(), baseline.nranks, nranks),
                     "bandwidths depend on the world size: record a baseline with the same "
                     "number of ranks");
}

}  // namespace zt::check
