#pragma once
// Logit soft-capping on the GPU (Gemma's final_logit_softcapping; the semantics of
// zt/kernels/softcap.hpp): y = cap tanh(x / cap), elementwise in fp32, cap > 0.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

//   y [n] (written; may be x), x [n]
template <class T>
void softcap_forward(T* y, const T* x, int64_t n, double cap, cudaStream_t stream = nullptr);

// dx = dy (1 - (y / cap)^2), from the forward's output y.
//   dx [n] (written; may be dy), dy [n], y [n]
template <class T>
void softcap_backward(T* dx, const T* dy, const T* y, int64_t n, double cap,
                      cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
