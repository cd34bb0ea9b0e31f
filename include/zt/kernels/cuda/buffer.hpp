#pragma once
// DeviceBuffer<T>: n elements of device memory (cudaMalloc), freed when it goes out of
// scope; move-only (PinnedBuffer<T>, below: page-locked host memory). Uploads and
// downloads are synchronous and checked. The element type
// is only a label for sizes: device memory is never touched from the host.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "zt/kernels/cuda/check.hpp"

namespace zt::kernels::cuda {

// Throws zt::Error for a copy of `count` elements into or out of an n-element buffer.
[[noreturn]] void buffer_size_error(size_t count, size_t n);
// Throws zt::Error for a failed cudaMalloc of `bytes` for `what`: with the device's free
// and total memory (cudaMemGetInfo) and how to ask `zt estimate` what fits.
[[noreturn]] void device_alloc_error(const char* what, size_t bytes, cudaError_t rc);

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `what` names the buffer in an out-of-memory message.
  explicit DeviceBuffer(size_t n, const char* what = "a device buffer") : n_(n) {
    if (n_ == 0) return;
    const cudaError_t rc = cudaMalloc(reinterpret_cast<void**>(&ptr_), n_ * sizeof(T));
    if (rc != cudaSuccess) {
      ptr_ = nullptr;
      n_ = 0;
      device_alloc_error(what, n * sizeof(T), rc);
    }
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);  // no throw from a destructor; a failure here is a dead context
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

  // Host -> device: the first src.size() elements (src.size() <= size()).
  void upload(std::span<const T> src) {
    check_count(src.size());
    if (!src.empty())
      ZT_CUDA_CHECK(cudaMemcpy(ptr_, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  // Device -> host: the first dst.size() elements.
  void download(std::span<T> dst) const {
    check_count(dst.size());
    if (!dst.empty())
      ZT_CUDA_CHECK(cudaMemcpy(dst.data(), ptr_, dst.size() * sizeof(T), cudaMemcpyDeviceToHost));
  }
  std::vector<T> to_host() const {
    std::vector<T> v(n_);
    download(v);
    return v;
  }
  // Every byte set to `byte` (tests poison outputs with 0xFF: NaN in float and bf16).
  void fill_bytes(int byte) {
    if (n_ > 0) ZT_CUDA_CHECK(cudaMemset(ptr_, byte, bytes()));
  }

 private:
  void check_count(size_t count) const {
    if (count > n_) buffer_size_error(count, n_);
  }

  T* ptr_ = nullptr;
  size_t n_ = 0;
};

// PinnedBuffer<T>: n elements of page-locked host memory (cudaMallocHost), freed when it
// goes out of scope; move-only. The host end of asynchronous copies (a copy from the device
// into pageable memory blocks the host until it is done; into pinned memory it is enqueued,
// and read after a wait for its stream: comm::wait_stream).
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t n) : n_(n) {
    T* p = nullptr;
    if (n_ > 0) ZT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p), n_ * sizeof(T)));
    ptr_.reset(p);
  }

  T* data() const { return ptr_.get(); }
  size_t size() const { return ptr_ ? n_ : 0; }

 private:
  struct FreeHost {  // no throw from a destructor
    void operator()(T* p) const { cudaFreeHost(p); }
  };
  std::unique_ptr<T[], FreeHost> ptr_;
  size_t n_ = 0;
};

}  // namespace zt::kernels::cuda
