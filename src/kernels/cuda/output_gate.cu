// The attention's output gate on the GPU, forward and backward, elementwise in
// fp32 over a grid-stride loop (the gate's gradient rows may be strided). See
// zt/kernels/cuda/output_gate.hpp.
#include "common.cuh"
#include "zt/kernels/cuda/output_gate.hpp"

namespace zt::kernels::cuda {
namespace {

__device__ __forceinline__ float sigmoid_f(float x) {
  return 1.0f / (1.0f + expf(-x));
}

template <class T>
__global__ void output_gate_forward_kernel(T *y, const T *att, const T *gate,
                                           int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride)
    y[i] = detail::from_f32<T>(detail::to_f32(att[i]) *
                               sigmoid_f(detail::to_f32(gate[i])));
}

template <class T>
__global__ void output_gate_backward_kernel(T *d, T *dgate, const T *att,
                                            const T *gate, int64_t n, int64_t D,
                                            int64_t pitch) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    const float s = sigmoid_f(detail::to_f32(gate[i])),
                dy = detail::to_f32(d[i]);
    dgate[i / D * pitch + i % D] =
        detail::from_f32<T>(dy * detail::to_f32(att[i]) * s * (1.0f - s));
    d[i] = detail::from_f32<T>(dy * s);
  }
}

} // namespace

template <class T>
void output_gate_forward(T *y, const T *att, const T *gate, int64_t rows,
                         int64_t D, cudaStream_t stream) {
  const int64_t n = rows * D;
  if (n == 0)
    return;
  output_gate_forward_kernel<T>
      <<<detail::grid_for(n, 256), 256, 0, stream>>>(y, att, gate, n);
  ZT_CUDA_LAUNCH_CHECK("output_gate_forward_kernel");
}

template <class T>
void output_gate_backward(T *d, T *dgate, const T *att, const T *gate,
                          int64_t rows, int64_t D, int64_t dgate_pitch,
                          cudaStream_t stream) {
  const int64_t n = rows * D;
  if (n == 0)
    return;
  output_gate_backward_kernel<T><<<detail::grid_for(n, 256), 256, 0, stream>>>(
      d, dgate, att, gate, n, D, dgate_pitch);
  ZT_CUDA_LAUNCH_CHECK("output_gate_backward_kernel");
}

#define ZT_OUTPUT_GATE_INSTANTIATE(T)                                          \
  template void output_gate_forward<T>(T *, const T *, const T *, int64_t,     \
                                       int64_t, cudaStream_t);                 \
  template void output_gate_backward<T>(T *, T *, const T *, const T *,        \
                                        int64_t, int64_t, int64_t,             \
                                        cudaStream_t);
ZT_OUTPUT_GATE_INSTANTIATE(float)
ZT_OUTPUT_GATE_INSTANTIATE(bf16_t)
#undef ZT_OUTPUT_GATE_INSTANTIATE

} // namespace zt::kernels::cuda
