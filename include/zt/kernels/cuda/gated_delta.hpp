#pragma once
// Gated DeltaNet (Qwen3.5's linear attention) on the GPU: the semantics of the CPU reference
// zt/kernels/gated_delta.hpp (kernels::cpu), with the device conventions: outputs first, a
// stream last, T = float or bf16_t for activations, computed in fp32. The decay g, beta and
// their gradients are fp32 ([N, Hv]: small, and the chunk's cumulative decay needs the bits),
// as are the recurrent state, the chunk-start states and every scratch. Parameter gradients
// G = float or bf16_t are ACCUMULATED in a fixed order (per-chunk partials to a scratch, then
// added in chunk order: no atomics, the same bits every run). Everything else is WRITTEN.
//
// The flow of one layer (N = B * T rows, Cc = 2 Hk Dk + Hv Dv conv channels, [q | k | v]):
//   causal_conv1d_silu_forward(qkv, qkv_pre, w, past)        [N, Cc]
//   delta_gates_forward(g, beta, a, b, A_log, dt_bias)       [N, Hv] fp32 each
//   gated_delta_chunked_forward(out, state1, starts, s, q, k, v, g, beta, state0)
//   gated_rmsnorm_forward(y, rstd, out, z, w)                rows N * Hv of Dv
// Decoding: causal_conv1d_silu_forward with past, then causal_conv1d_update_past;
// gated_delta_recurrent_forward with state1 == state0 (the state updated in place).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"
#include "zt/kernels/gated_delta.hpp"

namespace zt::kernels::cuda {

using kernels::cpu::DeltaShape;

inline constexpr int64_t kDeltaChunk = 64;      // the chunked kernels' chunk (s.chunk must be it)
inline constexpr int64_t kDeltaMaxDim = 128;    // Dk, Dv <= 128 (Qwen3.5: 128, 128)
inline constexpr int64_t kDeltaMaxConvK = 8;    // conv kernel sizes 1 .. 8 (Qwen3.5: 4)
inline constexpr int64_t kDeltaMaxNormDim = 256;  // the gated norm's rows: 1 .. 256
inline constexpr int kDeltaPartials = 64;       // fixed row chunks of the parameter gradients

// ---- causal depthwise conv1d + SiLU --------------------------------------------------------
//   y    [B, Tn, C] T (written)
//   x    [B, Tn, C] T, w [C, K] T (conv1d.weight [C, 1, K]),
//   past [B, C, K - 1] T: the inputs before x, oldest first, or nullptr (zeros)
template <class T>
void causal_conv1d_silu_forward(T* y, const T* x, const T* w, const T* past, int64_t B,
                                int64_t Tn, int64_t C, int64_t K, cudaStream_t stream = nullptr);

//   dx    [B, Tn, C] T (written)
//   dw    [C, K] G (accumulated; nullptr: frozen)
//   dpast [B, C, K - 1] T (written; nullptr: none wanted)
//   dy [B, Tn, C] T, x, w, past: the forward's
//   partial [kDeltaPartials * C * K] float, device scratch (needed when dw is given)
template <class T, class G>
void causal_conv1d_silu_backward(T* dx, G* dw, T* dpast, const T* dy, const T* x, const T* w,
                                 const T* past, int64_t B, int64_t Tn, int64_t C, int64_t K,
                                 float* partial, cudaStream_t stream = nullptr);

// The conv's state after x: past_out [B, C, K - 1] (written; may equal past) = the last K - 1
// inputs of [past | x] per channel (past nullptr: zeros), x [B, Tn, C].
template <class T>
void causal_conv1d_update_past(T* past_out, const T* past, const T* x, int64_t B, int64_t Tn,
                               int64_t C, int64_t K, cudaStream_t stream = nullptr);

// ---- the decay and beta ---------------------------------------------------------------------
//   g    [N, Hv] float (written) = -exp(A_log[h]) * softplus(a + dt_bias[h])  (nullable)
//   beta [N, Hv] float (written) = sigmoid(b)                                  (nullable)
//   a, b [N, Hv] T (in_proj_a's, in_proj_b's output), A_log, dt_bias [Hv] T
template <class T>
void delta_gates_forward(float* g, float* beta, const T* a, const T* b, const T* A_log,
                         const T* dt_bias, int64_t N, int64_t Hv, cudaStream_t stream = nullptr);

//   da, db [N, Hv] T (written; each nullable)
//   dA_log, ddt_bias [Hv] G (accumulated; each nullptr: frozen)
//   dg, dbeta [N, Hv] float (from gated_delta_backward), beta [N, Hv] float (the forward's),
//   a [N, Hv] T, A_log, dt_bias [Hv] T
//   partial [kDeltaPartials * 2 * Hv] float, device scratch (needed when dA_log or ddt_bias is)
template <class T, class G>
void delta_gates_backward(T* da, T* db, G* dA_log, G* ddt_bias, const float* dg,
                          const float* dbeta, const float* beta, const T* a, const T* A_log,
                          const T* dt_bias, int64_t N, int64_t Hv, float* partial,
                          cudaStream_t stream = nullptr);

// ---- the gated delta rule -------------------------------------------------------------------
// Shapes (s: B, T, Hk, Hv, Dk, Dv; Hv % Hk == 0; Dk, Dv <= kDeltaMaxDim; s.chunk == 64;
// value head h reads key head h / (Hv / Hk)):
//   out    [B, T, Hv, Dv] T (written; nullptr: not wanted)
//   state1 [B, Hv, Dk, Dv] float (written: the final state; nullable; may equal state0)
//   starts [B, Hv, ceil(T / 64), Dk, Dv] float (written: the state at each chunk's start,
//          for the backward; nullable)
//   q, k   [B, T, Hk, Dk] T (as projected: L2-normalised inside, q scaled by Dk^-1/2)
//   v      [B, T, Hv, Dv] T
//   g, beta [B, T, Hv] float (delta_gates_forward's)
//   state0 [B, Hv, Dk, Dv] float or nullptr (zeros)
template <class T>
void gated_delta_chunked_forward(T* out, float* state1, float* starts, const DeltaShape& s,
                                 const T* q, const T* k, const T* v, const float* g,
                                 const float* beta, const float* state0,
                                 cudaStream_t stream = nullptr);

// The recurrent form, one token after another (decoding: T = 1, state1 == state0: the state
// [B, Hv, Dk, Dv] updated in place). The same buffers as the chunked form.
template <class T>
void gated_delta_recurrent_forward(T* out, float* state1, const DeltaShape& s, const T* q,
                                   const T* k, const T* v, const float* g, const float* beta,
                                   const float* state0, cudaStream_t stream = nullptr);

// Floats of scratch gated_delta_backward needs (with_starts: starts is nullptr, so the
// backward computes the chunk-start states itself).
int64_t gated_delta_backward_scratch(const DeltaShape& s, bool with_starts);

// Backward of the chunked form, each chunk recomputed from its start state:
//   dq, dk  [B, T, Hk, Dk] T (written: summed over the value heads of a key head, in order)
//   dv      [B, T, Hv, Dv] T (written)
//   dg, dbeta [B, T, Hv] float (written)
//   dstate0 [B, Hv, Dk, Dv] float (written; nullable)
//   q, k, v, g, beta, state0: the forward's; starts: the forward's, or nullptr (recomputed)
//   dout [B, T, Hv, Dv] T, dstate1 [B, Hv, Dk, Dv] float or nullptr (zeros)
//   scratch [gated_delta_backward_scratch(s, starts == nullptr)] float, device
template <class T>
void gated_delta_backward(T* dq, T* dk, T* dv, float* dg, float* dbeta, float* dstate0,
                          const DeltaShape& s, const T* q, const T* k, const T* v,
                          const float* g, const float* beta, const float* state0,
                          const float* starts, const T* dout, const float* dstate1,
                          float* scratch, cudaStream_t stream = nullptr);

// ---- the gated RMSNorm ----------------------------------------------------------------------
// y = w * rmsnorm(x) * silu(z) over rows of D (rows = N * Hv, D = Dv <= kDeltaMaxNormDim):
//   y [rows, D] T (written), rstd [rows] float (written: 1 / sqrt(mean(x^2) + eps))
//   x, z [rows, D] T, w [D] T
template <class T>
void gated_rmsnorm_forward(T* y, float* rstd, const T* x, const T* z, const T* w, int64_t rows,
                           int64_t D, double eps, cudaStream_t stream = nullptr);

//   dx, dz [rows, D] T (written; each nullable), dw [D] G (accumulated; nullptr: frozen)
//   dy [rows, D] T, x, z, w, rstd: the forward's
//   partial [kDeltaPartials * D] float, device scratch (needed when dw is given)
template <class T, class G>
void gated_rmsnorm_backward(T* dx, T* dz, G* dw, const T* dy, const T* x, const T* z,
                            const T* w, const float* rstd, int64_t rows, int64_t D,
                            float* partial, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
