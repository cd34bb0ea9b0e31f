#pragma once
// Element type conversions on the GPU, for precision modes and the engine: the bf16
// compute copy of fp32 master weights, fp32 views of bf16 buffers, and accumulating
// (bf16 or fp32) gradients into fp32 ones. Rounding to bf16 is round-to-nearest-even,
// the same as zt::bf16 on the host.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

//   dst [n] (written) = src [n] converted; From, To in {float, bf16_t}
template <class From, class To>
void convert(To* dst, const From* src, int64_t n, cudaStream_t stream = nullptr);

//   acc [n] float += scale * x [n] (x float or bf16_t), in fp32
template <class X>
void add_scaled(float* acc, const X* x, int64_t n, float scale, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
