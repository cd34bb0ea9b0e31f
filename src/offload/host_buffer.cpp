// Aligned (and, with CUDA, pinned) host buffers of the offload store.
#include "zt/offload/host_buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

#ifdef ZT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace zt::offload {

HostBuffer::HostBuffer(size_t bytes, bool pinned) : size_(round_up(bytes)) {
  if (size_ == 0) return;
#ifdef ZT_HAVE_CUDA
  if (pinned) {
    const cudaError_t e = cudaHostAlloc(&data_, size_, cudaHostAllocDefault);
    if (e == cudaSuccess) {
      pinned_ = true;
    } else {
      (void)cudaGetLastError();
      data_ = nullptr;
      log::warn(strf("cudaHostAlloc of %s failed (%s): the offload buffer is pageable (slower "
                     "host<->device copies). HINT: %s",
                     format_size_approx(size_).c_str(), cudaGetErrorString(e),
                     e == cudaErrorMemoryAllocation
                         ? "raise the memlock limit (ulimit -l)."
                         : "check the GPU and its driver (nvidia-smi)."));
    }
  }
#else
  (void)pinned;  // no device: nothing to pin for
#endif
  if (!data_) {
    if (posix_memalign(&data_, kAlign, size_) != 0)
      throw Error(strf("posix_memalign of %s for an offload buffer failed",
                       format_size_approx(size_).c_str()),
                  "lower offload.subgroup_bytes or offload.buffers, or free host memory.");
  }
  std::memset(data_, 0, size_);
}

HostBuffer::~HostBuffer() { release(); }

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
      pinned_(std::exchange(o.pinned_, false)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    pinned_ = std::exchange(o.pinned_, false);
  }
  return *this;
}

void HostBuffer::release() {
  if (!data_) return;
#ifdef ZT_HAVE_CUDA
  if (pinned_) {
    cudaFreeHost(data_);
    data_ = nullptr;
    return;
  }
#endif
  std::free(data_);
  data_ = nullptr;
}

}  // namespace zt::offload
