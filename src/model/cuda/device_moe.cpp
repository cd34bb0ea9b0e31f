// The mixture-of-experts MLP of a decoder block on the GPU (Mixtral's and Qwen's;
// Config::moe_layer(l)): the CUDA twin of src/model/moe_block.cpp and shared_expert.cpp
// over the kernels of zt/kernels/cuda/moe.hpp. The
// router (mlp.gate) is a plain linear, its softmax and top-k run a warp per token, the
// routed rows are permuted so each expert's are contiguous (the plan), every expert is
// three cuBLASLt GEMMs on its rows, and the weighted combine writes the block's MLP output
// into `delta` (the pending residual add, as the dense down projection does). The GEMM
// sizes (rows per expert) are needed on the host: the block waits once for the plan's copy
// of them (comm::wait_stream, the polled wait), in its forward and in its recompute.
//
// The load-balancing loss (router_aux_loss, as MixtralForCausalLM with
// output_router_logits): every block of forward_trunk_and_norm adds its tokens per expert
// (on the host, from the plan's ranges) and its probability sums (on the device); the
// backward's d (coef aux) / d p needs only the tokens, so it is uploaded right after the
// trunk, and the value, which needs the sums, is formed after the pass's last wait.
// Device ties: the lower expert first (zt/kernels/cuda/moe.hpp); the CPU model breaks
// exact ties as torch's CPU topk does. Under expert parallelism (set_expert_group) the
// router, the plan and the statistics are these; the experts' part runs over the group
// (device_moe_ep.cpp; every block: gpt-oss's experts with the same expert_extras over the
// rank's slice of their biases, Qwen's expert width and weights; the shared expert and the
// dense layers stay on each rank, no exchange).
//
// Qwen's and gpt-oss's blocks differ from Mixtral's by a small table, read from the config
// where they apply, not by a copy of the block:
//   norm_topk_prob = false  the weights are the chosen probabilities (moe_route's and
//                           moe_route_backward's renormalise flag)
//   expert_width()          the experts' I_e (moe_intermediate) apart from intermediate
//   moe_layer(l)            dense layers among MoE ones (device_block.cpp's dense MLP;
//                           each layer's block_offsets(l))
//   shared_expert()         qwen2_moe: a SwiGLU of width S on every token times
//                           sigmoid(shared_expert_gate . xn2), added to the routed sum
//                           (shared_expert_forward / _backward below)
//   router_bias()           gpt-oss: the router's logits + mlp.router.bias (bias_forward)
//   topk_softmax()          gpt-oss: the k largest logits, a softmax over them
//   expert_bias(), swiglu_limit  gpt-oss: the experts' biases and clamped SwiGLU
//                           (expert_extras: kernels::cuda::MoeExpertExtras)
#include <algorithm>

#include "device_model_impl.hpp"
#include "zt/comm/device_wait.hpp"

namespace zt::model {

static_assert(kc::kMoeMaxExperts == Config::kMaxDeviceExperts,
              "Config::validate_for_device refuses the experts the router cannot take");

template <class T, class G>
void DeviceModel<T, G>::Impl::moe_ensure(const DeviceMoeSizes& z) {
  if (!cfg.moe()) return;
  const int64_t E = cfg.experts;
  const int64_t S = static_cast<int64_t>(z.dw);
  if (static_cast<int64_t>(z.plan) != kc::moe_plan_scratch(S, E))
    throw std::logic_error("DeviceMoeSizes::plan differs from kernels::cuda::moe_plan_scratch");
  rlogits = kc::DeviceBuffer<T>(z.rlogits, "the MoE router logits");
  moe_rows = kc::DeviceBuffer<T>(z.rows, "the MoE backward rows");
  moe_dh = kc::DeviceBuffer<T>(z.dh, "the MoE backward dh");
  moe_dw = kc::DeviceBuffer<float>(z.dw, "the MoE routing weights' gradient");
  aux_dprob = kc::DeviceBuffer<float>(z.dprob, "the MoE aux loss's gradient");
  router_sums = kc::DeviceBuffer<double>(z.sums, "the MoE router sums");
  plan_scratch = kc::DeviceBuffer<int32_t>(z.plan, "the MoE plan scratch");
  if (!moe_host.offsets.data()) {  // E is fixed: once
    const size_t e = static_cast<size_t>(E);
    moe_host.offsets = kc::PinnedBuffer<int32_t>(e + 1);
    moe_host.prob_sum = kc::PinnedBuffer<double>(e);
    moe_host.dprob = kc::PinnedBuffer<float>(e);
  }
}

// gpt-oss's expert biases and clamped SwiGLU for the kernels (defaults: Mixtral's), as
// the CPU model's expert_extras (its gradients: bias_grad).
template <class T, class G>
kc::MoeExpertExtras<T> DeviceModel<T, G>::Impl::expert_extras(const T* p, const BlockOffsets& o) {
  kc::MoeExpertExtras<T> x;
  x.swiglu_limit = cfg.swiglu_limit;
  x.swiglu_alpha = cfg.swiglu_alpha;
  if (o.experts_gate_up_bias >= 0) {
    x.gate_up_bias = p + o.experts_gate_up_bias;
    x.down_bias = p + o.experts_down_bias;
  }
  return x;
}

template <class T, class G>
void DeviceModel<T, G>::Impl::moe_forward(int l, const T* p, detail::DeviceBlockActs<T>& a,
                                          int64_t N) {
  // (no adapters inside the experts: lora.cpp refuses gate/up/down targets on them)
  const int64_t C = cfg.hidden, I = cfg.expert_width(), E = cfg.experts, K = cfg.experts_per_token;
  const BlockOffsets& o = layout.block_offsets(l);
  // rlogits [N, E] = xn2 [N, C] router^T (router [E, C]); the choice: rprobs [N, E],
  // ridx [N, k], rw [N, k]
  kc::linear_forward<T>(gemm, rlogits.data(), a.xn2.data(), p + o.router, N, C, E, stream);
  if (o.router_bias >= 0) kc::bias_forward<T>(rlogits.data(), p + o.router_bias, N, E, stream);
  kc::moe_route<T>(a.rprobs.data(), a.ridx.data(), a.rw.data(), rlogits.data(), N, E, K, stream,
                   cfg.norm_topk_prob, cfg.topk_softmax());
  // The plan: perm, pos [S] and the expert ranges, copied to pinned host memory; the
  // block's one wait, for the GEMM sizes.
  kc::MoePlan plan;
  plan.perm = a.perm.data();
  plan.pos = a.pos.data();
  int32_t* host_offsets = moe_host.offsets.data();  // [E + 1]
  kc::moe_plan(plan, plan_scratch.data(), host_offsets, a.ridx.data(), N, E, K, stream);
  comm::wait_stream(stream, "the mixture-of-experts plan (the experts' GEMM sizes)");
  kc::moe_plan_ready(plan, host_offsets, E);
  a.offsets = plan.offsets;
  if (count_router) {  // the tokens on the host (the plan's ranges), the sums on the device
    router.rows += static_cast<double>(N);
    for (int64_t e = 0; e < E; ++e)
      router.tokens[static_cast<size_t>(e)] += static_cast<double>(a.offsets[e + 1] - a.offsets[e]);
    kc::moe_aux_accumulate(router_sums.data(), router_sums.data() + E, a.rprobs.data(), plan, N, E,
                           stream);
  }
  // delta [N, C] = sum_j rw[n, j] expert_{ridx[n, j]}(xn2[n]); xp, mg, mu, mh, my kept.
  // Expert parallelism: the experts live on the group's ranks (device_moe_ep.cpp); the
  // shared expert is replicated and runs here on this rank's tokens either way.
  if (expert_group)
    ep_experts_forward(p, o, a, N);
  else
    kc::moe_experts_forward<T>(gemm, delta.data(), a.experts(), a.xn2.data(),
                               p + o.experts_gate_up, p + o.experts_down, plan, a.rw.data(), N,
                               C, I, E, K, stream, expert_extras(p, o));
  if (cfg.shared_expert()) shared_expert_forward(p, o, a, N);
}

// delta [N, C] += sigmoid(xn2 g) * down(silu(gate xn2) * up xn2): its SwiGLU in a.gate,
// a.up, a.h [N, S], its output in a.sy, the gate's sigmoid in a.sg (as shared_expert.cpp).
template <class T, class G>
void DeviceModel<T, G>::Impl::shared_expert_forward(const T* p, const BlockOffsets& o,
                                                    detail::DeviceBlockActs<T>& a, int64_t N) {
  const int64_t C = cfg.hidden, S = cfg.shared_expert_intermediate;
  kc::linear_forward<T>(gemm, a.gate.data(), a.xn2.data(), p + o.shared_gate, N, C, S, stream);
  kc::linear_forward<T>(gemm, a.up.data(), a.xn2.data(), p + o.shared_up, N, C, S, stream);
  kc::swiglu_forward<T>(a.h.data(), a.gate.data(), a.up.data(), N * S, stream);
  kc::linear_forward<T>(gemm, a.sy.data(), a.h.data(), p + o.shared_down, N, S, C, stream);
  kc::moe_shared_gate_forward<T>(delta.data(), a.sg.data(), a.sy.data(), a.xn2.data(),
                                 p + o.shared_expert_gate, N, C, stream);
}

// dres [N, C] (d loss / d delta) -> dxn += d loss / d xn2 through the shared expert and its
// gate; its weights' gradients into unit u's (nullptr: frozen). Scratch: moe_rows holds d
// sy [N, C], moe_dw d logit [N] (both free once the router's backward has run), dh, dgate,
// dup [N, S].
template <class T, class G>
void DeviceModel<T, G>::Impl::shared_expert_backward(int u, const T* p, const BlockOffsets& o,
                                                     detail::DeviceBlockActs<T>& a, int64_t N) {
  const int64_t C = cfg.hidden, S = cfg.shared_expert_intermediate;
  kc::moe_shared_gate_backward<T, G>(moe_rows.data(), moe_dw.data(), dxn.data(),
                                     base_grad(u, o.shared_expert_gate), dres.data(),
                                     a.sy.data(), a.sg.data(), a.xn2.data(),
                                     p + o.shared_expert_gate, N, C, stream);
  kc::linear_backward<T, G>(gemm, dh.data(), base_grad(u, o.shared_down), moe_rows.data(),
                            a.h.data(), p + o.shared_down, N, S, C, /*accumulate_dx=*/false,
                            stream);
  kc::swiglu_backward<T>(dgate.data(), dup.data(), dh.data(), a.gate.data(), a.up.data(), N * S,
                         /*accumulate=*/false, stream);
  kc::linear_backward<T, G>(gemm, dxn.data(), base_grad(u, o.shared_gate), dgate.data(),
                            a.xn2.data(), p + o.shared_gate, N, C, S, /*accumulate_dx=*/true,
                            stream);
  kc::linear_backward<T, G>(gemm, dxn.data(), base_grad(u, o.shared_up), dup.data(),
                            a.xn2.data(), p + o.shared_up, N, C, S, /*accumulate_dx=*/true,
                            stream);
}

template <class T, class G>
void DeviceModel<T, G>::Impl::moe_backward(int l, int u, const T* p,
                                           detail::DeviceBlockActs<T>& a, int64_t N) {
  const int64_t C = cfg.hidden, I = cfg.expert_width(), E = cfg.experts, K = cfg.experts_per_token;
  const BlockOffsets& o = layout.block_offsets(l);
  if (static_cast<int64_t>(a.offsets.size()) != E + 1)
    throw std::logic_error("DeviceModel: a MoE block's backward without its forward's plan");
  const kc::MoePlan plan = a.plan();
  // dxn [N, C] written (the experts' dx), moe_dw [S] written; the experts' weight gradients
  // accumulated (nullptr: frozen); a.mg, a.mu overwritten with their gradients.
  // (expert parallelism: through the experts' ranks, device_moe_ep.cpp)
  if (expert_group)
    ep_experts_backward(u, p, o, a, N);
  else
    kc::moe_experts_backward<T, G>(gemm, dxn.data(), base_grad(u, o.experts_gate_up),
                                   base_grad(u, o.experts_down), moe_dw.data(), dres.data(),
                                   a.experts(), p + o.experts_gate_up, p + o.experts_down, plan,
                                   a.rw.data(), moe_rows.data(), moe_dh.data(), N, C, I, E, K,
                                   /*accumulate_dx=*/false, stream, expert_extras(p, o),
                                   bias_grad(u, o.experts_gate_up_bias),
                                   bias_grad(u, o.experts_down_bias));
  // rlogits [N, E] := d loss / d logits (the weights' gradient + the aux loss's d/dp)
  kc::moe_route_backward<T>(rlogits.data(), moe_dw.data(),
                            cfg.router_aux_loss ? aux_dprob.data() : nullptr, a.rprobs.data(),
                            a.ridx.data(), a.rw.data(), N, E, K, stream, cfg.norm_topk_prob,
                            cfg.topk_softmax());
  if (G* gb = bias_grad(u, o.router_bias))
    kc::bias_backward<T, G>(gb, rlogits.data(), N, E, stream);
  kc::linear_backward<T, G>(gemm, dxn.data(), base_grad(u, o.router), rlogits.data(),
                            a.xn2.data(), p + o.router, N, C, E, /*accumulate_dx=*/true, stream);
  if (cfg.shared_expert()) shared_expert_backward(u, p, o, a, N);
}

template <class T, class G>
void DeviceModel<T, G>::Impl::moe_stats_begin() {
  router = RouterStats{};
  if (!cfg.moe()) return;
  router.tokens.assign(static_cast<size_t>(cfg.experts), 0.0);
  ZT_CUDA_CHECK(cudaMemsetAsync(router_sums.data(), 0, router_sums.bytes(), stream));
  count_router = true;
}

template <class T, class G>
void DeviceModel<T, G>::Impl::moe_stats_end() {
  if (!count_router) return;
  count_router = false;
  // prob_sum [E] (router_sums' second half) to pinned host memory, read after the pass's
  // last wait (moe_aux_term)
  ZT_CUDA_CHECK(cudaMemcpyAsync(moe_host.prob_sum.data(), router_sums.data() + cfg.experts,
                                static_cast<size_t>(cfg.experts) * sizeof(double),
                                cudaMemcpyDeviceToHost, stream));
}

template <class T, class G>
void DeviceModel<T, G>::Impl::moe_aux_begin(double grad_scale) {
  if (!cfg.moe() || !cfg.router_aux_loss) return;
  const int64_t E = cfg.experts;
  // dprob [E] = coef grad_scale E T_e / R^2 (the same for every row of every block); the
  // pinned copy is rewritten only after the pass's last wait, so the upload has read it.
  kernels::cpu::moe_aux_dprob<float>(moe_host.dprob.data(), router.tokens.data(), router.rows, E,
                                     cfg.router_aux_loss_coef * grad_scale);
  ZT_CUDA_CHECK(cudaMemcpyAsync(aux_dprob.data(), moe_host.dprob.data(),
                                static_cast<size_t>(E) * sizeof(float), cudaMemcpyHostToDevice,
                                stream));
}

template <class T, class G>
double DeviceModel<T, G>::Impl::moe_aux_term() {
  if (!cfg.moe()) return 0.0;
  router.aux = kernels::cpu::moe_aux_loss(router.tokens.data(), moe_host.prob_sum.data(),
                                          router.rows, cfg.experts);
  return cfg.router_aux_loss ? cfg.router_aux_loss_coef * router.aux : 0.0;
}

#define ZT_DEVICE_MOE_INSTANTIATE(T, G)                                                       \
  template kc::MoeExpertExtras<T> DeviceModel<T, G>::Impl::expert_extras(const T*,            \
                                                                         const BlockOffsets&); \
  template void DeviceModel<T, G>::Impl::moe_ensure(const DeviceMoeSizes&);                   \
  template void DeviceModel<T, G>::Impl::moe_forward(int, const T*,                           \
                                                     detail::DeviceBlockActs<T>&, int64_t);    \
  template void DeviceModel<T, G>::Impl::moe_backward(int, int, const T*,                     \
                                                      detail::DeviceBlockActs<T>&, int64_t);   \
  template void DeviceModel<T, G>::Impl::moe_stats_begin();                                   \
  template void DeviceModel<T, G>::Impl::moe_stats_end();                                     \
  template void DeviceModel<T, G>::Impl::moe_aux_begin(double);                               \
  template double DeviceModel<T, G>::Impl::moe_aux_term();                                    \
  template void DeviceModel<T, G>::Impl::shared_expert_forward(                               \
      const T*, const BlockOffsets&, detail::DeviceBlockActs<T>&, int64_t);                    \
  template void DeviceModel<T, G>::Impl::shared_expert_backward(                              \
      int, const T*, const BlockOffsets&, detail::DeviceBlockActs<T>&, int64_t);
ZT_DEVICE_MOE_INSTANTIATE(float, float)
ZT_DEVICE_MOE_INSTANTIATE(kc::bf16_t, float)
ZT_DEVICE_MOE_INSTANTIATE(kc::bf16_t, kc::bf16_t)
#undef ZT_DEVICE_MOE_INSTANTIATE

}  // namespace zt::model
