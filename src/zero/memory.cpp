// The host memory spaces of the engine (memory.hpp): the element-wise entries are the CPU
// code the engine has always run, loop for loop, so every CPU result stays bit for bit.
#include "memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "zt/comm/device_wait.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero::detail {
namespace {

// The host-staged space's model for train.precision = bf16-mixed (a test device: the host
// has no bf16 kernels). It takes bf16 weight views, as the GPU's DeviceModel<bf16, float>
// does, and computes with Model<float> on their exact fp32 widening, refreshed at every
// use of the unit (the engine's before_use binds the bf16 weights, then this copies them
// into the unit's fp32 buffer). Gradients are fp32 and pass through. So the engine's bf16
// path (casts, bf16 gathers, bf16 hpZ secondaries) runs on a CPU, and what the model
// computes is Model<float> on bf16-rounded weights: a reference a test can recompute.
class WidenedBf16Model final : public model::TrainableModel {
 public:
  WidenedBf16Model(const model::Config& cfg, int64_t max_batch, int64_t max_seq,
                   const model::LoraConfig& lora)
      : inner_(model::make_host_model(cfg, max_batch, max_seq, lora)) {
    const model::ParamLayout& l = inner_->layout();
    wide_.resize(static_cast<size_t>(l.num_units()));
    bound_.assign(wide_.size(), nullptr);
    for (int u = 0; u < l.num_units(); ++u)
      wide_[static_cast<size_t>(u)].assign(static_cast<size_t>(l.unit(u).numel), 0.0f);
  }

  const model::ParamLayout& layout() const override { return inner_->layout(); }
  model::Space space() const override { return model::Space::kHost; }
  DType param_dtype() const override { return DType::kBF16; }
  DType grad_dtype() const override { return DType::kF32; }
  std::string describe() const override { return "host bf16 weights widened to fp32 / grads fp32"; }

  void bind_unit(int u, model::ConstView params, model::MutView grads) override {
    const size_t i = static_cast<size_t>(u);
    model::check_view(params, model::Space::kHost, DType::kBF16, layout().unit(u).numel,
                      strf("unit %d parameters", u));
    bound_[i] = static_cast<const bf16*>(params.data);
    widen(u);
    inner_->bind_unit(u, model::host_view(std::span<const float>(wide_[i])), grads);
  }
  void set_hooks(model::UnitHooks hooks) override {
    outer_ = std::move(hooks);
    model::UnitHooks mine;
    mine.before_use = [this](int u) {
      if (outer_.before_use) outer_.before_use(u);  // binds (stage 2-3) the unit's weights
      widen(u);                                     // their current values, in fp32
    };
    mine.after_use = [this](int u) {
      if (outer_.after_use) outer_.after_use(u);
    };
    mine.grad_ready = [this](int u) {
      if (outer_.grad_ready) outer_.grad_ready(u);
    };
    inner_->set_hooks(std::move(mine));
  }
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       int64_t B, int64_t T, bool recompute, double grad_scale,
                       std::span<const int32_t> positions) override {
    return inner_->loss_and_grad(tokens, targets, B, T, recompute, grad_scale, positions);
  }
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t T, std::span<const int32_t> positions) override {
    return inner_->loss(tokens, targets, B, T, positions);
  }
  void set_dropout_stream(uint64_t stream) override { inner_->set_dropout_stream(stream); }
  void bind_qlora(const model::QloraBase& base) override { inner_->bind_qlora(base); }
  // bf16 logits, as the GPU's bf16 model writes: the fp32 logits rounded.
  void logits_last(std::span<const int32_t> tokens, int64_t T, model::MutView out) override {
    model::check_view(out, model::Space::kHost, DType::kBF16, -1, "logits_last output");
    std::vector<float> wide(static_cast<size_t>(out.numel));  // [vocab]
    inner_->logits_last(tokens, T, model::host_view(std::span<float>(wide)));
    bf16* o = static_cast<bf16*>(out.data);
    for (size_t k = 0; k < wide.size(); ++k) o[k] = bf16(wide[k]);
  }
  const model::RouterStats* router_stats() const override { return inner_->router_stats(); }
  size_t workspace_bytes() const override {
    size_t b = inner_->workspace_bytes();
    for (const auto& w : wide_) b += w.size() * sizeof(float);
    return b;
  }

 private:
  void widen(int u) {
    const size_t i = static_cast<size_t>(u);
    if (bound_[i] == nullptr) return;
    std::vector<float>& w = wide_[i];  // [numel]
    for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(bound_[i][k]);
  }

  std::unique_ptr<model::TrainableModel> inner_;
  model::UnitHooks outer_;                 // the engine's hooks
  std::vector<std::vector<float>> wide_;   // per unit [numel]: fp32 widening of the weights
  std::vector<const bf16*> bound_;         // per unit: the bound bf16 weights, or null
};

// The host-staged space's model wraps the host model as a device's: the host reads of a
// GPU model (the loss totals at the end of loss_and_grad and loss, the last logits) wait
// for its compute stream, polled (comm::wait_ready); here the host stands in for a stream
// ordered after every in-flight operation (comm::wait_in_flight), so a stuck collective
// the compute would wait on ends the job there as on a GPU. Nothing is in flight in a run
// on host memory: the wait returns at once and every value is the host model's.
class StagedWaitModel final : public model::TrainableModel {
 public:
  explicit StagedWaitModel(std::unique_ptr<model::TrainableModel> inner)
      : inner_(std::move(inner)) {}

  const model::ParamLayout& layout() const override { return inner_->layout(); }
  model::Space space() const override { return inner_->space(); }
  DType param_dtype() const override { return inner_->param_dtype(); }
  DType grad_dtype() const override { return inner_->grad_dtype(); }
  std::string describe() const override { return inner_->describe(); }
  void bind_unit(int u, model::ConstView params, model::MutView grads) override {
    inner_->bind_unit(u, params, grads);
  }
  void set_hooks(model::UnitHooks hooks) override { inner_->set_hooks(std::move(hooks)); }
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       int64_t B, int64_t T, bool recompute, double grad_scale,
                       std::span<const int32_t> positions) override {
    const double l = inner_->loss_and_grad(tokens, targets, B, T, recompute, grad_scale, positions);
    comm::wait_in_flight("reading the loss");
    return l;
  }
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t T, std::span<const int32_t> positions) override {
    const double l = inner_->loss(tokens, targets, B, T, positions);
    comm::wait_in_flight("reading the loss");
    return l;
  }
  void logits_last(std::span<const int32_t> tokens, int64_t T, model::MutView out) override {
    inner_->logits_last(tokens, T, out);
    comm::wait_in_flight("reading the last logits");
  }
  const model::RouterStats* router_stats() const override { return inner_->router_stats(); }
  size_t workspace_bytes() const override { return inner_->workspace_bytes(); }
  void set_dropout_stream(uint64_t stream) override { inner_->set_dropout_stream(stream); }
  void bind_qlora(const model::QloraBase& base) override { inner_->bind_qlora(base); }

 private:
  std::unique_ptr<model::TrainableModel> inner_;
};

class HostSpace final : public Space {
 public:
  HostSpace(offload::Isa isa, bool staged, bool bf16_weights)
      : isa_(isa), staged_(staged), bf16_weights_(bf16_weights) {}

  const char* name() const override { return staged_ ? "host-staged" : "host"; }
  model::Space model_space() const override { return model::Space::kHost; }
  // host-staged plays a device: checkpoints (owned) and logits go through host copies.
  bool host_accessible() const override { return !staged_; }
  bool stages(const comm::Comm&) const override { return staged_; }

  std::unique_ptr<model::TrainableModel> make_model(const model::Config& cfg, int64_t max_batch,
                                                    int64_t max_seq,
                                                    const model::LoraConfig& lora) override {
    if (bf16_weights_)
      return std::make_unique<StagedWaitModel>(
          std::make_unique<WidenedBf16Model>(cfg, max_batch, max_seq, lora));
    auto m = model::make_host_model(cfg, max_batch, max_seq, lora);
    if (staged_) return std::make_unique<StagedWaitModel>(std::move(m));
    return m;
  }

  void* allocate(size_t bytes, const char* what) override {
    // A failure is std::bad_alloc, as for any host allocation: the trainer catches it
    // around the engine's construction and names the model, its states, MemAvailable
    // and the address-space limit (train/trainer.cpp, out_of_memory).
    // Large buffers (the shards of parameters and moments) are mmap'ed: page-aligned, so
    // a checkpoint's O_DIRECT reads and writes land in them in place (no bounce copy,
    // src/ckpt/io_engine.cpp), and zero pages faulted in at first touch, as calloc's.
    (void)what;
    if (bytes >= kMapped) {
      void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      return p;
    }
    void* p = std::calloc(bytes, 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p, size_t bytes) noexcept override {
    if (bytes >= kMapped) {
      if (p) ::munmap(p, bytes);
    } else {
      std::free(p);
    }
  }
  static constexpr size_t kMapped = size_t{1} << 20;  // bytes from which allocate() maps pages
  // host-staged: waits as the device space's copies do (StagedWaitModel says why).
  void to_host(void* host, const void* src, size_t bytes) override {
    if (staged_) comm::wait_in_flight("copying from the device to the host");
    if (bytes) std::memcpy(host, src, bytes);
  }
  void from_host(void* dst, const void* host, size_t bytes) override {
    if (staged_) comm::wait_in_flight("copying from the host to the device");
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
  void sum_squares_store(double* dst) override { *dst = std::exchange(total_, 0.0); }
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
  bool bf16_weights_;  // host-staged, bf16-mixed: the model takes bf16 weights
  double total_ = 0.0;
};

}  // namespace

void from_host_rounded(Space& s, bf16* dst, std::span<const float> host) {
  std::vector<bf16> half(host.size());  // [n]
  for (size_t k = 0; k < host.size(); ++k) half[k] = bf16(host[k]);
  s.from_host(dst, half.data(), half.size() * sizeof(bf16));
}

void to_host_widened(Space& s, float* host, const bf16* src, size_t n) {
  std::vector<bf16> half(n);  // [n]
  s.to_host(half.data(), src, n * sizeof(bf16));
  for (size_t k = 0; k < n; ++k) host[k] = static_cast<float>(half[k]);
}

std::unique_ptr<Space> make_host_space(offload::Isa isa, bool staged, const std::string& precision) {
  // The host computes fp32 only; host-staged also runs bf16-mixed through its widening
  // test model (above), so the engine's bf16 path is exercised on a CPU.
  const bool bf16 = precision == "bf16-mixed" || precision == "bf16-true";
  if (precision != "fp32" && !(staged && bf16))
    throw InputError("train.precision = " + precision + " with the engine on the " +
                         (staged ? "host-staged space" : "CPU"),
                     staged ? "the host-staged space runs fp32, bf16-mixed and bf16-true"
                            : "set train.precision = fp32, or train on a GPU (train.device = cuda)");
  return std::make_unique<HostSpace>(isa, staged, bf16);
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
    case EngineOptions::Device::kHost: return make_host_space(isa, false, opt.precision);
    case EngineOptions::Device::kHostStaged: return make_host_space(isa, true, opt.precision);
    case EngineOptions::Device::kCuda: return make_device_space(opt.precision);
  }
  throw Error("unknown EngineOptions::device", "a bug: every device is listed above");
}

}  // namespace zt::zero::detail
