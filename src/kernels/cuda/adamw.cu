// AdamW on the GPU: one thread per element (grid-stride), fp32 arithmetic with the
// scalars of the CPU reference formed in double on the host.
#include <cmath>

#include "common.cuh"
#include "zt/kernels/cuda/adamw.hpp"

namespace zt::kernels::cuda {
namespace {

struct AdamScalars {
  float b1, one_minus_b1, b2, one_minus_b2, decay, step_size, inv_sqrt_bc2, eps;
};

template <class P, class G>
__global__ void adamw_kernel(P* param, const G* grad, float* m, float* v, bf16_t* param_bf16,
                             int64_t n, AdamScalars s) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = detail::to_f32(grad[i]);
    const float mi = s.b1 * m[i] + s.one_minus_b1 * g;
    const float vi = s.b2 * v[i] + s.one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) * s.inv_sqrt_bc2 + s.eps;  // sqrt(vhat) + eps
    const float p = detail::to_f32(param[i]) * s.decay - s.step_size * mi / denom;
    param[i] = detail::from_f32<P>(p);
    if (param_bf16) param_bf16[i] = __float2bfloat16_rn(p);
  }
}

}  // namespace

template <class P, class G>
void adamw_step(P* param, const G* grad, float* m, float* v, bf16_t* param_bf16, int64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                int64_t step, cudaStream_t stream) {
  if (n == 0) return;
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const AdamScalars s{static_cast<float>(beta1),      static_cast<float>(1.0 - beta1),
                      static_cast<float>(beta2),      static_cast<float>(1.0 - beta2),
                      static_cast<float>(1.0 - lr * weight_decay),
                      static_cast<float>(lr / bc1),   static_cast<float>(1.0 / std::sqrt(bc2)),
                      static_cast<float>(eps)};
  adamw_kernel<P, G><<<detail::grid_for(n, 256), 256, 0, stream>>>(param, grad, m, v, param_bf16,
                                                                   n, s);
  ZT_CUDA_LAUNCH_CHECK("adamw_kernel");
}

template void adamw_step<float, float>(float*, const float*, float*, float*, bf16_t*, int64_t,
                                       double, double, double, double, double, int64_t,
                                       cudaStream_t);
template void adamw_step<float, bf16_t>(float*, const bf16_t*, float*, float*, bf16_t*, int64_t,
                                        double, double, double, double, double, int64_t,
                                        cudaStream_t);
template void adamw_step<bf16_t, bf16_t>(bf16_t*, const bf16_t*, float*, float*, bf16_t*,
                                         int64_t, double, double, double, double, double,
                                         int64_t, cudaStream_t);

}  // namespace zt::kernels::cuda
