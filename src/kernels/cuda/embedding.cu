// Token embedding on the GPU: forward gather, backward scatter-add (atomics).
#include <climits>

#include "common.cuh"
#include "zt/kernels/cuda/embedding.hpp"

namespace zt::kernels::cuda {
namespace {

// grid: rows (grid-stride), block: threads over C
template <class T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* weight,
                                         int64_t N, int64_t V, int64_t C, int32_t* bad) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int32_t tok = tokens[n];
    T* dst = out + n * C;  // [C]
    if (tok < 0 || tok >= V) {
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dst[c] = detail::from_f32<T>(0.0f);
      if (bad && threadIdx.x == 0) atomicMin(bad, static_cast<int32_t>(n));
      continue;
    }
    const T* src = weight + static_cast<int64_t>(tok) * C;  // [C]
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dst[c] = src[c];
  }
}

__device__ __forceinline__ void add_to(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void add_to(__nv_bfloat16* p, float v) {
  atomicAdd(p, __float2bfloat16_rn(v));
}

template <class T, class G>
__global__ void embedding_backward_kernel(G* dweight, const T* dout, const int32_t* tokens,
                                          int64_t N, int64_t C) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    G* dst = dweight + static_cast<int64_t>(tokens[n]) * C;  // [C]
    const T* src = dout + n * C;                             // [C]
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) add_to(dst + c, detail::to_f32(src[c]));
  }
}

}  // namespace

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* weight, int64_t N, int64_t V,
                       int64_t C, int32_t* bad, cudaStream_t stream) {
  if (N == 0) return;
  embedding_forward_kernel<T><<<detail::grid_for(N, 1), 256, 0, stream>>>(out, tokens, weight,
                                                                          N, V, C, bad);
  ZT_CUDA_LAUNCH_CHECK("embedding_forward_kernel");
}

template <class T, class G>
void embedding_backward(G* dweight, const T* dout, const int32_t* tokens, int64_t N, int64_t C,
                        cudaStream_t stream) {
  if (N == 0) return;
  embedding_backward_kernel<T, G><<<detail::grid_for(N, 1), 256, 0, stream>>>(dweight, dout,
                                                                              tokens, N, C);
  ZT_CUDA_LAUNCH_CHECK("embedding_backward_kernel");
}

template void embedding_forward<float>(float*, const int32_t*, const float*, int64_t, int64_t,
                                       int64_t, int32_t*, cudaStream_t);
template void embedding_forward<bf16_t>(bf16_t*, const int32_t*, const bf16_t*, int64_t, int64_t,
                                        int64_t, int32_t*, cudaStream_t);
template void embedding_backward<float, float>(float*, const float*, const int32_t*, int64_t,
                                               int64_t, cudaStream_t);
template void embedding_backward<bf16_t, float>(float*, const bf16_t*, const int32_t*, int64_t,
                                                int64_t, cudaStream_t);
template void embedding_backward<bf16_t, bf16_t>(bf16_t*, const bf16_t*, const int32_t*, int64_t,
                                                 int64_t, cudaStream_t);

}  // namespace zt::kernels::cuda
