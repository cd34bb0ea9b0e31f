#pragma once
// The gated MLP activations on the GPU, elementwise in fp32: SwiGLU h = silu(g) * u, Gemma's
// GeGLU h = gelu_tanh(g) * u and gpt-oss's clamped SwiGLU (the semantics of
// zt/kernels/swiglu.hpp and zt/kernels/geglu.hpp).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

//   h [n] (written), g [n] (gate_proj output), u [n] (up_proj output)
template <class T>
void swiglu_forward(T* h, const T* g, const T* u, int64_t n, cudaStream_t stream = nullptr);

// With s = sigmoid(g):  dg (+)= dh * u * s * (1 + g * (1 - s));  du (+)= dh * g * s
//   dg, du [n] (accumulated; WRITTEN when !accumulate, and then dg may alias g and du
//   may alias u: each element is read before it is written), dh, g, u [n]
template <class T>
void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                     bool accumulate = true, cudaStream_t stream = nullptr);

// GeGLU with tanh-GELU (Gemma): h = gelu_tanh(g) * u; its backward as swiglu_backward's
// (the same accumulate and aliasing rules), derivative as kernels::cpu::geglu_backward.
template <class T>
void geglu_forward(T* h, const T* g, const T* u, int64_t n, cudaStream_t stream = nullptr);
template <class T>
void geglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                    bool accumulate = true, cudaStream_t stream = nullptr);

// gpt-oss's clamped SwiGLU: h = (clamp(u, -limit, limit) + 1) g' sigmoid(alpha g'),
// g' = min(g, limit) (kernels::cpu::swiglu_clamped_forward); the clamps pass the gradient
// where the input lies inside, bounds included. Backward as swiglu_backward's rules.
template <class T>
void swiglu_clamped_forward(T* h, const T* g, const T* u, int64_t n, double limit, double alpha,
                            cudaStream_t stream = nullptr);
template <class T>
void swiglu_clamped_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                             double limit, double alpha, bool accumulate = true,
                             cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
