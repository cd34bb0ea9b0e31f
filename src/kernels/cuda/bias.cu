// A linear layer's bias on the GPU, forward (y += b, 128-bit packed) and backward (db +=
// column sums of dy in a fixed order). See zt/kernels/cuda/bias.hpp.
#include "common.cuh"
#include "zt/kernels/cuda/bias.hpp"

namespace zt::kernels::cuda {
namespace {

// y[n, j] += b[j] over the N * out elements; packed when Vec (out % kVec == 0 and y, b
// aligned: a pack at element i covers columns i % out .. i % out + kVec - 1 of one row).
template <class T, bool Vec>
__global__ void bias_forward_kernel(T* y, const T* b, int64_t n, int64_t out) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float yf[W], bf[W];  // [W] each
    detail::load_n(yf, y + i);
    detail::load_n(bf, b + i % out);
#pragma unroll
    for (int j = 0; j < W; ++j) yf[j] += bf[j];
    detail::store_n(y + i, yf);
  });
}

// Block (32, 8) per 32 columns: thread (cx, ry) sums rows ry, ry + 8, ... of column
// c0 + cx; the 8 partial sums are then added in ry order (as rmsnorm's dw).
template <class T, class G>
__global__ void bias_backward_kernel(G* db, const T* dy, int64_t N, int64_t out) {
  __shared__ float part[8][33];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0.0f;
  if (c < out) {
    for (int64_t n = threadIdx.y; n < N; n += 8) acc += detail::to_f32(dy[n * out + c]);
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < out) {
    float s = 0.0f;
    for (int i = 0; i < 8; ++i) s += part[i][threadIdx.x];
    db[c] = detail::from_f32<G>(detail::to_f32(db[c]) + s);
  }
}

}  // namespace

template <class T>
void bias_forward(T* y, const T* b, int64_t N, int64_t out, cudaStream_t stream) {
  const int64_t n = N * out;
  if (n == 0) return;
  const bool vec = out % detail::kVec == 0 && detail::aligned16(y, b);
  if (vec)
    bias_forward_kernel<T, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(y, b, n, out);
  else
    bias_forward_kernel<T, false>
        <<<detail::grid_for_packs(n, false), 256, 0, stream>>>(y, b, n, out);
  ZT_CUDA_LAUNCH_CHECK("bias_forward_kernel");
}

template <class T, class G>
void bias_backward(G* db, const T* dy, int64_t N, int64_t out, cudaStream_t stream) {
  if (N == 0 || out == 0) return;
  const unsigned blocks = static_cast<unsigned>((out + 31) / 32);
  bias_backward_kernel<T, G><<<blocks, dim3(32, 8), 0, stream>>>(db, dy, N, out);
  ZT_CUDA_LAUNCH_CHECK("bias_backward_kernel");
}

template void bias_forward<float>(float*, const float*, int64_t, int64_t, cudaStream_t);
template void bias_forward<bf16_t>(bf16_t*, const bf16_t*, int64_t, int64_t, cudaStream_t);
template void bias_backward<float, float>(float*, const float*, int64_t, int64_t, cudaStream_t);
template void bias_backward<bf16_t, float>(float*, const bf16_t*, int64_t, int64_t, cudaStream_t);
template void bias_backward<bf16_t, bf16_t>(bf16_t*, const bf16_t*, int64_t, int64_t, cudaStream_t);

}  // namespace zt::kernels::cuda
