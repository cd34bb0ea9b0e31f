// SwiGLU gate on the GPU, forward and backward, elementwise in fp32.
#include "common.cuh"
#include "zt/kernels/cuda/swiglu.hpp"

namespace zt::kernels::cuda {
namespace {

template <class T>
__global__ void swiglu_forward_kernel(T* h, const T* g, const T* u, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gf = detail::to_f32(g[i]);
    const float uf = detail::to_f32(u[i]);
    h[i] = detail::from_f32<T>(gf * uf / (1.0f + expf(-gf)));
  }
}

template <class T>
__global__ void swiglu_backward_kernel(T* dg, T* du, const T* dh, const T* g, const T* u,
                                       int64_t n, bool accumulate) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gf = detail::to_f32(g[i]);
    const float uf = detail::to_f32(u[i]);
    const float d = detail::to_f32(dh[i]);
    const float s = 1.0f / (1.0f + expf(-gf));
    float vg = d * uf * s * (1.0f + gf * (1.0f - s));
    float vu = d * gf * s;
    if (accumulate) {
      vg += detail::to_f32(dg[i]);
      vu += detail::to_f32(du[i]);
    }
    dg[i] = detail::from_f32<T>(vg);
    du[i] = detail::from_f32<T>(vu);
  }
}

}  // namespace

template <class T>
void swiglu_forward(T* h, const T* g, const T* u, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  swiglu_forward_kernel<T><<<detail::grid_for(n, 256), 256, 0, stream>>>(h, g, u, n);
  ZT_CUDA_LAUNCH_CHECK("swiglu_forward_kernel");
}

template <class T>
void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                     bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  swiglu_backward_kernel<T><<<detail::grid_for(n, 256), 256, 0, stream>>>(dg, du, dh, g, u, n,
                                                                          accumulate);
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
