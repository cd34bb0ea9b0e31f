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
#include <string>
#include <vector>

#include "zt/comm/mpi_comm.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
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

TEST(Liveness, TimeoutNamesTheSilentRankOnly) {
  runtime::Runtime rt;
  auto comm = comm::make_mpi_comm(rt.world());
  if (comm->size() < 3) GTEST_SKIP() << "needs 3 ranks";
  const std::vector<Card> who = cards();
  const int last = comm->size() - 1;
  std::vector<float> x(100, 1.0f);
  if (comm->rank() == last) {
    int go = 0;  // blocked outside zt's communication until rank 0 has seen the timeout
    MPI_Recv(&go, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    comm->set_timeout(std::chrono::seconds(60));
    comm->all_reduce(x.data(), x.data(), x.size(), DType::kF32, comm::ReduceOp::kSum);
  } else {
    comm->set_timeout(std::chrono::seconds(2));
    comm::Handle h = comm->iall_reduce(x.data(), x.data(), x.size(), DType::kF32, comm::ReduceOp::kSum);
    std::string msg;
    try {
      h->wait();
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("did not complete within 2000 ms"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no answer to a liveness probe"), std::string::npos) << msg;
    EXPECT_NE(msg.find(named(last, who[static_cast<size_t>(last)])), std::string::npos) << msg;
    for (int r = 0; r < last; ++r)  // alive, polling: never named
      EXPECT_EQ(msg.find(strf("world rank %d (", r)), std::string::npos) << msg;
    // Release the silent rank; the same request then finishes.
    if (comm->rank() == 0) {
      int go = 1;
      MPI_Send(&go, 1, MPI_INT, last, 99, MPI_COMM_WORLD);
    }
    comm->set_timeout(std::chrono::seconds(60));
    h->wait();
  }
  EXPECT_EQ(x[99], static_cast<float>(comm->size()));
}

TEST(Liveness, TimeoutSaysEveryRankAnsweredWhenAllAreAlive) {
  runtime::Runtime rt;
  auto comm = comm::make_mpi_comm(rt.world());
  if (comm->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int last = comm->size() - 1;
  std::vector<float> x(100, 1.0f);
  if (comm->rank() == last) {
    // Alive and polling, but in a different operation (a receive) than the others.
    int go = 0;
    comm->set_timeout(std::chrono::seconds(60));
    comm->recv(&go, 1, DType::kI32, 0);
    comm->all_reduce(x.data(), x.data(), x.size(), DType::kF32, comm::ReduceOp::kSum);
  } else {
    comm->set_timeout(std::chrono::seconds(2));
    comm::Handle h = comm->iall_reduce(x.data(), x.data(), x.size(), DType::kF32, comm::ReduceOp::kSum);
    std::string msg;
    try {
      h->wait();
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("every rank answered a liveness probe"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("world rank "), std::string::npos) << msg;
    comm->set_timeout(std::chrono::seconds(60));
    if (comm->rank() == 0) {
      int go = 1;
      comm->send(&go, 1, DType::kI32, last);
    }
    h->wait();
  }
  EXPECT_EQ(x[99], static_cast<float>(comm->size()));
}

}  // namespace
}  // namespace zt::reliability::testing
