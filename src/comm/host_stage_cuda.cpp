// HostStage (zt/comm/host_stage.hpp; CUDA builds): copies between the device and any host
// memory through a pinned buffer, every host wait the polled one (device_wait.hpp).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "zt/comm/device_wait.hpp"
#include "zt/comm/host_stage.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::comm {
namespace {

void check(cudaError_t rc, const char* call, std::string_view what) {
  if (rc == cudaSuccess) return;
  throw Error(strf("%s failed while %.*s: %s", call, static_cast<int>(what.size()), what.data(),
                   cudaGetErrorString(rc)),
              "check the GPU with nvidia-smi and rerun with CUDA_LAUNCH_BLOCKING=1 to find the "
              "failing kernel; a failed cudaMallocHost means the host is out of page-locked memory");
}

// True when p is page-locked host memory (cudaMallocHost, cudaHostAlloc, registered).
bool pinned(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older CUDA: an unregistered pointer is an error; pageable
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

// copy(dst, src, n) for each chunk of at most kChunk bytes, or at once when `direct` (a
// pinned host side), through cudaMemcpyAsync of `kind` on `stream`.
template <class Chunk>
void copy_in_chunks(char* dst, const char* src, size_t bytes, bool direct, cudaMemcpyKind kind,
                    cudaStream_t stream, std::string_view what, Chunk&& chunk) {
  if (direct) {
    check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync", what);
    return;
  }
  for (size_t at = 0; at < bytes; at += HostStage::kChunk)
    chunk(dst + at, src + at, std::min(HostStage::kChunk, bytes - at));
}

}  // namespace

struct HostStage::Impl {
  cudaStream_t stream = nullptr;
  char* buf = nullptr;  // pinned, `capacity` bytes
  size_t capacity = 0;
  cudaEvent_t fed = nullptr;  // recorded after the last upload out of buf
  bool feeding = false;       // that upload may still run
  size_t used = 0;            // bytes of buf the uploads since the last wait read
  // Grown-out buffers: cudaFreeHost may wait for the whole device (a stuck collective
  // included), so they are freed with the stage, at teardown.
  std::vector<char*> retired;

  ~Impl() {
    if (buf) retired.push_back(buf);
    // After a communicator abort nothing waits on the device: the process is ending.
    if (communicators_aborted()) return;
    try {  // an upload still reading buf: polled, so a stuck stream ends the job
      if (feeding) wait_event(fed, "freeing a host stage");
    } catch (const std::exception& e) {
      log::warn(e.what());
      return;  // leaves the buffers: freeing memory a copy reads is worse than a leak
    }
    for (char* p : retired)
      if (cudaFreeHost(p) != cudaSuccess) log::warn("cudaFreeHost of a host stage failed");
    if (fed && cudaEventDestroy(fed) != cudaSuccess) log::warn("cudaEventDestroy failed");
  }

  // The stream passed every upload queued so far: the whole buffer is free.
  void drained() {
    feeding = false;
    used = 0;
  }
  // Where the host may write `bytes` for an upload: after the uploads still reading buf
  // (several in a row, as a batch's tokens and targets, need no wait), else at its start
  // once they finished (the polled wait_event), grown when too small.
  char* place(size_t bytes, std::string_view what) {
    const size_t at = (used + 255) / 256 * 256;
    if (at + bytes <= capacity) {
      used = at + bytes;
      return buf + at;
    }
    if (feeding) wait_event(fed, what);
    drained();
    grow(at + bytes, what);  // next time, uploads as many as these fit without a wait
    used = bytes;
    return buf;
  }
  // buf holds min(bytes, kChunk) or more (at least 1 MiB, doubling), the old one retired.
  void grow(size_t bytes, std::string_view what) {
    bytes = std::min(bytes, HostStage::kChunk);
    if (capacity >= bytes) return;
    const size_t want =
        std::min(HostStage::kChunk, std::max({bytes, 2 * capacity, size_t{1} << 20}));
    char* p = nullptr;
    check(cudaMallocHost(reinterpret_cast<void**>(&p), want), "cudaMallocHost", what);
    if (buf) retired.push_back(buf);
    buf = p;
    capacity = want;
  }
};

HostStage::HostStage(void* stream) : impl_(std::make_unique<Impl>()) {
  impl_->stream = static_cast<cudaStream_t>(stream);
  check(cudaEventCreateWithFlags(&impl_->fed, cudaEventDisableTiming), "cudaEventCreateWithFlags",
        "creating a host stage");
}

HostStage::~HostStage() = default;

void HostStage::to_host(void* dst, const void* src, size_t bytes, std::string_view what) {
  if (bytes == 0) return;
  Impl& s = *impl_;
  const bool direct = pinned(dst);
  copy_in_chunks(static_cast<char*>(dst), static_cast<const char*>(src), bytes, direct,
                 cudaMemcpyDeviceToHost, s.stream, what, [&](char* d, const char* from, size_t n) {
                   // Stream order puts this copy behind any upload still reading the stage
                   // (and grow frees nothing: an old buffer is retired, not freed).
                   s.grow(n, what);
                   check(cudaMemcpyAsync(s.buf, from, n, cudaMemcpyDeviceToHost, s.stream),
                         "cudaMemcpyAsync", what);
                   wait_stream(s.stream, what);
                   s.drained();
                   std::memcpy(d, s.buf, n);
                 });
  if (!direct) return;
  wait_stream(s.stream, what);
  s.drained();  // the stream passed every earlier upload too
}

void HostStage::to_device(void* dst, const void* src, size_t bytes, std::string_view what) {
  if (bytes == 0) return;
  Impl& s = *impl_;
  copy_in_chunks(static_cast<char*>(dst), static_cast<const char*>(src), bytes, pinned(src),
                 cudaMemcpyHostToDevice, s.stream, what, [&](char* d, const char* from, size_t n) {
                   char* stage = s.place(n, what);
                   std::memcpy(stage, from, n);
                   check(cudaMemcpyAsync(d, stage, n, cudaMemcpyHostToDevice, s.stream),
                         "cudaMemcpyAsync", what);
                   check(cudaEventRecord(s.fed, s.stream), "cudaEventRecord", what);
                   s.feeding = true;
                 });
}

}  // namespace zt::comm
