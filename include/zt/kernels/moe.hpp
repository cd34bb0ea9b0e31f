#pragma once
// Mixture-of-experts block, Mixtral's and Qwen's (CPU reference): a router picks k of E
// SwiGLU experts per token and the block returns their weighted sum.
//
//   logits = x Wr^T                          Wr [E, C]  (the router: a plain linear)
//   p      = softmax(logits)                 per token, over the E experts
//   i_1..k = the k largest p (torch.topk's order and tie-break on the CPU)
//   w_j    = p_{i_j} / sum_m p_{i_m}         (renormalised: Mixtral's, Qwen's norm_topk_prob)
//   w_j    = p_{i_j}                         (renormalise = false: Qwen's default)
//   w      = softmax(logits_{i_1..k})       (topk_softmax: gpt-oss's; chosen by logit)
// gpt-oss adds a router bias (logits = x Wr^T + b), expert biases and the clamped SwiGLU
// (ExpertExtras; swiglu.hpp).
//   out    = sum_j w_j * down_{i_j}( silu(gate_{i_j} x) * up_{i_j} x )
//
// Expert weights as transformers 5 holds them (MixtralExperts):
//   gate_up [E, 2I, C]: rows 0..I-1 the gate projection (w1), rows I..2I-1 the up (w3)
//   down    [E, C, I]:  the down projection (w2)
//
// The load-balancing loss (transformers' load_balancing_loss_func, without padding): over
// every routed row of every MoE layer of the micro-batch (R rows in all),
//   aux = E * sum_e (T_e / R) * (P_e / R)
// with T_e the times expert e is among a row's top k and P_e the sum of p[., e]. T is a
// count (no gradient); d aux / d p[n, e] = E * T_e / R^2 for every row n of every layer.
#include <cstdint>

namespace zt::kernels::cpu {

// The router's choice from its logits (computed with linear_forward).
//   probs [N, E] (written) softmax of logits
//   idx   [N, k] (written) chosen experts, largest probability first
//   w     [N, k] (written) their weights (renormalised unless renormalise is false)
//   logits [N, E]
// Ties fall as torch.topk's CPU kernel breaks them (an nth_element, then a sort of the
// first k-1, over (value, index) pairs compared by value), so the same experts are chosen
// as by transformers when router probabilities are equal.
template <class T>
void moe_route(T* probs, int32_t* idx, T* w, const T* logits, int64_t N, int64_t E, int64_t k,
               bool renormalise = true, bool topk_softmax = false);

// gpt-oss's experts (every field at its default: Mixtral's).
template <class T>
struct ExpertExtras {
  const T* gate_up_bias = nullptr;  // [E, 2I] added to gate_up's output (gate then up)
  const T* down_bias = nullptr;     // [E, C] added to down's output (y includes it)
  T* dgate_up_bias = nullptr;       // backward: [E, 2I], [E, C] accumulated (nullptr: none)
  T* ddown_bias = nullptr;
  double swiglu_limit = 0.0;  // > 0: swiglu_clamped_* with swiglu_alpha instead of SwiGLU
  double swiglu_alpha = 1.702;
};

// The router's logits, logits = x W^T, one dot product per (row, expert) in one fixed order:
// equal router rows give bit-equal logits on every CPU, so their ties are ties (a blocked
// GEMM rounds its remainder columns in another order, and the tie breaks by the last bit).
//   logits [N, E] (written)
//   x [N, C], router [E, C]
template <class T>
void moe_router_logits(T* logits, const T* x, const T* router, int64_t N, int64_t C, int64_t E,
                       const T* bias = nullptr);  // bias [E] added last (gpt-oss)

// Backward of moe_route.
//   dlogits [N, E] (written)
//   dw      [N, k] the gradient reaching the weights w
//   dprob   [E] or nullptr: an extra d loss / d p[n, e], the same for every row (the
//           load-balancing loss: moe_aux_dprob)
//   probs, idx, w: from moe_route
template <class T>
void moe_route_backward(T* dlogits, const T* dw, const T* dprob, const T* probs,
                        const int32_t* idx, const T* w, int64_t N, int64_t E, int64_t k,
                        bool renormalise = true, bool topk_softmax = false);

// The experts, grouped by expert (each expert's tokens gathered, two GEMMs, scattered).
//   out [N, C] (written)
//   gu  [N*k, 2I] (written, saved) gate|up pre-activations of row n's j-th choice at n*k+j
//   h   [N*k, I]  (written, saved) silu(gate) * up
//   y   [N*k, C]  (written, saved) the expert's output before its weight
//   x [N, C], gate_up [E, 2I, C], down [E, C, I], idx, w [N, k] from moe_route
template <class T>
void moe_experts_forward(T* out, T* gu, T* h, T* y, const T* x, const T* gate_up, const T* down,
                         const int32_t* idx, const T* w, int64_t N, int64_t C, int64_t I,
                         int64_t E, int64_t k, const ExpertExtras<T>& extra = {});

// Backward of moe_experts_forward.
//   dx [N, C] (accumulated), dgate_up [E, 2I, C] (accumulated), ddown [E, C, I]
//   (accumulated), dw [N, k] (written) d loss / d w; dgate_up and ddown may be nullptr
//   (frozen experts: no weight gradient)
//   dout [N, C]; the rest as in the forward, with its saved gu, h, y
template <class T>
void moe_experts_backward(T* dx, T* dgate_up, T* ddown, T* dw, const T* dout, const T* x,
                          const T* gate_up, const T* down, const int32_t* idx, const T* w,
                          const T* gu, const T* h, const T* y, int64_t N, int64_t C, int64_t I,
                          int64_t E, int64_t k, const ExpertExtras<T>& extra = {});

// Load-balancing statistics of one layer's rows, added to the micro-batch's totals.
//   tokens [E] (accumulated) T_e, prob_sum [E] (accumulated) P_e
//   probs [N, E], idx [N, k] from moe_route
template <class T>
void moe_aux_accumulate(double* tokens, double* prob_sum, const T* probs, const int32_t* idx,
                        int64_t N, int64_t E, int64_t k);

// aux = E * sum_e T_e P_e / R^2 (R = rows over all layers; 0 when R is 0).
double moe_aux_loss(const double* tokens, const double* prob_sum, double rows, int64_t E);

// d (coef * aux) / d p[n, e] = coef * E * T_e / R^2, for moe_route_backward's dprob.
//   dprob [E] (written)
template <class T>
void moe_aux_dprob(T* dprob, const double* tokens, double rows, int64_t E, double coef);

}  // namespace zt::kernels::cpu
