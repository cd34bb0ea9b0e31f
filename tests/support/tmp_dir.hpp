#pragma once
// A scratch directory shared by the ranks of an MPI test (NVMe offload files).
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace zt::testing {

// "<$TMPDIR or /tmp>/<prefix>-<rank 0's pid>", the same on every rank, created
// (collective: every rank calls it).
inline std::string rank0_tmp_dir(const std::string& prefix) {
  int pid = static_cast<int>(::getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-" + std::to_string(pid);
  ::mkdir(dir.c_str(), 0700);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

}  // namespace zt::testing
