// RMSNorm fused with the residual add, forward and backward, on the GPU (rows in 128-bit
// packs where C % 8 == 0 and the pointers are 16-byte aligned, scalar otherwise).
#include "common.cuh"
#include "zt/kernels/cuda/rmsnorm.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row (grid-stride over rows); the row's columns in 128-bit packs when Vec
// (C % kVec == 0 and every pointer 16-byte aligned, so every row starts aligned).
template <class T, bool Vec>
__global__ void residual_rmsnorm_forward_kernel(T* y, float* rstd, T* sum_out, const T* x,
                                                const T* residual, const T* w, int64_t N,
                                                int64_t C, float eps, float offset) {
  __shared__ float scratch[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* xr = x + n * C;  // [C]
    float ss = 0.0f;
    if (residual) {
      const T* rr = residual + n * C;  // [C]
      T* sr = sum_out + n * C;         // [C] (may alias xr or rr: same element, read first)
      detail::for_each_pack<Vec>(C, threadIdx.x, blockDim.x, [&](auto width, int64_t c) {
        constexpr int W = decltype(width)::value;
        float a[W], b[W];  // [W] each
        detail::load_n(a, xr + c);
        detail::load_n(b, rr + c);
#pragma unroll
        for (int j = 0; j < W; ++j) a[j] = detail::to_f32(detail::from_f32<T>(a[j] + b[j]));
        detail::store_n(sr + c, a);  // exact: a holds T's values
#pragma unroll
        for (int j = 0; j < W; ++j) ss += a[j] * a[j];  // of the rounded sum, as the norm reads
      });
      xr = sr;  // normalise the rounded sum (each thread re-reads only what it wrote)
    } else {
      detail::for_each_pack<Vec>(C, threadIdx.x, blockDim.x, [&](auto width, int64_t c) {
        constexpr int W = decltype(width)::value;
        float a[W];  // [W]
        detail::load_n(a, xr + c);
#pragma unroll
        for (int j = 0; j < W; ++j) ss += a[j] * a[j];
      });
    }
    ss = detail::block_sum(ss, scratch);
    const float r = 1.0f / sqrtf(ss / static_cast<float>(C) + eps);
    if (rstd && threadIdx.x == 0) rstd[n] = r;
    T* yr = y + n * C;  // [C]
    detail::for_each_pack<Vec>(C, threadIdx.x, blockDim.x, [&](auto width, int64_t c) {
      constexpr int W = decltype(width)::value;
      float a[W], wf[W];  // [W] each
      detail::load_n(a, xr + c);
      detail::load_n(wf, w + c);
#pragma unroll
      for (int j = 0; j < W; ++j) a[j] = a[j] * r * (offset + wf[j]);
      detail::store_n(yr + c, a);
    });
  }
}

// One block per row: dx = r (g - xhat mean(g xhat)), g = dout (offset + w); packed as the
// forward.
template <class T, bool Vec>
__global__ void rmsnorm_backward_dx_kernel(T* dx, const T* dout, const T* x, const T* w,
                                           const float* rstd, int64_t N, int64_t C,
                                           bool accumulate, float offset) {
  __shared__ float scratch[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* xr = x + n * C;     // [C]
    const T* dyr = dout + n * C; // [C]
    T* dxr = dx + n * C;         // [C]
    const float r = rstd[n];
    float dot = 0.0f;  // sum_c dy w x
    detail::for_each_pack<Vec>(C, threadIdx.x, blockDim.x, [&](auto width, int64_t c) {
      constexpr int W = decltype(width)::value;
      float dy[W], wf[W], xf[W];  // [W] each
      detail::load_n(dy, dyr + c);
      detail::load_n(wf, w + c);
      detail::load_n(xf, xr + c);
#pragma unroll
      for (int j = 0; j < W; ++j) dot += dy[j] * (offset + wf[j]) * xf[j];
    });
    dot = detail::block_sum(dot, scratch);
    const float m = dot * r / static_cast<float>(C);  // mean(g xhat)
    detail::for_each_pack<Vec>(C, threadIdx.x, blockDim.x, [&](auto width, int64_t c) {
      constexpr int W = decltype(width)::value;
      float dy[W], wf[W], xf[W], old[W];  // [W] each
      detail::load_n(dy, dyr + c);
      detail::load_n(wf, w + c);
      detail::load_n(xf, xr + c);
      if (accumulate) detail::load_n(old, dxr + c);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        dy[j] = r * (dy[j] * (offset + wf[j]) - xf[j] * r * m);
        if (accumulate) dy[j] += old[j];
      }
      detail::store_n(dxr + c, dy);
    });
  }
}

// dw[c] += sum over the rows of dout[n, c] * x[n, c] * rstd[n] (detail::column_sum's
// fixed order).
template <class T, class G>
__global__ void rmsnorm_backward_dw_kernel(G* dw, const T* dout, const T* x, const float* rstd,
                                           int64_t N, int64_t C) {
  const int64_t c = detail::column_of_block();
  const float s = detail::column_sum(c, C, 0, N, [&](int64_t n) {
    return detail::to_f32(dout[n * C + c]) * (detail::to_f32(x[n * C + c]) * rstd[n]);
  });
  if (threadIdx.y == 0 && c < C) dw[c] = detail::from_f32<G>(detail::to_f32(dw[c]) + s);
}

}  // namespace

template <class T>
void residual_rmsnorm_forward(T* y, float* rstd, T* sum_out, const T* x, const T* residual,
                              const T* w, int64_t N, int64_t C, double eps,
                              cudaStream_t stream, double offset) {
  if (N == 0) return;
  const unsigned blocks = detail::grid_for(N, 1);
  if (C % detail::kVec == 0 && detail::aligned16(y, sum_out, x, residual, w))
    residual_rmsnorm_forward_kernel<T, true><<<blocks, kThreads, 0, stream>>>(
        y, rstd, sum_out, x, residual, w, N, C, static_cast<float>(eps),
        static_cast<float>(offset));
  else
    residual_rmsnorm_forward_kernel<T, false><<<blocks, kThreads, 0, stream>>>(
        y, rstd, sum_out, x, residual, w, N, C, static_cast<float>(eps),
        static_cast<float>(offset));
  ZT_CUDA_LAUNCH_CHECK("residual_rmsnorm_forward_kernel");
}

template <class T, class G>
void rmsnorm_backward(T* dx, G* dw, const T* dout, const T* x, const T* w, const float* rstd,
                      int64_t N, int64_t C, bool accumulate_dx, cudaStream_t stream,
                      double offset) {
  if (N == 0) return;
  if (dx) {
    const unsigned blocks = detail::grid_for(N, 1);
    if (C % detail::kVec == 0 && detail::aligned16(dx, dout, x, w))
      rmsnorm_backward_dx_kernel<T, true><<<blocks, kThreads, 0, stream>>>(
          dx, dout, x, w, rstd, N, C, accumulate_dx, static_cast<float>(offset));
    else
      rmsnorm_backward_dx_kernel<T, false><<<blocks, kThreads, 0, stream>>>(
          dx, dout, x, w, rstd, N, C, accumulate_dx, static_cast<float>(offset));
    ZT_CUDA_LAUNCH_CHECK("rmsnorm_backward_dx_kernel");
  }
  if (dw) {
    rmsnorm_backward_dw_kernel<T, G><<<detail::column_blocks(C), detail::kColumnBlock, 0, stream>>>(
        dw, dout, x, rstd, N, C);
    ZT_CUDA_LAUNCH_CHECK("rmsnorm_backward_dw_kernel");
  }
}

template void residual_rmsnorm_forward<float>(float*, float*, float*, const float*, const float*,
                                              const float*, int64_t, int64_t, double,
                                              cudaStream_t, double);
template void residual_rmsnorm_forward<bf16_t>(bf16_t*, float*, bf16_t*, const bf16_t*,
                                               const bf16_t*, const bf16_t*, int64_t, int64_t,
                                               double, cudaStream_t, double);
template void rmsnorm_backward<float, float>(float*, float*, const float*, const float*,
                                             const float*, const float*, int64_t, int64_t, bool,
                                             cudaStream_t, double);
template void rmsnorm_backward<bf16_t, float>(bf16_t*, float*, const bf16_t*, const bf16_t*,
                                              const bf16_t*, const float*, int64_t, int64_t, bool,
                                              cudaStream_t, double);
template void rmsnorm_backward<bf16_t, bf16_t>(bf16_t*, bf16_t*, const bf16_t*, const bf16_t*,
                                               const bf16_t*, const float*, int64_t, int64_t,
                                               bool, cudaStream_t, double);

}  // namespace zt::kernels::cuda
