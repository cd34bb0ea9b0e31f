// The staged communicator's split (src/zero/staged_comm.cpp) as Comm::split says: a rank
// that passes a negative colour gets nullptr (it was a null dereference), the others a
// working staged communicator over their colour, whose all_reduce matches the sum the
// test computes itself. Needs 2 ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <vector>

#include "memory.hpp"
#include "support/mpi_fixtures.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/offload/pinned_pool.hpp"

namespace zt::zero::testing {
namespace {

TEST(StagedSplit, NegativeColourGivesNoCommunicator) {
  const int n = zt::testing::world_size(), r = zt::testing::world_rank();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  std::unique_ptr<comm::Comm> world = comm::make_mpi_comm(MPI_COMM_WORLD);
  std::unique_ptr<detail::Space> space = detail::make_host_space(offload::Isa::kScalar, true, "fp32");
  auto pool = std::make_shared<offload::PinnedPool>(uint64_t{1} << 20, false);
  std::unique_ptr<comm::Comm> staged = detail::make_staged_comm(*world, *space, pool);
  // Rank 0 opts out; the others form one communicator.
  std::unique_ptr<comm::Comm> sub = staged->split(r == 0 ? -1 : 0, r);
  if (r == 0) {
    EXPECT_EQ(sub, nullptr);
  } else {
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), n - 1);
    std::vector<float> x(8, static_cast<float>(r));
    sub->all_reduce(x.data(), x.data(), x.size(), DType::kF32, comm::ReduceOp::kSum);
    float want = 0;
    for (int k = 1; k < n; ++k) want += static_cast<float>(k);
    for (float v : x) EXPECT_EQ(v, want);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace zt::zero::testing
