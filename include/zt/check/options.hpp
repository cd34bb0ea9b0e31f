#pragma once
// What one `zt check` run measures: the ops, the size sweep, iterations, element type.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zt/check/baseline.hpp"
#include "zt/check/health.hpp"
#include "zt/check/ops.hpp"
#include "zt/check/stress.hpp"
#include "zt/check/thresholds.hpp"
#include "zt/comm/comm.hpp"
#include "zt/core/dtype.hpp"

namespace zt::check {

inline constexpr double kMaxBurnSeconds = 3600.0;  // --burn-seconds: an hour at most

struct CheckOptions {
  std::vector<CheckOp> ops{std::begin(kAllCheckOps), std::end(kAllCheckOps)};
  uint64_t min_bytes = 8;
  uint64_t max_bytes = uint64_t{256} << 20;  // 256M
  uint64_t step_factor = 2;
  int iters = 20;   // timed iterations per size and placement
  int warmup = 5;   // untimed iterations before them
  DType dtype = DType::kF32;
  comm::ReduceOp redop = comm::ReduceOp::kSum;  // for all_reduce and reduce_scatter
  int root = 0;                                 // broadcast root
  // MPI backend: time MPI's blocking collectives (MPI_Allreduce, ...: the calls IMB and
  // OSU time) or its nonblocking ones (MPI_Iallreduce + wait: the calls the training
  // engine overlaps). Open MPI serves the two with different components and algorithms.
  bool mpi_blocking = true;
  // "blocking" or "nonblocking": the --mpi-collectives value, as reports name it.
  const char* mpi_collectives() const { return mpi_blocking ? "blocking" : "nonblocking"; }
  // Sizes up to this go into the latency table (us per op).
  uint64_t latency_max_bytes = uint64_t{8} << 10;
  std::optional<Thresholds> thresholds;
  bool thresholds_auto = false;  // --thresholds auto: pick shipped tables by GPU and fabric
  std::optional<Baseline> baseline;

  // Stages beyond the sweep (docs/checklist.md).
  uint64_t pair_bytes = uint64_t{64} << 20;      // per direction, per exchange
  int pair_iters = 5;
  // Pair schedule: one pair at a time up to this many nodes, rounds of disjoint pairs above.
  int pair_sequential_max_nodes = 16;
  double slow_node_fraction = 0.5;  // a node whose best pair is under this x the median node's
  uint64_t straggler_bytes = uint64_t{1} << 20;  // all_reduce size of the straggler loop
  int straggler_iters = 20;
  double straggler_factor = 1.5;                 // above factor * median: a straggler
  uint64_t copy_bytes = uint64_t{256} << 20;     // host<->device copies (CUDA builds)
  int copy_iters = 5;
  std::string io_dir;                            // "": the write test is skipped
  // Node health (health.hpp): GPU checks through NVML and NIC counters, on each node's
  // leader. The tier names the run (quick: the prolog's minute; full: everything).
  std::string tier = "full";
  HealthOptions health;
  // GPU stress (stress.hpp): seconds of bf16 GEMM burn per GPU (0: off), then the HBM
  // test for a tenth of that; the verdict rules.
  double burn_seconds = 30.0;
  StressRules stress_rules;
  bool nagios_exit_codes = false;  // --exit-codes nagios: 0 healthy 1 warn 2 unhealthy 3 unknown
  uint64_t io_bytes = uint64_t{256} << 20;
};

// Throws zt::InputError naming the first problem: no ops, min < 1, max < min,
// step factor < 2, iters < 1, warmup < 0, an unsupported dtype or redop, a negative
// root, a gate whose size is not a size of the sweep, burn seconds outside [0, 3600].
void validate_options(const CheckOptions& options);

// The nominal sizes of the sweep (bandwidth.hpp: sweep_sizes).
std::vector<uint64_t> sweep_of(const CheckOptions& options);

// sum, max, min: the reductions whose result on the test pattern is exact.
comm::ReduceOp parse_check_redop(std::string_view name);

}  // namespace zt::check
