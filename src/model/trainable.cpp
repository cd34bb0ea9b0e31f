// The model interface of the engine, and its host implementation (see trainable.hpp).
#include "zt/model/trainable.hpp"

#include <optional>

#include "zt/comm/comm.hpp"
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
  HostModel(const Config& cfg, int64_t max_batch, int64_t max_seq, const LoraConfig& lora)
      : model_(lora_base_layout(cfg, lora), max_batch, max_seq), max_batch_(max_batch), max_seq_(max_seq) {
    if (lora.enabled()) {
      lora_layout_.emplace(cfg, lora);
      layout_.emplace(cfg, lora);
    }
  }

  const ParamLayout& layout() const override { return layout_ ? *layout_ : model_.layout(); }
  Space space() const override { return Space::kHost; }
  DType param_dtype() const override { return DType::kF32; }
  DType grad_dtype() const override { return DType::kF32; }
  std::string describe() const override { return "host fp32"; }

  // Called at every use of a unit at stages 2-3: the message is only formatted on a mismatch.
  void bind_unit(int u, ConstView params, MutView grads) override {
    const int64_t numel = layout().unit(u).numel;
    if (!fits(params, numel)) check(params, Space::kHost, DType::kF32, numel, strf("unit %d parameters", u));
    if ((grads.data != nullptr || grads.numel != 0) && !fits(grads, numel))
      check(grads, Space::kHost, DType::kF32, numel, strf("unit %d gradients", u));
    const std::span<const float> p(static_cast<const float*>(params.data), static_cast<size_t>(params.numel));
    const std::span<float> g(static_cast<float*>(grads.data), static_cast<size_t>(grads.numel));
    if (u == layout().adapter_unit()) {
      model_.bind_lora(*lora_layout_, p, g);
      adapters_bound_ = true;
      if (qlora_) model_.bind_qlora(*qlora_);
    } else
      model_.bind_unit(u, p, g);
  }
  void set_hooks(UnitHooks hooks) override {
    hooks_ = hooks;
    model_.set_hooks(std::move(hooks));
  }
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                       int64_t T, bool recompute, double grad_scale,
                       std::span<const int32_t> positions) override {
    use_adapters();
    const double loss = model_.loss_and_grad(tokens, targets, B, T, recompute, grad_scale, positions);
    done_adapters(true);
    return loss;
  }
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t T, std::span<const int32_t> positions) override {
    use_adapters();
    const double loss = model_.loss(tokens, targets, B, T, positions);
    done_adapters(false);
    return loss;
  }
  void logits_last(std::span<const int32_t> tokens, int64_t T, MutView out) override {
    check(out, Space::kHost, DType::kF32, -1, "logits_last output");
    use_adapters();
    model_.logits_last(tokens, T, std::span<float>(static_cast<float*>(out.data), static_cast<size_t>(out.numel)));
    done_adapters(false);
  }
  size_t workspace_bytes() const override { return model_.workspace_bytes(); }
  const RouterStats* router_stats() const override {
    return model_.config().moe() ? &model_.router_stats() : nullptr;
  }
  void set_expert_group(comm::Comm& group) override {
    if (lora_layout_) TrainableModel::set_expert_group(group);  // refuses
    model_ = Model<float>(ParamLayout::expert_slice(model_.config(), group.size(), group.rank()),
                          max_batch_, max_seq_);
    model_.set_expert_group(&group);
  }
  void set_dropout_stream(uint64_t stream) override { model_.set_lora_stream(stream); }
  void set_row_objective(RowObjective objective) override { model_.set_row_objective(std::move(objective)); }
  void set_adapters_enabled(bool on) override { model_.set_adapters_enabled(on); }
  void row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B, int64_t T,
                 std::span<const int32_t> positions, std::span<double> logp,
                 std::span<int64_t> count) override {
    use_adapters();
    model_.row_logps(tokens, targets, B, T, positions, logp, count);
    done_adapters(false);
  }
  void bind_qlora(const QloraBase& base) override {
    if (!lora_layout_ || lora_layout_->lora().method != FinetuneMethod::kQlora)
      TrainableModel::bind_qlora(base);  // refuses
    qlora_ = &base;  // Model::bind_qlora needs the adapters bound (stage 3: at their first use)
    if (adapters_bound_) model_.bind_qlora(base);
  }

 private:
  // The adapters' unit spans the whole pass (trainable.hpp): its hooks bracket the call.
  void use_adapters() { adapters_begin(hooks_, layout().adapter_unit()); }
  void done_adapters(bool grads) { adapters_end(hooks_, layout().adapter_unit(), grads); }

  Model<float> model_;
  std::optional<LoraLayout> lora_layout_;  // with adapters
  std::optional<ParamLayout> layout_;      // with adapters: ParamLayout(cfg, lora)
  UnitHooks hooks_;
  bool adapters_bound_ = false;
  const QloraBase* qlora_ = nullptr;  // QLoRA: the NF4 base (owned by the engine)
  int64_t max_batch_, max_seq_;       // the workspace's first shape (set_expert_group rebuilds)
};

}  // namespace

const char* space_name(Space s) { return s == Space::kHost ? "host" : "device"; }

void check_view(const ConstView& v, Space space, DType dtype, int64_t numel, const std::string& what) {
  check(v, space, dtype, numel, what);
}
void check_view(const MutView& v, Space space, DType dtype, int64_t numel, const std::string& what) {
  check(v, space, dtype, numel, what);
}

void adapters_begin(const UnitHooks& hooks, int a) {
  if (a >= 0 && hooks.before_use) hooks.before_use(a);
}
void adapters_end(const UnitHooks& hooks, int a, bool grads) {
  if (a < 0) return;
  if (hooks.after_use) hooks.after_use(a);
  if (grads && hooks.grad_ready) hooks.grad_ready(a);
}

namespace {
[[noreturn]] void no_objective(const std::string& model) {
  throw InputError("finetune.objective = dpo / orpo on the " + model + " model: this model has "
                   "no per-row objective (the host and device models have)",
                   "train DPO / ORPO on the host or device model, or use finetune.objective = "
                   "sft here");
}
}  // namespace

void TrainableModel::set_row_objective(RowObjective objective) {
  if (objective) no_objective(describe());
}
void TrainableModel::set_adapters_enabled(bool on) {
  if (!on) no_objective(describe());
}
void TrainableModel::row_logps(std::span<const int32_t>, std::span<const int32_t>, int64_t, int64_t,
                               std::span<const int32_t>, std::span<double>, std::span<int64_t>) {
  no_objective(describe());
}

void TrainableModel::set_expert_group(comm::Comm& group) {
  throw InputError(strf("moe.expert_parallel = %d on the %s model%s: it has no expert parallelism",
                        group.size(), describe().c_str(),
                        layout().adapter_unit() >= 0 ? " with LoRA adapters" : ""),
                   "set moe.expert_parallel = 1 (expert parallelism runs on the host and GPU "
                   "fp32 models without LoRA: train.device = cpu or cuda, train.precision = "
                   "fp32, finetune.method = full)");
}

void TrainableModel::bind_qlora(const QloraBase&) {
  throw InputError("finetune.method = qlora on the " + describe() + " model, built without QLoRA",
                   "build the model with the QLoRA config (make_host_model / make_device_model "
                   "with finetune.method = qlora)");
}

std::unique_ptr<TrainableModel> make_host_model(const Config& cfg, int64_t max_batch, int64_t max_seq,
                                                const LoraConfig& lora) {
  return std::make_unique<HostModel>(cfg, max_batch, max_seq, lora);
}

}  // namespace zt::model
