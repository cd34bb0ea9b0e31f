#pragma once
// Gated DeltaNet, Qwen3.5's linear attention (CPU reference kernels, float and double).
// transformers' Qwen3_5GatedDeltaNet, after its projections:
//   conv    y = silu(causal depthwise conv1d(x, w)) over [q | k | v] channels, no bias
//   decay   g = -exp(A_log[h]) * softplus(a + dt_bias[h])      (log decay, <= 0)
//   beta    beta = sigmoid(b)                                   (the caller applies it)
//   rule    per value head h (key head h / (Hv / Hk)), q and k L2-normalised (eps 1e-6),
//           q scaled by Dk^-1/2, state S [Dk, Dv] from state0 (or 0):
//             S = exp(g_t) S;  S += k_t (beta_t (v_t - k_t^T S))^T;  o_t = q_t^T S
//   norm    y = w * rmsnorm(o) * silu(z) over each head's Dv values
// The chunked form (training and prefill) computes the rule chunk by chunk as
// transformers' torch_chunk_gated_delta_rule does; the recurrent form is one token at a
// time (decoding). Both give the same numbers (to rounding).
#include <cstdint>

namespace zt::kernels::cpu {

// The sizes of one Gated DeltaNet layer's rule.
struct DeltaShape {
  int64_t B = 0, T = 0;    // examples, tokens per example
  int64_t Hk = 0, Hv = 0;  // key heads, value heads (Hv % Hk == 0)
  int64_t Dk = 0, Dv = 0;  // key and value head dims
  int64_t chunk = 64;      // the chunked form's chunk (transformers' 64)
};

//   q, k [B, T, Hk, Dk] (as projected: normalised inside), v [B, T, Hv, Dv],
//   g, beta [B, T, Hv], state0 [B, Hv, Dk, Dv] or null (zeros),
//   out [B, T, Hv, Dv] (written), state1 [B, Hv, Dk, Dv] or null (the final state, written)
//   (state1 may be state0: the state is then updated in place, as a decode step does)
template <class T>
void gated_delta_chunked_forward(const DeltaShape& s, const T* q, const T* k, const T* v,
                                 const T* g, const T* beta, const T* state0, T* out, T* state1);
template <class T>
void gated_delta_recurrent_forward(const DeltaShape& s, const T* q, const T* k, const T* v,
                                   const T* g, const T* beta, const T* state0, T* out,
                                   T* state1);

// Backward of the chunked form, recomputing what the forward kept in no buffer:
//   dout [B, T, Hv, Dv], dstate1 [B, Hv, Dk, Dv] or null;
//   dq, dk [B, T, Hk, Dk] (summed over the value heads a key head serves), dv [B, T, Hv, Dv],
//   dg, dbeta [B, T, Hv], dstate0 [B, Hv, Dk, Dv] or null: all WRITTEN
template <class T>
void gated_delta_backward(const DeltaShape& s, const T* q, const T* k, const T* v, const T* g,
                          const T* beta, const T* state0, const T* dout, const T* dstate1,
                          T* dq, T* dk, T* dv, T* dg, T* dbeta, T* dstate0);

// Causal depthwise conv1d of kernel K over each channel, then SiLU:
//   x [B, Tn, C], w [C, K] (transformers' conv1d.weight [C, 1, K]),
//   past [B, C, K - 1] (the inputs before x, oldest first) or null (zeros), y [B, Tn, C]
template <class T>
void causal_conv1d_silu_forward(int64_t B, int64_t Tn, int64_t C, int64_t K, const T* x,
                                const T* w, const T* past, T* y);
//   dy [B, Tn, C]; dx [B, Tn, C] WRITTEN, dw [C, K] ACCUMULATED (null: frozen, none)
template <class T>
void causal_conv1d_silu_backward(int64_t B, int64_t Tn, int64_t C, int64_t K, const T* x,
                                 const T* w, const T* past, const T* dy, T* dx, T* dw);

// The log decay: a [N, Hv] (N = B * T), A_log, dt_bias [Hv], g [N, Hv] written.
template <class T>
void delta_decay_forward(int64_t N, int64_t Hv, const T* a, const T* A_log, const T* dt_bias,
                         T* g);
//   dg [N, Hv]; da [N, Hv] WRITTEN, dA_log, ddt_bias [Hv] ACCUMULATED (each null: none)
template <class T>
void delta_decay_backward(int64_t N, int64_t Hv, const T* a, const T* A_log, const T* dt_bias,
                          const T* dg, T* da, T* dA_log, T* ddt_bias);

// The gated RMSNorm over rows of D: x, z [N, D], w [D], y [N, D] written, rstd [N] kept.
template <class T>
void gated_rmsnorm_forward(int64_t N, int64_t D, const T* x, const T* z, const T* w,
                           double eps, T* y, T* rstd);
//   dy [N, D]; dx, dz [N, D] WRITTEN, dw [D] ACCUMULATED (null: frozen, none)
template <class T>
void gated_rmsnorm_backward(int64_t N, int64_t D, const T* x, const T* z, const T* w,
                            const T* rstd, const T* dy, T* dx, T* dz, T* dw);

}  // namespace zt::kernels::cpu
