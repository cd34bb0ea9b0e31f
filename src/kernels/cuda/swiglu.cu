// The gated MLP activations on the GPU, forward and backward: SwiGLU, Gemma's tanh-GELU
// GeGLU and gpt-oss's clamped SwiGLU, one kernel over a gate functor, elementwise in fp32
// with 128-bit packed loads and stores (scalar tail; scalar throughout for unaligned
// pointers).
#include "common.cuh"
#include "zt/kernels/cuda/swiglu.hpp"

namespace zt::kernels::cuda {
namespace {

// The gates, elementwise in fp32: value(g, u) = h, grad(g, u, dh) -> (dg, du).
struct Silu {  // h = silu(g) u
  __device__ float value(float g, float u) const { return g * u / (1.0f + expf(-g)); }
  __device__ void grad(float g, float u, float d, float& dg, float& du) const {
    const float s = 1.0f / (1.0f + expf(-g));
    dg = d * u * s * (1.0f + g * (1.0f - s));
    du = d * g * s;
  }
};

struct GeluTanh {  // h = 0.5 g (1 + tanh(k (g + 0.044715 g^3))) u, k = sqrt(2 / pi)
  static constexpr float kK = 0.7978845608028654f, kC = 0.044715f;
  __device__ float value(float g, float u) const {
    return 0.5f * g * (1.0f + tanhf(kK * (g + kC * g * g * g))) * u;
  }
  __device__ void grad(float g, float u, float d, float& dg, float& du) const {
    const float t = tanhf(kK * (g + kC * g * g * g));
    dg = d * u * (0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * kK * (1.0f + 3.0f * kC * g * g));
    du = d * 0.5f * g * (1.0f + t);
  }
};

struct ClampedSilu {  // h = (clamp(u, -L, L) + 1) g' sigmoid(a g'), g' = min(g, L)
  float limit, alpha;
  __device__ float value(float g, float u) const {
    const float gc = fminf(g, limit), uc = fminf(fmaxf(u, -limit), limit);
    return (uc + 1.0f) * gc / (1.0f + expf(-alpha * gc));
  }
  __device__ void grad(float g, float u, float d, float& dg, float& du) const {
    const float gc = fminf(g, limit), uc = fminf(fmaxf(u, -limit), limit);
    const float s = 1.0f / (1.0f + expf(-alpha * gc));
    dg = g <= limit ? d * (uc + 1.0f) * s * (1.0f + alpha * gc * (1.0f - s)) : 0.0f;
    du = fabsf(u) <= limit ? d * gc * s : 0.0f;
  }
};

// h = gate(g, u), element-wise in fp32; packed when Vec (see for_each_pack).
template <class T, bool Vec, class Gate>
__global__ void gated_forward_kernel(T* h, const T* g, const T* u, int64_t n, Gate gate) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float gf[W], uf[W], hf[W];  // [W] each
    detail::load_n(gf, g + i);
    detail::load_n(uf, u + i);
#pragma unroll
    for (int j = 0; j < W; ++j) hf[j] = gate.value(gf[j], uf[j]);
    detail::store_n(h + i, hf);
  });
}

template <class T, bool Vec, class Gate>
__global__ void gated_backward_kernel(T* dg, T* du, const T* dh, const T* g, const T* u,
                                      int64_t n, bool accumulate, Gate gate) {
  detail::grid_for_each_pack<Vec>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float gf[W], uf[W], d[W], vg[W], vu[W];  // [W] each
    detail::load_n(gf, g + i);
    detail::load_n(uf, u + i);
    detail::load_n(d, dh + i);
#pragma unroll
    for (int j = 0; j < W; ++j) gate.grad(gf[j], uf[j], d[j], vg[j], vu[j]);
    if (accumulate) {
      float og[W], ou[W];
      detail::load_n(og, dg + i);
      detail::load_n(ou, du + i);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        vg[j] += og[j];
        vu[j] += ou[j];
      }
    }
    detail::store_n(dg + i, vg);
    detail::store_n(du + i, vu);
  });
}

template <class T, class Gate>
void gated_forward(T* h, const T* g, const T* u, int64_t n, Gate gate, cudaStream_t stream) {
  if (n == 0) return;
  if (detail::aligned16(h, g, u))
    gated_forward_kernel<T, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(h, g, u, n,
                                                                                      gate);
  else
    gated_forward_kernel<T, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(h, g, u,
                                                                                        n, gate);
  ZT_CUDA_LAUNCH_CHECK("gated_forward_kernel");
}

template <class T, class Gate>
void gated_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                    bool accumulate, Gate gate, cudaStream_t stream) {
  if (n == 0) return;
  if (detail::aligned16(dg, du, dh, g, u))
    gated_backward_kernel<T, true><<<detail::grid_for_packs(n, true), 256, 0, stream>>>(
        dg, du, dh, g, u, n, accumulate, gate);
  else
    gated_backward_kernel<T, false><<<detail::grid_for_packs(n, false), 256, 0, stream>>>(
        dg, du, dh, g, u, n, accumulate, gate);
  ZT_CUDA_LAUNCH_CHECK("gated_backward_kernel");
}

}  // namespace

template <class T>
void swiglu_forward(T* h, const T* g, const T* u, int64_t n, cudaStream_t stream) {
  gated_forward(h, g, u, n, Silu{}, stream);
}
template <class T>
void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                     bool accumulate, cudaStream_t stream) {
  gated_backward(dg, du, dh, g, u, n, accumulate, Silu{}, stream);
}
template <class T>
void geglu_forward(T* h, const T* g, const T* u, int64_t n, cudaStream_t stream) {
  gated_forward(h, g, u, n, GeluTanh{}, stream);
}
template <class T>
void geglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                    bool accumulate, cudaStream_t stream) {
  gated_backward(dg, du, dh, g, u, n, accumulate, GeluTanh{}, stream);
}
template <class T>
void swiglu_clamped_forward(T* h, const T* g, const T* u, int64_t n, double limit, double alpha,
                            cudaStream_t stream) {
  gated_forward(h, g, u, n, ClampedSilu{static_cast<float>(limit), static_cast<float>(alpha)},
                stream);
}
template <class T>
void swiglu_clamped_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                             double limit, double alpha, bool accumulate, cudaStream_t stream) {
  gated_backward(dg, du, dh, g, u, n, accumulate,
                 ClampedSilu{static_cast<float>(limit), static_cast<float>(alpha)}, stream);
}

#define ZT_GATED_INSTANTIATE(T)                                                                \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t, cudaStream_t);              \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, bool,        \
                                   cudaStream_t);                                              \
  template void geglu_forward<T>(T*, const T*, const T*, int64_t, cudaStream_t);               \
  template void geglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, bool,         \
                                  cudaStream_t);                                               \
  template void swiglu_clamped_forward<T>(T*, const T*, const T*, int64_t, double, double,     \
                                          cudaStream_t);                                       \
  template void swiglu_clamped_backward<T>(T*, T*, const T*, const T*, const T*, int64_t,      \
                                           double, double, bool, cudaStream_t);
ZT_GATED_INSTANTIATE(float)
ZT_GATED_INSTANTIATE(bf16_t)
#undef ZT_GATED_INSTANTIATE

}  // namespace zt::kernels::cuda
