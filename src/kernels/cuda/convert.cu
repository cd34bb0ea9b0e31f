// Element type conversions and scaled accumulation on the GPU (grid-stride, one element
// per thread per step).
#include "common.cuh"
#include "zt/kernels/cuda/convert.hpp"

namespace zt::kernels::cuda {
namespace {

template <class From, class To>
__global__ void convert_kernel(To* dst, const From* src, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = detail::from_f32<To>(detail::to_f32(src[i]));
}

template <class X>
__global__ void add_scaled_kernel(float* acc, const X* x, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    acc[i] += scale * detail::to_f32(x[i]);
}

}  // namespace

template <class From, class To>
void convert(To* dst, const From* src, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  convert_kernel<From, To><<<detail::grid_for(n, 256), 256, 0, stream>>>(dst, src, n);
  ZT_CUDA_LAUNCH_CHECK("convert_kernel");
}

template <class X>
void add_scaled(float* acc, const X* x, int64_t n, float scale, cudaStream_t stream) {
  if (n == 0) return;
  add_scaled_kernel<X><<<detail::grid_for(n, 256), 256, 0, stream>>>(acc, x, n, scale);
  ZT_CUDA_LAUNCH_CHECK("add_scaled_kernel");
}

template void convert<float, bf16_t>(bf16_t*, const float*, int64_t, cudaStream_t);
template void convert<bf16_t, float>(float*, const bf16_t*, int64_t, cudaStream_t);
template void convert<float, float>(float*, const float*, int64_t, cudaStream_t);
template void add_scaled<float>(float*, const float*, int64_t, float, cudaStream_t);
template void add_scaled<bf16_t>(float*, const bf16_t*, int64_t, float, cudaStream_t);

}  // namespace zt::kernels::cuda
