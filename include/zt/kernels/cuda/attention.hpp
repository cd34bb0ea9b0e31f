#pragma once
// Causal grouped-query attention on the GPU, on one of two paths chosen per shape:
//   cudnn  cuDNN's fused SDPA (flash attention on the tensor cores) through the cuDNN
//          frontend: bf16 inputs, head dims that are multiples of 8 up to 128, and a
//          libcudnn.so.9 that loads at run time;
//   zt     zt's own flash-attention-2 style kernel (tiles of queries and keys in shared
//          memory, online softmax, fp32 accumulation on the CUDA cores): fp32 and bf16,
//          every head dim in attention_head_dims(). The reference of the tests and the
//          fallback for everything cuDNN does not take.
// Same function as zt/kernels/attention.hpp (H query heads, G kv heads, query head h
// reads kv head h / (H / G), scores scaled by 1/sqrt(D), keys s <= t), but the T x T
// probabilities are never stored: the forward keeps each row's log-sum-exp (natural log,
// both paths, same layout, so either backward takes either forward's lse) and the backward
// recomputes the probabilities from it.
#include <cstdint>
#include <vector>
#include <string>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// Head dimensions zt's kernel is compiled for (every preset's and the common HF Llamas':
// 16, 32, 48, 64, 80, 96, 100, 112, 128, and Gemma 3's 256). Others throw zt::InputError
// from the launchers.
const std::vector<int64_t>& attention_head_dims();
bool attention_head_dim_supported(int64_t D);

enum class AttentionPath { kCudnn, kZt };
const char* attention_path_name(AttentionPath p);  // "cudnn" or "zt"

// The path attention_forward / attention_backward take for this shape and element type
// (bf16 = true for bf16_t, false for float). cuDNN needs bf16, D % 8 == 0, D <= 128, a
// loaded cuDNN >= 9 and ZT_ATTENTION unset or "auto" (ZT_ATTENTION=zt forces zt's kernel);
// a shape whose cuDNN graph failed to build is remembered and answers kZt from then on.
// A backward with accumulate = true always runs zt's kernel (cuDNN writes its gradients).
AttentionPath attention_path(bool bf16, int64_t B, int64_t Tn, int64_t H, int64_t G, int64_t D,
                             int64_t window = 0);

// One line for the start-up banner: the path a model of this element type and head dim
// takes and why, e.g. "cudnn (cuDNN 9.19.0 fused SDPA; bf16, head dim 64)",
// "zt (head dim 100 is not a multiple of 8; cuDNN 9.19.0 loaded)", "zt (fp32: ...)",
// "zt (libcudnn.so.9 did not load: ...)". Shapes cuDNN then fails to plan warn on their own.
std::string attention_backend_summary(bool bf16, int64_t D);

// Whether cuDNN's fused attention can run in this process (built in and the library
// loaded with version >= 9); the first call tries to load it and warns once if it cannot.
bool cudnn_attention_available();

//   out [B, Tn, H, D] T (written)
//   lse [B, H, Tn]    float (written: log(sum_s exp(score[t, s])) over s <= t, scaled scores)
//   q   [B, Tn, H, D] T (after RoPE);  k, v [B, Tn, G, D] T
//   pos [B, Tn] int32, device, or nullptr: packed examples (0 <= pos[t] <= t, restarting
//       at each example's first token); query t attends keys t - pos[t] .. t only, as
//       zt::kernels::cpu::attention_forward. Always zt's kernel (the cuDNN path is not
//       given the boundaries; logged once).
//   window: sliding window w > 0 (keys t - w < s <= t, as the CPU kernel), or 0. On the
//       cuDNN path its diagonal band (set_diagonal_band_left_bound(w) with the causal mask).
//   sink [H] T, device, or nullptr: attention sinks (gpt-oss), a logit per query head that
//       joins each row's softmax and takes no value, as the CPU kernel; lse includes it.
//       Always zt's kernel.
//   softcap: attention logit soft-capping (Gemma 2's), cap > 0: the scaled scores z become
//       cap tanh(z / cap) before the mask and softmax (the sink is not capped), as the CPU
//       kernel; lse is over the capped scores. 0: none. Always zt's kernel (cuDNN's fused
//       SDPA does not cap).
// Runs on attention_path(...). All pointers 16-byte aligned for the cuDNN path.
template <class T>
void attention_forward(T* out, float* lse, const T* q, const T* k, const T* v, int64_t B,
                       int64_t Tn, int64_t H, int64_t G, int64_t D,
                       cudaStream_t stream = nullptr, const int32_t* pos = nullptr,
                       int64_t window = 0, const T* sink = nullptr, double softcap = 0.0);
// zt's own kernel, whatever attention_path says (the tests' GPU reference).
template <class T>
void attention_forward_zt(T* out, float* lse, const T* q, const T* k, const T* v, int64_t B,
                          int64_t Tn, int64_t H, int64_t G, int64_t D,
                          cudaStream_t stream = nullptr, const int32_t* pos = nullptr,
                          int64_t window = 0, const T* sink = nullptr, double softcap = 0.0);

// dq [B, Tn, H, D], dk, dv [B, Tn, G, D] T: accumulated (WRITTEN when !accumulate).
// delta [B, H, Tn] float: scratch, written here (rowsum(dout * out)).
// dout, out [B, Tn, H, D]; q [B, Tn, H, D]; k, v [B, Tn, G, D]; lse [B, H, Tn] (forward's).
// Two kernels, no atomics: one per key tile makes dK and dV (looping over the query heads
// of its group and the query tiles at or after it), one per query tile makes dQ.
// On the cuDNN path delta is not written (cuDNN keeps its own in its workspace).
// pos, window: the forward's (packed examples, sliding window; zt's kernel).
// sink: the forward's sinks (zt's kernel); dsink [H] float, device, or nullptr: their
// gradient -sum_(b, t) exp(sink_h - lse) delta (accumulated; WRITTEN when !accumulate),
// one block per head in a fixed order (deterministic). dq, dk, dv need only lse.
// softcap: the forward's (zt's kernel): dS picks up 1 - tanh^2(z / cap), z recomputed.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, float* delta, const T* dout, const T* out,
                        const T* q, const T* k, const T* v, const float* lse, int64_t B,
                        int64_t Tn, int64_t H, int64_t G, int64_t D, bool accumulate = true,
                        cudaStream_t stream = nullptr, const int32_t* pos = nullptr,
                        int64_t window = 0, const T* sink = nullptr, float* dsink = nullptr,
                        double softcap = 0.0);
template <class T>
void attention_backward_zt(T* dq, T* dk, T* dv, float* delta, const T* dout, const T* out,
                           const T* q, const T* k, const T* v, const float* lse, int64_t B,
                           int64_t Tn, int64_t H, int64_t G, int64_t D, bool accumulate = true,
                           cudaStream_t stream = nullptr, const int32_t* pos = nullptr,
                           int64_t window = 0, const T* sink = nullptr,
                           float* dsink = nullptr, double softcap = 0.0);

namespace detail {
// The cuDNN path itself (attention_cudnn.cpp; bf16 only). Each returns false, after one
// warning naming the shape, when cuDNN cannot build a plan for the shape (the caller then
// runs zt's kernel); CUDA / cuDNN execution errors throw zt::Error.
bool cudnn_attention_forward(bf16_t* out, float* lse, const bf16_t* q, const bf16_t* k,
                             const bf16_t* v, int64_t B, int64_t Tn, int64_t H, int64_t G,
                             int64_t D, int64_t window, cudaStream_t stream);
bool cudnn_attention_backward(bf16_t* dq, bf16_t* dk, bf16_t* dv, const bf16_t* dout,
                              const bf16_t* out, const bf16_t* q, const bf16_t* k,
                              const bf16_t* v, const float* lse, int64_t B, int64_t Tn,
                              int64_t H, int64_t G, int64_t D, int64_t window,
                              cudaStream_t stream);
// "" when cuDNN loaded (version in *version, e.g. 91900), else why not.
std::string cudnn_attention_load(size_t* version);
bool cudnn_attention_shape_failed(int64_t B, int64_t Tn, int64_t H, int64_t G, int64_t D,
                                  int64_t window = 0);
}  // namespace detail

}  // namespace zt::kernels::cuda
