// The device copier (offload_copy.hpp; CUDA builds): one non-blocking copy stream; each
// copy waits for an event recorded on the compute stream when it starts (so it sees
// every kernel queued before it), and is bracketed by timing events on the copy stream.
// Events are recycled once their copy has landed and been timed.
#include <cuda_runtime_api.h>

#include <deque>
#include <vector>

#include "offload_copy.hpp"
#include "zt/comm/device_wait.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cuda/check.hpp"

namespace zt::zero::detail {
namespace {

class DeviceCopier final : public Copier {
 public:
  explicit DeviceCopier(cudaStream_t compute) : compute_(compute) {
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~DeviceCopier() override {
    // After a communicator abort nothing waits on the device (zt/comm/device_wait.hpp).
    if (!comm::communicators_aborted()) {
      try {
        comm::wait_stream(stream_, "finishing the offload copies");
      } catch (const std::exception& e) {
        log::warn(std::string("the offload copy stream failed: ") + e.what());
      }
    }
    for (Copy& c : inflight_) destroy(c);
    for (Copy& c : spare_) destroy(c);
    cudaStreamDestroy(stream_);
  }

  Ticket start(CopyDir dir, void* dst, const void* src, size_t bytes) override {
    Copy c = take_spare();
    c.ticket = ++last_;
    c.dir = dir;
    ZT_CUDA_CHECK(cudaEventRecord(c.after_compute, compute_));
    ZT_CUDA_CHECK(cudaStreamWaitEvent(stream_, c.after_compute, 0));
    ZT_CUDA_CHECK(cudaEventRecord(c.begin, stream_));
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes,
                                  dir == CopyDir::kToHost ? cudaMemcpyDeviceToHost
                                                          : cudaMemcpyHostToDevice,
                                  stream_));
    ZT_CUDA_CHECK(cudaEventRecord(c.end, stream_));
    inflight_.push_back(c);
    return c.ticket;
  }
  bool done(Ticket t) override {
    while (!inflight_.empty() && inflight_.front().ticket <= t) {
      const cudaError_t rc = cudaEventQuery(inflight_.front().end);
      if (rc == cudaErrorNotReady) return false;
      ZT_CUDA_CHECK(rc);
      retire();
    }
    return true;
  }
  void wait(Ticket t) override {
    while (!inflight_.empty() && inflight_.front().ticket <= t) {
      comm::wait_event(inflight_.front().end, "waiting for an offload copy");
      retire();
    }
  }
  void order_before_compute(Ticket t) override {
    for (const Copy& c : inflight_) {  // in ticket order; a retired copy has landed
      if (c.ticket < t) continue;
      if (c.ticket == t) ZT_CUDA_CHECK(cudaStreamWaitEvent(compute_, c.end, 0));
      return;
    }
  }
  double take_seconds(CopyDir dir) override {
    const double s = seconds_[static_cast<int>(dir)];
    seconds_[static_cast<int>(dir)] = 0;
    return s;
  }

 private:
  struct Copy {
    Ticket ticket = 0;
    CopyDir dir = CopyDir::kToHost;
    cudaEvent_t after_compute = nullptr;  // on the compute stream (no timing)
    cudaEvent_t begin = nullptr, end = nullptr;  // on the copy stream (timed)
  };
  Copy take_spare() {
    if (!spare_.empty()) {
      Copy c = spare_.back();
      spare_.pop_back();
      return c;
    }
    Copy c;
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c.after_compute, cudaEventDisableTiming));
    ZT_CUDA_CHECK(cudaEventCreate(&c.begin));
    ZT_CUDA_CHECK(cudaEventCreate(&c.end));
    return c;
  }
  // The front copy has landed: its time, and its events back to the spares.
  void retire() {
    Copy c = inflight_.front();
    inflight_.pop_front();
    float ms = 0;
    ZT_CUDA_CHECK(cudaEventElapsedTime(&ms, c.begin, c.end));
    seconds_[static_cast<int>(c.dir)] += 1e-3 * static_cast<double>(ms);
    spare_.push_back(c);
  }
  static void destroy(Copy& c) {
    cudaEventDestroy(c.after_compute);
    cudaEventDestroy(c.begin);
    cudaEventDestroy(c.end);
  }

  cudaStream_t compute_;
  cudaStream_t stream_ = nullptr;
  std::deque<Copy> inflight_;
  std::vector<Copy> spare_;
  Ticket last_ = 0;
  double seconds_[2] = {0, 0};
};

}  // namespace

std::unique_ptr<Copier> make_device_copier(void* compute_stream) {
  return std::make_unique<DeviceCopier>(static_cast<cudaStream_t>(compute_stream));
}

}  // namespace zt::zero::detail
