#pragma once
// A linear layer's bias on the GPU (the q/k/v biases of Qwen2, the q/k/v/o biases of
// `attention_bias` models; same semantics as zt/kernels/linear.hpp's bias_forward /
// bias_backward), run right after the projection's GEMM (kernels::cuda::linear_forward).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// y[n, j] += b[j]: element-wise in fp32, rounded once to T; in 128-bit packs when out % 8
// == 0 and y, b are 16-byte aligned (every pack then lies in one row), scalar otherwise.
//   y [N, out] T (accumulated), b [out] T
template <class T>
void bias_forward(T* y, const T* b, int64_t N, int64_t out, cudaStream_t stream = nullptr);

// db[j] += sum_n dy[n, j]: one block (32, 8) per 32 columns, rows summed in fp32 in a
// fixed order (thread ry sums rows ry, ry + 8, ...; the 8 partial sums added in ry order),
// so the result does not depend on timing.
//   db [out] G = float or T (accumulated), dy [N, out] T
template <class T, class G>
void bias_backward(G* db, const T* dy, int64_t N, int64_t out, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
