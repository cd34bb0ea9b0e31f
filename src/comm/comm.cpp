// The backend-independent part of the comm layer: names, counter totals, and the
// byte volumes of the ring algorithms (the definition is in docs/comm.md).
#include "zt/comm/comm.hpp"

#include <vector>

#include "describe.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::comm {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kAllReduce: return "all_reduce";
    case Op::kAllGather: return "all_gather";
    case Op::kReduceScatter: return "reduce_scatter";
    case Op::kBroadcast: return "broadcast";
    case Op::kSend: return "send";
    case Op::kRecv: return "recv";
    case Op::kBarrier: return "barrier";
    case Op::kAllToAll: return "all_to_all";
  }
  return "?";
}

uint64_t Counters::total_bytes() const {
  uint64_t sum = 0;
  for (uint64_t b : bytes) sum += b;
  return sum;
}

uint64_t Counters::total_calls() const {
  uint64_t sum = 0;
  for (uint64_t c : calls) sum += c;
  return sum;
}

namespace {

// The requests of one operation made of several: done when all are.
class Composite final : public Request {
 public:
  explicit Composite(std::vector<Handle> parts) : parts_(std::move(parts)) {}
  void wait() override {
    for (Handle& h : parts_) h->wait();
  }
  bool test() override {
    bool done = true;
    for (Handle& h : parts_) done = h->test() && done;  // test every part: each progresses
    return done;
  }

 private:
  std::vector<Handle> parts_;
};

// Elements in chunk c when `count` elements are cut into n near-equal chunks: the first
// count % n chunks hold one element more.
uint64_t ring_chunk(uint64_t count, int n, int c) {
  const uint64_t un = static_cast<uint64_t>(n);
  return count / un + (static_cast<uint64_t>(c) < count % un ? 1 : 0);
}

}  // namespace

uint64_t algorithm_bytes(Op op, size_t count, DType dtype, int rank, int n, int root) {
  ZT_CHECK(n >= 1 && rank >= 0 && rank < n, strf("rank %d of %d", rank, n),
           "algorithm_bytes needs 0 <= rank < n");
  const uint64_t elem = dtype_size(dtype);
  const uint64_t S = static_cast<uint64_t>(count) * elem;  // bytes in one buffer
  if (n == 1 && op != Op::kSend) return 0;
  switch (op) {
    case Op::kAllReduce: {
      // Ring of n ranks, buffer cut in n chunks. Reduce-scatter phase: at step s
      // (s = 0..n-2) rank r sends chunk (r - s) mod n, i.e. every chunk except
      // (r + 1) mod n, which it ends up owning. All-gather phase: at step s rank r sends
      // chunk (r + 1 - s) mod n, i.e. every chunk except (r + 2) mod n.
      const uint64_t skip1 = ring_chunk(count, n, (rank + 1) % n);
      const uint64_t skip2 = ring_chunk(count, n, (rank + 2) % n);
      return (2 * static_cast<uint64_t>(count) - skip1 - skip2) * elem;
    }
    case Op::kAllGather:
    case Op::kReduceScatter:
      // count is per rank: n - 1 steps, one part of `count` elements each.
      return static_cast<uint64_t>(n - 1) * S;
    case Op::kBroadcast: {
      // Chain root -> root+1 -> ... -> root+n-1 (mod n): all but the last forward S.
      ZT_CHECK(root >= 0 && root < n, strf("root %d of %d", root, n),
               "broadcast root must be a rank of the communicator");
      const int last = (root + n - 1) % n;
      return rank == last ? 0 : S;
    }
    case Op::kSend:
    case Op::kAllToAll: return S;  // all_to_all: count = the elements sent to other ranks
    case Op::kRecv:
    case Op::kBarrier: return 0;
  }
  return 0;
}

Handle Comm::iall_to_all(const void* send, std::span<const size_t> send_counts,
                         std::span<const size_t> send_offsets, void* recv,
                         std::span<const size_t> recv_counts,
                         std::span<const size_t> recv_offsets, DType dtype) {
  detail::check_all_to_all(send_counts, send_offsets, recv_counts, recv_offsets, size());
  const size_t elem = dtype_size(dtype);
  std::vector<Handle> parts;
  for (int p = 0; p < size(); ++p) {  // receives first, then sends: no rendezvous deadlock
    const auto i = static_cast<size_t>(p);
    if (recv_counts[i] > 0)
      parts.push_back(irecv(static_cast<std::byte*>(recv) + recv_offsets[i] * elem,
                            recv_counts[i], dtype, p));
  }
  for (int p = 0; p < size(); ++p) {
    const auto i = static_cast<size_t>(p);
    if (send_counts[i] > 0)
      parts.push_back(isend(static_cast<const std::byte*>(send) + send_offsets[i] * elem,
                            send_counts[i], dtype, p));
  }
  return std::make_unique<Composite>(std::move(parts));
}

}  // namespace zt::comm
