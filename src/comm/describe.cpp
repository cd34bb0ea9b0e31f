// Messages shared by MpiComm and NcclComm (see describe.hpp).
#include "describe.hpp"

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::comm::detail {

std::string describe(Op what, size_t count, DType dtype, ReduceOp op, int peer) {
  std::string s(op_name(what));
  if (what == Op::kAllReduce || what == Op::kReduceScatter)
    s += " (" + std::string(reduce_op_name(op)) + ")";
  if (what == Op::kBarrier) return s;
  const std::string name(dtype_name(dtype));
  s += strf(" of %zu x %s (%zu bytes%s)", count, name.c_str(), count * dtype_size(dtype),
            what == Op::kAllGather || what == Op::kReduceScatter ? " per rank"
            : what == Op::kAllToAll                              ? " sent to the other ranks"
                                                                 : "");
  if (what == Op::kBroadcast) s += strf(" from root %d", peer);
  if (what == Op::kSend) s += strf(" to rank %d", peer);
  if (what == Op::kRecv) s += strf(" from rank %d", peer);
  return s;
}

void check_all_to_all(std::span<const size_t> send_counts, std::span<const size_t> send_offsets,
                      std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets,
                      int n) {
  const auto want = static_cast<size_t>(n);
  if (send_counts.size() != want || send_offsets.size() != want || recv_counts.size() != want ||
      recv_offsets.size() != want)
    throw InputError(strf("all_to_all: counts and offsets need one entry per rank (%d); got "
                          "send %zu/%zu, recv %zu/%zu",
                          n, send_counts.size(), send_offsets.size(), recv_counts.size(),
                          recv_offsets.size()),
                     "pass spans of size() entries: element counts and offsets per peer");
}

size_t all_to_all_sent(std::span<const size_t> send_counts, int me) {
  size_t sum = 0;
  for (size_t p = 0; p < send_counts.size(); ++p)
    if (static_cast<int>(p) != me) sum += send_counts[p];
  return sum;
}

Error timeout_error(std::string_view backend, const std::string& what, int rank, int size,
                    std::chrono::milliseconds timeout, std::string_view extra_hint) {
  std::string hint =
      "a rank died, is stuck, or called a different operation, count or type; check the "
      "other ranks' logs for the first error. If the operation is legitimately slow, raise "
      "--timeout (config comm.timeout)";
  if (!extra_hint.empty()) hint += "; " + std::string(extra_hint);
  std::string lost;
  if (runtime::Liveness* live = runtime::Liveness::current()) lost = live->verdict();
  return Error(strf("%.*s %s did not complete within %lld ms on rank %d of %d (host %s)%s%s",
                    static_cast<int>(backend.size()), backend.data(), what.c_str(),
                    static_cast<long long>(timeout.count()), rank, size,
                    process_host().c_str(), lost.empty() ? "" : ": ", lost.c_str()),
               hint);
}

void throw_timeout(std::string_view backend, const std::string& what, int rank, int size,
                   std::chrono::milliseconds timeout, std::string_view extra_hint) {
  throw timeout_error(backend, what, rank, size, timeout, extra_hint);
}

}  // namespace zt::comm::detail
