#pragma once
// The memory space the ZeRO engine holds its state in (private to zt_zero): one small
// abstraction, so stages 0-3, hpZ, qwZ/qgZ, accumulation, clipping, NaN skipping, byte
// accounting, offload and checkpoints stay one code path whether the engine runs on the
// CPU or on a GPU (docs/zero.md, "Memory spaces").
//
// A Space allocates the engine's buffers (Buf<T>: shards, gather buffers, gradient
// buffers, moments), copies between them and host memory, builds the model that computes
// on them, and is the per-space table of the engine's element-wise work (AdamW, scaling,
// squared norms, int8 quantize / dequantize, bf16 casts):
//
//   host          host memory; the entries are the CPU code the engine always ran
//                 (bit for bit: the same loops in the same order)
//   host-staged   host memory and the host entries, but the engine treats it as a device:
//                 every collective on its buffers goes through the staging path of a
//                 device space on the MPI backend (make_staged_comm), and checkpoint
//                 slices (owned) and logits through host copies: tests the device
//                 orchestration on a CPU
//   device        CUDA device memory; the entries call src/kernels/cuda on the space's
//                 compute stream (CUDA builds only, memory_cuda.cpp)
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "zt/comm/comm.hpp"
#include "zt/core/dtype.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/optimizer.hpp"
#include "zt/model/trainable.hpp"
#include "zt/offload/cpu_adam.hpp"
#include "zt/offload/pinned_pool.hpp"
#include "zt/zero/options.hpp"

namespace zt::zero::detail {

class Space {
 public:
  virtual ~Space() = default;

  virtual const char* name() const = 0;              // "host", "host-staged", "device"
  virtual model::Space model_space() const = 0;      // of the views the model is bound to
  // The engine may hand the host pointers into buffers (else it copies: owned, logits).
  virtual bool host_accessible() const = 0;
  // Collectives on this space's buffers over `c` must be staged through pinned host
  // memory (a device space on a host backend; the host-staged space always).
  virtual bool stages(const comm::Comm& c) const = 0;
  // The stream the model and the element-wise table run on (a cudaStream_t): what the
  // engine's collectives (Groups::order_after) and the offload copies (offload_copy.hpp)
  // are ordered after. Null on the host, whose compute is synchronous.
  virtual void* compute_stream() const { return nullptr; }

  // The model computing on this space's buffers (TrainableModel views of this space).
  virtual std::unique_ptr<model::TrainableModel> make_model(const model::Config& cfg,
                                                            int64_t max_batch,
                                                            int64_t max_seq,
                                                            const model::LoraConfig& lora) = 0;

  // bytes zero-filled / freed. release never throws.
  virtual void* allocate(size_t bytes, const char* what) = 0;
  virtual void release(void* p, size_t bytes) noexcept = 0;
  // Blocking copies, ordered after all work queued on the compute stream.
  virtual void to_host(void* host, const void* src, size_t bytes) = 0;
  virtual void from_host(void* dst, const void* host, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // within the space

  // ---- ordering of communication against compute (llm.c style) ----------------------
  // Compute queued from now on runs after every operation in `ops`, one space-neutral
  // rule: an operation that can order the compute stream on the device (NCCL:
  // Request::order_before) does so without blocking the host and moves to `retired`,
  // which the engine waits on at the end of the pass (errors and timeouts surface
  // there); any other (MPI, the staged path; every operation on the host, whose compute
  // is synchronous) is waited on here.
  void order_compute_after(std::vector<comm::Handle>& ops, std::vector<comm::Handle>& retired) {
    for (comm::Handle& h : ops) {
      if (h->order_before(compute_stream()))
        retired.push_back(std::move(h));
      else
        h->wait();
    }
    ops.clear();
  }

  // ---- the element-wise table -------------------------------------------------------
  virtual void zero(float* x, size_t n) = 0;                           // x = 0
  virtual void add(float* acc, const float* x, size_t n) = 0;          // acc += x
  virtual void scale(float* x, size_t n, float c) = 0;                 // x *= c
  // Sums of squares in double, added in call order: sum_squares_add per buffer, then
  // sum_squares_take returns the total and starts a new one (one host read on a device).
  virtual void sum_squares_add(const float* x, size_t n) = 0;
  virtual double sum_squares_take() = 0;
  // The same total into *dst (one double in this space) instead of the host, so the
  // step's all-reduce can run on it where it is (NCCL on the device); a new one starts.
  virtual void sum_squares_store(double* dst) = 0;
  virtual bool all_finite(const float* x, size_t n) = 0;
  virtual void to_bf16(const float* x, size_t n, bf16* out) = 0;
  virtual void from_bf16(const bf16* x, size_t n, float* out) = 0;
  virtual void quantize_pack(const float* x, size_t n, size_t block, uint8_t* out) = 0;
  virtual void dequantize(const uint8_t* in, size_t n, size_t block, float* out) = 0;
  virtual void dequantize_add(const uint8_t* in, size_t n, size_t block, float* out) = 0;
  // model::adamw_unit_slice on this space: elements [begin, begin + n) of unit u.
  virtual void adamw(const model::ParamLayout& layout, int u, int64_t begin,
                     std::span<float> params, std::span<const float> grads, std::span<float> m,
                     std::span<float> v, const model::AdamWConfig& adam, int64_t step) = 0;
};

// The spaces. isa: the CPU AdamW level of the host entries. precision: train.precision
// (host: fp32 only; host-staged: fp32 or bf16-mixed, through a model that widens the
// bf16 weights; anything else an InputError naming the key).
std::unique_ptr<Space> make_host_space(offload::Isa isa, bool staged, const std::string& precision);
// CUDA builds: the device space (the current device, work on a compute stream of its
// own, ordered against NCCL's streams by events). Elsewhere an Error naming train.device.
std::unique_ptr<Space> make_device_space(const std::string& precision);
// The space for EngineOptions::device.
std::unique_ptr<Space> make_space(const EngineOptions& opt, offload::Isa isa);

// n elements of T in a space, zero-filled when made; move-only. bytes() is what the
// engine's memory figures count.
template <class T>
class Buf {
 public:
  Buf() = default;
  Buf(Space& s, size_t n, const char* what = "an engine buffer")
      : space_(&s), n_(n), p_(n ? static_cast<T*>(s.allocate(n * sizeof(T), what)) : nullptr) {}
  ~Buf() { reset(); }
  Buf(Buf&& o) noexcept
      : space_(o.space_), n_(std::exchange(o.n_, 0)), p_(std::exchange(o.p_, nullptr)) {}
  Buf& operator=(Buf&& o) noexcept {
    if (this != &o) {
      reset();
      space_ = o.space_;
      n_ = std::exchange(o.n_, 0);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  size_t bytes() const { return n_ * sizeof(T); }
  void reset() {
    if (p_) space_->release(p_, n_ * sizeof(T));
    p_ = nullptr;
    n_ = 0;
  }

 private:
  Space* space_ = nullptr;
  size_t n_ = 0;
  T* p_ = nullptr;
};

// n buffers of `each` elements in `space`, zero-filled.
template <class T>
std::vector<Buf<T>> make_bufs(Space& space, size_t n, size_t each, const char* what) {
  std::vector<Buf<T>> v;
  v.reserve(n);
  for (size_t i = 0; i < n; ++i) v.emplace_back(space, each, what);
  return v;
}
template <class T>
size_t bytes_of(const std::vector<Buf<T>>& v) {
  size_t b = 0;
  for (const auto& x : v) b += x.bytes();
  return b;
}

// Host values to and from bf16 buffers of a space (bf16-true's stored parameters), through
// a host bf16 copy: rounding (to nearest even, as bf16(float)) and widening (exact) happen
// on the host, so they are the same floats on every space. Blocking, like to_host.
void from_host_rounded(Space& s, bf16* dst, std::span<const float> host);
void to_host_widened(Space& s, float* host, const bf16* src, size_t n);

// Wraps `inner` (not owned; it must outlive the result) so that collectives on buffers
// of `space` run on host copies (staged_comm.cpp): each operation copies its send range
// to a staging buffer from a pool (pinned for a device space), runs on `inner`, and its
// wait() copies the receive range back. The aliasing of send and receive (in place or
// not) is kept, so the results are those of `inner` on the same values. split() wraps
// the split (sharing the pool). `pool` is the engine's one pinned pool (bounded by
// offload.pinned_bytes), shared with the offload copies.
std::unique_ptr<comm::Comm> make_staged_comm(comm::Comm& inner, Space& space,
                                             std::shared_ptr<offload::PinnedPool> pool);
// c, or its staging wrapper (made into `keep`) when the space stages collectives over c.
comm::Comm* staged(Space& space, const std::shared_ptr<offload::PinnedPool>& pool, comm::Comm* c,
                   std::unique_ptr<comm::Comm>& keep);

}  // namespace zt::zero::detail
