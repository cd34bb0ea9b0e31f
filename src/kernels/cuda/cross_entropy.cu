// Fused softmax cross-entropy on the GPU: one block per row (online max + sum of
// exponentials in one pass, then dlogits written over the row), and one block that adds
// the rows' losses in a fixed order, in double.
#include <climits>

#include "common.cuh"
#include "zt/kernels/cuda/cross_entropy.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 1024;

// One block per row; the row in 128-bit packs when Vec (V % kVec == 0, pointers aligned).
// logits are read twice (max/sum pass, dlogits pass) and dlogits written once; no fp32
// copy of the logits is ever made (bf16 logits stay bf16 in memory).
template <class T, bool Vec>
__global__ void cross_entropy_rows_kernel(T* dlogits, const T* logits, const int32_t* targets,
                                          int64_t N, int64_t V, float scale, float* row_loss) {
  __shared__ float scratch[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const int32_t tgt = targets[n];
    const T* row = logits + n * V;  // [V]
    T* drow = dlogits ? dlogits + n * V : nullptr;  // [V] (may alias row)
    if (tgt < 0 || tgt >= V) {  // ignored (>= V is reported by the totals kernel)
      if (drow)
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x) drow[j] = detail::from_f32<T>(0.0f);
      if (threadIdx.x == 0) row_loss[n] = 0.0f;
      continue;
    }
    const float logit_t = detail::to_f32(row[tgt]);  // read before any thread writes drow
    // Online max and sum of exp over this thread's columns.
    float m = -INFINITY, s = 0.0f;
    detail::for_each_pack<Vec>(V, threadIdx.x, blockDim.x, [&](auto width, int64_t j) {
      constexpr int W = decltype(width)::value;
      float x[W];  // [W]
      detail::load_n(x, row + j);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        if (x[k] > m) {
          s = s * expf(m - x[k]) + 1.0f;
          m = x[k];
        } else if (x[k] != -INFINITY) {  // -inf adds exp(-inf) = 0; while m is still -inf,
          s += expf(x[k] - m);           // exp(-inf - -inf) would be NaN (NaN still adds)
        }
      }
    });
    const float M = detail::block_max(m, scratch);
    const float S = detail::block_sum(m == -INFINITY ? 0.0f : s * expf(m - M), scratch);
    if (threadIdx.x == 0) row_loss[n] = M + logf(S) - logit_t;
    if (drow) {
      const float k = scale / S;
      detail::for_each_pack<Vec>(V, threadIdx.x, blockDim.x, [&](auto width, int64_t j) {
        constexpr int W = decltype(width)::value;
        float x[W];  // [W]
        detail::load_n(x, row + j);
#pragma unroll
        for (int c = 0; c < W; ++c) {
          x[c] = expf(x[c] - M) * k;
          if (j + c == tgt) x[c] -= scale;
        }
        detail::store_n(drow + j, x);
      });
    }
  }
}

// One block: totals = (sum of row_loss in double, counted rows, first bad row).
__global__ void cross_entropy_totals_kernel(CrossEntropyTotals* totals, const float* row_loss,
                                            const int32_t* targets, int64_t N, int64_t V) {
  __shared__ double dscratch[32];
  __shared__ long long lscratch[32];
  double sum = 0.0;
  long long count = 0;
  long long bad = LLONG_MAX;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const int32_t t = targets[n];
    if (t >= 0 && t < V) {
      sum += static_cast<double>(row_loss[n]);
      ++count;
    } else if (t >= V && n < bad) {
      bad = n;
    }
  }
  sum = detail::block_sum(sum, dscratch);
  count = detail::block_sum(count, lscratch);
  // block min of `bad`
  for (int o = 16; o > 0; o >>= 1) bad = min(bad, __shfl_xor_sync(0xffffffffu, bad, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) lscratch[threadIdx.x / 32] = bad;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long b = LLONG_MAX;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) b = min(b, lscratch[w]);
    totals->loss_sum = sum;
    totals->count = count;
    totals->bad_row = b == LLONG_MAX ? -1 : b;
  }
}

}  // namespace

template <class T>
void cross_entropy(T* dlogits, const T* logits, const int32_t* targets, int64_t N, int64_t V,
                   double scale, float* row_loss, CrossEntropyTotals* totals,
                   cudaStream_t stream) {
  if (N > 0) {
    const unsigned blocks = detail::grid_for(N, 1);
    if (V % detail::kVec == 0 && detail::aligned16(dlogits, logits))
      cross_entropy_rows_kernel<T, true><<<blocks, kThreads, 0, stream>>>(
          dlogits, logits, targets, N, V, static_cast<float>(scale), row_loss);
    else
      cross_entropy_rows_kernel<T, false><<<blocks, kThreads, 0, stream>>>(
          dlogits, logits, targets, N, V, static_cast<float>(scale), row_loss);
    ZT_CUDA_LAUNCH_CHECK("cross_entropy_rows_kernel");
  }
  cross_entropy_totals_kernel<<<1, kReduceThreads, 0, stream>>>(totals, row_loss, targets, N, V);
  ZT_CUDA_LAUNCH_CHECK("cross_entropy_totals_kernel");
}

template void cross_entropy<float>(float*, const float*, const int32_t*, int64_t, int64_t, double,
                                   float*, CrossEntropyTotals*, cudaStream_t);
template void cross_entropy<bf16_t>(bf16_t*, const bf16_t*, const int32_t*, int64_t, int64_t,
                                    double, float*, CrossEntropyTotals*, cudaStream_t);

}  // namespace zt::kernels::cuda
