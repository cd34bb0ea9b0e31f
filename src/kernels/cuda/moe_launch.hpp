#pragma once
// Internal launches of the mixture-of-experts kernels (moe.cu), used by moe_experts.cpp.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda::detail {

// Throws zt::InputError unless 1 <= k <= E <= kMoeMaxExperts.
void check_moe_shape(int64_t E, int64_t k, const char* what);

// xp [S, C] (written): xp[p] = x[perm[p] / k]
template <class T>
void moe_gather(T* xp, const T* x, const int32_t* perm, int64_t S, int64_t C, int64_t k,
                cudaStream_t stream);

// out [N, C] (written, or added to when accumulate) = sum_j w[n k + j] rows[pos[n k + j]]
// (w nullptr: weights 1).
template <class T>
void moe_combine(T* out, const T* rows, const int32_t* pos, const float* w, int64_t N, int64_t C,
                 int64_t k, bool accumulate, cudaStream_t stream);

// dw [S] (written) = dout[s / k] . y[pos[s]];  dyp [S, C] (written): dyp[pos[s]] = w[s] dout[s / k]
template <class T>
void moe_weight_backward(float* dw, T* dyp, const T* dout, const T* y, const int32_t* pos,
                         const float* w, int64_t S, int64_t C, int64_t k, cudaStream_t stream);

}  // namespace zt::kernels::cuda::detail
