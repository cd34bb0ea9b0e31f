#pragma once
// HostStage: the one way the device path copies between device memory and host memory it
// does not know to be pinned (docs/reliability.md, "Faults"). CUDA documents that a
// cudaMemcpyAsync into pageable host memory returns only once the copy is done, and that
// one from pageable memory synchronises the stream first: behind a collective that never
// completes (the stream waits on it) the host would block inside the copy, never reaching
// the polled wait (device_wait.hpp). So each copy goes through a pinned buffer of the
// stage, grown on demand (up to kChunk bytes; larger copies go in chunks):
//   to_host    device -> stage (queued on the stream), the polled wait_stream, stage -> dst
//   to_device  src -> stage (a host memcpy; first, when the stage still feeds an earlier
//              upload, the polled wait_event for it), stage -> device (queued); returns at
//              once, src may be reused at once
// A host side that is already pinned (cudaPointerGetAttributes: cudaMemoryTypeHost) is
// copied directly: to_host still waits; to_device does not, so such a source must stay
// unchanged until the caller's next wait on the stream (the device space waits at once).
// One stage per stream and owner (the device space's, the device model's); not
// thread-safe. CUDA builds only (host_stage_cuda.cpp); the guard
// tests/reliability/device_waits_check.py fails on any other host copy of the device path.
#include <cstddef>
#include <memory>
#include <string_view>

namespace zt::comm {

class HostStage {
 public:
  static constexpr size_t kChunk = size_t{64} << 20;  // the stage's largest buffer

  explicit HostStage(void* stream);  // a cudaStream_t
  ~HostStage();
  HostStage(const HostStage&) = delete;
  HostStage& operator=(const HostStage&) = delete;

  // `bytes` from device `src` into host `dst`, after the work queued on the stream; returns
  // once dst holds them. `what` names the wait in a timeout ("reading the loss").
  void to_host(void* dst, const void* src, size_t bytes, std::string_view what);
  // `bytes` from host `src` to device `dst`, queued on the stream (see above).
  void to_device(void* dst, const void* src, size_t bytes, std::string_view what);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt::comm
