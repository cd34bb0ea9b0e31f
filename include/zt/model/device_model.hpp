#pragma once
// The Llama-style decoder on one GPU (CUDA builds only): the same forward and backward as
// zt::model::Model (model.hpp), the same unit layout, hook order and loss, on device
// buffers and the kernels of zt/kernels/cuda. Parameters and gradients are device spans
// bound per unit (the ZeRO engine can own and gather them); activations live in a device
// workspace preallocated for (max_batch, max_seq) (the per-block activations of a step
// without recompute are allocated by the first such step, as in Model).
//
// Precision: T is the type of the weights the kernels read and of activations; G the type
// of parameter gradients.
//   DeviceModel<float, float>    fp32
//   DeviceModel<bf16_t, float>   bf16-mixed (bind the bf16 copy of the fp32 master)
//   DeviceModel<bf16_t, bf16_t>  bf16-true
//
// Residual adds are fused into the RMSNorms: block l's input x_l = x_mid(l-1) + mlp(l-1)
// is formed by the fused residual + RMSNorm that also normalises it, and x_mid = x_l +
// o_proj(att) by the one before the MLP.
#include <cstdint>
#include <memory>
#include <span>

#include "zt/kernels/cuda/types.hpp"
#include "zt/model/config.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/model.hpp"
#include "zt/model/trainable.hpp"

namespace zt::model {

template <class T, class G>
class DeviceModel {
 public:
  // All work is enqueued on `stream`; loss_and_grad and loss wait for it once at the end
  // to read the loss (polled: comm::wait_stream, zt/comm/device_wait.hpp).
  DeviceModel(const Config& cfg, int64_t max_batch, int64_t max_seq,
              cudaStream_t stream = nullptr);
  // On the units of `layout` (no adapters' unit), as Model's: QLoRA's lora_base_layout
  // leaves out the targeted W, read from the NF4 base only (bind_qlora first, else any
  // pass throws std::logic_error).
  DeviceModel(const ParamLayout& layout, int64_t max_batch, int64_t max_seq,
              cudaStream_t stream = nullptr);
  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  const Config& config() const;
  const ParamLayout& layout() const;

  // Device pointers to unit u's parameters (layout().unit(u).numel elements) and
  // gradients (same size; nullptr for eval-only use).
  void bind_unit(int u, const T* params, G* grads);
  void set_hooks(UnitHooks hooks);

  // LoRA (lora.hpp), as Model::bind_lora: adapters on the targeted projections, the base
  // frozen. params: device [layout.numel()] of T packed as LoraLayout says (the CPU's
  // packing; with bf16 compute, the bf16 copy of the fp32 adapters, as for units); grads:
  // device [layout.numel()] of G, or nullptr for eval. From then on loss_and_grad runs no
  // base-gradient GEMM or kernel (dW, norm weights, embedding: the units' gradient
  // pointers may be nullptr; dx still flows) and ADDS grad_scale * d(loss)/d(adapters)
  // into grads. Dropout (lora.dropout) applies in loss_and_grad only, with the CPU's
  // masks for the stream set by set_lora_stream (zt/kernels/dropout.hpp).
  void bind_lora(const LoraLayout& layout, const T* params, G* grads);
  void set_lora_stream(uint64_t stream);
  // QLoRA, as Model::bind_qlora: copies the NF4 weights `base` holds to the device (codes,
  // absmax codes, scales; `base` may go after the call); W of those projections is then
  // dequantised into one T workspace just before each of its GEMMs, forward and backward
  // (one projection's W alive at a time), instead of read from the units. Needs adapters
  // bound first.
  void bind_qlora(const QloraBase& base);

  // tokens, targets: host [B, T] row-major (targets < 0 ignored). Returns the mean
  // cross-entropy and ADDS grad_scale * d(mean loss)/d(params) into the bound gradients.
  // recompute: keep only each block's input in the forward and recompute the block in the
  // backward (same kernels on the same inputs: the same values). positions: packed
  // examples, host [B, T] (Model::loss_and_grad; zt's attention kernel then).
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       int64_t B, int64_t seq, bool recompute = false, double grad_scale = 1.0,
                       std::span<const int32_t> positions = {});
  // Preference objectives (DPO, ORPO), as Model's (model.hpp): with an objective set
  // (empty: none, the mean cross-entropy), loss_and_grad returns its value and adds
  // grad_scale * d(value)/d(params); the rows' summed log-probs cross to the host once per
  // call (the objective runs there: the CPU's pair loss, one copy of it).
  void set_row_objective(RowObjective objective);
  // Adapters off (on by default): the frozen base alone (QLoRA: its NF4 base), as PEFT's
  // disable_adapter(): DPO's reference model without a second copy of the weights.
  void set_adapters_enabled(bool on);
  // Forward only: logp[b] = the summed log-probability of row b's targets >= 0, count[b]
  // their number (logp, count: host [B]).
  void row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                 int64_t seq, std::span<const int32_t> positions, std::span<double> logp,
                 std::span<int64_t> count);

  // Forward only.
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t seq, std::span<const int32_t> positions = {});

  // Forward only over one sequence of T tokens: the logits of its last position into
  // out (device [vocab] of T).
  void logits_last(std::span<const int32_t> tokens, int64_t seq, T* out);

  // Mixture of experts (Config::moe(), Mixtral): the routing of the last forward (every
  // block's, summed; recompute does not count), as Model::router_stats. With
  // router_aux_loss, loss_and_grad and loss add router_aux_loss_coef * aux to the loss
  // and loss_and_grad its gradient, as Model's.
  const RouterStats& router_stats() const;

  // Expert parallelism (docs/zero.md "Expert parallelism"), as Model::set_expert_group:
  // built on ParamLayout::expert_slice(cfg, group->size(), group->rank()) (this rank's
  // experts only), every pass is then collective over the group: each MoE block sends its
  // routed rows to the experts' ranks and gets their outputs back by all_to_all, forward
  // and backward (and again in a recompute). A group on device memory (NCCL) moves device
  // buffers, ordered after `stream` (Comm::order_after); one on host memory (MPI) is
  // staged through pinned buffers. nullptr: none. zt::InputError for a layout of another
  // slice, a block other than Mixtral's, or LoRA adapters (bound before or after).
  void set_expert_group(comm::Comm* group);

  // Bytes of the activation workspace now, the LoRA adapters' and the dequantised QLoRA
  // weight's included (device_workspace_bytes of zt/model/device_workspace.hpp).
  size_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// DeviceModel<T, G> behind the engine's model interface (trainable.hpp): parameters of T
// (fp32 or bf16) and gradients of G in device memory, work on `stream`. precision:
// "fp32" (float, float), "bf16-mixed" (bf16, float), "bf16-true" (bf16, bf16); anything
// else is an InputError naming train.precision. With lora.enabled(): the adapters behind
// the adapters' unit of ParamLayout(cfg, lora) (trainable.hpp), via bind_lora/bind_qlora.
std::unique_ptr<TrainableModel> make_device_model(const Config& cfg, int64_t max_batch,
                                                  int64_t max_seq, const std::string& precision,
                                                  cudaStream_t stream, const LoraConfig& lora = {});

extern template class DeviceModel<float, float>;
extern template class DeviceModel<kernels::cuda::bf16_t, float>;
extern template class DeviceModel<kernels::cuda::bf16_t, kernels::cuda::bf16_t>;

}  // namespace zt::model
