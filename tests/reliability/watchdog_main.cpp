// Blocking steps longer than their watchdog allows; the watchdog must end the job
// (MPI_Abort) with a message naming the operation. Driven by watchdog_test.sh.
// Usage:
//   watchdog_main step LIMIT_MS SLEEP_S       every rank sleeps SLEEP_S inside a
//                                             runtime::Watchdog of LIMIT_MS
//   watchdog_main all_reduce LIMIT_MS SLEEP_S rank 1 sleeps SLEEP_S, then every rank
//                                             calls all_reduce on an MpiComm with blocking
//                                             collectives and a timeout of LIMIT_MS
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "zt/comm/mpi_comm.hpp"
#include "zt/runtime/runtime.hpp"
#include "zt/runtime/watchdog.hpp"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::string mode = argv[1];
  const std::chrono::milliseconds limit(std::atol(argv[2]));
  const auto seconds = static_cast<unsigned>(std::atoi(argv[3]));
  zt::runtime::Runtime rt;
  if (mode == "step") {
    const zt::runtime::Watchdog guard("the test's blocking step", limit);
    ::sleep(seconds);  // stands for a call stuck inside MPI
    return 0;          // reached only when the step ended before the limit
  }
  if (mode != "all_reduce") return 2;
  zt::comm::MpiCommOptions options;
  options.blocking_collectives = true;
  auto comm = zt::comm::make_mpi_comm(rt.world(), options);
  comm->set_timeout(limit);
  if (comm->rank() == 1) ::sleep(seconds);  // a late (stopped, slow) rank
  int mine = comm->rank() + 1, sum = 0;
  comm->all_reduce(&mine, &sum, 1, zt::DType::kI32, zt::comm::ReduceOp::kSum);
  const int n = comm->size();
  if (sum != n * (n + 1) / 2) {
    std::fprintf(stderr, "all_reduce gave %d, expected %d\n", sum, n * (n + 1) / 2);
    return 1;
  }
  return 0;
}
