// CUDA build: this rank's GPU stress (include/zt/check/stress.hpp, measure_stress) through
// the kernels' GEMM burn and HBM test. An error of either is kept in the sample with its
// message (rank, host, call, hint), never thrown: the other ranks wait in the gather.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>

#include "zt/check/stress.hpp"
#include "zt/core/error.hpp"
#include "zt/kernels/cuda/check.hpp"

namespace zt::check {
namespace {

// The message of what `run` threw, on one line ("" when it returned).
template <typename F>
std::string error_of(F run) {
  std::string what;
  try {
    run();
  } catch (const Error& e) {
    what = e.what();
  } catch (const std::exception& e) {
    what = where_prefix() + e.what();
  }
  std::replace(what.begin(), what.end(), '\n', ' ');
  return what;
}

}  // namespace

StressSample measure_stress(int device, double seconds) {
  StressSample s;
  s.device = device;
  if (seconds <= 0.0) {
    s.skipped = "stress off (--burn-seconds 0)";
    s.off = true;
    return s;
  }
  if (device < 0) {
    s.skipped = "no GPU bound to this rank";
    return s;
  }
  s.gemm_error = error_of([&] {
    ZT_CUDA_CHECK(cudaSetDevice(device));
    s.gemm = kernels::cuda::gemm_burn(seconds);
  });
  s.hbm_error = error_of([&] {
    ZT_CUDA_CHECK(cudaSetDevice(device));
    s.hbm = kernels::cuda::hbm_bandwidth(std::clamp(seconds / 10.0, 0.2, 2.0));
  });
  return s;
}

}  // namespace zt::check
