// LoRA on the experts: PEFT's per-expert factors merged into the stack, and the
// adapters' gradients from the stack's (lora_experts.hpp); LoraApply's expert calls.
#include "lora_experts.hpp"

#include <algorithm>

#include "lora_apply.hpp"
#include "zt/core/error.hpp"

namespace zt::model::detail {

template <class T>
void add_expert_delta(T* W, const T* A, const T* B, int64_t E, int64_t out, int64_t in,
                      int64_t r, double scale) {
  // (expert, row) pairs are independent: one per thread.
#pragma omp parallel for schedule(static)
  for (int64_t eo = 0; eo < E * out; ++eo) {
    const int64_t e = eo / out, o = eo % out;
    const T* Ae = A + e * r * in;  // [r, in]
    T* w = W + eo * in;            // W_e row o [in]
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int64_t k = 0; k < r; ++k)
        s += static_cast<double>(B[o * r * E + k * E + e]) * static_cast<double>(Ae[k * in + i]);
      w[i] = static_cast<T>(static_cast<double>(w[i]) + scale * s);
    }
  }
}

template <class T>
void expert_delta_backward(T* dA, T* dB, const T* dW, const T* A, const T* B, int64_t E,
                           int64_t out, int64_t in, int64_t r, double scale) {
  // dA_e[k, i] += scale * sum_o B[o, k*E+e] dW_e[o, i]: each (e, k) row of dA on one thread.
#pragma omp parallel for schedule(static)
  for (int64_t ek = 0; ek < E * r; ++ek) {
    const int64_t e = ek / r, k = ek % r;
    T* da = dA + ek * in;
    for (int64_t o = 0; o < out; ++o) {
      const double b = scale * static_cast<double>(B[o * r * E + k * E + e]);
      const T* dw = dW + (e * out + o) * in;
      for (int64_t i = 0; i < in; ++i) da[i] = static_cast<T>(static_cast<double>(da[i]) + b * static_cast<double>(dw[i]));
    }
  }
  // dB[o, k*E+e] += scale * sum_i dW_e[o, i] A_e[k, i]: each row o of dB on one thread.
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o)
    for (int64_t e = 0; e < E; ++e) {
      const T* dw = dW + (e * out + o) * in;
      for (int64_t k = 0; k < r; ++k) {
        const T* a = A + (e * r + k) * in;
        double s = 0;
        for (int64_t i = 0; i < in; ++i) s += static_cast<double>(dw[i]) * static_cast<double>(a[i]);
        T& db = dB[o * r * E + k * E + e];
        db = static_cast<T>(static_cast<double>(db) + scale * s);
      }
    }
}

namespace {
int slot(LoraTarget t) { return t == LoraTarget::kExpertsGateUp ? 0 : 1; }
}  // namespace

template <class R>
const R* LoraApply<R>::expert_weight(int layer, LoraTarget target, const R* W) {
  const LoraAdapterInfo* a = find(layer, target);
  if (!a) return W;
  const int64_t n = a->experts * a->out * a->in;
  Buffer<R>& w = xw_[slot(target)];
  w.ensure(n);
  std::copy_n(W, n, w.data());
  add_expert_delta<R>(w.data(), params_ + a->a_offset, params_ + a->b_offset, a->experts,
                      a->out, a->in, layout_->lora().rank, layout_->lora().scale());
  return w.data();
}

template <class R>
R* LoraApply<R>::expert_grad(int layer, LoraTarget target) {
  const LoraAdapterInfo* a = find(layer, target);
  if (!a) return nullptr;
  if (!grads_) {
    throw Error("the LoRA adapters have no gradient buffer",
                "bind_lora(layout, params, grads) with a gradient span before loss_and_grad.");
  }
  const int64_t n = a->experts * a->out * a->in;
  Buffer<R>& g = xg_[slot(target)];
  g.ensure(n);
  std::fill_n(g.data(), n, R(0));
  return g.data();
}

template <class R>
void LoraApply<R>::expert_backward(int layer, LoraTarget target) {
  const LoraAdapterInfo* a = find(layer, target);
  if (!a) return;
  expert_delta_backward<R>(grads_ + a->a_offset, grads_ + a->b_offset, xg_[slot(target)].data(),
                           params_ + a->a_offset, params_ + a->b_offset, a->experts, a->out,
                           a->in, layout_->lora().rank, layout_->lora().scale());
}

template void add_expert_delta<float>(float*, const float*, const float*, int64_t, int64_t,
                                      int64_t, int64_t, double);
template void add_expert_delta<double>(double*, const double*, const double*, int64_t, int64_t,
                                       int64_t, int64_t, double);
template void expert_delta_backward<float>(float*, float*, const float*, const float*,
                                           const float*, int64_t, int64_t, int64_t, int64_t, double);
template void expert_delta_backward<double>(double*, double*, const double*, const double*,
                                            const double*, int64_t, int64_t, int64_t, int64_t,
                                            double);
template const float* LoraApply<float>::expert_weight(int, LoraTarget, const float*);
template const double* LoraApply<double>::expert_weight(int, LoraTarget, const double*);
template float* LoraApply<float>::expert_grad(int, LoraTarget);
template double* LoraApply<double>::expert_grad(int, LoraTarget);
template void LoraApply<float>::expert_backward(int, LoraTarget);
template void LoraApply<double>::expert_backward(int, LoraTarget);

}  // namespace zt::model::detail
