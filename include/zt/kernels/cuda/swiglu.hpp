#pragma once
// SwiGLU gate on the GPU: h = silu(g) * u (same semantics as zt/kernels/swiglu.hpp),
// elementwise in fp32.
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

}  // namespace zt::kernels::cuda
