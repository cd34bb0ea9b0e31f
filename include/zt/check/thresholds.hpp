#pragma once
// Pass/fail thresholds, read from a TOML file (schema in docs/checklist.md):
//
//   warn_band = 0.1              # optional default for every op
//   [all_reduce]
//   size = "64M"                 # busbw gate: at this size of the sweep ...
//   min_busbw_gbs = 5.0          # ... busbw must be >= this
//   warn_band = 0.1              # warn when busbw < min * (1 + warn_band)
//   latency_size = "8"           # latency gate: at this size ...
//   max_latency_us = 100         # ... time must be <= this; warn above max * (1 - band)
//   # or with units: min_busbw = "360 GB/s" (GB/s, MB/s, TB/s, Gb/s, Gbit/s, Gbps),
//   #                max_latency = "50 us" (ns, us, ms, s)
//   [pairs]                      # stages that are not the sweep: a minimum bandwidth each
//   min_bw = "40 GB/s"           # pairs, h2d, d2h, io_write: min_bw;
//   [intra_node_all_reduce]      # intra_node_all_reduce: size + min_busbw (busbw)
//   size = "256M"
//   min_busbw = "360 GB/s"
//
// Gates look at single sizes, never at an average over the sweep.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zt/check/ops.hpp"

namespace zt::check {

struct BusbwGate {
  uint64_t size = 0;
  double min_busbw_gbs = 0.0;
};

struct LatencyGate {
  uint64_t size = 0;
  double max_latency_us = 0.0;
};

struct OpThresholds {
  CheckOp op = CheckOp::kAllReduce;
  std::optional<BusbwGate> busbw;
  std::optional<LatencyGate> latency;
  double warn_band = 0.1;
};

// Stages outside the collective sweep, gated by a minimum bandwidth (GB/s).
enum class Stage : uint8_t { kIntraNodeAllReduce, kPairs, kH2D, kD2H, kIoWrite };
inline constexpr Stage kAllStages[] = {Stage::kIntraNodeAllReduce, Stage::kPairs, Stage::kH2D,
                                       Stage::kD2H, Stage::kIoWrite};
// intra_node_all_reduce, pairs, h2d, d2h, io_write: the table names.
std::string_view stage_name(Stage s);

struct StageThresholds {
  Stage stage = Stage::kPairs;
  double min_gbs = 0.0;  // busbw for intra_node_all_reduce, bytes/s / 1e9 for the others
  uint64_t size = 0;     // intra_node_all_reduce only: the size gated (0: the stage's own)
  double warn_band = 0.1;
};

struct Thresholds {
  std::string source;  // file name(s), for messages and the report
  std::string description;
  std::vector<OpThresholds> ops;
  std::vector<StageThresholds> stages;
  std::vector<std::string> dropped;  // notes: gates of an auto-selected table outside the sweep
};

inline constexpr double kDefaultWarnBand = 0.1;

// Throws zt::InputError (exit 2) naming the file and the problem: unreadable file,
// malformed TOML (with line), unknown op table or key (named), wrong value type,
// bad size string, non-positive limit, warn_band outside [0, 1), a table without a gate.
Thresholds parse_thresholds_file(const std::string& path);
Thresholds parse_thresholds_text(std::string_view text, const std::string& source);

// Bandwidth with a unit ("360 GB/s", "400Gbps", "3200 Gb/s", "900 MB/s") in GB/s
// (1e9 bytes/s); latency with a unit ("50 us", "1.5 ms") in microseconds.
// Throw zt::InputError naming the unit when it is not one of those listed above.
double parse_bandwidth_gbs(std::string_view text);
double parse_latency_us(std::string_view text);

// Both tables' gates in one (a GPU table and a fabric table); a gate of `b` replaces the
// same gate of `a`. source: "a + b".
Thresholds merge_thresholds(Thresholds a, const Thresholds& b);

enum class GateStatus : uint8_t { kPass, kWarn, kFail };
std::string_view gate_status_name(GateStatus s);  // pass, warn, fail

// --thresholds auto: the shipped tables (in `dir`) for this node's GPU and fabric:
//   gpu-h100.toml, gpu-h200.toml, gpu-a100.toml   by the CUDA device name (H100, H200, A100)
//   fabric-efa.toml, fabric-ib-ndr.toml, fabric-ib-hdr.toml   by expected network and IB rate
//   cpu-local.toml                                 when there is no GPU
// `ib_rate` is /sys/class/infiniband/*/ports/1/rate ("400 Gb/sec (4X NDR)") or "".
// Returns the paths in order (GPU table first); tables for GPUs zt has none for are left out.
std::vector<std::string> select_threshold_files(const std::string& dir, const std::string& device_name,
                                                const std::string& expected_network,
                                                const std::string& ib_rate);

// --thresholds auto: the shipped tables ($ZT_THRESHOLDS_DIR, else the source tree's
// checklist/thresholds) for rank 0's GPU and this fabric, merged; gates at sizes outside
// `sweep` are dropped with a note. Throws zt::InputError when zt ships no table for the GPU.
struct Environment;
Thresholds auto_thresholds(const Environment& env, const std::vector<uint64_t>& sweep);

// Removes the op gates whose sizes are not sizes of `sweep` (an auto-selected table does
// not know the sweep), recording each in `dropped`.
void drop_gates_outside(Thresholds& t, const std::vector<uint64_t>& sweep);

// busbw gate: fail below min; warn in [min, min*(1+band)); pass from min*(1+band) up.
GateStatus judge_minimum(double measured, double minimum, double warn_band);
// latency gate: fail above max; warn in (max*(1-band), max]; pass up to max*(1-band).
GateStatus judge_maximum(double measured, double maximum, double warn_band);

}  // namespace zt::check
