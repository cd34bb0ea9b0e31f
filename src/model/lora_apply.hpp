#pragma once
// The adapters' share of a projection's forward and backward (private to zt_model):
// Model calls these right after the base projection's own kernel, so the model code only
// swaps its linear calls for proj_forward / proj_backward. Math (lora.hpp):
//   u  = dropout(x) A^T * scale                      [N, r]
//   y += u B^T                                       [N, out]
//   dB += dy^T u,  du = dy B * scale,  dA += du^T dropout(x),  dx += dropout'(du A)
// Dropout masks are a pure function of (stream, adapter name, element), so the backward
// (and a recomputed forward) regenerates the forward's mask instead of storing it.
#include <cstdint>
#include <optional>
#include <span>

#include "buffer.hpp"
#include "zt/model/lora.hpp"

namespace zt::model::detail {

template <class R>
class LoraApply {
 public:
  // params/grads [layout.numel()]; grads may be empty (forward only).
  void bind(const LoraLayout& layout, std::span<const R> params, std::span<R> grads);
  bool bound() const { return layout_.has_value(); }
  // The adapter on `target` of block `layer`, or nullptr (none bound, or not targeted).
  const LoraAdapterInfo* find(int layer, LoraTarget target) const {
    return layout_ && on_ ? layout_->find(layer, target) : nullptr;
  }
  void set_enabled(bool on) { on_ = on; }  // off: the base alone (find() gives nullptr)
  void set_stream(uint64_t stream) { stream_ = stream; }
  // QLoRA: W of the projections `base` holds come from it (check_qlora_dtype first).
  void bind_qlora(const QloraBase& base);
  bool has_qlora() const { return qlora_ != nullptr; }
  // The base weight of (layer, target): W itself, or with QLoRA its dequantised copy in a
  // scratch buffer (valid until the next call).
  const R* weight(int layer, LoraTarget target, const R* W);

  // y [N, a.out] += the adapter's output for x [N, a.in]; dropout when train.
  void forward(const LoraAdapterInfo& a, R* y, const R* x, int64_t N, bool train);
  // dy [N, a.out], x [N, a.in] (the forward's input): adds dA, dB into the bound grads and
  // the adapter's share of dx [N, a.in] into dx (dx already holds the base's share).
  void backward(const LoraAdapterInfo& a, R* dx, const R* dy, const R* x, int64_t N, bool train);

  // Experts (lora_experts.hpp, lora_experts.cpp): the stack W [E, out, in] of (layer,
  // target) with its adapter merged in (a scratch, valid until the next call for that
  // target), or W itself when the target has no adapter.
  const R* expert_weight(int layer, LoraTarget target, const R* W);
  // A zeroed scratch for d loss / d W' [E, out, in] of (layer, target), which the experts'
  // backward accumulates into; nullptr when the target has no adapter.
  R* expert_grad(int layer, LoraTarget target);
  // dA, dB of (layer, target) from expert_grad's scratch; no-op without an adapter.
  void expert_backward(int layer, LoraTarget target);

  size_t workspace_bytes() const {
    size_t b = xd_.bytes() + u_.bytes() + du_.bytes() + t_.bytes() + w_.bytes();
    for (int i = 0; i < 2; ++i) b += xw_[i].bytes() + xg_[i].bytes();
    return b;
  }

 private:
  // dropout(x) [N, in] (x itself when no dropout applies).
  const R* dropped(const LoraAdapterInfo& a, const R* x, int64_t N, bool train);
  // u_ [N, r] = dropped(x) A^T * scale.
  void down(const LoraAdapterInfo& a, const R* xd, int64_t N);

  std::optional<LoraLayout> layout_;
  const R* params_ = nullptr;
  R* grads_ = nullptr;
  uint64_t stream_ = 0;
  bool on_ = true;
  Buffer<R> xd_;  // [N, in]  dropout(x)
  Buffer<R> u_;   // [N, r]
  Buffer<R> du_;  // [N, r]
  Buffer<R> t_;   // [N, max(in, out)]  u B^T in the forward, du A in the backward
  const QloraBase* qlora_ = nullptr;
  Buffer<float> w_;  // [out, in]  a dequantised base weight (QLoRA)
  Buffer<R> xw_[2];  // [E, out, in]  experts.gate_up / experts.down with the adapter merged
  Buffer<R> xg_[2];  // [E, out, in]  their gradient (d loss / d W') in the backward
};

extern template class LoraApply<float>;
extern template class LoraApply<double>;

}  // namespace zt::model::detail
