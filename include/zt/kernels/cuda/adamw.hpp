#pragma once
// AdamW on the GPU, the arithmetic of zt/kernels/adamw.hpp in fp32 (PyTorch semantics:
// decoupled weight decay, bias correction; scalars formed in double on the host):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p = p (1 - lr wd) - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Optimizer state m, v is always fp32. Precision modes (precision.hpp):
//   fp32:       P = float,  G = float, param_bf16 = nullptr
//   bf16-mixed: P = float (master), G = float, param_bf16 = the bf16 compute copy (written)
//   bf16-true:  P = bf16_t (updated in place), G = bf16_t
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

//   param [n] P (updated), grad [n] G, m [n], v [n] float (updated),
//   param_bf16 [n] (written with bf16(param) after the update; nullable)
template <class P, class G>
void adamw_step(P* param, const G* grad, float* m, float* v, bf16_t* param_bf16, int64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                int64_t step, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
