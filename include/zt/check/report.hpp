#pragma once
// What `zt check` found: environment, one row per (op, size), gates and the verdict.
// The same structure feeds the stdout table, report.json and report.md (report_writer.hpp).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zt/check/health.hpp"
#include "zt/check/options.hpp"
#include "zt/check/stress.hpp"
#include "zt/check/thresholds.hpp"

namespace zt::check {

// --- environment ------------------------------------------------------------------

struct RankInfo {
  int rank = 0;
  std::string host;
  int node = 0;
  int local_rank = 0;
  int device = -1;        // bound CUDA device; -1: this rank runs on CPU
  int visible_gpus = 0;   // CUDA devices this rank sees
  std::string device_name;  // "" when none
  int64_t memlock_bytes = -1;  // RLIMIT_MEMLOCK soft limit; -1: unlimited
  uint64_t shm_bytes = 0;      // size of /dev/shm (statvfs); 0: not mounted
};

struct Environment {
  std::vector<RankInfo> ranks;                               // index = world rank
  std::vector<std::pair<std::string, std::string>> versions;  // name -> version, rank 0
  std::vector<std::string> fabric_providers;  // libfabric prov_name, deduplicated, rank 0
  std::string cuda;                           // CUDA summary on rank 0
  std::vector<std::string> warnings;          // things to fix that do not fail the run
};

// --- measurements ---------------------------------------------------------------------

// One placement (out-of-place or in-place) of one row. Times are microseconds per op.
struct Placement {
  bool ran = false;       // false: this op has no such form (table shows N/A)
  double time_us = 0.0;   // mean over ranks of each rank's mean time (nccl-tests' default)
  double alg_bw = 0.0;    // GB/s
  double bus_bw = 0.0;    // GB/s
  int64_t nwrong = 0;     // wrong elements after the timed loop, summed over ranks
  int slowest_rank = 0;   // rank with the largest mean time
  double slowest_us = 0.0;
};

struct Row {
  CheckOp op = CheckOp::kAllReduce;
  uint64_t nominal_size = 0;  // the sweep size asked for
  uint64_t size = 0;          // S in bytes (bandwidth.hpp: row_shape)
  size_t count = 0;           // count argument of the call
  int root = -1;              // broadcast root; -1 for ops without one
  Placement out_of_place;
  Placement in_place;
};

// --- stages beyond the sweep -----------------------------------------------------------

// The fabric of one node, judged from its leader rank: what libfabric and sysfs offer,
// what NCCL chose (nccl_log.hpp), and GPU-NIC NUMA affinity (hwloc).
struct NodeFabric {
  std::vector<std::string> providers;  // fi_getinfo prov_name on this node
  bool infiniband_sysfs = false;       // /sys/class/infiniband has entries
  std::string expected;                // efa, ib or any (expected_network)
  bool nccl_probed = false;            // false: skipped (nccl_note says why)
  std::string nccl_note;               // "skipped: no GPU", or NCCL's network and plugin
  int fabric_status = -1;              // FabricStatus (0 pass, 1 warn, 2 fail); -1 skipped
  std::string fabric_message;
  std::vector<std::string> nics;       // "mlx5_0 (NUMA 0)", from hwloc
  int affinity_status = -1;            // 0 pass, 1 warn; -1 skipped
  std::string affinity;                // one line: GPUs and NICs per NUMA node, or why skipped
};

// Pinned host<->device copy bandwidth of one rank's GPU (cudaMemcpyAsync, pinned memory).
struct CopyBandwidth {
  bool ran = false;
  std::string note;   // "skipped: no GPU" when not run
  double h2d_gbs = 0.0;
  double d2h_gbs = 0.0;
};

// Write bandwidth of --io-dir, measured by the node's leader.
struct IoBandwidth {
  bool ran = false;
  std::string note;   // "skipped: no --io-dir" / "O_DIRECT" / "buffered + fsync"
  uint64_t bytes = 0;
  double write_gbs = 0.0;
};

// All-reduce within each node (the node communicator) at one size.
struct IntraNode {
  bool ran = false;
  std::string note;
  uint64_t size = 0;
  std::vector<double> busbw;  // [node] busbw of that node's all-reduce (GB/s)
};

// Bandwidth between the leaders (lowest world rank) of every pair of nodes: both send
// `bytes` to each other at once, one pair at a time (or in rounds of disjoint pairs);
// gbs = bytes / time per exchange.
struct PairMatrix {
  bool ran = false;
  std::string note;                    // why not ran (one node)
  uint64_t bytes = 0;
  int iters = 0;
  bool rounds = false;                 // disjoint pairs at once (pair_rounds), else one at a time
  std::vector<int> leaders;            // [node] world rank of its leader
  std::vector<std::vector<double>> gbs;  // [node][node], symmetric, 0 on the diagonal
  int slow_a = -1, slow_b = -1;        // the slowest pair (nodes), slow_a < slow_b
  double slowest_gbs = 0.0;
  double reference_gbs = 0.0;          // median over nodes of each node's best pair
  double slow_fraction = 0.5;          // a node whose best pair is under this x reference ...
  std::vector<int> slow_nodes;         // ... is a slow node
};

// Per-rank mean time of a fixed loop (barrier, all_reduce of `bytes`, synchronize).
struct Stragglers {
  bool ran = false;
  uint64_t bytes = 0;
  int iters = 0;
  double factor = 1.5;
  std::vector<double> rank_us;  // [rank]
  double median_us = 0.0;
  std::vector<int> ranks;       // ranks above factor * median
};

// --- gates and verdict ------------------------------------------------------------------

struct GateResult {
  CheckOp op = CheckOp::kAllReduce;
  std::string name;        // op or stage name (all_reduce, pairs, h2d ...)
  std::string kind;        // "busbw", "latency", "bw" (stages) or "baseline"
  uint64_t size = 0;       // nominal size gated
  double measured = 0.0;   // busbw (GB/s): worse placement; latency (us): worse placement
  double limit = 0.0;      // min_busbw_gbs or max_latency_us
  double warn_band = 0.0;
  GateStatus status = GateStatus::kPass;
  std::string message;     // one line for humans
};

enum class Verdict : uint8_t { kPass, kWarn, kFail };
std::string_view verdict_name(Verdict v);  // PASS, WARN, FAIL

// One line per node: "node 0 (host): PASS|WARN|FAIL — reason; reason".
struct NodeVerdict {
  int node = 0;
  std::string host;
  Verdict verdict = Verdict::kPass;
  std::vector<std::string> reasons;
};
std::string node_verdict_line(const NodeVerdict& v);

struct Report {
  CheckOptions options;
  std::string backend;  // "mpi" or "nccl"
  int nranks = 1;
  double timeout_s = 0.0;
  Environment environment;
  std::vector<Row> rows;
  std::vector<NodeFabric> fabric;     // [node]
  std::vector<CopyBandwidth> copies;  // [rank]
  std::vector<IoBandwidth> io;        // [node]
  IntraNode intra;
  PairMatrix pairs;
  Stragglers stragglers;
  std::vector<GateResult> gates;
  std::vector<NodeVerdict> node_verdicts;  // [node]
  std::vector<std::string> plots;          // PNG files written next to report.md
  std::string plot_note;                   // why there are none (gnuplot missing ...)
  std::vector<StressSample> stress;   // [rank] GPU stress (its checks are in `health`)
  std::vector<HealthCheck> health;    // node health (GPU through NVML, NICs, stress), every node's
  std::vector<std::string> unknown;   // checks that could not run: the node is not known healthy
  std::vector<std::string> failures;  // one line per reason the verdict is FAIL
  std::vector<std::string> notes;     // e.g. gates not evaluated because their op did not run
  Verdict verdict = Verdict::kPass;
};

// Process exit code for a report. zt's codes (the default): 0 PASS or WARN, 1 FAIL or a
// check that could not run. --exit-codes nagios (gcm's contract, docs/checklist.md):
// 0 healthy, 1 warning, 2 unhealthy (FAIL), 3 unknown (a check could not run).
int exit_code(const Report& report);

}  // namespace zt::check
