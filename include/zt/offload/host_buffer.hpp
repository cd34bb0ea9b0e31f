#pragma once
// Host memory for the offload store: 4 KiB aligned (O_DIRECT needs aligned buffers), and
// page-locked ("pinned") in CUDA builds so host<->device copies run at full speed and
// asynchronously. Without CUDA there is no device and no pinning: plain aligned memory.
#include <cstddef>

namespace zt::offload {

inline constexpr size_t kAlign = 4096;  // O_DIRECT alignment of buffers, offsets, lengths

inline size_t round_up(size_t bytes, size_t align = kAlign) {
  return (bytes + align - 1) / align * align;
}

class HostBuffer {
 public:
  HostBuffer() = default;
  // bytes rounded up to kAlign, zero-filled. pinned: cudaHostAlloc in CUDA builds (falls
  // back to pageable memory with a warning when that fails, e.g. memlock too low).
  HostBuffer(size_t bytes, bool pinned);
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }
  size_t size() const { return size_; }
  bool pinned() const { return pinned_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
};

}  // namespace zt::offload
