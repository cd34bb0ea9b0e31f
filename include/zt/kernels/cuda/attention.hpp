#pragma once
// Causal grouped-query attention on the GPU: a flash-attention-2 style kernel of zt's
// own (tiles of queries and keys in shared memory, online softmax, fp32 accumulation).
// Same function as zt/kernels/attention.hpp (H query heads, G kv heads, query head h
// reads kv head h / (H / G), scores scaled by 1/sqrt(D), keys s <= t), but the T x T
// probabilities are never stored: the forward keeps each row's log-sum-exp instead and
// the backward recomputes the probabilities from it.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// Head dimensions the kernels are compiled for: 16, 32, 64, 128. Others throw
// zt::InputError from the launchers.
bool attention_head_dim_supported(int64_t D);

//   out [B, Tn, H, D] T (written)
//   lse [B, H, Tn]    float (written: log(sum_s exp(score[t, s])) over s <= t, scaled scores)
//   q   [B, Tn, H, D] T (after RoPE);  k, v [B, Tn, G, D] T
template <class T>
void attention_forward(T* out, float* lse, const T* q, const T* k, const T* v, int64_t B,
                       int64_t Tn, int64_t H, int64_t G, int64_t D,
                       cudaStream_t stream = nullptr);

// dq [B, Tn, H, D], dk, dv [B, Tn, G, D] T: accumulated (WRITTEN when !accumulate).
// delta [B, H, Tn] float: scratch, written here (rowsum(dout * out)).
// dout, out [B, Tn, H, D]; q [B, Tn, H, D]; k, v [B, Tn, G, D]; lse [B, H, Tn] (forward's).
// Two kernels, no atomics: one per key tile makes dK and dV (looping over the query heads
// of its group and the query tiles at or after it), one per query tile makes dQ.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, float* delta, const T* dout, const T* out,
                        const T* q, const T* k, const T* v, const float* lse, int64_t B,
                        int64_t Tn, int64_t H, int64_t G, int64_t D, bool accumulate = true,
                        cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
