#pragma once
// Matrix products through cuBLASLt, with every plan cached.
//
// Gemm::matmul is cuBLAS's column-major D = alpha op(A) op(B) + beta C (C and D are the
// same buffer here). The first call with a given (transposes, m, n, k, leading
// dimensions, element types, pointer alignments) creates the matmul descriptor, the three
// matrix layouts and asks cuBLASLt's heuristic for the best algorithm that fits the
// workspace; later calls with the same key reuse that plan, so the hot path creates
// nothing. Compute is fp32 (CUBLAS_COMPUTE_32F: no TF32, so fp32 products match the CPU
// reference to ~1e-6); bf16 operands are multiplied on the tensor cores with fp32
// accumulation, and C/D may be bf16 or fp32 (bf16 x bf16 -> fp32 accumulates parameter
// gradients in fp32 for bf16-mixed).
//
// One Gemm per stream at a time (the workspace is shared by its calls); not thread-safe.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "zt/core/dtype.hpp"
#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

class Gemm {
 public:
  // workspace_bytes: cuBLASLt's scratch (device memory, allocated once; `zt estimate`
  // counts the default, model::kGemmWorkspaceBytes).
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;
  explicit Gemm(size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Column-major: D[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta D[m, n].
  // A is [m, k] (lda >= m) or, transposed, [k, m] (lda >= k); likewise B. Types: kF32 or
  // kBF16; A and B the same type; D fp32 or the operands' type.
  void matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const void* A, DType a_type, int64_t lda, const void* B, DType b_type,
              int64_t ldb, float beta, void* D, DType d_type, int64_t ldd,
              cudaStream_t stream = nullptr);

  // Plans created so far (a test checks that repeated shapes reuse them).
  size_t cached_plans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Row-major linear layer without bias (the semantics of zt/kernels/linear.hpp):
//   y [N, out] = x [N, in] W^T,   W [out, in] (Hugging Face layout)
template <class T>
void linear_forward(Gemm& gemm, T* y, const T* x, const T* W, int64_t N, int64_t in,
                    int64_t out, cudaStream_t stream = nullptr);

//   dx [N, in]   (+)= dy W      (nullable; WRITTEN when !accumulate_dx)
//   dW [out, in] +=  dy^T x     (nullable; G = float or T)
template <class T, class G>
void linear_backward(Gemm& gemm, T* dx, G* dW, const T* dy, const T* x, const T* W, int64_t N,
                     int64_t in, int64_t out, bool accumulate_dx = true,
                     cudaStream_t stream = nullptr);

// The same products with cuBLAS's scale and accumulation exposed (the LoRA adapters fold
// their scale alpha / r into them; linear_forward and linear_backward's dx are these with
// alpha 1):
//   y [N, out]  = alpha x W^T + beta y
//   dx [N, in]  = alpha dy W  + beta dx      (dy [N, out], W [out, in])
template <class T>
void linear_forward_scaled(Gemm& gemm, T* y, const T* x, const T* W, int64_t N, int64_t in,
                           int64_t out, float alpha, float beta, cudaStream_t stream = nullptr);
template <class T>
void linear_dx_scaled(Gemm& gemm, T* dx, const T* dy, const T* W, int64_t N, int64_t in,
                      int64_t out, float alpha, float beta, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
