#pragma once
// The one pool of pinned host buffers an engine moves data through between a device and
// host memory: the offload copies (gradient sub-groups device-to-host, updated parameter
// sub-groups and stage-3 parameter shards host-to-device) and the staging of collectives
// on device buffers over a host backend (zero/staged_comm.cpp). Buffers are reused: after
// the first steps nothing is allocated. The pool never holds more than `limit` bytes
// (offload.pinned_bytes): an offload copy that finds no room waits for an older one to
// land (the engine's "stall"), a staged collective that finds none is refused by name.
// Single-threaded: the engine's thread owns it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "zt/offload/host_buffer.hpp"

namespace zt::offload {

class PinnedPool {
 public:
  // limit: bytes the pool may hold (0: no bound). pinned: page-locked (CUDA builds; a
  // device to copy to), else plain aligned memory (the host-staged test space).
  PinnedPool(uint64_t limit, bool pinned) : limit_(limit), pinned_(pinned) {}

  // A free buffer of at least `bytes` (the smallest such), or a new one when the bound
  // allows (idle buffers are freed first to make room); -1 when none fits now.
  int try_acquire(size_t bytes);
  // try_acquire, or a zt::InputError naming `what`, the bytes and offload.pinned_bytes.
  int acquire(size_t bytes, const char* what);
  void release(int slot);
  uint8_t* data(int slot) { return static_cast<uint8_t*>(bufs_[static_cast<size_t>(slot)].data()); }

  uint64_t limit() const { return limit_; }
  bool pinned() const { return pinned_; }
  uint64_t held_bytes() const { return held_; }  // allocated now (busy + idle)
  uint64_t peak_bytes() const { return peak_; }  // most ever held at once

 private:
  uint64_t limit_;
  bool pinned_;
  std::vector<HostBuffer> bufs_;  // a freed slot keeps an empty HostBuffer (slots stay valid)
  std::vector<uint8_t> busy_;
  uint64_t held_ = 0, peak_ = 0;
};

}  // namespace zt::offload
