// Element type conversions and scaled accumulation on the GPU (grid-stride, 128-bit packs
// of 8 elements per thread per step, scalar tail; scalar throughout for unaligned pointers).
#include "common.cuh"
#include "zt/kernels/cuda/convert.hpp"

namespace zt::kernels::cuda {
namespace {

template <class From, class To, bool Vec>
__global__ void convert_kernel(To* dst, const From* src, int64_t n) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    float f[decltype(width)::value];  // [W]
    detail::load_n(f, src + i);
    detail::store_n(dst + i, f);
  });
}

template <class X, bool Vec>
__global__ void add_scaled_kernel(float* acc, const X* x, int64_t n, float scale) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float a[W], b[W];  // [W] each
    detail::load_n(a, acc + i);
    detail::load_n(b, x + i);
#pragma unroll
    for (int j = 0; j < W; ++j) a[j] += scale * b[j];
    detail::store_n(acc + i, a);
  });
}

}  // namespace

template <class From, class To>
void convert(To* dst, const From* src, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (detail::aligned16(dst, src))
    convert_kernel<From, To, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(dst, src, n);
  else
    convert_kernel<From, To, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(dst, src, n);
  ZT_CUDA_LAUNCH_CHECK("convert_kernel");
}

template <class X>
void add_scaled(float* acc, const X* x, int64_t n, float scale, cudaStream_t stream) {
  if (n == 0) return;
  if (detail::aligned16(acc, x))
    add_scaled_kernel<X, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(acc, x, n, scale);
  else
    add_scaled_kernel<X, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(acc, x, n, scale);
  ZT_CUDA_LAUNCH_CHECK("add_scaled_kernel");
}

template void convert<float, bf16_t>(bf16_t*, const float*, int64_t, cudaStream_t);
template void convert<bf16_t, float>(float*, const bf16_t*, int64_t, cudaStream_t);
template void convert<float, float>(float*, const float*, int64_t, cudaStream_t);
template void add_scaled<float>(float*, const float*, int64_t, float, cudaStream_t);
template void add_scaled<bf16_t>(float*, const bf16_t*, int64_t, float, cudaStream_t);

}  // namespace zt::kernels::cuda
