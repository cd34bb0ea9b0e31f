// Failure reporting for ZT_CUDA_CHECK / ZT_CUBLAS_CHECK (see zt/kernels/cuda/check.hpp).
#include "zt/kernels/cuda/check.hpp"

#include <cublasLt.h>

#include "zt/kernels/cuda/buffer.hpp"

#include "zt/core/error.hpp"
#include "zt/core/units.hpp"
#include "zt/core/log.hpp"

namespace zt::kernels::cuda {

std::string where_device() {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    d = -1;
    cudaGetLastError();  // do not leave a sticky error behind for the next check
  }
  return strf("device %d, host %s", d, process_host().c_str());
}

void cuda_fail(const char* call, cudaError_t rc, const char* file, int line) {
  fail_call(call, strf("%s: %s (%s)", cudaGetErrorName(rc), cudaGetErrorString(rc),
                       where_device().c_str()),
            "check the GPU with nvidia-smi and that CUDA_VISIBLE_DEVICES gives this rank a "
            "device; rerun with CUDA_LAUNCH_BLOCKING=1 (errors then point at the failing "
            "kernel) or under compute-sanitizer to find an out-of-bounds access",
            file, line);
}

void cublas_fail(const char* call, cublasStatus_t rc, const char* file, int line) {
  fail_call(call, strf("%s (%s)", cublasLtGetStatusString(rc), where_device().c_str()),
            "CUBLAS_STATUS_NOT_SUPPORTED means no algorithm fits these shapes, types or "
            "pointer alignments; rerun with CUBLASLT_LOG_LEVEL=5 (and CUBLAS_LOGINFO_DBG=1) "
            "for cuBLAS's own log",
            file, line);
}

int device_count() {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear it: no device (or no driver) is not an error here
    return 0;
  }
  return n;
}

void device_alloc_error(const char* what, size_t bytes, cudaError_t rc) {
  cudaGetLastError();  // clear the sticky allocation error before querying
  size_t free_bytes = 0, total_bytes = 0;
  const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
  throw Error(strf("out of GPU memory: cudaMalloc of %s for %s failed (%s; %s): %s",
                   format_binary(bytes, BinaryUnit::kGiB, 3).c_str(), what, cudaGetErrorString(rc),
                   where_device().c_str(),
                   known ? (format_binary(free_bytes, BinaryUnit::kGiB, 2) + " free of " +
                            format_binary(total_bytes, BinaryUnit::kGiB, 2)).c_str()
                         : "free memory unknown"),
              "see what fits: zt estimate --config <your job.toml> --gpus-per-node <N> --nodes <M> "
              "(it lists every ZeRO stage, offload choice and recompute); raise zero.stage, turn "
              "on train.recompute or offload, or lower train.micro_batch");
}

void buffer_size_error(size_t count, size_t n) {
  throw Error(strf("copy of %zu elements into or out of a device buffer of %zu", count, n),
              "this is a bug in the caller: size the DeviceBuffer for the largest copy");
}

}  // namespace zt::kernels::cuda
