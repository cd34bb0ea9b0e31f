#pragma once
// Inverted dropout on the GPU with the CPU's masks (zt/kernels/dropout.hpp: element i kept
// when counter_uniform(stream, i) > p), for the LoRA adapters' input. keep = 1 / (1 - p)
// is rounded to float once on the host, as the CPU's fp32 model rounds it, so fp32 values
// are the CPU's bit for bit. Element-wise in fp32 with 128-bit packs (scalar tail; scalar
// throughout for unaligned pointers). 0 <= p < 1.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

//   out [n] (written) = kept(i) ? x[i] * keep : 0           (may alias x)
template <class T>
void dropout_forward(T* out, const T* x, int64_t n, uint64_t mask_stream, double p,
                     cudaStream_t stream = nullptr);

//   dx [n] += kept(i) ? dy[i] * keep : 0                    (no FMA: a product, then a sum)
template <class T>
void dropout_backward(T* dx, const T* dy, int64_t n, uint64_t mask_stream, double p,
                      cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
