#pragma once
// Copies between an engine's memory space and pinned host buffers for the offload from a
// device (engine_offload.cpp; private to zt_zero). A copy is ordered after all the work
// queued on the space's compute stream before it starts (so a gradient copy sees the
// reduction that produced it), and runs beside the compute:
//   device       one copy stream of its own, an event per copy (CUDA builds,
//                offload_copy_cuda.cpp); done() polls, wait() blocks on the event
//   host spaces  the copy happens at once (a memcpy through the space, the same code
//                path with synchronous copies): done() is always true; or, with
//                ZT_TEST_DEFER_COPIES=1 in the environment (a test hook, host-staged
//                only), each copy lands only when waited for or ordered before compute,
//                so a missing order_before_compute shows up as stale values
// Copies land in the order they were started (one stream).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "memory.hpp"

namespace zt::zero::detail {

enum class CopyDir : uint8_t { kToHost, kToSpace };

class Copier {
 public:
  using Ticket = int64_t;
  virtual ~Copier() = default;
  // Starts copying `bytes` from src to dst (host <- space, or space <- host).
  virtual Ticket start(CopyDir dir, void* dst, const void* src, size_t bytes) = 0;
  virtual bool done(Ticket t) = 0;  // landed; never blocks
  virtual void wait(Ticket t) = 0;  // blocks until landed
  // Work queued on the compute stream from now on (and the collectives ordered after it,
  // Groups::order_after) runs after copy t (and every copy started before it) has
  // landed. Device: a stream wait on the copy's event, the host does not block; host
  // spaces: the copy has landed (the deferred test copier lands it here).
  virtual void order_before_compute(Ticket t) = 0;
  // Seconds spent moving data in `dir` by the copies that landed since the last call
  // (device: measured by events on the copy stream; host: the memcpy's wall time).
  virtual double take_seconds(CopyDir dir) = 0;
};

// The copier of `space`: the device one for a device space (CUDA builds), else the
// synchronous one through the space's to_host / from_host.
std::unique_ptr<Copier> make_copier(Space& space);
// CUDA builds: the device copier, ordered after `compute_stream` (a cudaStream_t; null:
// the legacy default stream).
std::unique_ptr<Copier> make_device_copier(void* compute_stream);

}  // namespace zt::zero::detail
