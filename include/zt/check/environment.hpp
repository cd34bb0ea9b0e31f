#pragma once
// The environment section of `zt check`: who runs where (rank, host, node, local rank,
// device), library versions (MPI, NCCL, CUDA driver and runtime, HDF5, libfabric),
// libfabric providers, GPUs per rank, memlock limit and /dev/shm size.
#include <string_view>
#include <vector>

#include "zt/check/report.hpp"
#include "zt/comm/comm.hpp"
#include "zt/runtime/runtime.hpp"

namespace zt::check {

// Collective over `control` (a host-memory Comm over the runtime's world): every rank
// returns the same Environment. Versions and providers come from rank 0.
Environment collect_environment(const runtime::Runtime& runtime, comm::Comm& control);

// Distinct libfabric provider names fi_getinfo reports on this host, sorted; a failing
// fi_getinfo adds a warning and returns none.
std::vector<std::string> libfabric_providers(std::vector<std::string>* warnings);

// This rank's facts (no communication).
RankInfo local_rank_info(const runtime::Runtime& runtime);

// Things worth fixing, from the gathered per-rank facts: a memlock limit that is not
// unlimited, /dev/shm under 1 GiB, more ranks on a host than GPUs it shows.
std::vector<std::string> environment_warnings(const std::vector<RankInfo>& ranks);

}  // namespace zt::check
