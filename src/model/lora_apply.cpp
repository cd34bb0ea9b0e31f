// The adapters' share of a projection's forward and backward (lora_apply.hpp).
#include "lora_apply.hpp"

#include <type_traits>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/dropout.hpp"
#include "zt/model/init.hpp"

namespace zt::model::detail {

namespace cpu = zt::kernels::cpu;

// Element i of the adapter's input is kept when its uniform in (0, 1] exceeds p
// (probability 1 - p): the rule the GPU's dropout kernel shares (zt/kernels/dropout.hpp).
using kernels::dropout_kept;

template <class R>
void LoraApply<R>::bind(const LoraLayout& layout, std::span<const R> params, std::span<R> grads) {
  if (static_cast<int64_t>(params.size()) != layout.numel() ||
      (!grads.empty() && static_cast<int64_t>(grads.size()) != layout.numel())) {
    throw InputError(strf("bind_lora: params/grads hold %zu/%zu elements, the adapters have %lld",
                          params.size(), grads.size(), static_cast<long long>(layout.numel())),
                     "allocate LoraLayout::numel() elements per buffer (grads may be empty "
                     "for eval).");
  }
  layout_.emplace(layout);
  params_ = params.data();
  grads_ = grads.empty() ? nullptr : grads.data();
}

template <class R>
void LoraApply<R>::bind_qlora(const QloraBase& base) {
  LoraConfig q = layout_ ? layout_->lora() : LoraConfig{};
  q.method = FinetuneMethod::kQlora;
  check_qlora_dtype(q, std::is_same_v<R, float> ? DType::kF32 : DType::kF64);
  if (!layout_) {
    throw Error("bind_qlora before bind_lora",
                "bind the adapters first: QLoRA quantises the projections they target.");
  }
  qlora_ = &base;
}

template <class R>
const R* LoraApply<R>::weight(int layer, LoraTarget target, const R* W) {
  if constexpr (std::is_same_v<R, float>) {
    const kernels::nf4::Quantized* q = qlora_ ? qlora_->find(layer, target) : nullptr;
    if (!q) return W;
    w_.ensure(q->n);
    kernels::nf4::dequantize(*q, std::span<float>(w_.data(), static_cast<size_t>(q->n)));
    return w_.data();
  } else {
    return W;  // bind_qlora refuses every other type
  }
}

template <class R>
const R* LoraApply<R>::dropped(const LoraAdapterInfo& a, const R* x, int64_t N, bool train) {
  const double p = layout_->lora().dropout;
  if (!train || p == 0.0) return x;
  const int64_t n = N * a.in;
  xd_.ensure(n);
  R* xd = xd_.data();
  const uint64_t mask = init_stream(stream_, a.name);
  const R keep = static_cast<R>(1.0 / (1.0 - p));  // inverted dropout, as torch
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) xd[i] = dropout_kept(mask, i, p) ? x[i] * keep : R(0);
  return xd;
}

template <class R>
void LoraApply<R>::down(const LoraAdapterInfo& a, const R* xd, int64_t N) {
  const int64_t r = layout_->lora().rank;
  u_.ensure(N * r);
  cpu::linear_forward(u_.data(), xd, params_ + a.a_offset, N, a.in, r);
  const R s = static_cast<R>(layout_->lora().scale());
  R* u = u_.data();
  for (int64_t i = 0; i < N * r; ++i) u[i] *= s;
}

template <class R>
void LoraApply<R>::forward(const LoraAdapterInfo& a, R* y, const R* x, int64_t N, bool train) {
  down(a, dropped(a, x, N, train), N);
  t_.ensure(N * a.out);
  cpu::linear_forward(t_.data(), u_.data(), params_ + a.b_offset, N, layout_->lora().rank, a.out);
  cpu::residual_forward(y, y, t_.data(), N * a.out);
}

template <class R>
void LoraApply<R>::backward(const LoraAdapterInfo& a, R* dx, const R* dy, const R* x, int64_t N,
                            bool train) {
  if (!grads_) {
    throw Error("the LoRA adapters have no gradient buffer",
                "bind_lora(layout, params, grads) with a gradient span before loss_and_grad.");
  }
  const int64_t r = layout_->lora().rank;
  const double p = layout_->lora().dropout;
  const R* xd = dropped(a, x, N, train);
  down(a, xd, N);  // recomputed: r columns, cheaper than keeping u per projection
  du_.ensure(N * r);
  // du = dy B, dB += dy^T u (u already carries the scale)
  cpu::linear_backward(du_.data(), grads_ + a.b_offset, dy, u_.data(), params_ + a.b_offset, N, r,
                     a.out, /*accumulate_dx=*/false);
  const R s = static_cast<R>(layout_->lora().scale());
  R* du = du_.data();
  for (int64_t i = 0; i < N * r; ++i) du[i] *= s;
  if (!train || p == 0.0) {  // dA += du^T x, dx += du A
    cpu::linear_backward(dx, grads_ + a.a_offset, du, xd, params_ + a.a_offset, N, a.in, r);
    return;
  }
  // Through the dropout: dx += mask * keep * (du A).
  t_.ensure(N * a.in);
  R* t = t_.data();
  cpu::linear_backward(t, grads_ + a.a_offset, du, xd, params_ + a.a_offset, N, a.in, r,
                     /*accumulate_dx=*/false);
  const uint64_t mask = init_stream(stream_, a.name);
  const R keep = static_cast<R>(1.0 / (1.0 - p));
  const int64_t n = N * a.in;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (dropout_kept(mask, i, p)) dx[i] += t[i] * keep;
  }
}

template class LoraApply<float>;
template class LoraApply<double>;

}  // namespace zt::model::detail
