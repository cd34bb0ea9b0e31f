// AdamW on the GPU: 128-bit packs of 8 elements per thread per step (grid-stride, scalar
// tail; scalar throughout for unaligned pointers), fp32 arithmetic with the scalars of the
// CPU reference formed in double on the host.
#include <cmath>

#include "common.cuh"
#include "zt/kernels/cuda/adamw.hpp"

namespace zt::kernels::cuda {
namespace {

struct AdamScalars {
  float b1, one_minus_b1, b2, one_minus_b2, decay, step_size, inv_sqrt_bc2, eps;
};

template <class P, class G, bool Vec>
__global__ void adamw_kernel(P* param, const G* grad, float* m, float* v, bf16_t* param_bf16,
                             int64_t n, AdamScalars s) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float g[W], mi[W], vi[W], p[W];  // [W] each
    detail::load_n(g, grad + i);
    detail::load_n(mi, m + i);
    detail::load_n(vi, v + i);
    detail::load_n(p, param + i);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      mi[j] = s.b1 * mi[j] + s.one_minus_b1 * g[j];
      vi[j] = s.b2 * vi[j] + s.one_minus_b2 * g[j] * g[j];
      const float denom = sqrtf(vi[j]) * s.inv_sqrt_bc2 + s.eps;  // sqrt(vhat) + eps
      p[j] = p[j] * s.decay - s.step_size * mi[j] / denom;
    }
    detail::store_n(m + i, mi);
    detail::store_n(v + i, vi);
    detail::store_n(param + i, p);
    if (param_bf16) detail::store_n(param_bf16 + i, p);
  });
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
  const bool vec = detail::aligned16(param, grad, m, v, param_bf16);
  if (vec)
    adamw_kernel<P, G, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(
        param, grad, m, v, param_bf16, n, s);
  else
    adamw_kernel<P, G, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(
        param, grad, m, v, param_bf16, n, s);
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
