#pragma once
// Linear layer without bias (CPU reference, Eigen GEMM): y = x W^T, W in the
// Hugging Face [out, in] layout.
#include <cstdint>

namespace zt::kernels::cpu {

//   y [N, out]   (written)
//   x [N, in]
//   W [out, in]
template <class T>
void linear_forward(T* y, const T* x, const T* W, int64_t N, int64_t in, int64_t out);

//   dx [N, in]   += dy W      (accumulated; may be nullptr; WRITTEN when !accumulate_dx)
//   dW [out, in] += dy^T x    (accumulated; may be nullptr)
//   dy [N, out], x [N, in], W [out, in]
template <class T>
void linear_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int64_t N, int64_t in,
                     int64_t out, bool accumulate_dx = true);

// A linear layer's bias (q/k/v/o biases of Qwen2, attention_bias models):
//   y  [N, out] += b      (every row)
//   db [out]    += sum_n dy[n, :]   (summed over rows in row order; no thread-count dependence)
template <class T>
void bias_forward(T* y, const T* b, int64_t N, int64_t out);
template <class T>
void bias_backward(T* db, const T* dy, int64_t N, int64_t out);

}  // namespace zt::kernels::cpu
