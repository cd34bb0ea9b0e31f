// A process that blocks (sleeps) far longer than its watchdog allows, inside a
// runtime::Watchdog of LIMIT_MS: the watchdog must end it (MPI_Abort) with a message
// naming the operation. Driven by watchdog_test.sh. Usage: watchdog_main LIMIT_MS SLEEP_S
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "zt/runtime/runtime.hpp"
#include "zt/runtime/watchdog.hpp"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  zt::runtime::Runtime rt;
  {
    const zt::runtime::Watchdog guard("the test's blocking step",
                                      std::chrono::milliseconds(std::atol(argv[1])));
    ::sleep(static_cast<unsigned>(std::atoi(argv[2])));  // stands for a call stuck inside MPI
  }
  return 0;  // reached only when the step ended before the limit
}
