// RMSNorm over many short rows (the per-head q/k norm), forward and backward: one warp per
// row; the weight's gradient in fixed row chunks then added in chunk order. See
// zt/kernels/cuda/head_rmsnorm.hpp.
#include <string>

#include "common.cuh"
#include "zt/core/error.hpp"
#include "zt/kernels/cuda/head_rmsnorm.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kThreads = 256;  // 8 warps: 8 rows per block at a time
constexpr int kWarps = kThreads / 32;

// Warp (blockIdx.x * kWarps + warp) handles rows n, n + all warps, ...; lane l the
// elements l, l + 32, ... of a row (D <= 256: at most 8 each).
template <class T>
__global__ void head_rmsnorm_forward_kernel(T* y, float* rstd, const T* x, const T* w,
                                            int64_t rows, int64_t D, float eps,
                                            float offset) {
  const int lane = threadIdx.x % 32;
  detail::for_each_warp_row(rows, kWarps, [&](int64_t n) {
    const T* xr = x + n * D;  // [D]
    T* yr = y + n * D;        // [D] (may alias xr: each lane reads its elements first)
    const float ss = detail::warp_sum_squares(xr, D);
    const float r = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
    if (rstd && lane == 0) rstd[n] = r;
    for (int64_t c = lane; c < D; c += 32)
      yr[c] = detail::from_f32<T>(detail::to_f32(xr[c]) * r * (offset + detail::to_f32(w[c])));
  });
}

// dx = r (dy w' - x r m), m = r sum(dy w' x) / D, w' = offset + w: the RMSNorm kernel's
// formula, per warp.
template <class T>
__global__ void head_rmsnorm_dx_kernel(T* dx, const T* dout, const T* x, const T* w,
                                       const float* rstd, int64_t rows, int64_t D,
                                       float offset) {
  const int lane = threadIdx.x % 32;
  detail::for_each_warp_row(rows, kWarps, [&](int64_t n) {
    const T* xr = x + n * D;      // [D]
    const T* dyr = dout + n * D;  // [D]
    T* dxr = dx + n * D;          // [D]
    const float r = rstd[n];
    float dot = 0.0f;
    for (int64_t c = lane; c < D; c += 32)
      dot += detail::to_f32(dyr[c]) * (offset + detail::to_f32(w[c])) * detail::to_f32(xr[c]);
    dot = detail::warp_sum(dot);
    const float m = dot * r / static_cast<float>(D);
    for (int64_t c = lane; c < D; c += 32) {
      const float g = detail::to_f32(dyr[c]) * (offset + detail::to_f32(w[c]));
      dxr[c] = detail::from_f32<T>(r * (g - detail::to_f32(xr[c]) * r * m));
    }
  });
}

// partial[k, c] = the sum over the rows of chunk k (blockIdx.y) of dout[n, c] * x[n, c] *
// rstd[n] (detail::column_sum's fixed order).
template <class T>
__global__ void head_rmsnorm_dw_partial_kernel(float* partial, const T* dout, const T* x,
                                               const float* rstd, int64_t rows, int64_t D,
                                               int64_t chunk) {
  const int64_t c = detail::column_of_block();
  const int64_t k = blockIdx.y;
  const int64_t end = (k + 1) * chunk < rows ? (k + 1) * chunk : rows;
  const float s = detail::column_sum(c, D, k * chunk, end, [&](int64_t n) {
    return detail::to_f32(dout[n * D + c]) * (detail::to_f32(x[n * D + c]) * rstd[n]);
  });
  if (threadIdx.y == 0 && c < D) partial[k * D + c] = s;
}

// dw[c] += sum_k partial[k, c], k in order.
template <class G>
__global__ void head_rmsnorm_dw_final_kernel(G* dw, const float* partial, int64_t D) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= D) return;
  float s = 0.0f;
  for (int k = 0; k < kHeadNormChunks; ++k) s += partial[k * D + c];
  dw[c] = detail::from_f32<G>(detail::to_f32(dw[c]) + s);
}

void check_dim(int64_t D) {
  if (D < 1 || D > kHeadNormMaxDim)
    throw Error("head_rmsnorm: rows of " + std::to_string(D) + " elements",
                "the per-head norm kernels take head dims 1 .. 256 (residual_rmsnorm_forward "
                "takes longer rows)");
}

}  // namespace

template <class T>
void head_rmsnorm_forward(T* y, float* rstd, const T* x, const T* w, int64_t rows, int64_t D,
                          double eps, cudaStream_t stream, double offset) {
  check_dim(D);
  if (rows == 0) return;
  head_rmsnorm_forward_kernel<T><<<detail::grid_for(rows, kWarps), kThreads, 0, stream>>>(
      y, rstd, x, w, rows, D, static_cast<float>(eps), static_cast<float>(offset));
  ZT_CUDA_LAUNCH_CHECK("head_rmsnorm_forward_kernel");
}

template <class T, class G>
void head_rmsnorm_backward(T* dx, G* dw, const T* dout, const T* x, const T* w,
                           const float* rstd, int64_t rows, int64_t D, float* partial,
                           cudaStream_t stream, double offset) {
  check_dim(D);
  if (rows == 0) return;
  if (dx) {
    head_rmsnorm_dx_kernel<T><<<detail::grid_for(rows, kWarps), kThreads, 0, stream>>>(
        dx, dout, x, w, rstd, rows, D, static_cast<float>(offset));
    ZT_CUDA_LAUNCH_CHECK("head_rmsnorm_dx_kernel");
  }
  if (dw) {
    if (!partial)
      throw Error("head_rmsnorm_backward: no scratch for the weight's gradient",
                  "pass partial [kHeadNormChunks * D] floats");
    const int64_t chunk = (rows + kHeadNormChunks - 1) / kHeadNormChunks;  // rows per chunk
    const dim3 grid(detail::column_blocks(D), kHeadNormChunks);
    head_rmsnorm_dw_partial_kernel<T><<<grid, detail::kColumnBlock, 0, stream>>>(
        partial, dout, x, rstd, rows, D, chunk);
    ZT_CUDA_LAUNCH_CHECK("head_rmsnorm_dw_partial_kernel");
    head_rmsnorm_dw_final_kernel<G><<<1, static_cast<unsigned>(kHeadNormMaxDim), 0, stream>>>(
        dw, partial, D);
    ZT_CUDA_LAUNCH_CHECK("head_rmsnorm_dw_final_kernel");
  }
}

template void head_rmsnorm_forward<float>(float*, float*, const float*, const float*, int64_t,
                                          int64_t, double, cudaStream_t, double);
template void head_rmsnorm_forward<bf16_t>(bf16_t*, float*, const bf16_t*, const bf16_t*,
                                           int64_t, int64_t, double, cudaStream_t, double);
template void head_rmsnorm_backward<float, float>(float*, float*, const float*, const float*,
                                                  const float*, const float*, int64_t, int64_t,
                                                  float*, cudaStream_t, double);
template void head_rmsnorm_backward<bf16_t, float>(bf16_t*, float*, const bf16_t*, const bf16_t*,
                                                   const bf16_t*, const float*, int64_t, int64_t,
                                                   float*, cudaStream_t, double);
template void head_rmsnorm_backward<bf16_t, bf16_t>(bf16_t*, bf16_t*, const bf16_t*,
                                                    const bf16_t*, const bf16_t*, const float*,
                                                    int64_t, int64_t, float*, cudaStream_t, double);

}  // namespace zt::kernels::cuda
