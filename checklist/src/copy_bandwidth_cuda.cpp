// CUDA build: pinned host<->device copy bandwidth of one GPU. `bytes` copied `iters`
// times each way with cudaMemcpyAsync on a private stream, timed with CUDA events after
// one untimed copy; GB/s = bytes * iters / time / 1e9.
#include <cuda_runtime_api.h>

#include "zt/check/stages.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

void cuda_check(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc != cudaSuccess)
    fail_call(call, cudaGetErrorString(rc), "check the GPU (nvidia-smi) or lower --copy-bytes",
              file, line);
}
#define ZT_CHECK_CUDA(call) cuda_check((call), #call, __FILE__, __LINE__)

// Owns the pinned buffer, device buffer, stream and events of one measurement.
struct CopyResources {
  void* host = nullptr;    // [bytes] pinned host memory
  void* device = nullptr;  // [bytes] device memory
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~CopyResources() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
    if (device) cudaFree(device);
    if (host) cudaFreeHost(host);
  }
};

double timed_copies(CopyResources& r, size_t bytes, int iters, cudaMemcpyKind kind) {
  void* dst = kind == cudaMemcpyHostToDevice ? r.device : r.host;
  const void* src = kind == cudaMemcpyHostToDevice ? r.host : r.device;
  ZT_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, r.stream));  // untimed
  ZT_CHECK_CUDA(cudaEventRecord(r.start, r.stream));
  for (int i = 0; i < iters; ++i) ZT_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, r.stream));
  ZT_CHECK_CUDA(cudaEventRecord(r.stop, r.stream));
  ZT_CHECK_CUDA(cudaEventSynchronize(r.stop));
  float ms = 0.0f;
  ZT_CHECK_CUDA(cudaEventElapsedTime(&ms, r.start, r.stop));
  return ms > 0.0f ? static_cast<double>(bytes) * iters / (ms * 1e-3) / 1e9 : 0.0;
}

}  // namespace

CopyBandwidth measure_copy_bandwidth(int device, uint64_t bytes, int iters) {
  CopyBandwidth c;
  if (device < 0) {
    c.note = "skipped: no GPU";
    return c;
  }
  ZT_CHECK_CUDA(cudaSetDevice(device));
  CopyResources r;
  ZT_CHECK_CUDA(cudaHostAlloc(&r.host, bytes, cudaHostAllocDefault));
  ZT_CHECK_CUDA(cudaMalloc(&r.device, bytes));
  ZT_CHECK_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  ZT_CHECK_CUDA(cudaEventCreate(&r.start));
  ZT_CHECK_CUDA(cudaEventCreate(&r.stop));
  c.h2d_gbs = timed_copies(r, bytes, iters, cudaMemcpyHostToDevice);
  c.d2h_gbs = timed_copies(r, bytes, iters, cudaMemcpyDeviceToHost);
  c.ran = true;
  c.note = strf("device %d, %s pinned", device, format_size_approx(bytes).c_str());
  return c;
}

}  // namespace zt::check
