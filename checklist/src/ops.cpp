// Names and properties of the benchmarked operations (include/zt/check/ops.hpp), read
// from the table of collectives.
#include "zt/check/ops.hpp"

#include <algorithm>
#include <string>

#include "collectives.hpp"
#include "zt/core/error.hpp"

namespace zt::check {

std::string_view check_op_name(CheckOp op) { return collective(op).name; }

CheckOp parse_check_op(std::string_view name) {
  std::string names;
  for (CheckOp op : kAllCheckOps) {
    if (check_op_name(op) == name) return op;
    names += (names.empty() ? "" : ", ") + std::string(check_op_name(op));
  }
  throw InputError("unknown operation '" + std::string(name) + "'",
                   "use all, or a comma-separated list of " + names);
}

std::vector<CheckOp> parse_check_ops(std::string_view list) {
  std::vector<bool> wanted(std::size(kAllCheckOps), false);
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view name = list.substr(start, comma - start);
    if (name.empty())
      throw InputError("empty operation name in --ops '" + std::string(list) + "'",
                       "separate names by single commas, e.g. --ops all_reduce,all_gather");
    if (name == "all") {
      std::fill(wanted.begin(), wanted.end(), true);
    } else {
      wanted[static_cast<size_t>(parse_check_op(name))] = true;
    }
    start = comma + 1;
  }
  std::vector<CheckOp> ops;
  for (CheckOp op : kAllCheckOps)
    if (wanted[static_cast<size_t>(op)]) ops.push_back(op);
  return ops;
}

bool op_reduces(CheckOp op) { return collective(op).reduces; }
bool has_in_place(CheckOp op) { return collective(op).in_place; }
bool has_out_of_place(CheckOp op) { return collective(op).out_of_place; }

}  // namespace zt::check
