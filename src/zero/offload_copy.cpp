// The synchronous copier of the host spaces (offload_copy.hpp): the copy is done when
// start() returns, through the space's own copies, so the host-staged space runs the
// device orchestration of engine_offload.cpp with the same values and the same order.
#include "offload_copy.hpp"

#include <chrono>

#include "zt/core/error.hpp"

namespace zt::zero::detail {
namespace {

class SyncCopier final : public Copier {
 public:
  explicit SyncCopier(Space& space) : space_(space) {}
  Ticket start(CopyDir dir, void* dst, const void* src, size_t bytes) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (dir == CopyDir::kToHost)
      space_.to_host(dst, src, bytes);
    else
      space_.from_host(dst, src, bytes);
    seconds_[static_cast<int>(dir)] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return ++last_;
  }
  bool done(Ticket) override { return true; }
  void wait(Ticket) override {}
  double take_seconds(CopyDir dir) override {
    const double s = seconds_[static_cast<int>(dir)];
    seconds_[static_cast<int>(dir)] = 0;
    return s;
  }

 private:
  Space& space_;
  Ticket last_ = 0;
  double seconds_[2] = {0, 0};
};

}  // namespace

#ifndef ZT_HAVE_CUDA
std::unique_ptr<Copier> make_device_copier(void*) {
  throw Error("the device copier in a build without CUDA", "a bug: no device space exists here");
}
#endif

std::unique_ptr<Copier> make_copier(Space& space) {
  if (space.model_space() == model::Space::kDevice) return make_device_copier(space.compute_stream());
  return std::make_unique<SyncCopier>(space);
}

}  // namespace zt::zero::detail
