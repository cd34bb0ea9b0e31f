// The pinned pool's bound and reuse, and the host-memory preflight's decisions and
// message (the numbers given to it directly: MemAvailable and the memlock limit of this
// machine are what they are; test_offload_device.cpp lowers the real memlock limit).
#include <gtest/gtest.h>

#include <limits>

#include "support/expect_error.hpp"
#include "zt/offload/pinned_pool.hpp"
#include "zt/offload/preflight.hpp"

namespace zt::offload {
namespace {

TEST(PinnedPool, ReusesBuffersAndStaysWithinItsBound) {
  PinnedPool pool(64 << 10, /*pinned=*/false);
  const int a = pool.try_acquire(16 << 10), b = pool.try_acquire(16 << 10);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.held_bytes(), 32u << 10);
  pool.release(a);
  EXPECT_EQ(pool.try_acquire(10 << 10), a) << "a free buffer large enough is reused";
  EXPECT_EQ(pool.held_bytes(), 32u << 10);
  const int c = pool.try_acquire(32 << 10);
  ASSERT_GE(c, 0);
  EXPECT_EQ(pool.held_bytes(), 64u << 10);
  EXPECT_EQ(pool.try_acquire(4 << 10), -1) << "full: the caller lands a copy first";
  zt::testing::expect_input_error([&] { pool.acquire(4 << 10, "a staged collective"); },
                                  {"offload.pinned_bytes = 64K is too small", "a staged collective",
                                   "4K", "64K of the pool are in use", "raise offload.pinned_bytes"});
  // Idle buffers too small for a request are freed to make room for it.
  pool.release(a);
  pool.release(b);
  const int d = pool.try_acquire(32 << 10);
  ASSERT_GE(d, 0);
  EXPECT_EQ(pool.held_bytes(), 64u << 10);
  EXPECT_LE(pool.peak_bytes(), 64u << 10);
  EXPECT_EQ(pool.try_acquire(1), -1);
  pool.release(c);
  pool.release(d);
  EXPECT_GE(pool.try_acquire(64 << 10), 0) << "two idle halves give way to one whole";
  EXPECT_EQ(pool.held_bytes(), 64u << 10);
}

HostNeed need_of(uint64_t state, uint64_t grads, uint64_t pinned, int ranks) {
  HostNeed n;
  n.state = state;
  n.grads = grads;
  n.pinned = pinned;
  n.ranks_on_node = ranks;
  return n;
}

TEST(HostPreflight, FitsOrRefusesWithTheNumbers) {
  constexpr uint64_t G = 1ull << 30, M = 1ull << 20;
  const uint64_t unlimited = std::numeric_limits<uint64_t>::max();
  // Fits: 2 ranks x (10G + 2G + 256M) under 30G, pool under the limit.
  EXPECT_NO_THROW(preflight_host_memory(need_of(10 * G, 2 * G, 256 * M, 2), 30 * G, 256 * M));
  EXPECT_NO_THROW(preflight_host_memory(need_of(10 * G, 0, 0, 1), 0, 0))
      << "MemAvailable unknown (0) is not checked; nothing pinned needs no memlock";
  // The node's ranks together do not fit.
  zt::testing::expect_input_error(
      [&] { preflight_host_memory(need_of(10 * G, 2 * G, 256 * M, 4), 40 * G, unlimited); },
      {"needed 12.2G on this rank", "optimizer state 10G", "gradient copies 2G", "pinned pool 256M",
       "x 4 ranks on this node = 49G", "MemAvailable 40G", "memlock limit unlimited",
       "offload.optimizer = nvme"});
  // The pool above the memlock limit, though the memory is there.
  zt::testing::expect_input_error(
      [&] { preflight_host_memory(need_of(1 * G, 0, 256 * M, 1), 100 * G, 64 * 1024); },
      {"needed 1.2G", "MemAvailable 100G", "memlock limit 64K", "pinned pool of 256M",
       "lower offload.pinned_bytes", "ulimit -l unlimited"});
}

TEST(HostPreflight, ThisMachinesFiguresAreRead) {
  EXPECT_GT(mem_available(), 0u) << "/proc/meminfo has MemAvailable on Linux >= 3.14";
  EXPECT_GT(memlock_limit(), 0u);
}

}  // namespace
}  // namespace zt::offload
