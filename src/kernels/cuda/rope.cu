// Rotary position embedding on the GPU (rotate_half), in place, forward and backward, on
// the first rd dims of each head (partial rotary; the rest untouched); 8 pairs per thread
// in 128-bit packs where rd / 2 % 8 == 0, D % 8 == 0 and the pointers are aligned.
#include "common.cuh"
#include "zt/kernels/cuda/rope.hpp"

namespace zt::kernels::cuda {
namespace {

// One thread per kVec consecutive rotated pairs (b, t, h, i .. i + kVec - 1) when Vec
// (half % kVec == 0, D % kVec == 0, x, cos, sin 16-byte aligned), else per pair;
// grid-stride. half = rd / 2 (the tables' row length); pos [B, Tn] (or nullptr: t) is each
// token's row of the tables (packed examples).
template <class T, bool Vec>
__global__ void rope_kernel(T* x, const float* cos, const float* sin, int64_t B, int64_t Tn,
                            int64_t nh, int64_t D, int64_t half, float sign, const int32_t* pos) {
  constexpr int W = Vec ? detail::kVec : 1;
  const int64_t groups = B * Tn * nh * (half / W);
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < groups;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = (idx % (half / W)) * W;
    const int64_t vec = idx / (half / W);     // (b * Tn + t) * nh + h
    const int64_t bt = vec / nh;              // b * Tn + t
    const int64_t t = pos ? pos[bt] : bt % Tn;
    T* v = x + vec * D;                       // [D]
    float c[W], s[W], a[W], b[W];             // [W] each
    detail::load_n(c, cos + t * half + i);
    detail::load_n(s, sin + t * half + i);
    detail::load_n(a, v + i);
    detail::load_n(b, v + i + half);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const float aj = a[j], sj = sign * s[j];
      a[j] = aj * c[j] - b[j] * sj;
      b[j] = b[j] * c[j] + aj * sj;
    }
    detail::store_n(v + i, a);
    detail::store_n(v + i + half, b);
  }
}

template <class T>
void launch(T* x, const float* cos, const float* sin, int64_t B, int64_t Tn, int64_t nh,
            int64_t D, int64_t rd, float sign, const int32_t* pos, cudaStream_t stream) {
  const int64_t half = (rd > 0 ? rd : D) / 2;
  const int64_t pairs = B * Tn * nh * half;
  if (pairs == 0) return;
  if (half % detail::kVec == 0 && D % detail::kVec == 0 && detail::aligned16(x, cos, sin))
    rope_kernel<T, true><<<detail::grid_for(pairs / detail::kVec, 256), 256, 0, stream>>>(
        x, cos, sin, B, Tn, nh, D, half, sign, pos);
  else
    rope_kernel<T, false><<<detail::grid_for(pairs, 256), 256, 0, stream>>>(
        x, cos, sin, B, Tn, nh, D, half, sign, pos);
  ZT_CUDA_LAUNCH_CHECK("rope_kernel");
}

}  // namespace

template <class T>
void rope_forward(T* x, const float* cos, const float* sin, int64_t B, int64_t Tn, int64_t nh,
                  int64_t D, cudaStream_t stream, const int32_t* pos, int64_t rotary_dim) {
  launch(x, cos, sin, B, Tn, nh, D, rotary_dim, 1.0f, pos, stream);
}

template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, int64_t B, int64_t Tn, int64_t nh,
                   int64_t D, cudaStream_t stream, const int32_t* pos, int64_t rotary_dim) {
  // y = a R x with R orthogonal: dL/dx = a R^T dL/dy, the rotation by -angle with the same
  // (scaled) tables; the pass-through dims keep dL/dy.
  launch(dx, cos, sin, B, Tn, nh, D, rotary_dim, -1.0f, pos, stream);
}

template void rope_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t,
                                  int64_t, cudaStream_t,
                                  const int32_t*, int64_t);
template void rope_forward<bf16_t>(bf16_t*, const float*, const float*, int64_t, int64_t,
                                   int64_t, int64_t, cudaStream_t,
                                  const int32_t*, int64_t);
template void rope_backward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t,
                                   int64_t, cudaStream_t,
                                  const int32_t*, int64_t);
template void rope_backward<bf16_t>(bf16_t*, const float*, const float*, int64_t, int64_t,
                                    int64_t, int64_t, cudaStream_t,
                                  const int32_t*, int64_t);

}  // namespace zt::kernels::cuda
