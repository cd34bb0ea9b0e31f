// Mixture-of-experts kernels (see zt/kernels/cuda/moe.hpp): routing (a warp per token),
// the expert-sorted plan (counting sort in slot order: per-block counts, a scan, a
// placement by rank within the block), the row gather, the weighted combine, and their
// backward. The GEMMs are in moe_experts.cpp.
#include <climits>

#include "common.cuh"
#include "moe_launch.hpp"
#include "zt/kernels/cuda/moe.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kPlanBlock = 256;  // slots per block of the plan kernels

// (value, index) order of the top-k: larger value first (NaN largest, as torch.topk),
// equal values lower index first.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  const bool vn = isnan(v), bn = isnan(bv);
  if (vn != bn) return vn;
  if (vn) return i < bi;
  return v > bv || (v == bv && i < bi);
}

// A warp per row: softmax over E, then k rounds of a warp arg-max over the experts not
// chosen yet (by probability, or by logit when by_logit: gpt-oss's topk_softmax, whose
// softmax over the k chosen logits is the renormalised probabilities). Lane l holds
// experts l, l + 32, ... (at most 32 each: E <= 1024).
template <class T>
__global__ void route_kernel(float* probs, int32_t* idx, float* w, const T* logits, int64_t N,
                             int E, int k, bool renormalise, bool by_logit) {
  const int lane = threadIdx.x % 32;
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (row >= N) return;
  const T* l = logits + row * E;  // [E]
  float* p = probs + row * E;     // [E]
  float top = -INFINITY;
  for (int e = lane; e < E; e += 32) top = fmaxf(top, detail::to_f32(l[e]));
  top = detail::warp_max(top);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) sum += expf(detail::to_f32(l[e]) - top);
  sum = detail::warp_sum(sum);
  for (int e = lane; e < E; e += 32) p[e] = expf(detail::to_f32(l[e]) - top) / sum;
  __syncwarp();
  uint32_t taken = 0;  // bit j: expert lane + 32 j chosen
  float chosen_sum = 0.f;
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int e = lane, b = 0; e < E; e += 32, ++b) {
      const float v = by_logit ? detail::to_f32(l[e]) : p[e];
      if (!(taken >> b & 1u) && better(v, e, bv, bi)) {
        bv = v;
        bi = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (better(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    if (bi % 32 == lane) taken |= 1u << (bi / 32);
    const float pb = p[bi];  // (the warp wrote p before the __syncwarp above)
    chosen_sum += pb;
    if (lane == 0) {
      idx[row * k + j] = bi;
      w[row * k + j] = pb;
    }
  }
  __syncwarp();
  if (lane == 0 && renormalise)
    for (int j = 0; j < k; ++j) w[row * k + j] /= chosen_sum;
}

// A warp per row: d p from the weights (+ dprob), then the softmax backward. Renormalised
// weights w_j = p_{i_j} / S pass (dw_j - dw . w) / S to p_{i_j}; without renormalisation
// (w_j = p_{i_j}) dw_j itself.
template <class T>
__global__ void route_backward_kernel(T* dlogits, const float* dw, const float* dprob,
                                      const float* probs, const int32_t* idx, const float* w,
                                      int64_t N, int E, int k, bool renormalise) {
  const int lane = threadIdx.x % 32;
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (row >= N) return;
  const float* p = probs + row * E;  // [E]
  float S = 0.f, dot = 0.f;          // every lane computes both (k is small)
  for (int j = 0; j < k; ++j) {
    S += p[idx[row * k + j]];
    dot += dw[row * k + j] * w[row * k + j];
  }
  // d p_e = dprob_e + sum over the j with idx_j == e of (dw_j - dot) / S (renormalised)
  // or of dw_j (not)
  auto dp = [&](int e) {
    float v = dprob ? dprob[e] : 0.f;
    for (int j = 0; j < k; ++j)
      if (idx[row * k + j] == e) v += renormalise ? (dw[row * k + j] - dot) / S : dw[row * k + j];
    return v;
  };
  float pd = 0.f;
  for (int e = lane; e < E; e += 32) pd += p[e] * dp(e);
  pd = detail::warp_sum(pd);
  for (int e = lane; e < E; e += 32)
    dlogits[row * E + e] = detail::from_f32<T>(p[e] * (dp(e) - pd));
}

// counts [blocks, E] (written): slots of each block routed to each expert.
__global__ void plan_count_kernel(int32_t* counts, const int32_t* idx, int64_t S, int E) {
  extern __shared__ int32_t c[];  // [E]
  for (int e = threadIdx.x; e < E; e += blockDim.x) c[e] = 0;
  __syncthreads();
  const int64_t s = blockIdx.x * static_cast<int64_t>(kPlanBlock) + threadIdx.x;
  if (s < S) atomicAdd(&c[idx[s]], 1);  // a count: the order of the adds does not matter
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[blockIdx.x * E + e] = c[e];
}

// One block: offsets [E + 1] (expert ranges) and counts turned into each block's first
// row per expert (in place), expert-major then block order.
__global__ void plan_scan_kernel(int32_t* counts, int32_t* offsets, int blocks, int E) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t total = 0;
    for (int b = 0; b < blocks; ++b) total += counts[b * E + e];
    offsets[e + 1] = total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    offsets[0] = 0;
    for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t at = offsets[e];
    for (int b = 0; b < blocks; ++b) {
      const int32_t n = counts[b * E + e];
      counts[b * E + e] = at;
      at += n;
    }
  }
}

// Each slot's row: its block's first row for its expert + its rank among the block's
// earlier slots of the same expert.
__global__ void plan_place_kernel(int32_t* perm, int32_t* pos, const int32_t* first,
                                  const int32_t* idx, int64_t S, int E) {
  __shared__ int32_t ids[kPlanBlock];
  const int64_t s = blockIdx.x * static_cast<int64_t>(kPlanBlock) + threadIdx.x;
  ids[threadIdx.x] = s < S ? idx[s] : -1;
  __syncthreads();
  if (s >= S) return;
  const int32_t e = ids[threadIdx.x];
  int32_t rank = 0;
  for (int t = 0; t < static_cast<int>(threadIdx.x); ++t) rank += ids[t] == e;
  const int32_t p = first[blockIdx.x * E + e] + rank;
  perm[p] = static_cast<int32_t>(s);
  pos[s] = p;
}

// xp [S, C] (written): xp[p] = x[perm[p] / k]
template <class T>
__global__ void gather_kernel(T* xp, const T* x, const int32_t* perm, int64_t S, int64_t C, int k) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < S * C;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = i / C, c = i % C;
    xp[i] = x[(perm[p] / k) * C + c];
  }
}

// out [N, C] (written, or added to when accumulate) = sum_j scale_j rows[pos[n k + j]]
// with scale_j = w[n k + j] (combine) or 1 (the backward's dx).
template <class T>
__global__ void combine_kernel(T* out, const T* rows, const int32_t* pos, const float* w,
                               int64_t N, int64_t C, int k, bool accumulate) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < N * C;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    float v = accumulate ? detail::to_f32(out[i]) : 0.f;
    for (int j = 0; j < k; ++j)
      v += (w ? w[n * k + j] : 1.f) * detail::to_f32(rows[pos[n * k + j] * C + c]);
    out[i] = detail::from_f32<T>(v);
  }
}

// A warp per slot: dw[s] = dout[n] . y[pos[s]]; dyp[pos[s]] = w[s] dout[n] (w nullptr: 1).
template <class T>
__global__ void weight_backward_kernel(float* dw, T* dyp, const T* dout, const T* y,
                                       const int32_t* pos, const float* w, int64_t S, int64_t C,
                                       int k) {
  const int lane = threadIdx.x % 32;
  const int64_t s = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (s >= S) return;
  const T* d = dout + (s / k) * C;        // [C]
  const int64_t row = pos[s] * C;
  const float ws = w ? w[s] : 1.f;
  float dot = 0.f;
  for (int64_t c = lane; c < C; c += 32) {
    const float dv = detail::to_f32(d[c]);
    dot += dv * detail::to_f32(y[row + c]);
    dyp[row + c] = detail::from_f32<T>(ws * dv);
  }
  dot = detail::warp_sum(dot);
  if (lane == 0) dw[s] = dot;
}

// A block per expert: tokens[e] += rows routed to e, prob_sum[e] += sum_n probs[n, e]
// (fixed-order block sum).
__global__ void aux_kernel(double* tokens, double* prob_sum, const float* probs,
                           const int32_t* offsets, int64_t N, int E) {
  __shared__ double scratch[32];
  const int e = blockIdx.x;
  double v = 0.0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) v += probs[n * E + e];
  v = detail::block_sum(v, scratch);
  if (threadIdx.x == 0) {
    prob_sum[e] += v;
    tokens[e] += offsets[e + 1] - offsets[e];
  }
}

}  // namespace

template <class T>
void moe_route(float* probs, int32_t* idx, float* w, const T* logits, int64_t N, int64_t E,
               int64_t k, cudaStream_t stream, bool renormalise, bool topk_softmax) {
  detail::check_moe_shape(E, k, "moe_route");
  if (N == 0) return;
  route_kernel<T><<<detail::warps_grid(N), 256, 0, stream>>>(
      probs, idx, w, logits, N, static_cast<int>(E), static_cast<int>(k),
      renormalise || topk_softmax, topk_softmax);
  ZT_CUDA_LAUNCH_CHECK("moe route_kernel");
}

template <class T>
void moe_route_backward(T* dlogits, const float* dw, const float* dprob, const float* probs,
                        const int32_t* idx, const float* w, int64_t N, int64_t E, int64_t k,
                        cudaStream_t stream, bool renormalise, bool topk_softmax) {
  detail::check_moe_shape(E, k, "moe_route_backward");
  if (N == 0) return;
  route_backward_kernel<T><<<detail::warps_grid(N), 256, 0, stream>>>(
      dlogits, dw, dprob, probs, idx, w, N, static_cast<int>(E), static_cast<int>(k),
      renormalise || topk_softmax);
  ZT_CUDA_LAUNCH_CHECK("moe route_backward_kernel");
}

int64_t moe_plan_scratch(int64_t S, int64_t E) {
  return (S + kPlanBlock - 1) / kPlanBlock * E + E + 1;
}

void moe_plan(MoePlan& plan, int32_t* scratch, int32_t* host_offsets, const int32_t* idx,
              int64_t N, int64_t E, int64_t k, cudaStream_t stream) {
  detail::check_moe_shape(E, k, "moe_plan");
  const int64_t S = N * k;
  const int blocks = static_cast<int>((S + kPlanBlock - 1) / kPlanBlock);
  int32_t* counts = scratch;                                      // [blocks, E]
  int32_t* offsets = scratch + static_cast<int64_t>(blocks) * E;  // [E + 1]
  const int e32 = static_cast<int>(E);
  if (blocks > 0) {
    plan_count_kernel<<<blocks, kPlanBlock, E * sizeof(int32_t), stream>>>(counts, idx, S, e32);
    ZT_CUDA_LAUNCH_CHECK("moe plan_count_kernel");
  }
  plan_scan_kernel<<<1, 256, 0, stream>>>(counts, offsets, blocks, e32);
  ZT_CUDA_LAUNCH_CHECK("moe plan_scan_kernel");
  if (blocks > 0) {
    plan_place_kernel<<<blocks, kPlanBlock, 0, stream>>>(plan.perm, plan.pos, counts, idx, S, e32);
    ZT_CUDA_LAUNCH_CHECK("moe plan_place_kernel");
  }
  ZT_CUDA_CHECK(cudaMemcpyAsync(host_offsets, offsets, static_cast<size_t>(E + 1) * sizeof(int32_t),
                                cudaMemcpyDeviceToHost, stream));
  plan.dev_offsets = offsets;
  plan.offsets.clear();  // filled by moe_plan_ready once the copy is done
}

void moe_plan_ready(MoePlan& plan, const int32_t* host_offsets, int64_t E) {
  plan.offsets.assign(host_offsets, host_offsets + E + 1);
}

void moe_aux_accumulate(double* tokens, double* prob_sum, const float* probs,
                        const MoePlan& plan, int64_t N, int64_t E, cudaStream_t stream) {
  if (E == 0) return;
  aux_kernel<<<static_cast<unsigned>(E), 256, 0, stream>>>(tokens, prob_sum, probs,
                                                           plan.dev_offsets, N, static_cast<int>(E));
  ZT_CUDA_LAUNCH_CHECK("moe aux_kernel");
}

template <class T>
void moe_gather(T* xp, const T* x, const int32_t* perm, int64_t S, int64_t C, int64_t k,
                cudaStream_t stream) {
  if (S * C == 0) return;
  gather_kernel<T><<<detail::grid_for(S * C, 256), 256, 0, stream>>>(xp, x, perm, S, C, static_cast<int>(k));
  ZT_CUDA_LAUNCH_CHECK("moe gather_kernel");
}

template <class T>
void moe_combine(T* out, const T* rows, const int32_t* pos, const float* w, int64_t N, int64_t C,
                 int64_t k, bool accumulate, cudaStream_t stream) {
  if (N * C == 0) return;
  combine_kernel<T><<<detail::grid_for(N * C, 256), 256, 0, stream>>>(out, rows, pos, w, N, C,
                                                              static_cast<int>(k), accumulate);
  ZT_CUDA_LAUNCH_CHECK("moe combine_kernel");
}

template <class T>
void moe_weight_backward(float* dw, T* dyp, const T* dout, const T* y, const int32_t* pos,
                         const float* w, int64_t S, int64_t C, int64_t k, cudaStream_t stream) {
  if (S == 0) return;
  weight_backward_kernel<T><<<detail::warps_grid(S), 256, 0, stream>>>(dw, dyp, dout, y, pos, w, S, C,
                                                               static_cast<int>(k));
  ZT_CUDA_LAUNCH_CHECK("moe weight_backward_kernel");
}

#define ZT_MOE_LAUNCH(T)                                                                       \
  template void moe_gather<T>(T*, const T*, const int32_t*, int64_t, int64_t, int64_t,         \
                              cudaStream_t);                                                   \
  template void moe_combine<T>(T*, const T*, const int32_t*, const float*, int64_t, int64_t,   \
                               int64_t, bool, cudaStream_t);                                   \
  template void moe_weight_backward<T>(float*, T*, const T*, const T*, const int32_t*,         \
                                       const float*, int64_t, int64_t, int64_t, cudaStream_t);
ZT_MOE_LAUNCH(float)
ZT_MOE_LAUNCH(bf16_t)
#undef ZT_MOE_LAUNCH

template void moe_route<float>(float*, int32_t*, float*, const float*, int64_t, int64_t, int64_t,
                               cudaStream_t, bool, bool);
template void moe_route<bf16_t>(float*, int32_t*, float*, const bf16_t*, int64_t, int64_t,
                                int64_t, cudaStream_t, bool, bool);
template void moe_route_backward<float>(float*, const float*, const float*, const float*,
                                        const int32_t*, const float*, int64_t, int64_t, int64_t,
                                        cudaStream_t, bool, bool);
template void moe_route_backward<bf16_t>(bf16_t*, const float*, const float*, const float*,
                                         const int32_t*, const float*, int64_t, int64_t, int64_t,
                                         cudaStream_t, bool, bool);

}  // namespace zt::kernels::cuda
