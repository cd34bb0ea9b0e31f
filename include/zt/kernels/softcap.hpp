#pragma once
// Logit soft-capping (CPU reference; Gemma 2's attn_logit_softcapping and
// final_logit_softcapping): y = cap * tanh(x / cap), elementwise, cap > 0.
#include <cstdint>

namespace zt::kernels::cpu {

//   y [n] (written; may be x), x [n]
template <class T>
void softcap_forward(T* y, const T* x, int64_t n, double cap);

// dx = dy * (1 - (y / cap)^2), from the forward's output y.
//   dx [n] (WRITTEN; may be dy), dy [n], y [n]
template <class T>
void softcap_backward(T* dx, const T* dy, const T* y, int64_t n, double cap);

}  // namespace zt::kernels::cpu
