#pragma once
// The GPU table shipped with zt (data/gpus.csv): memory, bandwidth and peak bf16 FLOP/s
// of common accelerators, for `zt estimate --gpu NAME`.
//
// Columns (first line is this header):
//   name,architecture,memory_gib,memory_bandwidth_gb_s,gpu_interconnect,interconnect_gb_s,
//   bf16_dense_tflops,notes
// Fields hold no commas or quotes; empty numeric fields (e.g. no bf16) read as 0.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt::estimate {

inline constexpr const char* kShippedGpus = "data/gpus.csv";

struct GpuSpec {
  std::string name;            // "h100-sxm"
  std::string architecture;    // "Hopper"
  double memory_gib = 0;       // device memory, GiB
  double bandwidth_gb_s = 0;   // memory bandwidth, GB/s
  std::string interconnect;    // "NVLink"
  double interconnect_gb_s = 0;
  double bf16_tflops = 0;      // dense bf16 peak, TFLOP/s (0: none)
  std::string notes;

  uint64_t memory_bytes() const;  // memory_gib * 2^30
};

// Parses the CSV text (blank lines and trailing spaces ignored). Throws zt::InputError
// naming `origin` and the line for a bad header, a wrong field count or a bad number.
std::vector<GpuSpec> parse_gpus_csv(std::string_view text, const std::string& origin);

// Where gpus.csv is looked for, in order: $ZT_DATA_DIR/gpus.csv, <source dir at compile
// time>/data/gpus.csv, then relative to the executable (<exe>/../../../data,
// <exe>/../../data, <exe>/../data, <exe>/../share/zt/data).
std::vector<std::string> gpus_csv_candidates();

// Reads the first candidate that exists. Throws zt::InputError listing the paths tried.
std::vector<GpuSpec> load_shipped_gpus();

// The row named `name` (case-insensitive). Throws zt::InputError naming `flag` and
// listing the valid names.
const GpuSpec& find_gpu(const std::vector<GpuSpec>& gpus, std::string_view name,
                        std::string_view flag = "--gpu");

// The row for a CUDA/NVML device name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
// "NVIDIA A100 80GB PCIe", "Tesla V100-SXM2-32GB"; a trailing " [bus id]" is ignored), or
// nullptr when the table has no row for it. The name is split into words at spaces and
// hyphens; the first rule whose words all appear picks the row (H100 + PCIe -> h100-pcie,
// H100 alone -> h100-sxm, A100 + PCIe + 80GB -> a100-pcie-80 ...: gpus.cpp, kDeviceRules).
const GpuSpec* gpu_for_device(const std::vector<GpuSpec>& gpus, std::string_view device_name);

}  // namespace zt::estimate
