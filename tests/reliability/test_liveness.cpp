// Liveness (runtime::Liveness through the comm layer's poll loop): when a collective times
// out, the message names the ranks that did not answer a probe (a stopped or dead rank),
// with host and pid, and names no rank that is alive. The "stopped" rank here sits in a
// blocking MPI_Recv, where it cannot answer (as under SIGSTOP); the real kill -9 and
// SIGSTOP of `zt train` ranks are in dead_rank_test.sh. Host names and pids are gathered
// here with plain MPI, independently of Liveness. Needs 3 ranks.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "zt/comm/mpi_comm.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/liveness.hpp"
#include "zt/runtime/runtime.hpp"

namespace zt::reliability::testing {
namespace {

struct Card {
  std::array<char, MPI_MAX_PROCESSOR_NAME + 1> host{};
  long pid = 0;
};

std::vector<Card> cards() {
  Card mine;
  int len = 0;
  MPI_Get_processor_name(mine.host.data(), &len);
  mine.pid = static_cast<long>(::getpid());
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<Card> all(static_cast<size_t>(n));
  MPI_Allgather(&mine, sizeof(Card), MPI_BYTE, all.data(), sizeof(Card), MPI_BYTE, MPI_COMM_WORLD);
  return all;
}

std::string named(int rank, const Card& c) {
  return strf("world rank %d (host %s, pid %ld)", rank, c.host.data(), c.pid);
}

// Waits until every early rank (all but the last) has seen its own timeout, answering
// liveness probes meanwhile. Without it rank 0 could release the last rank while another
// early rank, started a little later under load, is still inside its 2 s: that rank's
// all_reduce would then complete instead of timing out.
void all_early_ranks_timed_out(MPI_Comm early) {
  MPI_Request req = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Ibarrier(early, &req), MPI_SUCCESS);
  for (int done = 0; !done;) {
    ASSERT_EQ(MPI_Test(&req, &done, MPI_STATUS_IGNORE), MPI_SUCCESS);
    if (runtime::Liveness* live = runtime::Liveness::current()) live->serve();
  }
}

// One all_reduce of 100 ones over the world; the ranks but the last start it under a 2 s
// timeout and see it time out, the last rank joins late, released by rank 0 once every
// early rank has timed out.
class Liveness : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = std::make_unique<runtime::Runtime>();
    comm_ = comm::make_mpi_comm(rt_->world());
    last_ = comm_->size() - 1;
    MPI_Comm_split(MPI_COMM_WORLD, comm_->rank() == last_ ? 1 : 0, comm_->rank(), &early_);
  }
  void TearDown() override {  // every rank that took part holds the sum
    if (ran_) {
      EXPECT_EQ(x_[99], static_cast<float>(comm_->size()));
    }
    MPI_Comm_free(&early_);
  }

  // The early ranks: starts the all_reduce, returns the timeout's message.
  std::string early_all_reduce_times_out() {
    comm_->set_timeout(std::chrono::seconds(2));
    pending_ = comm_->iall_reduce(x_.data(), x_.data(), x_.size(), DType::kF32, comm::ReduceOp::kSum);
    std::string msg;
    try {
      pending_->wait();
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("did not complete within 2000 ms"), std::string::npos) << msg;
    return msg;
  }
  // The early ranks, after releasing the last: the same request now finishes.
  void early_finish() {
    comm_->set_timeout(std::chrono::seconds(60));
    pending_->wait();
    ran_ = true;
  }
  // The last rank, once released.
  void late_all_reduce() {
    comm_->set_timeout(std::chrono::seconds(60));
    comm_->all_reduce(x_.data(), x_.data(), x_.size(), DType::kF32, comm::ReduceOp::kSum);
    ran_ = true;
  }

  std::unique_ptr<runtime::Runtime> rt_;
  std::unique_ptr<comm::Comm> comm_;
  int last_ = 0;
  std::vector<float> x_ = std::vector<float>(100, 1.0f);
  comm::Handle pending_;
  MPI_Comm early_ = MPI_COMM_NULL;  // every rank but the last (the last alone in its own)
  bool ran_ = false;
};

TEST_F(Liveness, TimeoutNamesTheSilentRankOnly) {
  if (comm_->size() < 3) GTEST_SKIP() << "needs 3 ranks";
  const std::vector<Card> who = cards();
  if (comm_->rank() == last_) {
    int go = 0;  // blocked outside zt's communication until rank 0 has seen the timeout
    MPI_Recv(&go, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    late_all_reduce();
    return;
  }
  const std::string msg = early_all_reduce_times_out();
  EXPECT_NE(msg.find("no answer to a liveness probe"), std::string::npos) << msg;
  EXPECT_NE(msg.find(named(last_, who[static_cast<size_t>(last_)])), std::string::npos) << msg;
  for (int r = 0; r < last_; ++r)  // alive, polling: never named
    EXPECT_EQ(msg.find(strf("world rank %d (", r)), std::string::npos) << msg;
  all_early_ranks_timed_out(early_);
  if (comm_->rank() == 0) {
    int go = 1;
    MPI_Send(&go, 1, MPI_INT, last_, 99, MPI_COMM_WORLD);
  }
  early_finish();
}

TEST_F(Liveness, TimeoutSaysEveryRankAnsweredWhenAllAreAlive) {
  if (comm_->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  if (comm_->rank() == last_) {
    // Alive and polling, but in a different operation (a receive) than the others.
    int go = 0;
    comm_->set_timeout(std::chrono::seconds(60));
    comm_->recv(&go, 1, DType::kI32, 0);
    late_all_reduce();
    return;
  }
  const std::string msg = early_all_reduce_times_out();
  EXPECT_NE(msg.find("every rank answered a liveness probe"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("world rank "), std::string::npos) << msg;
  all_early_ranks_timed_out(early_);
  comm_->set_timeout(std::chrono::seconds(60));
  if (comm_->rank() == 0) {
    int go = 1;
    comm_->send(&go, 1, DType::kI32, last_);
  }
  early_finish();
}

}  // namespace
}  // namespace zt::reliability::testing
