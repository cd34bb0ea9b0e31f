#pragma once
// GPU stress per GPU, alone (docs/checklist.md, "GPU stress"): every rank with a bound GPU
// runs a bf16 GEMM burn through cuBLASLt and an HBM copy kernel (zt/kernels/cuda/stress.hpp)
// at the same time as the others (the only rank of a node, as in a Slurm prolog, stresses
// every GPU it sees, one thread each); the results are gathered and each GPU is judged against
// its row of data/gpus.csv (peak bf16 TFLOP/s, memory bandwidth) and against the median of
// its node's GPUs, so one slow GPU stands out. Two named checks per GPU: gpu.gemm, gpu.hbm.
#include <string>
#include <vector>

#include "zt/check/health.hpp"
#include "zt/estimate/gpus.hpp"
#include "zt/kernels/cuda/stress.hpp"

namespace zt::check {

// What one rank measured on one GPU.
struct StressSample {
  int rank = 0;
  int node = 0;
  std::string host;
  int device = -1;           // bound CUDA device; -1: none
  std::string device_name;   // "NVIDIA H100 80GB HBM3 [0000:1B:00.0]"
  int expected_gpus = -1;    // the rank's expected GPU count (expected_gpus); -1: not known
  std::string skipped;       // not measured, why ("no GPU bound to this rank", "--burn-seconds 0")
  bool off = false;          // skipped because the stress was turned off (never UNKNOWN)
  std::string gemm_error;    // a failed CUDA/cuBLAS call during the burn ([rank R on HOST] call ... HINT)
  std::string hbm_error;     // ... during the HBM test
  kernels::cuda::GemmBurn gemm;
  kernels::cuda::HbmBandwidth hbm;
  bool gemm_measured() const { return skipped.empty() && gemm_error.empty(); }
  bool hbm_measured() const { return skipped.empty() && hbm_error.empty(); }
};

// The verdict rules (docs/checklist.md's table gives them with their reasons). A GPU is
// judged against its table row (fraction of the peak / of the memory bandwidth) and against
// the median of the GPUs of its node that were measured (two or more).
struct StressRules {
  double gemm_warn_of_peak = 0.50;  // WARN (MONITOR) below this fraction of the bf16 peak
  double gemm_fail_of_peak = 0.30;  // FAIL (DRAIN) below this
  double hbm_warn_of_table = 0.60;  // WARN (MONITOR) below this fraction of the table's bandwidth
  double hbm_fail_of_table = 0.40;  // FAIL (DRAIN) below this
  double warn_of_median = 0.90;     // WARN (MONITOR) below this fraction of the node's median
  double fail_of_median = 0.80;     // FAIL (DRAIN): the slow GPU of its node
};

// This rank's measurements, one sample per device of `devices` (not empty; seconds > 0),
// each GPU on a thread of its own, all at once: `seconds` of GEMM burn, then the HBM test
// for a tenth of that (0.2 to 2 s). A CUDA or cuBLAS error is kept in gemm_error /
// hbm_error (never thrown: the other ranks are waiting for the gather). Fills device,
// device_name (CUDA's name and PCI bus id) and the measurements; rank, node, host ... are
// the caller's. A build without CUDA skips every device, saying so.
std::vector<StressSample> measure_stress(const std::vector<int>& devices, double seconds);

// gpus.csv, or {} with the reason in *why_not (no peak comparison then).
std::vector<estimate::GpuSpec> stress_table(std::string* why_not);

// The checks gpu.gemm and gpu.hbm: per node where nothing was measured one SKIP (UNKNOWN
// when the node expects GPUs and the stress was not turned off); otherwise one per
// measured GPU (wrong outputs FAIL [DRAIN]; below the table's figure or the node's
// median by the rules' fractions WARN [MONITOR] or FAIL [DRAIN]) and one FAIL
// [RESET_GPU] per GPU whose test failed with an error. Pure: tested on made-up samples.
std::vector<HealthCheck> judge_stress(const std::vector<StressSample>& samples,
                                      const std::vector<estimate::GpuSpec>& table,
                                      const std::string& table_note, const StressRules& rules);

}  // namespace zt::check
