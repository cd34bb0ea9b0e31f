// NcclComm on device buffers: the same checks as the MpiComm tests (collective_checks),
// plus async operations in flight, split, counters and the timeout. Label `gpu`: every
// test skips itself where this process sees no GPU or the ranks outnumber the GPUs
// (NCCL needs one GPU per rank).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

#include "collective_checks.hpp"
#include "values.hpp"
#include "zt/comm/nccl_comm.hpp"
#include "zt/core/error.hpp"
#include "zt/runtime/runtime.hpp"

namespace zt::comm::testing {
namespace {

void cuda_ok(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(rc));
}

class DeviceSpace final : public BufferSpace {
 public:
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void upload(void* dst, const void* host, size_t bytes) override {
    cuda_ok(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  void download(void* host, const void* src, size_t bytes) override {
    cuda_ok(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  }
};

// NCCL's float average pre-multiplies by 1/n: for n not a power of two each of the n
// terms (|x| <= 5) is rounded, so allow n + 1 roundings at magnitude 8.
double avg_tolerance(DType t, ReduceOp op, int n) {
  if (op != ReduceOp::kAvg || !dtype_is_float(t) || (n & (n - 1)) == 0) return 0;
  const double eps = t == DType::kBF16 ? 0x1p-8 : t == DType::kF16 ? 0x1p-11
                     : t == DType::kF32 ? 0x1p-24 : 0x1p-53;
  return (n + 1) * 8 * 2 * eps;
}

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    int ranks = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int devices = runtime::cuda_device_count();
    if (devices == 0) GTEST_SKIP() << "no GPU visible";
    if (ranks > devices) GTEST_SKIP() << ranks << " ranks but " << devices << " GPUs";
    runtime::cuda_set_device(rank % devices);
    comm_ = make_nccl_comm(MPI_COMM_WORLD);
    comm_->set_timeout(std::chrono::seconds(60));
  }
  std::unique_ptr<Comm> comm_;
  DeviceSpace space_;
};

TEST_F(Nccl, Basics) {
  EXPECT_TRUE(nccl_available());
  EXPECT_FALSE(nccl_version().empty());
  EXPECT_EQ(comm_->backend(), "nccl");
  EXPECT_EQ(comm_->memory(), Memory::kDevice);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(comm_->rank(), rank);
  EXPECT_EQ(comm_->size(), size);
}

TEST_F(Nccl, AllReduce) {
  for (DType t : kAllDTypes)
    for (ReduceOp op : kAllReduceOps)
      for (size_t count : kCounts)
        for (bool in_place : {false, true})
          check_all_reduce(*comm_, space_,
                           {t, count, in_place, op, 0, avg_tolerance(t, op, comm_->size())});
}

TEST_F(Nccl, AllGather) {
  for (DType t : kAllDTypes)
    for (size_t count : kCounts)
      for (bool in_place : {false, true}) check_all_gather(*comm_, space_, {t, count, in_place});
}

TEST_F(Nccl, ReduceScatter) {
  for (DType t : kAllDTypes)
    for (ReduceOp op : kAllReduceOps)
      for (size_t count : kCounts)
        for (bool in_place : {false, true})
          check_reduce_scatter(*comm_, space_,
                               {t, count, in_place, op, 0, avg_tolerance(t, op, comm_->size())});
}

TEST_F(Nccl, BroadcastFromEveryRoot) {
  for (DType t : kAllDTypes)
    for (size_t count : kCounts)
      for (int root = 0; root < comm_->size(); ++root)
        check_broadcast(*comm_, space_, {t, count, false, ReduceOp::kSum, root});
}

TEST_F(Nccl, SendRecvRing) {
  for (DType t : kAllDTypes)
    for (size_t count : kCounts) check_ring_sendrecv(*comm_, space_, {t, count, false});
}

TEST_F(Nccl, AllToAllUneven) {
  for (DType t : kAllDTypes)
    for (size_t count : kCounts) check_all_to_all(*comm_, space_, {t, count, false});
}

TEST_F(Nccl, AsyncInFlightWaitedInReverseOrder) {
  const int n = comm_->size(), me = comm_->rank();
  const size_t count = 1009, un = static_cast<size_t>(n);
  Buffer a(space_, count, DType::kF32), a_out(space_, count, DType::kF32);
  Buffer g(space_, count, DType::kI32), g_out(space_, count * un, DType::kI32);
  Buffer r(space_, count, DType::kU8), r_out(space_, count, DType::kU8);
  a.fill(me, 0, 1);
  g.fill(me, 0, 2);
  r.fill(me, 0, 3);
  std::vector<Handle> h;
  h.push_back(comm_->iall_reduce(a.data(), a_out.data(), count, DType::kF32, ReduceOp::kSum));
  h.push_back(comm_->irecv(r_out.data(), count, DType::kU8, (me + n - 1) % n));
  h.push_back(comm_->isend(r.data(), count, DType::kU8, (me + 1) % n));
  h.push_back(comm_->iall_gather(g.data(), g_out.data(), count, DType::kI32));
  for (auto it = h.rbegin(); it != h.rend(); ++it) (*it)->wait();
  const auto ar = a_out.to_host(), ag = g_out.to_host(), ring = r_out.to_host();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(load(DType::kF32, ar.data(), i), reference_reduce(ReduceOp::kSum, DType::kF32, n, i, 1));
    ASSERT_EQ(load(DType::kU8, ring.data(), i), input_value(DType::kU8, (me + n - 1) % n, i, 3));
  }
  for (size_t j = 0; j < count * un; ++j)
    ASSERT_EQ(load(DType::kI32, ag.data(), j),
              input_value(DType::kI32, static_cast<int>(j / count), j % count, 2));
}

TEST_F(Nccl, SplitEvenOddReversed) {
  const int n = comm_->size(), me = comm_->rank();
  auto sub = comm_->split(me % 2, -me);
  ASSERT_NE(sub, nullptr);
  std::vector<int> members;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == me % 2) members.push_back(r);
  EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
  Buffer mine(space_, 1, DType::kI32), all(space_, members.size(), DType::kI32);
  const int32_t v = me;
  space_.upload(mine.data(), &v, sizeof v);
  sub->all_gather(mine.data(), all.data(), 1, DType::kI32);
  const auto got = all.to_host();
  for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(load(DType::kI32, got.data(), i), members[i]);
}

TEST_F(Nccl, CountersMatchTextbookVolumes) {
  const uint64_t un = static_cast<uint64_t>(comm_->size());
  const size_t count = 12 * 64;
  Buffer a(space_, count * un, DType::kBF16), b(space_, count * un, DType::kBF16);
  comm_->reset_counters();
  comm_->all_reduce(a.data(), b.data(), count, DType::kBF16, ReduceOp::kSum);
  comm_->all_gather(a.data(), b.data(), count, DType::kBF16);
  comm_->barrier();
  EXPECT_EQ(comm_->counters().bytes[static_cast<int>(Op::kAllReduce)], 2 * (un - 1) * count * 2 / un);
  EXPECT_EQ(comm_->counters().bytes[static_cast<int>(Op::kAllGather)], (un - 1) * count * 2);
  EXPECT_EQ(comm_->counters().total_calls(), 3u);
}

TEST_F(Nccl, UnmatchedReceiveTimesOut) {
  // Rank 0 receives from rank 1, which never sends: rank 0's wait must throw, naming
  // the op and rank. Its communicator is aborted then, so the test uses one of its own.
  if (comm_->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto mine = comm_->split(0, 0);
  ASSERT_NE(mine, nullptr);
  if (mine->rank() == 0) {
    mine->set_timeout(std::chrono::milliseconds(500));
    Buffer buf(space_, 1024, DType::kF32);
    Handle h = mine->irecv(buf.data(), 1024, DType::kF32, 1);
    std::string msg;
    try {
      h->wait();
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("nccl recv of 1024 x float (4096 bytes) from rank 1"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("rank 0 of " + std::to_string(mine->size())), std::string::npos) << msg;
    EXPECT_THROW(mine->barrier(), Error);  // an aborted communicator refuses more work
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace zt::comm::testing
