// Sum of squares (for the global gradient norm) and in-place scaling, on the GPU.
// A fixed grid writes one double partial per block; one block adds the partials: the
// order of every addition is fixed by n alone, so the result is deterministic.
#include "common.cuh"
#include "zt/kernels/cuda/grad_norm.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <class G>
__global__ void sum_squares_partial_kernel(double* partial, const G* x, int64_t n) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = static_cast<double>(detail::to_f32(x[i]));
    s += v * v;
  }
  s = detail::block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_squares_final_kernel(double* total, const double* partial, bool accumulate) {
  __shared__ double scratch[32];
  double s = threadIdx.x < kSumSquaresBlocks ? partial[threadIdx.x] : 0.0;
  s = detail::block_sum(s, scratch);
  if (threadIdx.x == 0) *total = accumulate ? *total + s : s;
}

template <class G>
__global__ void scale_kernel(G* x, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = detail::from_f32<G>(detail::to_f32(x[i]) * factor);
}

}  // namespace

template <class G>
void sum_squares(double* total, const G* x, int64_t n, double* partial, bool accumulate,
                 cudaStream_t stream) {
  static_assert(kSumSquaresBlocks == kThreads, "the final kernel reads one partial per thread");
  sum_squares_partial_kernel<G><<<kSumSquaresBlocks, kThreads, 0, stream>>>(partial, x, n);
  ZT_CUDA_LAUNCH_CHECK("sum_squares_partial_kernel");
  sum_squares_final_kernel<<<1, kThreads, 0, stream>>>(total, partial, accumulate);
  ZT_CUDA_LAUNCH_CHECK("sum_squares_final_kernel");
}

template <class G>
void scale_inplace(G* x, int64_t n, float factor, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<G><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, factor);
  ZT_CUDA_LAUNCH_CHECK("scale_kernel");
}

template void sum_squares<float>(double*, const float*, int64_t, double*, bool, cudaStream_t);
template void sum_squares<bf16_t>(double*, const bf16_t*, int64_t, double*, bool, cudaStream_t);
template void scale_inplace<float>(float*, int64_t, float, cudaStream_t);
template void scale_inplace<bf16_t>(bf16_t*, int64_t, float, cudaStream_t);

}  // namespace zt::kernels::cuda
