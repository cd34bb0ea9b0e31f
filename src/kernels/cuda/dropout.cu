// Inverted dropout on the GPU (zt/kernels/cuda/dropout.hpp): the mask of element i is
// zt::kernels::dropout_kept(stream, i, p), the one definition the CPU uses.
#include "common.cuh"
#include "zt/core/error.hpp"
#include "zt/kernels/cuda/dropout.hpp"
#include "zt/kernels/dropout.hpp"

namespace zt::kernels::cuda {
namespace {

// out = mask * keep * x (Backward: out += mask * keep * x), element-wise in fp32.
template <class T, bool Vec, bool Backward>
__global__ void dropout_kernel(T* out, const T* x, int64_t n, uint64_t mask_stream, double p,
                               float keep) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float xf[W], of[W];  // [W] each
    detail::load_n(xf, x + i);
    if constexpr (Backward) detail::load_n(of, out + i);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const float v = dropout_kept(mask_stream, i + j, p) ? __fmul_rn(xf[j], keep) : 0.0f;
      of[j] = Backward ? __fadd_rn(of[j], v) : v;
    }
    detail::store_n(out + i, of);
  });
}

template <class T, bool Backward>
void launch(T* out, const T* x, int64_t n, uint64_t mask_stream, double p, cudaStream_t stream) {
  ZT_CHECK(p >= 0.0 && p < 1.0, "dropout probability outside [0, 1)",
           "a bug in the caller: lora.dropout is checked when the config is read.");
  if (n == 0) return;
  const float keep = static_cast<float>(1.0 / (1.0 - p));
  if (detail::aligned16(out, x))
    dropout_kernel<T, true, Backward><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(
        out, x, n, mask_stream, p, keep);
  else
    dropout_kernel<T, false, Backward><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(
        out, x, n, mask_stream, p, keep);
  ZT_CUDA_LAUNCH_CHECK("dropout_kernel");
}

}  // namespace

template <class T>
void dropout_forward(T* out, const T* x, int64_t n, uint64_t mask_stream, double p,
                     cudaStream_t stream) {
  launch<T, false>(out, x, n, mask_stream, p, stream);
}

template <class T>
void dropout_backward(T* dx, const T* dy, int64_t n, uint64_t mask_stream, double p,
                      cudaStream_t stream) {
  launch<T, true>(dx, dy, n, mask_stream, p, stream);
}

template void dropout_forward<float>(float*, const float*, int64_t, uint64_t, double,
                                     cudaStream_t);
template void dropout_forward<bf16_t>(bf16_t*, const bf16_t*, int64_t, uint64_t, double,
                                      cudaStream_t);
template void dropout_backward<float>(float*, const float*, int64_t, uint64_t, double,
                                      cudaStream_t);
template void dropout_backward<bf16_t>(bf16_t*, const bf16_t*, int64_t, uint64_t, double,
                                       cudaStream_t);

}  // namespace zt::kernels::cuda
