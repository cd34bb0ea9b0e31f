// The mixture-of-experts MLP of a block on CPU (Mixtral's, Qwen's; Config::moe_layer(l)): the router
// (mlp.gate), softmax and top-k with transformers' tie-break, the experts' SwiGLU on their
// gathered tokens, the weighted sum (zt/kernels/moe.hpp), its backward, and the
// load-balancing loss over every block of a forward (transformers'
// load_balancing_loss_func, added with router_aux_loss_coef when router_aux_loss is set,
// as MixtralForCausalLM with output_router_logits). block.cpp calls it in place of the
// dense MLP.
#include <algorithm>
#include <numeric>

#include "model_impl.hpp"

namespace zt::model {

double RouterStats::imbalance() const {
  if (tokens.empty()) return 0.0;
  const double sum = std::accumulate(tokens.begin(), tokens.end(), 0.0);
  if (sum <= 0) return 0.0;
  const double mean = sum / static_cast<double>(tokens.size());
  return *std::max_element(tokens.begin(), tokens.end()) / mean;
}

template <class R>
void Model<R>::Impl::moe_forward(int l, const R* p, R* x_out, BlockActs<R>& a, int64_t N) {
  if (expert_group) return moe_forward_ep(l, p, x_out, a, N);  // moe_block_ep.cpp
  const int64_t C = cfg.hidden, I = cfg.expert_width(), E = cfg.experts, K = cfg.experts_per_token;
  const BlockOffsets& o = layout.block_offsets(l);
  router_logits.ensure(N * E);
  cpu::moe_router_logits(router_logits.data(), a.xn2.data(), p + o.router, N, C, E,
                         o.router_bias >= 0 ? p + o.router_bias : nullptr);
  cpu::moe_route(a.rprobs.data(), a.ridx.data(), a.rw.data(), router_logits.data(), N, E, K,
               cfg.norm_topk_prob, cfg.topk_softmax());
  if (count_router) {
    router.rows += static_cast<double>(N);
    prob_sum.resize(static_cast<size_t>(E), 0.0);
    cpu::moe_aux_accumulate(router.tokens.data(), prob_sum.data(), a.rprobs.data(),
                          a.ridx.data(), N, E, K);
  }
  R* out = x_out;
  if (!out) {  // recompute: the backward needs the saved activations, not the sum
    moe_out.ensure(N * C);
    out = moe_out.data();
  }
  // LoRA on the experts (lora_experts.hpp): the stacks with their adapters merged in.
  cpu::moe_experts_forward(out, a.mgu.data(), a.mh.data(), a.my.data(), a.xn2.data(),
                         lora.expert_weight(l, LoraTarget::kExpertsGateUp, p + o.experts_gate_up),
                         lora.expert_weight(l, LoraTarget::kExpertsDown, p + o.experts_down),
                         a.ridx.data(), a.rw.data(), N, C, I, E, K, expert_extras(layout.block_unit(l), p));
  if (cfg.shared_expert()) shared_expert_forward(l, p, out, a, N);
  if (x_out) cpu::residual_forward(x_out, a.x_mid.data(), x_out, N * C);
}

template <class R>
void Model<R>::Impl::moe_backward(int u, const R* p, BlockActs<R>& a, int64_t N) {
  if (expert_group) return moe_backward_ep(u, p, a, N);  // moe_block_ep.cpp
  const int64_t C = cfg.hidden, I = cfg.expert_width(), E = cfg.experts, K = cfg.experts_per_token;
  const BlockOffsets& o = layout.block_offsets(layout.unit(u).layer);
  dlogits_r.ensure(N * E);
  dw_r.ensure(N * K);
  std::fill_n(dxn.data(), N * C, R(0));
  // With adapters on the experts the kernels see the merged stacks and write d loss / d W'
  // into LoraApply's scratch, which expert_backward turns into the adapters' gradients.
  const int l = layout.unit(u).layer;
  using LT = LoraTarget;
  R* dgu = lora.expert_grad(l, LT::kExpertsGateUp);
  R* ddown = lora.expert_grad(l, LT::kExpertsDown);
  cpu::moe_experts_backward(dxn.data(), dgu ? dgu : base_grad_or_null(u, o.experts_gate_up),
                          ddown ? ddown : base_grad_or_null(u, o.experts_down), dw_r.data(),
                          dres.data(), a.xn2.data(),
                          lora.expert_weight(l, LT::kExpertsGateUp, p + o.experts_gate_up),
                          lora.expert_weight(l, LT::kExpertsDown, p + o.experts_down),
                          a.ridx.data(), a.rw.data(), a.mgu.data(), a.mh.data(), a.my.data(), N,
                          C, I, E, K, expert_extras(u, p, /*grads=*/true));
  lora.expert_backward(l, LT::kExpertsGateUp);
  lora.expert_backward(l, LT::kExpertsDown);
  cpu::moe_route_backward(dlogits_r.data(), dw_r.data(),
                        cfg.router_aux_loss ? aux_dprob.data() : static_cast<const R*>(nullptr),
                        a.rprobs.data(), a.ridx.data(), a.rw.data(), N, E, K, cfg.norm_topk_prob,
                        cfg.topk_softmax());
  cpu::linear_backward(dxn.data(), base_grad_or_null(u, o.router), dlogits_r.data(), a.xn2.data(),
                     p + o.router, N, C, E, /*accumulate_dx=*/true);
  if (R* db = o.router_bias >= 0 ? base_grad_or_null(u, o.router_bias) : nullptr)
    cpu::bias_backward(db, dlogits_r.data(), N, E);
  if (cfg.shared_expert()) shared_expert_backward(u, p, a, N);
}

// gpt-oss's expert biases and clamped SwiGLU for the kernels (defaults: Mixtral's); with
// grads, where the biases' gradients go (nullptr when frozen).
template <class R>
cpu::ExpertExtras<R> Model<R>::Impl::expert_extras(int u, const R* p, bool with_grads) {
  const BlockOffsets& o = layout.block_offsets(layout.unit(u).layer);
  cpu::ExpertExtras<R> x;
  x.swiglu_limit = cfg.swiglu_limit;
  x.swiglu_alpha = cfg.swiglu_alpha;
  if (o.experts_gate_up_bias < 0) return x;
  x.gate_up_bias = p + o.experts_gate_up_bias;
  x.down_bias = p + o.experts_down_bias;
  if (with_grads) {
    x.dgate_up_bias = base_grad_or_null(u, o.experts_gate_up_bias);
    x.ddown_bias = base_grad_or_null(u, o.experts_down_bias);
  }
  return x;
}

template <class R>
void Model<R>::Impl::moe_stats_begin() {
  router = RouterStats{};
  if (!cfg.moe()) return;
  router.tokens.assign(static_cast<size_t>(cfg.experts), 0.0);
  prob_sum.assign(static_cast<size_t>(cfg.experts), 0.0);
  count_router = true;
}

template <class R>
void Model<R>::Impl::moe_stats_end() {
  if (!count_router) return;
  count_router = false;
  router.aux = cpu::moe_aux_loss(router.tokens.data(), prob_sum.data(), router.rows, cfg.experts);
}

template <class R>
double Model<R>::Impl::moe_aux_term(double grad_scale) {
  if (!cfg.moe() || !cfg.router_aux_loss) return 0.0;
  const int64_t E = cfg.experts;
  aux_dprob.ensure(E);
  cpu::moe_aux_dprob(aux_dprob.data(), router.tokens.data(), router.rows, E,
                   cfg.router_aux_loss_coef * grad_scale);
  return cfg.router_aux_loss_coef * router.aux;
}

template <class R>
const RouterStats& Model<R>::router_stats() const {
  return impl_->router;
}

#define ZT_MOE_BLOCK_INSTANTIATE(R)                                                          \
  template void Model<R>::Impl::moe_forward(int, const R*, R*, BlockActs<R>&, int64_t);      \
  template void Model<R>::Impl::moe_backward(int, const R*, BlockActs<R>&, int64_t);         \
  template void Model<R>::Impl::moe_stats_begin();                                           \
  template cpu::ExpertExtras<R> Model<R>::Impl::expert_extras(int, const R*, bool);          \
  template void Model<R>::Impl::moe_stats_end();                                             \
  template double Model<R>::Impl::moe_aux_term(double);                                      \
  template const RouterStats& Model<R>::router_stats() const;
ZT_MOE_BLOCK_INSTANTIATE(float)
ZT_MOE_BLOCK_INSTANTIATE(double)
#undef ZT_MOE_BLOCK_INSTANTIATE

}  // namespace zt::model
