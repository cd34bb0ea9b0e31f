// wait_stream and wait_event (zt/comm/device_wait.hpp; CUDA builds): the host's only
// blocking waits on the device, an event polled with cudaEventQuery inside wait_ready.
#include <cuda_runtime_api.h>

#include "zt/comm/device_wait.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::comm {
namespace {

[[noreturn]] void cuda_wait_fail(const char* call, cudaError_t rc, std::string_view what) {
  throw Error(strf("%s failed while %.*s: %s", call, static_cast<int>(what.size()), what.data(),
                   cudaGetErrorString(rc)),
              "check the GPU with nvidia-smi and rerun with CUDA_LAUNCH_BLOCKING=1 to find the "
              "failing kernel");
}

// Polls `event` (recorded): true once the work before it finished.
bool event_done(cudaEvent_t event, std::string_view what) {
  const cudaError_t rc = cudaEventQuery(event);
  if (rc == cudaSuccess) return true;
  if (rc != cudaErrorNotReady) cuda_wait_fail("cudaEventQuery", rc, what);
  return false;
}

}  // namespace

void wait_event(void* event, std::string_view what) {
  const auto e = static_cast<cudaEvent_t>(event);
  wait_ready([&] { return event_done(e, what); }, what);
}

void wait_stream(void* stream, std::string_view what) {
  cudaEvent_t e = nullptr;
  cudaError_t rc = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (rc != cudaSuccess) cuda_wait_fail("cudaEventCreateWithFlags", rc, what);
  struct Destroy {
    cudaEvent_t e;
    ~Destroy() {
      if (cudaEventDestroy(e) != cudaSuccess) log::warn("cudaEventDestroy failed");
    }
  } destroy{e};
  rc = cudaEventRecord(e, static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) cuda_wait_fail("cudaEventRecord", rc, what);
  wait_event(e, what);
}

}  // namespace zt::comm
