#pragma once
// The training loop's figures and errors about memory (trainer_memory.cpp): the step's
// bytes and memory as the maximum over ranks, the out-of-memory error, and the fp32
// model states the engine allocates per rank.
#include <string>

#include "zt/comm/comm.hpp"
#include "zt/core/error.hpp"
#include "zt/train/config.hpp"
#include "zt/train/metrics.hpp"
#include "zt/zero/stats.hpp"

namespace zt::train::detail {

// The step's comm bytes and memory figures into rec: the maximum over ranks of each (one
// all_reduce of doubles; byte counts stay exact below 2^53).
void reduce_max_over_ranks(comm::Comm& comm, const Memory& mem, const zero::StepStats& stats,
                           StepRecord& rec);
// bytes as "x.xx GiB".
std::string gib(double bytes);
// The error for a failed host allocation: what was being allocated (and its size when
// known), what the machine had free, and how to find a configuration that fits.
Error out_of_memory(const TrainConfig& cfg, const std::string& what);
// The model states the engine allocates per rank (see trainer_memory.cpp); hpZ's group
// from ranks_per_node (0: the world).
double model_state_bytes(const TrainConfig& cfg, int ranks_per_node = 0);

}  // namespace zt::train::detail
