// qwen2_moe's shared-expert gate on the GPU (see zt/kernels/cuda/moe.hpp; the CPU's is in
// src/model/shared_expert.cpp): a warp per row forms sigmoid(x . g) and adds s y to the
// block's output; the backward's per-row part (d y, d logit, d x) is one warp per row too,
// and d g a column sum in a fixed order. The shared expert's SwiGLU itself is
// linear_forward / swiglu_forward, as the dense MLP's.
#include "common.cuh"
#include "moe_launch.hpp"
#include "zt/kernels/cuda/moe.hpp"

namespace zt::kernels::cuda {
namespace {

// A warp per row n: s[n] = sigmoid(x[n] . g); out[n] += s[n] y[n].
template <class T>
__global__ void shared_gate_forward_kernel(T* out, float* s, const T* y, const T* x, const T* g,
                                           int64_t N, int64_t C) {
  const int lane = threadIdx.x % 32;
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (row >= N) return;
  float dot = 0.f;
  for (int64_t c = lane; c < C; c += 32)
    dot += detail::to_f32(x[row * C + c]) * detail::to_f32(g[c]);
  dot = detail::warp_sum(dot);
  const float sv = 1.f / (1.f + expf(-dot));
  if (lane == 0) s[row] = sv;
  for (int64_t c = lane; c < C; c += 32) {
    const int64_t i = row * C + c;
    out[i] = detail::from_f32<T>(detail::to_f32(out[i]) + sv * detail::to_f32(y[i]));
  }
}

// A warp per row n: dy[n] = s dout[n]; dlogit[n] = s (1 - s) dout[n] . y[n];
// dx[n] += dlogit[n] g.
template <class T>
__global__ void shared_gate_backward_kernel(T* dy, float* dlogit, T* dx, const T* dout,
                                            const T* y, const float* s, const T* g, int64_t N,
                                            int64_t C) {
  const int lane = threadIdx.x % 32;
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (row >= N) return;
  const float sv = s[row];
  float dot = 0.f;
  for (int64_t c = lane; c < C; c += 32) {
    const int64_t i = row * C + c;
    const float d = detail::to_f32(dout[i]);
    dot += d * detail::to_f32(y[i]);
    dy[i] = detail::from_f32<T>(sv * d);
  }
  const float dl = sv * (1.f - sv) * detail::warp_sum(dot);
  if (lane == 0) dlogit[row] = dl;
  for (int64_t c = lane; c < C; c += 32) {
    const int64_t i = row * C + c;
    dx[i] = detail::from_f32<T>(detail::to_f32(dx[i]) + dl * detail::to_f32(g[c]));
  }
}

// dg[c] += sum over the rows of dlogit[n] x[n, c] (detail::column_sum's fixed order).
template <class T, class G>
__global__ void shared_gate_dg_kernel(G* dg, const float* dlogit, const T* x, int64_t N,
                                      int64_t C) {
  const int64_t c = detail::column_of_block();
  const float v = detail::column_sum(
      c, C, 0, N, [&](int64_t n) { return dlogit[n] * detail::to_f32(x[n * C + c]); });
  if (threadIdx.y == 0 && c < C) dg[c] = detail::from_f32<G>(detail::to_f32(dg[c]) + v);
}

}  // namespace

template <class T>
void moe_shared_gate_forward(T* out, float* s, const T* y, const T* x, const T* g, int64_t N,
                             int64_t C, cudaStream_t stream) {
  if (N == 0) return;
  shared_gate_forward_kernel<T><<<detail::warps_grid(N), 256, 0, stream>>>(out, s, y, x, g, N, C);
  ZT_CUDA_LAUNCH_CHECK("moe shared_gate_forward_kernel");
}

template <class T, class G>
void moe_shared_gate_backward(T* dy, float* dlogit, T* dx, G* dg, const T* dout, const T* y,
                              const float* s, const T* x, const T* g, int64_t N, int64_t C,
                              cudaStream_t stream) {
  if (N == 0) return;
  shared_gate_backward_kernel<T>
      <<<detail::warps_grid(N), 256, 0, stream>>>(dy, dlogit, dx, dout, y, s, g, N, C);
  ZT_CUDA_LAUNCH_CHECK("moe shared_gate_backward_kernel");
  if (!dg) return;  // frozen (LoRA)
  shared_gate_dg_kernel<T, G>
      <<<detail::column_blocks(C), detail::kColumnBlock, 0, stream>>>(dg, dlogit, x, N, C);
  ZT_CUDA_LAUNCH_CHECK("moe shared_gate_dg_kernel");
}

template void moe_shared_gate_forward<float>(float*, float*, const float*, const float*,
                                             const float*, int64_t, int64_t, cudaStream_t);
template void moe_shared_gate_forward<bf16_t>(bf16_t*, float*, const bf16_t*, const bf16_t*,
                                              const bf16_t*, int64_t, int64_t, cudaStream_t);
#define ZT_SHARED_GATE_BACKWARD(T, G)                                                        \
  template void moe_shared_gate_backward<T, G>(T*, float*, T*, G*, const T*, const T*,       \
                                               const float*, const T*, const T*, int64_t,    \
                                               int64_t, cudaStream_t);
ZT_SHARED_GATE_BACKWARD(float, float)
ZT_SHARED_GATE_BACKWARD(bf16_t, float)
ZT_SHARED_GATE_BACKWARD(bf16_t, bf16_t)
#undef ZT_SHARED_GATE_BACKWARD

}  // namespace zt::kernels::cuda
