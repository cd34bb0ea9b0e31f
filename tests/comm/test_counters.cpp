// Byte and call counters: algorithm_bytes against hand-computed values, and MpiComm's
// counters against textbook volumes computed here independently (closed formulas where
// the count divides evenly, an explicit step-by-step ring simulation otherwise).
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "zt/comm/mpi_comm.hpp"

namespace zt::comm::testing {
namespace {

constexpr int kAR = static_cast<int>(Op::kAllReduce);
constexpr int kAG = static_cast<int>(Op::kAllGather);
constexpr int kRS = static_cast<int>(Op::kReduceScatter);
constexpr int kBC = static_cast<int>(Op::kBroadcast);
constexpr int kSend = static_cast<int>(Op::kSend);
constexpr int kRecv = static_cast<int>(Op::kRecv);
constexpr int kBarrier = static_cast<int>(Op::kBarrier);

// Ring all-reduce, simulated: chunk sizes by hand, then every step of both phases,
// adding what `rank` sends. Elements, not bytes.
uint64_t simulated_ring_all_reduce(uint64_t count, int n, int rank) {
  std::vector<uint64_t> chunk(static_cast<size_t>(n));
  uint64_t left = count;
  for (int c = 0; c < n; ++c) {  // n near-equal chunks, larger ones first
    chunk[static_cast<size_t>(c)] = (left + static_cast<uint64_t>(n - c) - 1) / static_cast<uint64_t>(n - c);
    left -= chunk[static_cast<size_t>(c)];
  }
  uint64_t sent = 0;
  for (int phase = 0; phase < 2; ++phase) {
    // Reduce-scatter: at step s rank r sends chunk (r - s); all-gather: chunk (r + 1 - s).
    for (int s = 0; s < n - 1; ++s) {
      const int c = ((rank + phase - s) % n + n) % n;
      sent += chunk[static_cast<size_t>(c)];
    }
  }
  return sent;
}

TEST(AlgorithmBytes, HandComputedValues) {
  // 10 floats over 4 ranks: chunks 3,3,2,2. Rank r skips chunks r+1 and r+2.
  EXPECT_EQ(algorithm_bytes(Op::kAllReduce, 10, DType::kF32, 0, 4), (20u - 3 - 2) * 4);
  EXPECT_EQ(algorithm_bytes(Op::kAllReduce, 10, DType::kF32, 1, 4), (20u - 2 - 2) * 4);
  EXPECT_EQ(algorithm_bytes(Op::kAllReduce, 10, DType::kF32, 2, 4), (20u - 2 - 3) * 4);
  EXPECT_EQ(algorithm_bytes(Op::kAllReduce, 10, DType::kF32, 3, 4), (20u - 3 - 3) * 4);
  // 2 ranks: each sends the whole buffer once (half in each phase).
  EXPECT_EQ(algorithm_bytes(Op::kAllReduce, 7, DType::kF64, 0, 2), 56u);
  EXPECT_EQ(algorithm_bytes(Op::kAllReduce, 7, DType::kF64, 1, 2), 56u);
  // One rank sends nothing, whatever the operation but send.
  for (Op op : {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter, Op::kBroadcast, Op::kRecv,
                Op::kBarrier})
    EXPECT_EQ(algorithm_bytes(op, 1000, DType::kF32, 0, 1), 0u) << op_name(op);
  EXPECT_EQ(algorithm_bytes(Op::kAllGather, 5, DType::kBF16, 2, 3), 2u * 5 * 2);
  EXPECT_EQ(algorithm_bytes(Op::kReduceScatter, 5, DType::kI64, 0, 4), 3u * 5 * 8);
  // Broadcast chain 2 -> 3 -> 0 -> 1: rank 1 is last.
  EXPECT_EQ(algorithm_bytes(Op::kBroadcast, 6, DType::kI32, 1, 4, 2), 0u);
  EXPECT_EQ(algorithm_bytes(Op::kBroadcast, 6, DType::kI32, 2, 4, 2), 24u);
  EXPECT_EQ(algorithm_bytes(Op::kBroadcast, 6, DType::kI32, 0, 4, 2), 24u);
  EXPECT_EQ(algorithm_bytes(Op::kSend, 6, DType::kU8, 0, 4), 6u);
  EXPECT_EQ(algorithm_bytes(Op::kRecv, 6, DType::kU8, 0, 4), 0u);
}

TEST(AlgorithmBytes, MatchesARingSimulation) {
  for (int n = 1; n <= 9; ++n)
    for (uint64_t count : {0u, 1u, 2u, 7u, 10u, 1009u, 4096u})
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(algorithm_bytes(Op::kAllReduce, count, DType::kF16, r, n),
                  2 * simulated_ring_all_reduce(count, n, r))
            << "n " << n << " count " << count << " rank " << r;
}

TEST(MpiCounters, TextbookVolumes) {
  auto comm = make_mpi_comm(MPI_COMM_WORLD);
  const int n = comm->size(), me = comm->rank();
  const uint64_t un = static_cast<uint64_t>(n);
  comm->reset_counters();

  // all_reduce of a count every n in 1..4 divides: 2 (n-1)/n * S.
  const size_t count = 12 * 16;
  std::vector<float> a(count * un, 1.0f), b(count * un);
  comm->all_reduce(a.data(), b.data(), count, DType::kF32, ReduceOp::kSum);
  const uint64_t S = count * 4;
  EXPECT_EQ(comm->counters().bytes[kAR], 2 * (un - 1) * S / un);

  // A count n does not divide: the simulated ring says what this rank sends.
  comm->all_reduce(a.data(), a.data(), 7, DType::kF32, ReduceOp::kMax);
  EXPECT_EQ(comm->counters().bytes[kAR], 2 * (un - 1) * S / un + 4 * simulated_ring_all_reduce(7, n, me));
  EXPECT_EQ(comm->counters().calls[kAR], 2u);

  // all_gather and reduce_scatter, count per rank: (n-1) * count * size.
  comm->all_gather(a.data(), b.data(), count, DType::kF32);
  EXPECT_EQ(comm->counters().bytes[kAG], (un - 1) * count * 4);
  comm->reduce_scatter(a.data(), b.data(), count, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(comm->counters().bytes[kRS], (un - 1) * count * 4);

  // broadcast from the last rank: every rank sends S except the one before the root.
  comm->broadcast(a.data(), count, DType::kF32, n - 1);
  const bool last_in_chain = me == (n >= 2 ? n - 2 : 0);
  EXPECT_EQ(comm->counters().bytes[kBC], last_in_chain ? 0u : S);

  // Over all ranks, a broadcast moves (n-1) S and an all_reduce 2 (n-1) S.
  uint64_t mine[2] = {comm->counters().bytes[kBC], comm->counters().bytes[kAR]};
  uint64_t total[2] = {0, 0};
  MPI_Allreduce(mine, total, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total[0], (un - 1) * S);
  EXPECT_EQ(total[1], 2 * (un - 1) * (S + 7 * 4));

  // send/recv ring: S sent, 0 counted for recv; barrier: a call, no bytes.
  comm->sendrecv(a.data(), (me + 1) % n, b.data(), (me + n - 1) % n, count, DType::kF32);
  comm->barrier();
  EXPECT_EQ(comm->counters().bytes[kSend], S);
  EXPECT_EQ(comm->counters().bytes[kRecv], 0u);
  EXPECT_EQ(comm->counters().calls[kSend], 1u);
  EXPECT_EQ(comm->counters().calls[kRecv], 1u);
  EXPECT_EQ(comm->counters().calls[kBarrier], 1u);
  EXPECT_EQ(comm->counters().bytes[kBarrier], 0u);
  EXPECT_EQ(comm->counters().total_calls(), 8u);
  EXPECT_EQ(comm->counters().total_bytes(),
            mine[1] + 2 * (un - 1) * count * 4 + mine[0] + S);

  // Async operations count when started.
  Handle h = comm->iall_gather(a.data(), b.data(), 1, DType::kF64);
  EXPECT_EQ(comm->counters().calls[kAG], 2u);
  h->wait();
  comm->reset_counters();
  EXPECT_EQ(comm->counters().total_calls(), 0u);
  EXPECT_EQ(comm->counters().total_bytes(), 0u);
}

TEST(Names, OpAndReduceOpNames) {
  EXPECT_EQ(op_name(Op::kAllReduce), "all_reduce");
  EXPECT_EQ(op_name(Op::kAllGather), "all_gather");
  EXPECT_EQ(op_name(Op::kReduceScatter), "reduce_scatter");
  EXPECT_EQ(op_name(Op::kBroadcast), "broadcast");
  EXPECT_EQ(op_name(Op::kSend), "send");
  EXPECT_EQ(op_name(Op::kRecv), "recv");
  EXPECT_EQ(op_name(Op::kBarrier), "barrier");
  EXPECT_EQ(op_name(Op::kAllToAll), "all_to_all");
  EXPECT_EQ(reduce_op_name(ReduceOp::kSum), "sum");
  EXPECT_EQ(reduce_op_name(ReduceOp::kAvg), "avg");
  EXPECT_EQ(reduce_op_name(ReduceOp::kMax), "max");
  EXPECT_EQ(reduce_op_name(ReduceOp::kMin), "min");
}

}  // namespace
}  // namespace zt::comm::testing
