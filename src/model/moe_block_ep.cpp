// The mixture-of-experts MLP of a block under expert parallelism (Model::set_expert_group,
// docs/zero.md "Expert parallelism"): the unit holds this rank's experts only
// (ParamLayout::expert_slice), and each block's ExpertParallelMoe (moe_parallel.hpp)
// routes this rank's tokens, dispatches them to the experts' ranks and combines the
// results by all_to_all over the expert group, forward and backward (with gpt-oss's router
// bias, top-k softmax, experts' biases and clamped SwiGLU; Qwen's expert width and top-k
// weights with or without renormalisation). qwen2_moe's shared expert and its gate are
// replicated like attention: every rank computes them on its own tokens, no exchange
// (shared_expert.cpp). Dense layers (mlp_only_layers) never come here: block.cpp runs
// their MLP. moe_block.cpp calls these in place of the single-rank block when a group is
// set. fp32 only.
#include <algorithm>
#include <type_traits>

#include "model_impl.hpp"

namespace zt::model {

template <class R>
void Model<R>::Impl::moe_forward_ep(int l, const R* p, R* x_out, BlockActs<R>& a, int64_t N) {
  if constexpr (std::is_same_v<R, float>) {
    const BlockOffsets& o = layout.block_offsets(l);
    ExpertParallelMoe& m = ep_for(l, a);
    std::fill(m.tokens().begin(), m.tokens().end(), 0.0);  // this forward's statistics only
    std::fill(m.prob_sum().begin(), m.prob_sum().end(), 0.0);
    R* out = x_out;
    if (!out) {  // recompute: the layer keeps what its backward needs, the sum is discarded
      moe_out.ensure(N * cfg.hidden);
      out = moe_out.data();
    }
    m.forward(out, a.xn2.data(), p + o.router, p + o.experts_gate_up, p + o.experts_down, N,
              o.router_bias >= 0 ? p + o.router_bias : nullptr,
              expert_extras(layout.block_unit(l), p));
    if (cfg.shared_expert()) shared_expert_forward(l, p, out, a, N);
    if (count_router) {
      router.rows += static_cast<double>(N);
      for (size_t e = 0; e < m.tokens().size(); ++e) {
        router.tokens[e] += m.tokens()[e];
        prob_sum[e] += m.prob_sum()[e];
      }
    }
    if (x_out) cpu::residual_forward(x_out, a.x_mid.data(), x_out, N * cfg.hidden);
  } else {
    (void)l, (void)p, (void)x_out, (void)a, (void)N;
    throw std::logic_error("expert parallelism on Model<double> (set_expert_group refuses it)");
  }
}

template <class R>
void Model<R>::Impl::moe_backward_ep(int u, const R* p, BlockActs<R>& a, int64_t N) {
  if constexpr (std::is_same_v<R, float>) {
    const BlockOffsets& o = layout.block_offsets(layout.unit(u).layer);
    ExpertParallelMoe& m = ep_for(layout.unit(u).layer, a);
    std::fill_n(dxn.data(), N * cfg.hidden, R(0));
    m.backward(dxn.data(), base_grad(u, o.router), base_grad(u, o.experts_gate_up),
               base_grad(u, o.experts_down), dres.data(), a.xn2.data(), p + o.router,
               p + o.experts_gate_up, p + o.experts_down,
               cfg.router_aux_loss ? aux_dprob.data() : static_cast<const R*>(nullptr),
               o.router_bias >= 0 ? base_grad(u, o.router_bias) : nullptr,
               expert_extras(u, p, /*grads=*/true));
    if (cfg.shared_expert()) shared_expert_backward(u, p, a, N);
  } else {
    (void)u, (void)p, (void)a, (void)N;
    throw std::logic_error("expert parallelism on Model<double> (set_expert_group refuses it)");
  }
}

template <class R>
void Model<R>::set_expert_group(comm::Comm* group) {
  Impl& m = *impl_;
  m.ep.clear();
  m.expert_group = nullptr;
  if (!group) return;
  const ParamLayout& l = m.layout;
  if constexpr (!std::is_same_v<R, float>)
    throw InputError("expert parallelism on a float64 model", "the expert exchanges move fp32: use Model<float>");
  if (!m.cfg.moe() || l.expert_parts() != group->size() ||
      l.first_expert() != m.cfg.experts / group->size() * group->rank())
    throw InputError(strf("an expert group of %d ranks (rank %d) for a model whose layout holds %s",
                          group->size(), group->rank(),
                          m.cfg.moe() ? strf("experts from %lld of %d slices",
                                             static_cast<long long>(l.first_expert()),
                                             l.expert_parts()).c_str()
                                      : "no experts"),
                     "build the model on ParamLayout::expert_slice(cfg, group size, group rank)");
  check_expert_parallel_block(m.cfg, group->size());
  if (m.lora.bound()) refuse_expert_parallel_lora(group->size());
  for (int64_t b = 0; b <= m.cfg.layers; ++b)  // every layer's, and the one beside `shared`
    m.ep.push_back(std::make_unique<ExpertParallelMoe>(
        *group, m.cfg.hidden, m.cfg.expert_width(), m.cfg.experts, m.cfg.experts_per_token,
        ExpertRouting{m.cfg.norm_topk_prob, m.cfg.topk_softmax()}));
  m.expert_group = group;
  m.shared.drop_routed();  // allocated by the constructor; the layers keep their own rows
  for (auto& a : m.saved) a.drop_routed();
}

#define ZT_MOE_BLOCK_EP_INSTANTIATE(R)                                                   \
  template void Model<R>::Impl::moe_forward_ep(int, const R*, R*, BlockActs<R>&, int64_t); \
  template void Model<R>::Impl::moe_backward_ep(int, const R*, BlockActs<R>&, int64_t);    \
  template void Model<R>::set_expert_group(comm::Comm*);
ZT_MOE_BLOCK_EP_INSTANTIATE(float)
ZT_MOE_BLOCK_EP_INSTANTIATE(double)
#undef ZT_MOE_BLOCK_EP_INSTANTIATE

}  // namespace zt::model
