// DeviceModel as the engine sees models: the TrainableModel on device memory for each
// precision (fp32, bf16-mixed, bf16-true), with LoRA/QLoRA's adapters' unit, and
// make_device_model, the factory the engine calls (zt/model/device_model.hpp).
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "device_model_impl.hpp"

namespace zt::model {

namespace {

template <class X>
constexpr DType dtype_of() {
  return std::is_same_v<X, float> ? DType::kF32 : DType::kBF16;
}

// DeviceModel<T, G> on device memory, as the engine sees models. With lora.enabled():
// DeviceModel::bind_lora behind the adapters' unit, as the host model (trainable.cpp,
// HostModel) has Model::bind_lora: the same unit, hooks and deferral of QLoRA.
template <class T, class G>
class DeviceTrainable final : public TrainableModel {
 public:
  DeviceTrainable(const Config& cfg, int64_t max_batch, int64_t max_seq, cudaStream_t stream,
                  const LoraConfig& lora)
      : model_(std::make_unique<DeviceModel<T, G>>(lora_base_layout(cfg, lora), max_batch,
                                                   max_seq, stream)),
        max_batch_(max_batch),
        max_seq_(max_seq),
        stream_(stream) {
    if (lora.enabled()) {
      lora_layout_.emplace(cfg, lora);
      layout_.emplace(cfg, lora);
    }
  }

  const ParamLayout& layout() const override { return layout_ ? *layout_ : model_->layout(); }
  Space space() const override { return Space::kDevice; }
  DType param_dtype() const override { return dtype_of<T>(); }
  DType grad_dtype() const override { return dtype_of<G>(); }
  std::string describe() const override {
    return strf("device %s / grads %s", std::string(dtype_name(dtype_of<T>())).c_str(),
                std::string(dtype_name(dtype_of<G>())).c_str());
  }
  // The adapters' unit too: bf16 under bf16 compute (the engine casts it from the fp32
  // master as it casts units), fp32 gradients.
  void bind_unit(int u, ConstView params, MutView grads) override {
    const int64_t numel = layout().unit(u).numel;
    check_view(params, Space::kDevice, dtype_of<T>(), numel, strf("unit %d parameters", u));
    if (grads.data != nullptr || grads.numel != 0)
      check_view(grads, Space::kDevice, dtype_of<G>(), numel, strf("unit %d gradients", u));
    const T* p = static_cast<const T*>(params.data);
    G* g = static_cast<G*>(grads.data);
    if (u == layout().adapter_unit()) {
      model_->bind_lora(*lora_layout_, p, g);
      lora_bound_ = true;
      // Uploads the NF4 base once per bind_qlora (DeviceLora keeps it across rebinds).
      if (qlora_ && !qlora_uploaded_) {
        model_->bind_qlora(*qlora_);
        qlora_uploaded_ = true;
      }
    } else
      model_->bind_unit(u, p, g);
  }
  void set_hooks(UnitHooks hooks) override {
    hooks_ = hooks;
    model_->set_hooks(std::move(hooks));
  }
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                       int64_t Tn, bool recompute, double grad_scale,
                       std::span<const int32_t> positions) override {
    use_adapters();
    const double loss =
        model_->loss_and_grad(tokens, targets, B, Tn, recompute, grad_scale, positions);
    done_adapters(true);
    return loss;
  }
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t Tn, std::span<const int32_t> positions) override {
    use_adapters();
    const double loss = model_->loss(tokens, targets, B, Tn, positions);
    done_adapters(false);
    return loss;
  }
  void logits_last(std::span<const int32_t> tokens, int64_t Tn, MutView out) override {
    check_view(out, Space::kDevice, dtype_of<T>(), model_->config().vocab, "logits_last output");
    use_adapters();
    model_->logits_last(tokens, Tn, static_cast<T*>(out.data));
    done_adapters(false);
  }
  size_t workspace_bytes() const override { return model_->workspace_bytes(); }
  // Mixture of experts: the last forward's routing (tokens per expert, aux), as HostModel's.
  const RouterStats* router_stats() const override {
    return model_->config().moe() ? &model_->router_stats() : nullptr;
  }
  // Expert parallelism, as HostModel's: the model rebuilt on this rank's expert slice.
  void set_expert_group(comm::Comm& group) override {
    if (lora_layout_) TrainableModel::set_expert_group(group);  // refuses
    const Config cfg = model_->config();
    model_.reset();  // (its workspace first: one model's on the device at a time)
    model_ = std::make_unique<DeviceModel<T, G>>(
        ParamLayout::expert_slice(cfg, group.size(), group.rank()), max_batch_, max_seq_, stream_);
    model_->set_hooks(hooks_);
    model_->set_expert_group(&group);
  }
  void set_dropout_stream(uint64_t stream) override { model_->set_lora_stream(stream); }
  // Preference objectives (DPO, ORPO), as the host model's (trainable.cpp).
  void set_row_objective(RowObjective objective) override {
    model_->set_row_objective(std::move(objective));
  }
  void set_adapters_enabled(bool on) override { model_->set_adapters_enabled(on); }
  void row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                 int64_t Tn, std::span<const int32_t> positions, std::span<double> logp,
                 std::span<int64_t> count) override {
    use_adapters();
    model_->row_logps(tokens, targets, B, Tn, positions, logp, count);
    done_adapters(false);
  }
  void bind_qlora(const QloraBase& base) override {
    if (!lora_layout_ || lora_layout_->lora().method != FinetuneMethod::kQlora)
      TrainableModel::bind_qlora(base);  // refuses
    // DeviceModel::bind_qlora needs the adapters bound (stage 3: at their first use).
    qlora_ = &base;
    qlora_uploaded_ = false;  // a new base (after a load): upload it again
    if (lora_bound_) {
      model_->bind_qlora(base);
      qlora_uploaded_ = true;
    }
  }

 private:
  // The adapters' unit spans the whole pass (trainable.hpp): its hooks bracket the call;
  // at stage 3 before_use(a) rebinds it, so adapter pointers are read only after it.
  void use_adapters() { adapters_begin(hooks_, layout().adapter_unit()); }
  void done_adapters(bool grads) { adapters_end(hooks_, layout().adapter_unit(), grads); }

  std::unique_ptr<DeviceModel<T, G>> model_;  // (set_expert_group rebuilds it)
  int64_t max_batch_, max_seq_;                // the workspace's first shape
  cudaStream_t stream_;
  std::optional<LoraLayout> lora_layout_;  // with adapters
  std::optional<ParamLayout> layout_;      // with adapters: ParamLayout(cfg, lora)
  UnitHooks hooks_;
  bool lora_bound_ = false;
  const QloraBase* qlora_ = nullptr;  // QLoRA: the NF4 base (owned by the engine)
  bool qlora_uploaded_ = false;       // qlora_ is on the device
};

}  // namespace

std::unique_ptr<TrainableModel> make_device_model(const Config& cfg, int64_t max_batch,
                                                  int64_t max_seq, const std::string& precision,
                                                  cudaStream_t stream, const LoraConfig& lora) {
  check_device_lora(lora);  // the rule zt estimate --device gpu applies too
  if (precision == "fp32")
    return std::make_unique<DeviceTrainable<float, float>>(cfg, max_batch, max_seq, stream, lora);
  if (precision == "bf16-mixed")
    return std::make_unique<DeviceTrainable<kc::bf16_t, float>>(cfg, max_batch, max_seq, stream,
                                                                lora);
  if (precision == "bf16-true")
    return std::make_unique<DeviceTrainable<kc::bf16_t, kc::bf16_t>>(cfg, max_batch, max_seq,
                                                                     stream, lora);
  throw InputError("train.precision = '" + precision + "' is not a precision",
                   "use fp32, bf16-mixed (bf16 compute, fp32 master weights and moments) or "
                   "bf16-true");
}

}  // namespace zt::model
