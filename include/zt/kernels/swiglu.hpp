#pragma once
// SwiGLU gate (CPU reference): h = silu(g) * u, silu(g) = g * sigmoid(g), elementwise.
#include <cstdint>

namespace zt::kernels::cpu {

//   h [n] (written), g [n] (gate_proj output), u [n] (up_proj output)
template <class T>
void swiglu_forward(T* h, const T* g, const T* u, int64_t n);

// With s = sigmoid(g):
//   dg += dh * u * s * (1 + g * (1 - s))
//   du += dh * g * s
//   dg, du [n] (accumulated; WRITTEN when !accumulate), dh, g, u [n]
template <class T>
void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                     bool accumulate = true);

// gpt-oss's clamped SwiGLU (transformers' GptOssExperts._apply_gate), limit L, alpha a:
//   g' = min(g, L), u' = clamp(u, -L, L), h = (u' + 1) * g' sigmoid(a g')
// Backward (the clamps pass the gradient where the input lies inside, bounds included, as
// torch.clamp): with s = sigmoid(a g'),
//   dg += [g <= L] dh (u' + 1) s (1 + a g' (1 - s)),  du += [|u| <= L] dh g' s
template <class T>
void swiglu_clamped_forward(T* h, const T* g, const T* u, int64_t n, double limit, double alpha);
template <class T>
void swiglu_clamped_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                             double limit, double alpha, bool accumulate = true);

}  // namespace zt::kernels::cpu
