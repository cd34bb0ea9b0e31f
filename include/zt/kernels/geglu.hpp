#pragma once
// GeGLU gate with tanh-GELU (CPU reference; Gemma's MLP, transformers' hidden_activation
// "gelu_pytorch_tanh"): h = gelu(g) * u, elementwise, with
//   gelu(g) = 0.5 g (1 + tanh(k (g + 0.044715 g^3))),  k = sqrt(2 / pi).
#include <cstdint>

namespace zt::kernels::cpu {

//   h [n] (written), g [n] (gate_proj output), u [n] (up_proj output)
template <class T>
void geglu_forward(T* h, const T* g, const T* u, int64_t n);

// With t = tanh(k (g + 0.044715 g^3)):
//   dg += dh * u * (0.5 (1 + t) + 0.5 g (1 - t^2) k (1 + 3 * 0.044715 g^2))
//   du += dh * gelu(g)
//   dg, du [n] (accumulated; WRITTEN when !accumulate), dh, g, u [n]
template <class T>
void geglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                    bool accumulate = true);

}  // namespace zt::kernels::cpu
