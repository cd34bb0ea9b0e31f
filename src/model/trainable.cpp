// The model interface of the engine, and its host implementation (see trainable.hpp).
#include "zt/model/trainable.hpp"

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::model {
namespace {

template <class View>
void check(const View& v, Space space, DType dtype, int64_t numel, const std::string& what) {
  if (v.space != space || v.dtype != dtype)
    throw InputError(strf("%s: a %s buffer of %s, this model takes %s buffers of %s", what.c_str(),
                          space_name(v.space), std::string(dtype_name(v.dtype)).c_str(),
                          space_name(space), std::string(dtype_name(dtype)).c_str()),
                     "bind buffers of the memory space and dtype the model computes in");
  if (numel >= 0 && v.numel != numel)
    throw InputError(strf("%s: %lld elements, expected %lld", what.c_str(),
                          static_cast<long long>(v.numel), static_cast<long long>(numel)),
                     "the buffer must hold exactly the unit's (or the vocabulary's) elements");
}

// A host fp32 view of numel elements: the case bind_unit takes without formatting a name.
template <class View>
bool fits(const View& v, int64_t numel) {
  return v.space == Space::kHost && v.dtype == DType::kF32 && v.numel == numel;
}

// Model<float> on host memory.
class HostModel final : public TrainableModel {
 public:
  HostModel(const Config& cfg, int64_t max_batch, int64_t max_seq) : model_(cfg, max_batch, max_seq) {}

  const ParamLayout& layout() const override { return model_.layout(); }
  Space space() const override { return Space::kHost; }
  DType param_dtype() const override { return DType::kF32; }
  DType grad_dtype() const override { return DType::kF32; }
  std::string describe() const override { return "host fp32"; }

  // Called at every use of a unit at stages 2-3: the message is only formatted on a mismatch.
  void bind_unit(int u, ConstView params, MutView grads) override {
    const int64_t numel = model_.layout().unit(u).numel;
    if (!fits(params, numel)) check(params, Space::kHost, DType::kF32, numel, strf("unit %d parameters", u));
    if ((grads.data != nullptr || grads.numel != 0) && !fits(grads, numel))
      check(grads, Space::kHost, DType::kF32, numel, strf("unit %d gradients", u));
    model_.bind_unit(u, std::span<const float>(static_cast<const float*>(params.data), static_cast<size_t>(params.numel)),
                     std::span<float>(static_cast<float*>(grads.data), static_cast<size_t>(grads.numel)));
  }
  void set_hooks(UnitHooks hooks) override { model_.set_hooks(std::move(hooks)); }
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                       int64_t T, bool recompute, double grad_scale,
                       std::span<const int32_t> positions) override {
    return model_.loss_and_grad(tokens, targets, B, T, recompute, grad_scale, positions);
  }
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t T, std::span<const int32_t> positions) override {
    return model_.loss(tokens, targets, B, T, positions);
  }
  void logits_last(std::span<const int32_t> tokens, int64_t T, MutView out) override {
    check(out, Space::kHost, DType::kF32, -1, "logits_last output");
    model_.logits_last(tokens, T, std::span<float>(static_cast<float*>(out.data), static_cast<size_t>(out.numel)));
  }
  size_t workspace_bytes() const override { return model_.workspace_bytes(); }

 private:
  Model<float> model_;
};

}  // namespace

const char* space_name(Space s) { return s == Space::kHost ? "host" : "device"; }

void check_view(const ConstView& v, Space space, DType dtype, int64_t numel, const std::string& what) {
  check(v, space, dtype, numel, what);
}
void check_view(const MutView& v, Space space, DType dtype, int64_t numel, const std::string& what) {
  check(v, space, dtype, numel, what);
}

std::unique_ptr<TrainableModel> make_host_model(const Config& cfg, int64_t max_batch, int64_t max_seq) {
  return std::make_unique<HostModel>(cfg, max_batch, max_seq);
}

}  // namespace zt::model
