#pragma once
// Shared by the MPI tests that run engines (tests/zero, tests/ckpt, tests/offload,
// tests/reliability): world rank and size, and the communicators of one run.
#include <mpi.h>

#include <memory>

#include "zt/comm/mpi_comm.hpp"
#include "zt/runtime/runtime.hpp"

namespace zt::testing {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Communicators of one run: world, and node/cross from a Runtime simulating nodes of
// ranks_per_node ranks (0: no Runtime, no node communicators). `mpi` is the MPI
// communicator under `world` (the Runtime's world, else MPI_COMM_WORLD).
struct Comms {
  std::unique_ptr<runtime::Runtime> rt;
  std::unique_ptr<comm::Comm> world, node, cross;
  MPI_Comm mpi = MPI_COMM_WORLD;
};
inline Comms make_comms(int ranks_per_node) {
  Comms c;
  if (ranks_per_node > 0) {
    c.rt = std::make_unique<runtime::Runtime>(runtime::Options{ranks_per_node});
    c.world = comm::make_mpi_comm(c.rt->world());
    c.node = comm::make_mpi_comm(c.rt->node());
    c.cross = comm::make_mpi_comm(c.rt->cross());
    c.mpi = c.rt->world();
  } else {
    c.world = comm::make_mpi_comm(MPI_COMM_WORLD);
  }
  return c;
}

}  // namespace zt::testing
