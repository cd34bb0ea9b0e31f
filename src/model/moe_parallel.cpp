// Expert parallelism for one MoE layer on the host (see moe_parallel.hpp): route locally,
// dispatch rows to the experts' ranks with all_to_all, run the local experts with the CPU
// kernels (one "choice" per received row, weight 1), return the outputs, combine with
// the router's weights. The backward runs the same exchanges with the gradients.
#include "zt/model/moe_parallel.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/linear.hpp"
#include "zt/kernels/moe.hpp"

namespace zt::model {

void check_expert_parallel_block(const Config& cfg, int parts) {
  if (!cfg.moe() || cfg.moe_layer_count() == 0)
    throw InputError(strf("moe.expert_parallel = %d with model family '%s': the model has no "
                          "routed experts to split",
                          parts, cfg.family.c_str()),
                     "set moe.expert_parallel = 1 for this model");
}

void refuse_expert_parallel_lora(int parts) {
  throw InputError(strf("moe.expert_parallel = %d with finetune.method = lora / qlora", parts),
                   "LoRA trains with moe.expert_parallel = 1");
}

namespace cpu = kernels::cpu;

namespace {

// v.resize(n), growing the capacity to n exactly (resize alone may double it: a layer's
// rows vary from step to step and from layer to layer).
template <class T>
void fit(std::vector<T>& v, size_t n) {
  if (n > v.capacity()) v.reserve(n);
  v.resize(n);
}

}  // namespace

LocalExpertPlan local_expert_plan(std::span<const int64_t> counts, int64_t P, int64_t L) {
  if (P < 1 || L < 1 || static_cast<int64_t>(counts.size()) != P * L)
    throw std::logic_error("local_expert_plan: counts is not [P, L]");
  LocalExpertPlan plan;
  plan.offsets.assign(static_cast<size_t>(L + 1), 0);
  std::vector<int64_t> from(static_cast<size_t>(P * L));  // [P, L] first received row of (p, e)
  int64_t R = 0;
  for (int64_t p = 0; p < P; ++p)
    for (int64_t e = 0; e < L; ++e) {
      const int64_t c = counts[static_cast<size_t>(p * L + e)];
      if (c < 0) throw std::logic_error("local_expert_plan: a negative count");
      from[static_cast<size_t>(p * L + e)] = R;
      R += c;
      plan.offsets[static_cast<size_t>(e + 1)] += c;
    }
  if (R > INT32_MAX) throw std::logic_error("local_expert_plan: over 2^31 rows");
  for (int64_t e = 0; e < L; ++e) plan.offsets[static_cast<size_t>(e + 1)] += plan.offsets[static_cast<size_t>(e)];
  plan.perm.resize(static_cast<size_t>(R));
  plan.pos.resize(static_cast<size_t>(R));
  for (int64_t e = 0; e < L; ++e) {
    int64_t q = plan.offsets[static_cast<size_t>(e)];
    for (int64_t p = 0; p < P; ++p) {
      const int64_t r0 = from[static_cast<size_t>(p * L + e)];
      for (int64_t r = r0; r < r0 + counts[static_cast<size_t>(p * L + e)]; ++r, ++q) {
        plan.perm[static_cast<size_t>(q)] = static_cast<int32_t>(r);
        plan.pos[static_cast<size_t>(r)] = static_cast<int32_t>(q);
      }
    }
  }
  return plan;
}

ExpertParallelMoe::ExpertParallelMoe(comm::Comm& group, int64_t C, int64_t I, int64_t E,
                                     int64_t k, ExpertRouting routing)
    : group_(group), C_(C), I_(I), E_(E), k_(k), routing_(routing) {
  const int64_t P = group.size();
  if (C < 1 || I < 1 || E < 1 || k < 1 || k > E || E % P != 0)
    throw InputError(strf("expert parallelism: %lld experts (%lld per token, hidden %lld, "
                          "expert width %lld) over an expert group of %lld ranks",
                          static_cast<long long>(E), static_cast<long long>(k),
                          static_cast<long long>(C), static_cast<long long>(I),
                          static_cast<long long>(P)),
                     "the group size must divide the expert count (moe.expert_parallel), and "
                     "1 <= k <= experts");
  local_ = E / P;
  first_ = local_ * group.rank();
  tokens_.assign(static_cast<size_t>(E), 0.0);
  prob_sum_.assign(static_cast<size_t>(E), 0.0);
}

size_t ExpertParallelMoe::bytes() const {
  const auto b = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  return b(probs_) + b(w_) + b(idx_) + b(order_) + b(send_rows_) + b(recv_rows_by_rank_) +
         b(xr_) + b(gu_) + b(h_) + b(y_) + b(er_) + b(ys_) + b(tokens_) + b(prob_sum_);
}

void ExpertParallelMoe::exchange(const float* send, float* recv, int64_t width, bool reverse) {
  const size_t P = static_cast<size_t>(group_.size());
  const std::vector<size_t>& out_rows = reverse ? recv_rows_by_rank_ : send_rows_;
  const std::vector<size_t>& in_rows = reverse ? send_rows_ : recv_rows_by_rank_;
  std::vector<size_t> sc(P), so(P), rc(P), ro(P);  // [P] elements and offsets
  size_t s_at = 0, r_at = 0;
  for (size_t p = 0; p < P; ++p) {
    sc[p] = out_rows[p] * static_cast<size_t>(width);
    so[p] = s_at;
    s_at += sc[p];
    rc[p] = in_rows[p] * static_cast<size_t>(width);
    ro[p] = r_at;
    r_at += rc[p];
  }
  group_.all_to_all(send, sc, so, recv, rc, ro, DType::kF32);
}

void ExpertParallelMoe::forward(float* out, const float* x, const float* router,
                                const float* gate_up, const float* down, int64_t N,
                                const float* router_bias,
                                const kernels::cpu::ExpertExtras<float>& extra) {
  const int64_t S = N * k_, P = group_.size();
  N_ = N;
  // Route this rank's tokens.
  std::vector<float> logits(static_cast<size_t>(N * E_));  // [N, E]
  fit(probs_, static_cast<size_t>(N * E_));
  fit(w_, static_cast<size_t>(S));
  fit(idx_, static_cast<size_t>(S));
  cpu::moe_router_logits(logits.data(), x, router, N, C_, E_, router_bias);
  cpu::moe_route(probs_.data(), idx_.data(), w_.data(), logits.data(), N, E_, k_,
                 routing_.renormalise, routing_.topk_softmax);
  cpu::moe_aux_accumulate(tokens_.data(), prob_sum_.data(), probs_.data(), idx_.data(), N, E_, k_);

  // Slots by destination rank (then slot order): the dispatch order.
  send_rows_.assign(static_cast<size_t>(P), 0);
  for (int64_t s = 0; s < S; ++s) ++send_rows_[static_cast<size_t>(idx_[s] / local_)];
  fit(order_, static_cast<size_t>(S));
  std::vector<size_t> at(static_cast<size_t>(P), 0);  // [P] next position per destination
  for (size_t p = 1; p < at.size(); ++p) at[p] = at[p - 1] + send_rows_[p - 1];
  for (int64_t s = 0; s < S; ++s) order_[at[static_cast<size_t>(idx_[s] / local_)]++] = s;

  // How many rows come from each rank.
  std::vector<size_t> one(static_cast<size_t>(P), 1), offs(static_cast<size_t>(P));
  for (size_t p = 0; p < offs.size(); ++p) offs[p] = p;
  std::vector<int64_t> mine(send_rows_.begin(), send_rows_.end()), theirs(static_cast<size_t>(P));
  group_.all_to_all(mine.data(), one, offs, theirs.data(), one, offs, DType::kI64);
  recv_rows_by_rank_.assign(theirs.begin(), theirs.end());
  recv_rows_ = 0;
  for (const int64_t r : theirs) recv_rows_ += r;
  const int64_t R = recv_rows_;

  // Dispatch: each row's local expert, then the rows.
  std::vector<float> eid_send(static_cast<size_t>(S)), eid_recv(static_cast<size_t>(R));  // [S], [R]
  std::vector<float> xs(static_cast<size_t>(S * C_));                                     // [S, C]
  for (int64_t q = 0; q < S; ++q) {
    const int64_t s = order_[static_cast<size_t>(q)];
    eid_send[static_cast<size_t>(q)] = static_cast<float>(idx_[s] % local_);  // exact in fp32
    std::copy_n(x + (s / k_) * C_, C_, xs.data() + q * C_);
  }
  exchange(eid_send.data(), eid_recv.data(), 1, false);
  fit(xr_, static_cast<size_t>(R * C_));
  exchange(xs.data(), xr_.data(), C_, false);

  // This rank's experts on the rows they received (one choice per row, weight 1).
  fit(er_, static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) er_[static_cast<size_t>(r)] = static_cast<int32_t>(eid_recv[static_cast<size_t>(r)]);
  const std::vector<float> ones(static_cast<size_t>(R), 1.0f);  // [R]
  std::vector<float> yr(static_cast<size_t>(R * C_));             // [R, C]
  fit(gu_, static_cast<size_t>(R * 2 * I_));
  fit(h_, static_cast<size_t>(R * I_));
  fit(y_, static_cast<size_t>(R * C_));
  cpu::moe_experts_forward(yr.data(), gu_.data(), h_.data(), y_.data(), xr_.data(), gate_up, down,
                           er_.data(), ones.data(), R, C_, I_, local_, 1, extra);

  // Combine: the outputs back, weighted per token in choice order.
  fit(ys_, static_cast<size_t>(S * C_));
  exchange(y_.data(), ys_.data(), C_, true);
  std::vector<int64_t> q_of(static_cast<size_t>(S));  // [S] slot -> position in order_
  for (int64_t q = 0; q < S; ++q) q_of[static_cast<size_t>(order_[static_cast<size_t>(q)])] = q;
  std::fill_n(out, N * C_, 0.0f);
  for (int64_t s = 0; s < S; ++s) {
    const float* yq = ys_.data() + q_of[static_cast<size_t>(s)] * C_;
    float* o = out + (s / k_) * C_;
    for (int64_t c = 0; c < C_; ++c) o[c] += w_[static_cast<size_t>(s)] * yq[c];
  }
}

void ExpertParallelMoe::backward(float* dx, float* drouter, float* dgate_up, float* ddown,
                                 const float* dout, const float* x, const float* router,
                                 const float* gate_up, const float* down, const float* dprob,
                                 float* drouter_bias,
                                 const kernels::cpu::ExpertExtras<float>& extra) {
  const int64_t N = N_, S = N * k_, R = recv_rows_;
  // The weights' gradient, and each slot's output gradient in dispatch order.
  std::vector<float> dw(static_cast<size_t>(S)), dys(static_cast<size_t>(S * C_));  // [S], [S, C]
  for (int64_t q = 0; q < S; ++q) {
    const int64_t s = order_[static_cast<size_t>(q)];
    const float* d = dout + (s / k_) * C_;
    const float* yq = ys_.data() + q * C_;
    float dot = 0.f;
    for (int64_t c = 0; c < C_; ++c) {
      dot += d[c] * yq[c];
      dys[static_cast<size_t>(q * C_ + c)] = w_[static_cast<size_t>(s)] * d[c];
    }
    dw[static_cast<size_t>(s)] = dot;
  }
  // To the experts' ranks, through the experts, and the input gradient back.
  std::vector<float> dyr(static_cast<size_t>(R * C_)), dxr(static_cast<size_t>(R * C_), 0.f);
  exchange(dys.data(), dyr.data(), C_, false);
  const std::vector<float> ones(static_cast<size_t>(R), 1.0f);
  std::vector<float> unused(static_cast<size_t>(R));  // d loss / d (weight 1) of each row
  cpu::moe_experts_backward(dxr.data(), dgate_up, ddown, unused.data(), dyr.data(), xr_.data(),
                            gate_up, down, er_.data(), ones.data(), gu_.data(), h_.data(),
                            y_.data(), R, C_, I_, local_, 1, extra);
  std::vector<float> dxs(static_cast<size_t>(S * C_));  // [S, C] in dispatch order
  exchange(dxr.data(), dxs.data(), C_, true);
  for (int64_t q = 0; q < S; ++q) {
    const int64_t n = order_[static_cast<size_t>(q)] / k_;
    for (int64_t c = 0; c < C_; ++c) dx[n * C_ + c] += dxs[static_cast<size_t>(q * C_ + c)];
  }
  // The router (with the load-balancing loss's d/dp) and its linear.
  std::vector<float> dlogits(static_cast<size_t>(N * E_));  // [N, E]
  cpu::moe_route_backward(dlogits.data(), dw.data(), dprob, probs_.data(), idx_.data(), w_.data(),
                          N, E_, k_, routing_.renormalise, routing_.topk_softmax);
  cpu::linear_backward(dx, drouter, dlogits.data(), x, router, N, C_, E_);
  if (drouter_bias) cpu::bias_backward(drouter_bias, dlogits.data(), N, E_);
}

}  // namespace zt::model
