// The bounded pool of pinned host buffers (see pinned_pool.hpp).
#include "zt/offload/pinned_pool.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::offload {

int PinnedPool::try_acquire(size_t bytes) {
  const size_t need = round_up(std::max<size_t>(bytes, 1));
  int best = -1;
  for (size_t i = 0; i < bufs_.size(); ++i)
    if (!busy_[i] && bufs_[i].size() >= need &&
        (best < 0 || bufs_[i].size() < bufs_[static_cast<size_t>(best)].size()))
      best = static_cast<int>(i);
  if (best < 0 && limit_ > 0 && held_ + need > limit_) {
    // Room for a new buffer by freeing the idle ones (too small for this request).
    for (size_t i = 0; i < bufs_.size(); ++i)
      if (!busy_[i] && bufs_[i].size() > 0) {
        held_ -= bufs_[i].size();
        bufs_[i] = HostBuffer();
      }
    if (held_ + need > limit_) return -1;
  }
  if (best < 0) {
    for (size_t i = 0; i < bufs_.size() && best < 0; ++i)  // an empty slot, else a new one
      if (!busy_[i] && bufs_[i].size() == 0) best = static_cast<int>(i);
    if (best < 0) {
      bufs_.emplace_back();
      busy_.push_back(0);
      best = static_cast<int>(bufs_.size() - 1);
    }
    bufs_[static_cast<size_t>(best)] = HostBuffer(need, pinned_);
    held_ += need;
    peak_ = std::max(peak_, held_);
  }
  busy_[static_cast<size_t>(best)] = 1;
  return best;
}

int PinnedPool::acquire(size_t bytes, const char* what) {
  const int slot = try_acquire(bytes);
  if (slot >= 0) return slot;
  uint64_t busy = 0;
  for (size_t i = 0; i < bufs_.size(); ++i)
    if (busy_[i]) busy += bufs_[i].size();
  throw InputError(strf("offload.pinned_bytes = %s is too small: %s needs a pinned host buffer of "
                        "%s while %s of the pool are in use",
                        format_size_approx(limit_).c_str(), what,
                        format_size_approx(round_up(bytes)).c_str(),
                        format_size_approx(busy).c_str()),
                   "raise offload.pinned_bytes (the bound of the pinned host buffers between "
                   "the device and host memory), keeping it within the memlock limit (ulimit -l).");
}

void PinnedPool::release(int slot) { busy_[static_cast<size_t>(slot)] = 0; }

}  // namespace zt::offload
