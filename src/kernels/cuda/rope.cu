// Rotary position embedding on the GPU (rotate_half), in place, forward and backward.
#include "common.cuh"
#include "zt/kernels/cuda/rope.hpp"

namespace zt::kernels::cuda {
namespace {

// One thread per rotated pair (b, t, h, i), i < D/2; grid-stride.
template <class T>
__global__ void rope_kernel(T* x, const float* cos, const float* sin, int64_t B, int64_t Tn,
                            int64_t nh, int64_t D, float sign) {
  const int64_t half = D / 2;
  const int64_t pairs = B * Tn * nh * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < pairs;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half;
    const int64_t vec = idx / half;           // (b * Tn + t) * nh + h
    const int64_t t = (vec / nh) % Tn;
    T* v = x + vec * D;                       // [D]
    const float c = cos[t * half + i];
    const float s = sign * sin[t * half + i];
    const float a = detail::to_f32(v[i]);
    const float b = detail::to_f32(v[i + half]);
    v[i] = detail::from_f32<T>(a * c - b * s);
    v[i + half] = detail::from_f32<T>(b * c + a * s);
  }
}

template <class T>
void launch(T* x, const float* cos, const float* sin, int64_t B, int64_t Tn, int64_t nh,
            int64_t D, float sign, cudaStream_t stream) {
  const int64_t pairs = B * Tn * nh * (D / 2);
  if (pairs == 0) return;
  rope_kernel<T><<<detail::grid_for(pairs, 256), 256, 0, stream>>>(x, cos, sin, B, Tn, nh, D,
                                                                   sign);
  ZT_CUDA_LAUNCH_CHECK("rope_kernel");
}

}  // namespace

template <class T>
void rope_forward(T* x, const float* cos, const float* sin, int64_t B, int64_t Tn, int64_t nh,
                  int64_t D, cudaStream_t stream) {
  launch(x, cos, sin, B, Tn, nh, D, 1.0f, stream);
}

template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, int64_t B, int64_t Tn, int64_t nh,
                   int64_t D, cudaStream_t stream) {
  // y = R x with R orthogonal: dL/dx = R^T dL/dy, the rotation by -angle.
  launch(dx, cos, sin, B, Tn, nh, D, -1.0f, stream);
}

template void rope_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t,
                                  int64_t, cudaStream_t);
template void rope_forward<bf16_t>(bf16_t*, const float*, const float*, int64_t, int64_t,
                                   int64_t, int64_t, cudaStream_t);
template void rope_backward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t,
                                   int64_t, cudaStream_t);
template void rope_backward<bf16_t>(bf16_t*, const float*, const float*, int64_t, int64_t,
                                    int64_t, int64_t, cudaStream_t);

}  // namespace zt::kernels::cuda
