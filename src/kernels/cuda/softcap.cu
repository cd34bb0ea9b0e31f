// Logit soft-capping on the GPU, forward and backward, elementwise in fp32 with 128-bit
// packed loads and stores (scalar for unaligned pointers). See zt/kernels/cuda/softcap.hpp.
#include "common.cuh"
#include "zt/kernels/cuda/softcap.hpp"

namespace zt::kernels::cuda {
namespace {

template <class T, bool Vec>
__global__ void softcap_forward_kernel(T* y, const T* x, int64_t n, float cap) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float v[W];  // [W]
    detail::load_n(v, x + i);
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = cap * tanhf(v[j] / cap);
    detail::store_n(y + i, v);
  });
}

template <class T, bool Vec>
__global__ void softcap_backward_kernel(T* dx, const T* dy, const T* y, int64_t n, float cap) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float d[W], yf[W];  // [W] each
    detail::load_n(d, dy + i);
    detail::load_n(yf, y + i);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const float t = yf[j] / cap;
      d[j] *= 1.0f - t * t;
    }
    detail::store_n(dx + i, d);
  });
}

}  // namespace

template <class T>
void softcap_forward(T* y, const T* x, int64_t n, double cap, cudaStream_t stream) {
  if (n == 0) return;
  const float c = static_cast<float>(cap);
  if (detail::aligned16(y, x))
    softcap_forward_kernel<T, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(y, x, n,
                                                                                        c);
  else
    softcap_forward_kernel<T, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(y, x, n,
                                                                                          c);
  ZT_CUDA_LAUNCH_CHECK("softcap_forward_kernel");
}

template <class T>
void softcap_backward(T* dx, const T* dy, const T* y, int64_t n, double cap,
                      cudaStream_t stream) {
  if (n == 0) return;
  const float c = static_cast<float>(cap);
  if (detail::aligned16(dx, dy, y))
    softcap_backward_kernel<T, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(
        dx, dy, y, n, c);
  else
    softcap_backward_kernel<T, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(
        dx, dy, y, n, c);
  ZT_CUDA_LAUNCH_CHECK("softcap_backward_kernel");
}

template void softcap_forward<float>(float*, const float*, int64_t, double, cudaStream_t);
template void softcap_forward<bf16_t>(bf16_t*, const bf16_t*, int64_t, double, cudaStream_t);
template void softcap_backward<float>(float*, const float*, const float*, int64_t, double,
                                      cudaStream_t);
template void softcap_backward<bf16_t>(bf16_t*, const bf16_t*, const bf16_t*, int64_t, double,
                                       cudaStream_t);

}  // namespace zt::kernels::cuda
