// MpiComm collectives: every operation, dtype, reduce op, in place and out of place,
// counts not divisible by the world size, checked element by element against the
// independent reference of values.hpp. Run twice: with MPI's own count limit and with
// at most 3 elements per MPI call, which exercises the split path that operations over
// INT_MAX elements take; each with MPI's nonblocking collectives (the default) and its
// blocking ones (MpiCommOptions::blocking_collectives).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <iterator>
#include <vector>

#include "collective_checks.hpp"
#include "support/forwarding_comm.hpp"
#include "zt/comm/mpi_comm.hpp"

namespace zt::comm::testing {
namespace {

struct Variant {
  size_t max_elements_per_call;
  bool blocking;
};

class MpiCollectives : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    MpiCommOptions options;
    options.max_elements_per_call = GetParam().max_elements_per_call;
    options.blocking_collectives = GetParam().blocking;
    comm_ = make_mpi_comm(MPI_COMM_WORLD, options);
    comm_->set_timeout(std::chrono::seconds(60));  // fail, never hang
  }
  // The split path makes one MPI call per 3 elements (reduce_scatter: per rank too), so
  // it runs on smaller counts: still 1, a count below n * 3, and a prime above it.
  std::vector<size_t> counts() const {
    if (GetParam().max_elements_per_call == static_cast<size_t>(INT_MAX)) return {std::begin(kCounts), std::end(kCounts)};
    return {1, 7, 31};
  }
  std::unique_ptr<Comm> comm_;
  HostSpace space_;
};

TEST_P(MpiCollectives, AllReduce) {
  for (DType t : kAllDTypes)
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin})
      for (size_t count : counts())
        for (bool in_place : {false, true})
          check_all_reduce(*comm_, space_, {t, count, in_place, op});
}

TEST_P(MpiCollectives, AllGather) {
  for (DType t : kAllDTypes)
    for (size_t count : counts())
      for (bool in_place : {false, true}) check_all_gather(*comm_, space_, {t, count, in_place});
}

TEST_P(MpiCollectives, ReduceScatter) {
  for (DType t : kAllDTypes)
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin})
      for (size_t count : counts())
        for (bool in_place : {false, true})
          check_reduce_scatter(*comm_, space_, {t, count, in_place, op});
}

TEST_P(MpiCollectives, BroadcastFromEveryRoot) {
  for (DType t : kAllDTypes)
    for (size_t count : counts())
      for (int root = 0; root < comm_->size(); ++root)
        check_broadcast(*comm_, space_, {t, count, false, ReduceOp::kSum, root});
}

TEST_P(MpiCollectives, SendRecvRing) {
  for (DType t : kAllDTypes)
    for (size_t count : counts()) check_ring_sendrecv(*comm_, space_, {t, count, false});
}

TEST_P(MpiCollectives, AllToAllUneven) {
  for (DType t : kAllDTypes)
    for (size_t count : counts()) check_all_to_all(*comm_, space_, {t, count, false});
  check_all_to_all(*comm_, space_, {DType::kF32, 0, false});  // count 0: parts of r + 2p
}

// A communicator that wraps another and does not override iall_to_all: Comm's default
// (the same messages through isend and irecv).
TEST_P(MpiCollectives, AllToAllThroughTheDefault) {
  MpiCommOptions options;
  options.max_elements_per_call = GetParam().max_elements_per_call;
  zt::testing::ForwardingComm wrapped(make_mpi_comm(MPI_COMM_WORLD, options));
  wrapped.set_timeout(std::chrono::seconds(60));
  for (size_t count : counts())
    check_all_to_all(wrapped, space_, {DType::kBF16, count, false}, /*counted=*/false);
}

TEST_P(MpiCollectives, ZeroCountIsANoOp) {
  for (bool in_place : {false, true}) {
    check_all_reduce(*comm_, space_, {DType::kF32, 0, in_place});
    check_all_gather(*comm_, space_, {DType::kF32, 0, in_place});
    check_reduce_scatter(*comm_, space_, {DType::kF32, 0, in_place});
  }
  check_broadcast(*comm_, space_, {DType::kF32, 0, false});
  check_ring_sendrecv(*comm_, space_, {DType::kF32, 0, false});
}

INSTANTIATE_TEST_SUITE_P(Limits, MpiCollectives,
                         ::testing::Values(Variant{INT_MAX, false}, Variant{3, false},
                                           Variant{INT_MAX, true}, Variant{3, true}),
                         [](const ::testing::TestParamInfo<Variant>& p) {
                           const Variant& v = p.param;
                           return (v.max_elements_per_call == INT_MAX
                                       ? std::string("OneCall")
                                       : "Split" + std::to_string(v.max_elements_per_call)) +
                                  (v.blocking ? "Blocking" : "");
                         });

}  // namespace
}  // namespace zt::comm::testing
