// The host memory spaces of the engine (memory.hpp): the element-wise entries are the CPU
// code the engine has always run, loop for loop, so every CPU result stays bit for bit.
#include "memory.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero::detail {
namespace {

class HostSpace final : public Space {
 public:
  HostSpace(offload::Isa isa, bool staged) : isa_(isa), staged_(staged) {}

  const char* name() const override { return staged_ ? "host-staged" : "host"; }
  model::Space model_space() const override { return model::Space::kHost; }
  // host-staged plays a device: checkpoints (owned) and logits go through host copies.
  bool host_accessible() const override { return !staged_; }
  bool stages(const comm::Comm&) const override { return staged_; }

  std::unique_ptr<model::TrainableModel> make_model(const model::Config& cfg, int64_t max_batch,
                                                    int64_t max_seq) override {
    return model::make_host_model(cfg, max_batch, max_seq);
  }

  void* allocate(size_t bytes, const char* what) override {
    // A failure is std::bad_alloc, as for any host allocation: the trainer catches it
    // around the engine's construction and names the model, its states, MemAvailable
    // and the address-space limit (train/trainer.cpp, out_of_memory).
    (void)what;
    void* p = std::calloc(bytes, 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p, size_t) noexcept override { std::free(p); }
  void to_host(void* host, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(host, src, bytes);
  }
  void from_host(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memmove(dst, src, bytes);
  }

  void zero(float* x, size_t n) override { std::fill_n(x, n, 0.0f); }
  void add(float* acc, const float* x, size_t n) override {
    for (size_t k = 0; k < n; ++k) acc[k] += x[k];
  }
  void scale(float* x, size_t n, float c) override {
    for (size_t k = 0; k < n; ++k) x[k] *= c;
  }
  void sum_squares_add(const float* x, size_t n) override {
    double s = 0.0;  // per buffer, then into the total: the engine's order since stage 0
    for (size_t k = 0; k < n; ++k) s += static_cast<double>(x[k]) * x[k];
    total_ += s;
  }
  double sum_squares_take() override { return std::exchange(total_, 0.0); }
  bool all_finite(const float* x, size_t n) override {
    for (size_t k = 0; k < n; ++k)
      if (!std::isfinite(x[k])) return false;
    return true;
  }
  void to_bf16(const float* x, size_t n, bf16* out) override {
    for (size_t k = 0; k < n; ++k) out[k] = bf16(x[k]);
  }
  void from_bf16(const bf16* x, size_t n, float* out) override {
    for (size_t k = 0; k < n; ++k) out[k] = static_cast<float>(x[k]);
  }
  void quantize_pack(const float* x, size_t n, size_t block, uint8_t* out) override {
    zero::quantize_pack(x, n, block, out);
  }
  void dequantize(const uint8_t* in, size_t n, size_t block, float* out) override {
    zero::dequantize(in, n, block, out);
  }
  void dequantize_add(const uint8_t* in, size_t n, size_t block, float* out) override {
    zero::dequantize_add(in, n, block, out);
  }
  void adamw(const model::ParamLayout& layout, int u, int64_t begin, std::span<float> params,
             std::span<const float> grads, std::span<float> m, std::span<float> v,
             const model::AdamWConfig& adam, int64_t step) override {
    offload::adamw_unit_slice(layout, u, begin, params, grads, m, v, {}, adam, step, isa_);
  }

 private:
  offload::Isa isa_;
  bool staged_;
  double total_ = 0.0;
};

}  // namespace

std::unique_ptr<Space> make_host_space(offload::Isa isa, bool staged) {
  return std::make_unique<HostSpace>(isa, staged);
}

#ifndef ZT_HAVE_CUDA
std::unique_ptr<Space> make_device_space(const std::string&) {
  throw InputError("train.device = cuda in a build without CUDA",
                   "set train.device = cpu (or auto), or rebuild with -DZT_CUDA=ON on a machine "
                   "with nvcc");
}
#endif

std::unique_ptr<Space> make_space(const EngineOptions& opt, offload::Isa isa) {
  switch (opt.device) {
    case EngineOptions::Device::kHost: return make_host_space(isa, false);
    case EngineOptions::Device::kHostStaged: return make_host_space(isa, true);
    case EngineOptions::Device::kCuda: return make_device_space(opt.precision);
  }
  throw Error("unknown EngineOptions::device", "a bug: every device is listed above");
}

}  // namespace zt::zero::detail
