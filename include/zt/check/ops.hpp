#pragma once
// The operations `zt check` benchmarks, in the order it runs them (all_reduce first).
// Each has one entry in the table of collectives (checklist/src/collectives.cpp), which
// holds everything else about it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace zt::check {

enum class CheckOp : uint8_t {
  kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSendRecv, kAllToAll,
  kEnd  // not an operation: the number of them
};

inline constexpr auto kAllCheckOps = [] {
  std::array<CheckOp, static_cast<size_t>(CheckOp::kEnd)> ops{};
  for (size_t i = 0; i < ops.size(); ++i) ops[i] = static_cast<CheckOp>(i);
  return ops;
}();

// all_reduce, all_gather, reduce_scatter, broadcast, sendrecv, all_to_all.
std::string_view check_op_name(CheckOp op);

// One name; throws zt::InputError naming it and listing the valid names.
CheckOp parse_check_op(std::string_view name);

// A comma-separated list ("all_reduce,broadcast" or "all"). The result holds each op once,
// in the run order above, whatever order the list gave. Throws zt::InputError on an
// unknown or empty name.
std::vector<CheckOp> parse_check_ops(std::string_view list);

// True for the ops that combine values (all_reduce, reduce_scatter): they have a redop.
bool op_reduces(CheckOp op);

// The placements the Comm interface has: in place for every op but sendrecv and
// all_to_all (whose receive buffer must not overlap the send buffer), out of place for
// every op but broadcast (Comm::broadcast takes one buffer).
bool has_in_place(CheckOp op);
bool has_out_of_place(CheckOp op);

}  // namespace zt::check
