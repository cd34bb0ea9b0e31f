#pragma once
// MpiComm: the Comm interface over MPI and host memory. Async operations use MPI's
// nonblocking collectives (MPI_Iallreduce, ...), or optionally its blocking ones (below). bf16 and f16 reductions use
// user-defined MPI operations. The communicator is duplicated, so zt's traffic never
// matches a caller's messages.
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <memory>

#include "zt/comm/comm.hpp"

namespace zt::comm {

// Wraps a duplicate of `comm` (the caller keeps ownership of `comm`).
std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm);

struct MpiCommOptions {
  // Elements per MPI call. MPI counts are `int`, so an operation on more elements is
  // split into several calls; tests set this small to exercise that path.
  size_t max_elements_per_call = INT_MAX;
  // all_reduce, all_gather, reduce_scatter, broadcast and all_to_all with one count for
  // every rank through MPI's blocking calls (MPI_Allreduce, MPI_Alltoall, ...) instead of
  // the nonblocking ones: the code path that IMB and the OSU benchmarks time, and the one
  // Open MPI tunes (coll/tuned; nonblocking collectives go through libnbc). The handle returned is already complete, so nothing overlaps;
  // the communicator's timeout still holds, through a runtime::CallWatchdog that ends
  // the job when a call overruns it. send/recv and barrier stay nonblocking.
  bool blocking_collectives = false;
};
std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, const MpiCommOptions& options);

}  // namespace zt::comm
