#pragma once
// What the ZeRO engine needs of a model, whatever memory it computes in: the host model
// (Model<float>) and the GPU model (DeviceModel<T, G>) both implement it, so stages 0-3,
// hpZ, qwZ/qgZ, accumulation and the optimizer stay one engine (docs/zero.md).
//
// Buffers cross this interface as views that name their memory space and element type;
// a model accepts only the space and types it computes in (an InputError otherwise), so
// a host span is never handed to a kernel as a device pointer.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "zt/comm/comm.hpp"
#include "zt/core/dtype.hpp"
#include "zt/model/config.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"

namespace zt::model {

enum class Space : uint8_t { kHost, kDevice };
const char* space_name(Space s);  // "host", "device"

// numel elements of `dtype` at `data`, in `space`.
struct ConstView {
  const void* data = nullptr;
  int64_t numel = 0;
  DType dtype = DType::kF32;
  Space space = Space::kHost;
};
struct MutView {
  void* data = nullptr;
  int64_t numel = 0;
  DType dtype = DType::kF32;
  Space space = Space::kHost;
};
inline ConstView host_view(std::span<const float> s) {
  return {s.data(), static_cast<int64_t>(s.size()), DType::kF32, Space::kHost};
}
inline MutView host_view(std::span<float> s) {
  return {s.data(), static_cast<int64_t>(s.size()), DType::kF32, Space::kHost};
}

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  virtual const ParamLayout& layout() const = 0;
  virtual Space space() const = 0;          // where parameters, gradients and logits live
  virtual DType param_dtype() const = 0;    // of the bound parameters (compute dtype)
  virtual DType grad_dtype() const = 0;     // of the bound gradients
  virtual std::string describe() const = 0; // "host fp32", "device bf16 / grads fp32"

  // Model::bind_unit / set_hooks / loss_and_grad / loss / logits_last / workspace_bytes,
  // with buffers as views (grads may be empty for eval-only use; out holds vocab values
  // of the parameter dtype). Tokens, targets and positions (optional: packed examples,
  // Model::loss_and_grad) are host [B, T] row-major.
  virtual void bind_unit(int u, ConstView params, MutView grads) = 0;
  virtual void set_hooks(UnitHooks hooks) = 0;
  virtual double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                               int64_t B, int64_t T, bool recompute, double grad_scale,
                               std::span<const int32_t> positions = {}) = 0;
  virtual double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                      int64_t B, int64_t T, std::span<const int32_t> positions = {}) = 0;
  virtual void logits_last(std::span<const int32_t> tokens, int64_t T, MutView out) = 0;
  virtual size_t workspace_bytes() const = 0;
  // Mixture of experts: the router statistics of the last pass (Model::router_stats);
  // nullptr for a model without experts or one that does not keep them.
  virtual const RouterStats* router_stats() const { return nullptr; }

  // ---- LoRA / QLoRA (docs/finetune.md "LoRA and QLoRA"; docs/zero.md "Frozen units") ---
  // A model built with adapters has layout() = ParamLayout(cfg, lora): the base units
  // frozen (bound with empty gradient views: it computes no base gradient; QLoRA's
  // without the targeted W, which it reads from bind_qlora's base only) and the
  // adapters' unit a = layout().adapter_unit() last, an ordinary unit: bind_unit(a, ...)
  // binds the packed adapters (LoraLayout order) and their gradients, and around every
  // call the model brackets the whole pass with the adapters' hooks:
  //   loss_and_grad:  before_use(a), <the base units' uses as UnitHooks says>,
  //                   after_use(a), grad_ready(a)
  //   loss, logits_last: before_use(a), <the base units' uses>, after_use(a)
  // (the engine's use orders start with a; grad_ready(a) comes after the last use).
  // Dropout masks of the adapters come from `stream` (set per micro-batch; same stream,
  // same masks). A model without adapters ignores it.
  virtual void set_dropout_stream(uint64_t stream) { (void)stream; }

  // ---- Preference objectives (Model::set_row_objective / set_adapters_enabled /
  // row_logps; docs/finetune.md "DPO and ORPO"). The host model and the device model
  // implement them; a model that does not refuses (zt::InputError naming the objective).
  virtual void set_row_objective(RowObjective objective);
  virtual void set_adapters_enabled(bool on);
  virtual void row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                         int64_t T, std::span<const int32_t> positions, std::span<double> logp,
                         std::span<int64_t> count);
  // QLoRA: the targeted W are read from `base` (NF4, dequantised at each use); the
  // frozen units hold none, so no pass runs before it (std::logic_error); `base` must
  // outlive its use. Models without QLoRA refuse it.
  virtual void bind_qlora(const QloraBase& base);

  // ---- Expert parallelism (docs/zero.md "Expert parallelism"; Model::set_expert_group):
  // the layout becomes ParamLayout::expert_slice(cfg, group.size(), group.rank()) (this
  // rank's experts only) and every pass is collective over the group. Called once, before
  // any bind_unit or set_hooks. The host fp32 model implements it; any other refuses
  // (zt::InputError naming the model and moe.expert_parallel).
  virtual void set_expert_group(comm::Comm& group);
};

// The adapters' unit's hooks around one pass (the contract above), for the models that
// wrap one with adapters: before_use(a) at its start; after_use(a) and, when the pass
// computed gradients, grad_ready(a) at its end. No-op when a < 0 (no adapters).
void adapters_begin(const UnitHooks& hooks, int a);
void adapters_end(const UnitHooks& hooks, int a, bool grads);

// Throws zt::InputError unless `v` holds `numel` elements of `dtype` in `space` (numel < 0:
// any count); `what` names the buffer ("unit 3 parameters").
void check_view(const ConstView& v, Space space, DType dtype, int64_t numel, const std::string& what);
void check_view(const MutView& v, Space space, DType dtype, int64_t numel, const std::string& what);

// The fp32 host model behind the interface (Model<float>).
// With lora.enabled(): Model<float>::bind_lora behind the adapters' unit (see above).
std::unique_ptr<TrainableModel> make_host_model(const Config& cfg, int64_t max_batch, int64_t max_seq,
                                                const LoraConfig& lora = {});

}  // namespace zt::model
