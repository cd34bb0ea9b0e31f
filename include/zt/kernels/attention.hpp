#pragma once
// Causal grouped-query attention (CPU reference). H query heads share G key/value heads:
// query head h reads kv head h / (H / G). Per (batch b, head h), with s = 1/sqrt(D):
//   P = softmax_row(s * Q K^T masked to s <= t)      [T, T]
//   O = P V                                          [T, D]
// With per-token positions pos [B, Tn] (packed examples, positions restarting at 0 at each
// example's first token), query t attends only keys t - pos[t] .. t: its own example, causal
// within it (no attention across examples). The backward needs no positions: it reads the
// mask from probs (zero outside it). With a sliding window w > 0 (Mistral's
// `sliding_window`, transformers' sliding_window_overlay: kv_idx > q_idx - w) query t
// attends keys t - w < s <= t only: the last w positions including itself, intersected with
// its own example's. window 0: full causal.
// Attention sinks (gpt-oss): with sink [H], a learned logit per query head joins each row's
// softmax as one more column that takes no value (transformers' eager_attention_forward of
// gpt-oss: the scores after scaling, the sink not scaled):
//   P[t, s] = exp(z_ts - m) / (sum_s' exp(z_ts' - m) + exp(sink_h - m)),  m = max(z_t., sink_h)
// so each row of P sums to 1 - p_sink(t) < 1. Backward: dz_ts = P_ts (dP_ts - d_t) with
// d_t = sum_s P_ts dP_ts = dO_t . O_t (the sink's dP is 0), and
//   dsink_h = -sum_(b, t) p_sink(b, h, t) d_t,  p_sink = 1 - sum_s P_ts.
// Attention logit soft-capping (Gemma 2's attn_logit_softcapping; transformers' eager
// attention of gemma2/gemma3): with cap > 0 the scaled scores z = s q_t . k_s are replaced
// by cap tanh(z / cap) before the mask and the softmax (the sink logit is not capped).
// Backward: dz picks up the factor 1 - tanh^2(z / cap), z recomputed from q and k.
// Parallel over batch x kv-head groups with OpenMP; Eigen GEMMs inside.
#include <cstdint>

namespace zt::kernels::cpu {

//   out   [B, Tn, H, D]  (written)
//   probs [B, H, Tn, Tn] (written; the softmax, zeros above the diagonal; kept for backward)
//   q     [B, Tn, H, D]  (after RoPE)
//   k, v  [B, Tn, G, D]
//   pos   [B, Tn] with 0 <= pos[t] <= t, or nullptr (plain causal)
//   window  sliding window (>= 1), or 0 (none)
//   sink  [H] per-head sink logits, or nullptr (none)
//   softcap  the scores' soft-cap (> 0), or 0 (none)
template <class T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, int64_t B,
                       int64_t Tn, int64_t H, int64_t G, int64_t D, const int32_t* pos = nullptr,
                       int64_t window = 0, const T* sink = nullptr, double softcap = 0.0);

// Elements of scratch needed by attention_backward with `threads` OpenMP threads.
int64_t attention_backward_scratch(int64_t Tn, int threads);

//   dq    [B, Tn, H, D]  (accumulated; WRITTEN when !accumulate)
//   dk,dv [B, Tn, G, D]  (accumulated; WRITTEN when !accumulate)
//   scratch  attention_backward_scratch(Tn, omp_get_max_threads()) elements
//   dout  [B, Tn, H, D], q [B, Tn, H, D], k, v [B, Tn, G, D], probs [B, H, Tn, Tn]
//   dsink [H] (accumulated; WRITTEN when !accumulate), or nullptr: the sinks' gradient
//         (the forward ran with sinks; p_sink is read from probs). dq, dk, dv need no sink.
//   softcap  the forward's soft-cap, or 0
template <class T>
void attention_backward(T* dq, T* dk, T* dv, T* scratch, const T* dout, const T* q, const T* k,
                        const T* v, const T* probs, int64_t B, int64_t Tn, int64_t H, int64_t G,
                        int64_t D, bool accumulate = true, T* dsink = nullptr,
                        double softcap = 0.0);

// Attention of n new positions of one sequence over its key/value cache (incremental
// decoding): query t, at position past + t, attends keys 0..past + t, or with a sliding
// window w > 0 keys past + t - w < s <= past + t (the same rule and softmax as
// attention_forward, one query row at a time; the cache keeps every position).
//   out     [n, H, D]         (written)
//   scratch [H, past + n]     (scores)
//   q       [n, H, D]         (after RoPE at positions past .. past + n - 1)
//   k, v    [past + n, G, D]  (the cache, new positions included; k after RoPE)
//   sink    [H] sink logits, or nullptr (as attention_forward)
//   softcap the scores' soft-cap, or 0 (as attention_forward)
template <class T>
void attention_decode(T* out, T* scratch, const T* q, const T* k, const T* v, int64_t n,
                      int64_t past, int64_t H, int64_t G, int64_t D, int64_t window = 0,
                      const T* sink = nullptr, double softcap = 0.0);

}  // namespace zt::kernels::cpu
