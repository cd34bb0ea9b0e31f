// SwiGLU gate on the GPU, forward and backward, elementwise in fp32 with 128-bit packed
// loads and stores (scalar tail; scalar throughout for unaligned pointers).
#include "common.cuh"
#include "zt/kernels/cuda/swiglu.hpp"

namespace zt::kernels::cuda {
namespace {

// h = silu(g) * u, element-wise in fp32; packed when Vec (see for_each_pack).
template <class T, bool Vec>
__global__ void swiglu_forward_kernel(T* h, const T* g, const T* u, int64_t n) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float gf[W], uf[W], hf[W];  // [W] each
    detail::load_n(gf, g + i);
    detail::load_n(uf, u + i);
#pragma unroll
    for (int j = 0; j < W; ++j) hf[j] = gf[j] * uf[j] / (1.0f + expf(-gf[j]));
    detail::store_n(h + i, hf);
  });
}

template <class T, bool Vec>
__global__ void swiglu_backward_kernel(T* dg, T* du, const T* dh, const T* g, const T* u,
                                       int64_t n, bool accumulate) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float gf[W], uf[W], d[W], vg[W], vu[W];  // [W] each
    detail::load_n(gf, g + i);
    detail::load_n(uf, u + i);
    detail::load_n(d, dh + i);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const float s = 1.0f / (1.0f + expf(-gf[j]));
      vg[j] = d[j] * uf[j] * s * (1.0f + gf[j] * (1.0f - s));
      vu[j] = d[j] * gf[j] * s;
    }
    if (accumulate) {
      float og[W], ou[W];
      detail::load_n(og, dg + i);
      detail::load_n(ou, du + i);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        vg[j] += og[j];
        vu[j] += ou[j];
      }
    }
    detail::store_n(dg + i, vg);
    detail::store_n(du + i, vu);
  });
}

}  // namespace

template <class T>
void swiglu_forward(T* h, const T* g, const T* u, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (detail::aligned16(h, g, u))
    swiglu_forward_kernel<T, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(h, g, u, n);
  else
    swiglu_forward_kernel<T, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(h, g, u,
                                                                                        n);
  ZT_CUDA_LAUNCH_CHECK("swiglu_forward_kernel");
}

template <class T>
void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                     bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  if (detail::aligned16(dg, du, dh, g, u))
    swiglu_backward_kernel<T, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(
        dg, du, dh, g, u, n, accumulate);
  else
    swiglu_backward_kernel<T, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(
        dg, du, dh, g, u, n, accumulate);
  ZT_CUDA_LAUNCH_CHECK("swiglu_backward_kernel");
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t, cudaStream_t);
template void swiglu_forward<bf16_t>(bf16_t*, const bf16_t*, const bf16_t*, int64_t,
                                     cudaStream_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*,
                                     int64_t, bool, cudaStream_t);
template void swiglu_backward<bf16_t>(bf16_t*, bf16_t*, const bf16_t*, const bf16_t*,
                                      const bf16_t*, int64_t, bool, cudaStream_t);

}  // namespace zt::kernels::cuda
