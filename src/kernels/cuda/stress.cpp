// Stress of one GPU (zt/kernels/cuda/stress.hpp): the bf16 GEMM burn through cuBLASLt (the
// one Gemm) and the HBM copy, each timed with CUDA events and checking what it computed.
// The kernels are stress.cu (compiled as C++17 by nvcc); this file is C++20.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <vector>

#include "stress_launch.hpp"
#include "zt/core/dtype.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/poll.hpp"
#include "zt/kernels/cuda/buffer.hpp"
#include "zt/kernels/cuda/gemm.hpp"
#include "zt/kernels/cuda/stress.hpp"

namespace zt::kernels::cuda {
namespace {

using namespace detail;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr uint64_t kSeedA = 0xA11CE, kSeedB = 0xB0B, kSeedHbm = 0x4B3;

// The host's wait for this file's GPU work: cudaEventQuery through the one polled wait
// (zt/core/poll.hpp; never a blocking synchronize: tests/reliability/device_waits_check.py),
// bounded, so a hung GPU fails its stress check (a CUDA error: RESET_GPU) instead of
// hanging `zt check` in a Slurm prolog. comm::wait_ready is the same primitive plus a watch
// of in-flight collectives, of which none is in flight here, and no bound of its own; and
// kernels does not use comm (layers, docs/architecture.md). poll_until keeps no state, so
// the stress's threads (one per GPU) wait at once. Each wait covers at most one window of
// work (about a second).
constexpr std::chrono::seconds kWaitLimit{120};
void wait_done(cudaEvent_t e, const char* what) {
  PollOptions o;
  o.limit = kWaitLimit;
  o.limit_hint = "the GPU may be hung: see nvidia-smi and the kernel log (Xid lines); reset the GPU "
                 "or drain the node";
  o.pause = std::chrono::microseconds(50);
  poll_until(
      [&] {
        const cudaError_t rc = cudaEventQuery(e);
        if (rc != cudaSuccess && rc != cudaErrorNotReady) ZT_CUDA_CHECK(rc);
        return rc == cudaSuccess;
      },
      strf("GPU stress: %s on %s", what, where_device().c_str()), o);
}

// A stream and the events of one measurement, released however it ends.
struct Timing {
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;  // recorded by wait_stream
  std::vector<cudaEvent_t> events;
  Timing() {
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  }
  ~Timing() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);  // no throw from a destructor
    if (done) cudaEventDestroy(done);
    if (stream) cudaStreamDestroy(stream);
  }
  // The work queued so far on the stream.
  void wait_stream(const char* what) {
    ZT_CUDA_CHECK(cudaEventRecord(done, stream));
    wait_done(done, what);
  }
  Timing(const Timing&) = delete;
  Timing& operator=(const Timing&) = delete;
  // A new event recorded on the stream now; its index.
  size_t record() {
    cudaEvent_t e = nullptr;
    ZT_CUDA_CHECK(cudaEventCreate(&e));
    events.push_back(e);
    ZT_CUDA_CHECK(cudaEventRecord(e, stream));
    return events.size() - 1;
  }
  double seconds(size_t from, size_t to) {
    wait_done(events[to], "a timed window");
    float ms = 0.0f;
    ZT_CUDA_CHECK(cudaEventElapsedTime(&ms, events[from], events[to]));
    return ms * 1e-3;
  }
};

int launch_blocks(int per_sm) {
  int device = 0, sms = 0;
  ZT_CUDA_CHECK(cudaGetDevice(&device));
  ZT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return std::max(1, sms) * per_sm;
}

std::atomic<StressFault> g_fault{StressFault::kNone};

// The test hook's fault: flips the lowest bit of the element at p (a device pointer).
template <typename T>
void flip_one_bit(T* p, StressFault fault, Timing& t) {
  if (g_fault.load() != fault) return;
  unsigned char byte = 0;
  ZT_CUDA_CHECK(cudaMemcpyAsync(&byte, p, 1, cudaMemcpyDeviceToHost, t.stream));
  t.wait_stream("the test hook's read");
  byte ^= 1u;
  ZT_CUDA_CHECK(cudaMemcpyAsync(p, &byte, 1, cudaMemcpyHostToDevice, t.stream));
  t.wait_stream("the test hook's write");
}

// A counter of wrong elements, zeroed on the stream of the kernel that counts into it.
struct Counter {
  DeviceBuffer<unsigned long long> value{1, "a counter of wrong elements"};
  explicit Counter(cudaStream_t stream) {
    ZT_CUDA_CHECK(cudaMemsetAsync(value.data(), 0, sizeof(unsigned long long), stream));
  }
  // After the counting kernel, on the same stream.
  int64_t read(Timing& t) {
    unsigned long long wrong = 0;
    ZT_CUDA_CHECK(cudaMemcpyAsync(&wrong, value.data(), sizeof wrong, cudaMemcpyDeviceToHost, t.stream));
    t.wait_stream("the count of wrong elements");
    return static_cast<int64_t>(wrong);
  }
};

// Outputs of the last product (column-major D [n, n]) against the exact product on the
// host: the four corners, then pseudo-random positions.
int64_t sample_wrong(const DeviceBuffer<float>& d, int64_t n, Timing& t) {
  const cudaStream_t stream = t.stream;
  std::vector<int64_t> index(kGemmSamples);  // [sample] i + j n
  for (int s = 0; s < kGemmSamples; ++s) {
    const uint64_t h = mix_host(static_cast<uint64_t>(s) + 77);
    const int64_t i = s == 0 || s == 2 ? 0 : s == 1 || s == 3 ? n - 1 : static_cast<int64_t>(h % static_cast<uint64_t>(n));
    const int64_t j = s == 0 || s == 3 ? 0 : s == 1 || s == 2 ? n - 1 : static_cast<int64_t>((h >> 32) % static_cast<uint64_t>(n));
    index[static_cast<size_t>(s)] = i + j * n;
  }
  DeviceBuffer<int64_t> d_index(index.size(), "the GEMM burn's sample positions");
  DeviceBuffer<float> d_got(index.size(), "the GEMM burn's samples");
  ZT_CUDA_CHECK(cudaMemcpyAsync(d_index.data(), index.data(), index.size() * sizeof(int64_t),
                                cudaMemcpyHostToDevice, stream));
  launch_gather(d.data(), d_index.data(), d_got.data(), kGemmSamples, stream);
  std::vector<float> got(index.size());
  ZT_CUDA_CHECK(cudaMemcpyAsync(got.data(), d_got.data(), got.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                stream));
  t.wait_stream("the GEMM burn's samples");
  int64_t wrong = 0;
  for (size_t s = 0; s < index.size(); ++s) {
    const uint64_t i = static_cast<uint64_t>(index[s] % n), j = static_cast<uint64_t>(index[s] / n);
    double want = 0.0;
    for (uint64_t l = 0; l < static_cast<uint64_t>(n); ++l)
      want += static_cast<double>(burn_value_host(kSeedA, i + l * static_cast<uint64_t>(n))) *
              static_cast<double>(burn_value_host(kSeedB, l + j * static_cast<uint64_t>(n)));
    wrong += static_cast<double>(got[s]) != want;
  }
  return wrong;
}

}  // namespace

void set_stress_fault_for_test(StressFault fault) { g_fault.store(fault); }

GemmBurn gemm_burn(double seconds, int64_t n) {
  ZT_CHECK(n > 0 && n % 8 == 0 && n <= 32768 && std::isfinite(seconds) && seconds >= 0.0,
           strf("gemm_burn(seconds %g, n %lld)", seconds, static_cast<long long>(n)),
           "this is a bug in the caller: n is a multiple of 8 up to 32768, seconds >= 0");
  GemmBurn r;
  r.n = n;
  const size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
  DeviceBuffer<bf16_t> a(nn, "the GEMM burn's A"), b(nn, "the GEMM burn's B");
  DeviceBuffer<float> d(nn, "the GEMM burn's D"), first(nn, "the GEMM burn's first product");
  Timing t;
  const int blocks = launch_blocks(4);
  launch_fill_burn(a.data(), static_cast<int64_t>(nn), kSeedA, blocks, t.stream);
  launch_fill_burn(b.data(), static_cast<int64_t>(nn), kSeedB, blocks, t.stream);
  Gemm gemm;
  const auto product = [&](float* out) {
    gemm.matmul(false, false, n, n, n, 1.0f, a.data(), DType::kBF16, n, b.data(), DType::kBF16, n, 0.0f, out,
                DType::kF32, n, t.stream);
  };
  product(first.data());
  t.wait_stream("the first GEMM product");

  // Warm-up (clocks and power settle), which also times one product.
  const double warm = std::min(1.0, std::max(0.05, seconds / 10.0));
  int64_t warm_calls = 0;
  const Clock::time_point w0 = Clock::now();
  do {
    product(d.data());
    t.wait_stream("a warm-up GEMM product");
    ++warm_calls;
  } while (since(w0) < warm);
  const double per_call = since(w0) / static_cast<double>(warm_calls);
  const double window_s = std::clamp(seconds / 20.0, 0.02, 1.0);
  const int64_t window_calls = std::max<int64_t>(1, static_cast<int64_t>(window_s / per_call));

  // Windows of window_calls products, at most two in flight, until `seconds` have passed.
  const size_t begin = t.record();
  std::vector<std::pair<size_t, size_t>> windows;  // [window] start and stop event
  double slowest = -1.0;
  const Clock::time_point t0 = Clock::now();
  for (;;) {
    const size_t start = t.record();
    for (int64_t c = 0; c < window_calls; ++c) product(d.data());
    windows.emplace_back(start, t.record());
    r.calls += window_calls;
    if (windows.size() >= 2) {
      const auto [ws_start, ws_stop] = windows[windows.size() - 2];
      const double ws = t.seconds(ws_start, ws_stop);
      slowest = slowest < 0.0 ? ws : std::max(slowest, ws);
      if (since(t0) + ws >= seconds) break;
    } else if (seconds <= 0.0) {
      break;
    }
  }
  const double last = t.seconds(windows.back().first, windows.back().second);
  slowest = std::max(slowest, last);
  r.seconds = t.seconds(begin, windows.back().second);
  const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  r.tflops = r.seconds > 0.0 ? flop * static_cast<double>(r.calls) / r.seconds / 1e12 : 0.0;
  r.slowest_window_tflops = slowest > 0.0 ? flop * static_cast<double>(window_calls) / slowest / 1e12 : 0.0;

  // The last product against the first, everywhere, and against the host at the samples.
  // (The hook's bit is in the first product, which no host sample reads: one wrong output.)
  flip_one_bit(first.data() + 1, StressFault::kGemm, t);
  Counter counter(t.stream);
  launch_count_differences(d.data(), first.data(), static_cast<int64_t>(nn), counter.value.data(), blocks,
                           t.stream);
  r.wrong = counter.read(t) + sample_wrong(d, n, t);
  r.checked = static_cast<int64_t>(nn) + kGemmSamples;
  return r;
}

HbmBandwidth hbm_bandwidth(double seconds, uint64_t max_bytes) {
  ZT_CHECK(std::isfinite(seconds) && seconds >= 0.0 && max_bytes >= 16,
           strf("hbm_bandwidth(seconds %g, max_bytes %llu)", seconds, static_cast<unsigned long long>(max_bytes)),
           "this is a bug in the caller: seconds >= 0, max_bytes >= 16");
  size_t free_bytes = 0, total_bytes = 0;
  ZT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  HbmBandwidth r;
  r.bytes = std::min<uint64_t>(max_bytes, free_bytes / 4) / 16 * 16;
  if (r.bytes < (uint64_t{1} << 20))
    throw Error(strf("the HBM bandwidth test needs two buffers of at least 1 MiB; %s has %zu bytes free",
                     where_device().c_str(), free_bytes),
                "another process holds the GPU's memory: see nvidia-smi");
  const int64_t words = static_cast<int64_t>(r.bytes / 16);
  DeviceBuffer<uint4> src(static_cast<size_t>(words), "the HBM test's source");
  DeviceBuffer<uint4> dst(static_cast<size_t>(words), "the HBM test's destination");
  Timing t;
  const int blocks = launch_blocks(4);
  launch_fill_words(src.data(), words, kSeedHbm, blocks, t.stream);
  const auto pass = [&] { launch_copy_words(dst.data(), src.data(), words, blocks, t.stream); };
  pass();
  pass();
  const size_t begin = t.record();
  size_t stop = begin;
  const Clock::time_point t0 = Clock::now();
  do {
    for (int i = 0; i < 10; ++i) pass();
    r.passes += 10;
    stop = t.record();
    wait_done(t.events[stop], "ten HBM copy passes");
  } while (since(t0) < seconds);
  r.seconds = t.seconds(begin, stop);
  r.gbs = r.seconds > 0.0 ? 2.0 * static_cast<double>(r.bytes) * static_cast<double>(r.passes) / r.seconds / 1e9 : 0.0;
  flip_one_bit(dst.data() + words / 2, StressFault::kHbm, t);
  Counter counter(t.stream);
  launch_count_wrong_words(dst.data(), words, kSeedHbm, counter.value.data(), blocks, t.stream);
  r.wrong = counter.read(t);
  return r;
}

}  // namespace zt::kernels::cuda
