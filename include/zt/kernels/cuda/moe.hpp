#pragma once
// Mixture-of-experts block on the GPU (the semantics of zt/kernels/moe.hpp): the router's
// softmax and top-k, the tokens permuted so each expert's rows are contiguous, two
// GEMMs per expert through cuBLASLt (gate and up, then down), the weighted combine, and
// the backward of each. Routing values (probabilities, weights, their gradients) are
// fp32; activations and weights T = float or bf16_t.
//
// One difference from the CPU reference: equal router probabilities go to the lower expert
// index first (the CPU reference breaks ties as torch's CPU topk does). Outputs agree
// wherever no tie decides a choice.
//
// The flow of one layer (N tokens, E experts, k per token, S = N * k slots):
//   logits   = linear_forward(x, router)                       [N, E]
//   moe_route(probs, idx, w, logits)                           [N, E], [N, k], [N, k]
//   MoePlan plan = moe_plan(..., idx)                          slot <-> row of the permuted order
//   moe_experts_forward(out, acts, x, gate_up, down, plan, w)  [N, C]
//   ... moe_experts_backward, moe_route_backward, linear_backward for the router.
#include <cstdint>
#include <vector>

#include "zt/kernels/cuda/gemm.hpp"
#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// Largest expert count the routing kernels take (a warp holds a row's E probabilities).
inline constexpr int64_t kMoeMaxExperts = 1024;

// probs [N, E] (written) softmax of logits; idx [N, k] (written) the k largest, largest
// first; w [N, k] (written) their probabilities, renormalised to sum 1 unless renormalise
// is false (Qwen's norm_topk_prob = false: the probabilities themselves), as the CPU
// kernels::cpu::moe_route. topk_softmax (gpt-oss): the k largest logits, w the softmax
// over them (equal to their renormalised probabilities). logits [N, E] (a router bias is
// added to them before: bias_forward). (renormalise after the stream: a stream passed
// where a bool is read would convert silently.)
template <class T>
void moe_route(float* probs, int32_t* idx, float* w, const T* logits, int64_t N, int64_t E,
               int64_t k, cudaStream_t stream = nullptr, bool renormalise = true,
               bool topk_softmax = false);

// dlogits [N, E] (written) from dw [N, k] and dprob [E] (nullable: the load-balancing
// loss's d/dp, the same for every row), with moe_route's probs, idx, w and the same
// renormalise and topk_softmax.
template <class T>
void moe_route_backward(T* dlogits, const float* dw, const float* dprob, const float* probs,
                        const int32_t* idx, const float* w, int64_t N, int64_t E, int64_t k,
                        cudaStream_t stream = nullptr, bool renormalise = true,
                        bool topk_softmax = false);

// Where each slot s = n * k + j goes in the expert-sorted order: the rows routed to expert e
// are [offsets[e], offsets[e + 1]), in slot order (deterministic: no atomics decide it).
struct MoePlan {
  int32_t* perm = nullptr;     // [S] device: permuted row p holds slot perm[p]
  int32_t* pos = nullptr;      // [S] device: slot s sits at row pos[s]
  const int32_t* dev_offsets = nullptr;  // [E + 1] device: the same (inside the scratch)
  std::vector<int64_t> offsets;  // [E + 1] host: the expert ranges
};

// Scratch ints moe_plan needs: (blocks of 256 slots) * E + E + 1.
int64_t moe_plan_scratch(int64_t S, int64_t E);

// Enqueues the plan: plan.perm and plan.pos (device buffers of S ints, the caller's) from
// idx [N, k], the expert ranges in the scratch (plan.dev_offsets), and their copy into
// host_offsets [E + 1] (pinned host memory: an asynchronous copy). The GEMM sizes are needed
// on the host: the caller waits for the stream (comm::wait_stream, the one polled host wait;
// the block's one wait), then calls moe_plan_ready.
void moe_plan(MoePlan& plan, int32_t* scratch, int32_t* host_offsets, const int32_t* idx,
              int64_t N, int64_t E, int64_t k, cudaStream_t stream = nullptr);
// plan.offsets from host_offsets, once the stream has passed moe_plan's copy.
void moe_plan_ready(MoePlan& plan, const int32_t* host_offsets, int64_t E);

// The saved activations of moe_experts_forward, device buffers, in the permuted order.
template <class T>
struct MoeActs {
  T* xp = nullptr;  // [S, C] the input rows, permuted
  T* g = nullptr;   // [S, I] gate pre-activations
  T* u = nullptr;   // [S, I] up pre-activations
  T* h = nullptr;   // [S, I] silu(g) * u
  T* y = nullptr;   // [S, C] each expert's output before its weight
};

// gpt-oss's experts (every field at its default: Mixtral's SwiGLU experts without biases),
// as kernels::cpu::ExpertExtras.
template <class T>
struct MoeExpertExtras {
  const T* gate_up_bias = nullptr;  // [E, 2I] added to the gate, then the up rows' output
  const T* down_bias = nullptr;     // [E, C] added to down's output (y includes it)
  double swiglu_limit = 0.0;        // > 0: swiglu_clamped_* with swiglu_alpha
  double swiglu_alpha = 1.702;
};

// out [N, C] (written) = sum_j w[n, j] y[pos[n k + j]]; acts written.
//   x [N, C], gate_up [E, 2I, C], down [E, C, I], w [N, k] (nullptr: weights 1, as for
//   the rows an expert rank received under expert parallelism; also in the backward)
template <class T>
void moe_experts_forward(Gemm& gemm, T* out, const MoeActs<T>& acts, const T* x,
                         const T* gate_up, const T* down, const MoePlan& plan, const float* w,
                         int64_t N, int64_t C, int64_t I, int64_t E, int64_t k,
                         cudaStream_t stream = nullptr, const MoeExpertExtras<T>& extra = {});

// Backward. dx [N, C] (accumulated; WRITTEN when !accumulate_dx), dgate_up [E, 2I, C] and
// ddown [E, C, I] (accumulated, G = float or T; nullptr: frozen experts, no weight GEMMs),
// dw [N, k] (written); with extra's biases, dgate_up_bias [E, 2I] and ddown_bias [E, C]
// (accumulated; nullptr: frozen).
//   scratch_rows [S, C] and scratch_h [S, I] (T, device): the permuted dx and dh.
// acts.g and acts.u are overwritten with their gradients.
template <class T, class G>
void moe_experts_backward(Gemm& gemm, T* dx, G* dgate_up, G* ddown, float* dw, const T* dout,
                          const MoeActs<T>& acts, const T* gate_up, const T* down,
                          const MoePlan& plan, const float* w, T* scratch_rows, T* scratch_h,
                          int64_t N, int64_t C, int64_t I, int64_t E, int64_t k,
                          bool accumulate_dx = true, cudaStream_t stream = nullptr,
                          const MoeExpertExtras<T>& extra = {}, G* dgate_up_bias = nullptr,
                          G* ddown_bias = nullptr);

// The steps of moe_experts_forward / backward around the experts' GEMMs, for a caller that
// moves the permuted rows elsewhere (expert parallelism: src/model/cuda/device_moe_ep.cpp).
// xp [S, C] (written): xp[p] = x[perm[p] / k]   (x [S / k, C])
template <class T>
void moe_gather(T* xp, const T* x, const int32_t* perm, int64_t S, int64_t C, int64_t k,
                cudaStream_t stream = nullptr);
// out [N, C] (written, or added to when accumulate) = sum_j w[n k + j] rows[pos[n k + j]]
// (rows [N k, C]; w nullptr: weights 1).
template <class T>
void moe_combine(T* out, const T* rows, const int32_t* pos, const float* w, int64_t N, int64_t C,
                 int64_t k, bool accumulate, cudaStream_t stream = nullptr);
// dw [S] (written) = dout[s / k] . y[pos[s]];  dyp [S, C] (written): dyp[pos[s]] = w[s] dout[s / k]
//   dout [S / k, C], y [S, C]; w nullptr: weights 1
template <class T>
void moe_weight_backward(float* dw, T* dyp, const T* dout, const T* y, const int32_t* pos,
                         const float* w, int64_t S, int64_t C, int64_t k,
                         cudaStream_t stream = nullptr);

// qwen2_moe's shared expert (src/model/shared_expert.cpp on the CPU): beside the routed
// sum, out += sigmoid(x . g) * y, with y [N, C] the shared SwiGLU's output (linear_forward
// and swiglu_forward, as a dense MLP) and g [C] mlp.shared_expert_gate.weight.
//   s [N] (written, f32) sigmoid(x [N, C] . g); out [N, C] += s[n] y[n]
template <class T>
void moe_shared_gate_forward(T* out, float* s, const T* y, const T* x, const T* g, int64_t N,
                             int64_t C, cudaStream_t stream = nullptr);
// Backward, with dout [N, C] = d loss / d out and the forward's s, y, x:
//   dy [N, C] (written) = s dout;  dlogit [N] (written, f32) = s (1 - s) dout . y;
//   dx [N, C] += dlogit[n] g;  dg [C] += sum_n dlogit[n] x[n] (G = float or T; nullptr:
//   frozen, no gradient)
template <class T, class G>
void moe_shared_gate_backward(T* dy, float* dlogit, T* dx, G* dg, const T* dout, const T* y,
                              const float* s, const T* x, const T* g, int64_t N, int64_t C,
                              cudaStream_t stream = nullptr);

// The load-balancing statistics of one layer added to the micro-batch's (device, double):
// tokens [E] += the rows routed to e (plan.dev_offsets), prob_sum [E] += sum_n probs[n, e]
// (a fixed-order sum per expert). The loss itself: kernels::cpu::moe_aux_loss on the host.
void moe_aux_accumulate(double* tokens, double* prob_sum, const float* probs,
                        const MoePlan& plan, int64_t N, int64_t E, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
