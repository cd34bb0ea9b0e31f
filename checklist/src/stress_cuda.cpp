// CUDA build: this rank's GPU stress (include/zt/check/stress.hpp, measure_stress) through
// the kernels' GEMM burn and HBM test, one thread per GPU. An error of either is kept in
// the sample with its message (rank, host, call, hint), never thrown: the other ranks wait
// in the gather.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "cuda_facts.hpp"

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

// One GPU: the burn, then the HBM test (on the calling thread).
StressSample measure_one(int device, double seconds) {
  StressSample s;
  s.device = device;
  s.device_name = query_cuda(device).device_name;
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

}  // namespace

std::vector<StressSample> measure_stress(const std::vector<int>& devices, double seconds) {
  std::vector<StressSample> out(devices.size());
  std::vector<std::thread> threads;
  try {
    for (size_t i = 0; i < devices.size(); ++i)
      threads.emplace_back([&out, &devices, i, seconds] { out[i] = measure_one(devices[i], seconds); });
  } catch (...) {  // no thread: those started finish first (a joinable thread must not be destroyed)
    for (std::thread& t : threads) t.join();
    throw;
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace zt::check
