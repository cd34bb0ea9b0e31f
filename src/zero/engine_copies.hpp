#pragma once
// The offload's copies between the engine's space and host memory (engine_copies.cpp),
// each through a buffer of the pinned pool, started in order and landed in order: a
// copy down lands in its host destination; a copy up of unit u's parameters is ordered
// before u's next use on the compute stream (order_up). Until start(), nothing is ever
// in flight and landing or ordering does nothing.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "memory.hpp"
#include "offload_copy.hpp"
#include "zt/zero/stats.hpp"

namespace zt::zero::detail {

class CopyQueue {
 public:
  explicit CopyQueue(std::shared_ptr<offload::PinnedPool> pinned) : pinned_(std::move(pinned)) {}
  void start(Space& mem);     // copies from now on, by mem's copier
  void track_units(int units);  // the copies up name their unit (order_up)

  int acquire(size_t bytes);  // a pool buffer; lands older copies while the pool is full
  void* buffer(int slot) { return pinned_->data(slot); }
  // Starts copying `bytes` of pool buffer `slot` up to dst (in the space); unit >= 0:
  // they are u's parameters, which order_up(u) orders before compute.
  void up(int slot, void* dst, size_t bytes, int unit = -1);
  // Starts copying src [count] fp32 (in the space) down; they land in land [count].
  void down(float* land, const float* src, size_t count);
  // host [count] up to dst, through the pool in pieces of `piece` elements.
  void to_space(float* dst, const float* host, size_t count, size_t piece);
  void order_up(int u);  // compute (and collectives) from now on see u's copies up
  void land_ready();     // every copy that has landed, in order
  void land_all();       // every copy, waiting
  // Adds the copy seconds (by direction), the stalls and the bytes since the last call.
  void take_times(OffloadTimes& t);

 private:
  struct Transfer {
    Copier::Ticket ticket = 0;
    int slot = -1;          // its pinned pool buffer
    float* land = nullptr;  // down: where the landed values go [count] (host); up: null
    size_t count = 0;
  };
  void land_front(bool wait);  // the oldest copy (waits for it when asked)

  std::shared_ptr<offload::PinnedPool> pinned_;
  std::unique_ptr<Copier> copier_;
  std::deque<Transfer> transfers_;  // started, not yet landed, in start order
  // Per unit: the last copy up of its parameters not yet ordered before compute (0: none).
  std::vector<Copier::Ticket> unit_up_;
  double stall_s_ = 0;
  uint64_t d2h_bytes_ = 0, h2d_bytes_ = 0;
};

}  // namespace zt::zero::detail
