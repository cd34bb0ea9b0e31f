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

// db[c] += sum over the rows of dy[n, c] (detail::column_sum's fixed order).
template <class T, class G>
__global__ void bias_backward_kernel(G* db, const T* dy, int64_t N, int64_t out) {
  const int64_t c = detail::column_of_block();
  const float s =
      detail::column_sum(c, out, 0, N, [&](int64_t n) { return detail::to_f32(dy[n * out + c]); });
  if (threadIdx.y == 0 && c < out) db[c] = detail::from_f32<G>(detail::to_f32(db[c]) + s);
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
  bias_backward_kernel<T, G>
      <<<detail::column_blocks(out), detail::kColumnBlock, 0, stream>>>(db, dy, N, out);
  ZT_CUDA_LAUNCH_CHECK("bias_backward_kernel");
}

template void bias_forward<float>(float*, const float*, int64_t, int64_t, cudaStream_t);
template void bias_forward<bf16_t>(bf16_t*, const bf16_t*, int64_t, int64_t, cudaStream_t);
template void bias_backward<float, float>(float*, const float*, int64_t, int64_t, cudaStream_t);
template void bias_backward<bf16_t, float>(float*, const bf16_t*, int64_t, int64_t, cudaStream_t);
template void bias_backward<bf16_t, bf16_t>(bf16_t*, const bf16_t*, int64_t, int64_t, cudaStream_t);

}  // namespace zt::kernels::cuda
