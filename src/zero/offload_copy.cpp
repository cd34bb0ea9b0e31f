// The synchronous copier of the host spaces (offload_copy.hpp): the copy is done when
// start() returns, through the space's own copies, so the host-staged space runs the
// device orchestration of engine_offload.cpp with the same values and the same order;
// and the deferred copier of the tests (ZT_TEST_DEFER_COPIES=1), which lands a copy only
// when the engine waits for it or orders compute after it.
#include "offload_copy.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "zt/comm/device_wait.hpp"
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
  // As the device copier's wait (polled, zt/comm/device_wait.hpp): the host stand-in.
  void wait(Ticket) override { comm::wait_in_flight("waiting for an offload copy"); }
  void order_before_compute(Ticket) override {}
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

// The test hook ZT_TEST_DEFER_COPIES=1 (host-staged space): a copy's source is taken
// when it starts, but its destination is written only when the engine waits for it or
// orders compute after it, as late as a device could land it. An engine that reads a
// destination without ordering sees the old values, and the bitwise tests fail.
class DeferredCopier final : public Copier {
 public:
  explicit DeferredCopier(Space& space) : space_(space) {}
  Ticket start(CopyDir dir, void* dst, const void* src, size_t bytes) override {
    Pending p{++last_, dir, dst, std::vector<unsigned char>(bytes)};  // data: [bytes]
    if (dir == CopyDir::kToHost)
      space_.to_host(p.data.data(), src, bytes);
    else
      std::memcpy(p.data.data(), src, bytes);
    pending_.push_back(std::move(p));
    return last_;
  }
  bool done(Ticket t) override { return pending_.empty() || pending_.front().ticket > t; }
  void wait(Ticket t) override {
    comm::wait_in_flight("waiting for an offload copy");
    land(t);
  }
  void order_before_compute(Ticket t) override { land(t); }
  double take_seconds(CopyDir dir) override {
    const double s = seconds_[static_cast<int>(dir)];
    seconds_[static_cast<int>(dir)] = 0;
    return s;
  }

 private:
  struct Pending {
    Ticket ticket;
    CopyDir dir;
    void* dst;
    std::vector<unsigned char> data;  // [bytes] the source as it was at start()
  };
  void land(Ticket t) {
    while (!pending_.empty() && pending_.front().ticket <= t) {
      const auto t0 = std::chrono::steady_clock::now();
      Pending& p = pending_.front();
      if (p.dir == CopyDir::kToHost)
        std::memcpy(p.dst, p.data.data(), p.data.size());
      else
        space_.from_host(p.dst, p.data.data(), p.data.size());
      seconds_[static_cast<int>(p.dir)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      pending_.pop_front();
    }
  }
  Space& space_;
  std::deque<Pending> pending_;
  Ticket last_ = 0;
  double seconds_[2] = {0, 0};
};

bool defer_copies() {
  const char* v = std::getenv("ZT_TEST_DEFER_COPIES");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace

#ifndef ZT_HAVE_CUDA
std::unique_ptr<Copier> make_device_copier(void*) {
  throw Error("the device copier in a build without CUDA", "a bug: no device space exists here");
}
#endif

std::unique_ptr<Copier> make_copier(Space& space) {
  if (space.model_space() == model::Space::kDevice) return make_device_copier(space.compute_stream());
  if (defer_copies()) return std::make_unique<DeferredCopier>(space);
  return std::make_unique<SyncCopier>(space);
}

}  // namespace zt::zero::detail
