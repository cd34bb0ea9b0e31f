#pragma once
// Expert parallelism for one mixture-of-experts layer, on the host (the CPU reference):
// the E experts are split over the ranks of an expert group of P ranks (rank r owns
// experts [r E/P, (r+1) E/P)), every rank routes its own tokens, and two all_to_alls move
// them: dispatch (each routed row to the rank owning its expert) and combine (each
// expert's output back to the token's rank), the same pair reversed in the backward.
// No capacity limit: every routed row is computed, none is dropped.
//
// What each rank holds:
//   router  [E, C]        every rank (the router is data parallel, like attention)
//   gate_up [E/P, 2I, C]  its own experts only (layout as kernels/moe.hpp)
//   down    [E/P, C, I]
// The expert width I is Config::expert_width() (Qwen's moe_intermediate_size).
// gpt-oss's block adds the router's bias [E] (every rank), the experts' biases
// [E/P, 2I] and [E/P, C] (its own experts, as the weights) and the clamped SwiGLU
// (kernels::cpu::ExpertExtras over the local experts), with the k weights a softmax over
// the k chosen logits (ExpertRouting).
// The result equals the single-rank block (kernels/moe.hpp) on the same tokens within
// fp32 rounding; the experts' gradients are summed over the tokens of every rank of the
// group, the router's and the input's are this rank's own.
#include <cstdint>
#include <span>
#include <vector>

#include "zt/comm/comm.hpp"
#include "zt/kernels/moe.hpp"
#include "zt/model/config.hpp"

namespace zt::model {

// Expert parallelism's rules, in one place, for the engine's options and both models (the
// host's and the GPU's). Every MoE block zt has is taken: Mixtral's, gpt-oss's (the
// router's bias, the softmax over the top k, the experts' biases and the clamped SwiGLU),
// Qwen2-MoE's, Qwen3-MoE's and Qwen3.5-MoE's (the experts' own width, top-k weights with or
// without renormalisation, dense layers among routed ones, which run as dense blocks with
// no exchange, and the shared expert with its sigmoid gate, computed on every rank for
// its own tokens: replicated like attention). Refused: a model without routed experts,
// and LoRA adapters. zt::InputError naming moe.expert_parallel = parts and what to do.
void check_expert_parallel_block(const Config& cfg, int parts);
[[noreturn]] void refuse_expert_parallel_lora(int parts);

// The local plan of an expert rank (the GPU block's, src/model/cuda/device_moe_ep.cpp):
// it received R rows, counts[p L + e] of them from rank p for its local expert e (P ranks,
// L local experts; each source's rows arrive together, sorted by local expert). Sorted
// by local expert, then source, then arrival: sorted row q is received row perm[q],
// received row r sits at pos[r], local expert e's rows are [offsets[e], offsets[e + 1]).
// The plan kernels::cuda::moe_experts_forward takes with E = L, k = 1.
struct LocalExpertPlan {
  std::vector<int32_t> perm, pos;  // [R]
  std::vector<int64_t> offsets;    // [L + 1]
};
// Throws std::logic_error for counts that are not P x L non-negative values (R < 2^31).
LocalExpertPlan local_expert_plan(std::span<const int64_t> counts, int64_t P, int64_t L);

// The k weights (kernels::cpu::moe_route): Mixtral's renormalised top-k by default;
// Qwen's norm_topk_prob = false (renormalise false); gpt-oss's topk_softmax.
struct ExpertRouting {
  bool renormalise = true;
  bool topk_softmax = false;
};

class ExpertParallelMoe {
 public:
  // group: the expert group (its size P must divide E). C hidden, I expert width, E
  // experts, k per token. Throws zt::InputError for shapes that do not split.
  ExpertParallelMoe(comm::Comm& group, int64_t C, int64_t I, int64_t E, int64_t k,
                    ExpertRouting routing = {});

  int64_t first_expert() const { return first_; }
  int64_t local_experts() const { return local_; }

  // out [N, C] (written) for this rank's N tokens x [N, C]. Collective over the group.
  // Keeps what backward() needs; the routing statistics of these tokens are added to
  // tokens() and prob_sum() (the load-balancing loss: kernels::cpu::moe_aux_loss).
  // router_bias [E] (nullable); extra: this rank's experts' biases ([E/P, 2I], [E/P, C])
  // and the SwiGLU's clamp (its gradient fields unused here).
  void forward(float* out, const float* x, const float* router, const float* gate_up,
               const float* down, int64_t N, const float* router_bias = nullptr,
               const kernels::cpu::ExpertExtras<float>& extra = {});

  // The backward of the last forward. dx [N, C] and drouter [E, C] (accumulated): this
  // rank's; dgate_up [E/P, 2I, C] and ddown [E/P, C, I] (accumulated): this rank's
  // experts, over the tokens of every rank. dprob [E] (nullable): d loss / d p for
  // every row (kernels::cpu::moe_aux_dprob). drouter_bias [E] (accumulated, nullable):
  // this rank's. extra: the forward's, with the experts' bias gradients [E/P, 2I] and
  // [E/P, C] (accumulated, nullable) over the tokens of every rank. Collective over the group.
  void backward(float* dx, float* drouter, float* dgate_up, float* ddown, const float* dout,
                const float* x, const float* router, const float* gate_up, const float* down,
                const float* dprob, float* drouter_bias = nullptr,
                const kernels::cpu::ExpertExtras<float>& extra = {});

  std::vector<double>& tokens() { return tokens_; }      // [E] T_e of kernels/moe.hpp
  std::vector<double>& prob_sum() { return prob_sum_; }  // [E] P_e
  // Rows this rank computed for its experts in the last forward (from every rank).
  int64_t rows_computed() const { return recv_rows_; }
  // Bytes this layer keeps between its forward and backward (its buffers' capacities; the
  // forward's and backward's temporaries are freed on return).
  size_t bytes() const;

 private:
  // Moves rows of `width` floats: from send (ordered by destination, send_rows_ per rank)
  // into recv (recv_rows_ per source), or back when `reverse`.
  void exchange(const float* send, float* recv, int64_t width, bool reverse);

  comm::Comm& group_;
  int64_t C_, I_, E_, k_, first_, local_;
  ExpertRouting routing_;
  int64_t N_ = 0;
  // Routing of this rank's tokens (slots s = n k + j).
  std::vector<float> probs_, w_;          // [N, E], [N, k]
  std::vector<int32_t> idx_;              // [N, k]
  std::vector<int64_t> order_;            // [S] slots by destination rank, then slot
  std::vector<size_t> send_rows_, recv_rows_by_rank_;  // [P] rows to / from each rank
  int64_t recv_rows_ = 0;
  // The rows this rank's experts computed.
  std::vector<float> xr_, gu_, h_, y_;    // [R, C], [R, 2I], [R, I], [R, C]
  std::vector<int32_t> er_;               // [R] local expert of each received row
  std::vector<float> ys_;                 // [S, C] expert outputs back, in order_
  std::vector<double> tokens_, prob_sum_; // [E]
};

}  // namespace zt::model
