#pragma once
// Checked CUDA and cuBLAS calls for the CUDA kernels (one definition, used by every file
// of src/kernels/cuda and by the GPU tests). A failing call throws zt::Error:
//
//   [rank 3 on node7] cudaMalloc(&p, bytes) failed: out of memory (device 0, host node7)
//     (buffer.cpp:31)
//     HINT: ...
//
// "[rank R on HOST]" is the zt::Error prefix once the runtime has set the process identity
// (zt::set_process_identity); the detail always names the device and the host. The
// kernels never call MPI themselves, so they also work (and report) without it.
//
//   ZT_CUDA_CHECK(call)        a cudaError_t-returning call
//   ZT_CUBLAS_CHECK(call)      a cublasStatus_t-returning call (cuBLAS and cuBLASLt)
//   ZT_CUDA_LAUNCH_CHECK(name) after a kernel launch: cudaGetLastError() (launch
//                              configuration errors; faults surface at the next sync)
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string>

namespace zt::kernels::cuda {

// "device D, host H" for error messages (D = -1 when no device is current).
std::string where_device();

[[noreturn]] void cuda_fail(const char* call, cudaError_t rc, const char* file, int line);
[[noreturn]] void cublas_fail(const char* call, cublasStatus_t rc, const char* file, int line);

// Number of CUDA devices this process sees; 0 (never an exception) when there is no
// device or no driver, so GPU tests can skip themselves.
int device_count();

}  // namespace zt::kernels::cuda

#define ZT_CUDA_CHECK(call)                                                  \
  do {                                                                       \
    const cudaError_t zt_cuda_rc_ = (call);                                  \
    if (zt_cuda_rc_ != cudaSuccess)                                          \
      ::zt::kernels::cuda::cuda_fail(#call, zt_cuda_rc_, __FILE__, __LINE__); \
  } while (0)

#define ZT_CUBLAS_CHECK(call)                                                    \
  do {                                                                           \
    const cublasStatus_t zt_cublas_rc_ = (call);                                 \
    if (zt_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                  \
      ::zt::kernels::cuda::cublas_fail(#call, zt_cublas_rc_, __FILE__, __LINE__); \
  } while (0)

#define ZT_CUDA_LAUNCH_CHECK(kernel_name)                                    \
  do {                                                                       \
    const cudaError_t zt_cuda_rc_ = cudaGetLastError();                      \
    if (zt_cuda_rc_ != cudaSuccess)                                          \
      ::zt::kernels::cuda::cuda_fail("launch of " kernel_name, zt_cuda_rc_,  \
                                     __FILE__, __LINE__);                    \
  } while (0)
