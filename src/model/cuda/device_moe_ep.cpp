// Expert parallelism on the GPU (DeviceModel::set_expert_group; docs/zero.md "Expert
// parallelism"): the semantics of the host's ExpertParallelMoe (model/moe_parallel.hpp) on
// the kernels of zt/kernels/cuda/moe.hpp. The E experts are split over the P ranks of the
// expert group (rank q owns [q L, (q + 1) L), L = E / P; the units hold that slice,
// ParamLayout::expert_slice); every rank routes its own N tokens (device_moe.cpp: the
// router, its statistics and the plan over all E experts are the single-rank block's).
//
// One layer's forward, after the plan (S = N k routed rows, sorted by expert):
//   - the plan sorts by expert and rank q owns a contiguous range of experts, so the
//     expert order IS the dispatch order: rank q's rows are the plan's rows of its
//     experts, their counts per (rank, local expert) known on the host from the plan's
//     one wait; they are exchanged (ep_exchange_counts), and each rank builds the plan of
//     the R rows it will receive on the host (local_expert_plan: each source's rows
//     arrive sorted by local expert) and uploads it;
//   - xs [S, C] = xn2 rows in dispatch order (moe_gather), all_to_all to xr [R, C];
//   - this rank's experts on xr: moe_experts_forward with E = L, k = 1, weights 1 -> yr [R, C];
//   - all_to_all back to ys [S, C] (dispatch order, kept: a.eys), and
//     delta[n] = sum_j w[n, j] ys[pos[n k + j]] (moe_combine).
// The backward mirrors it: dw[s] = dout[n] . ys[pos[s]], dys[pos[s]] = w[s] dout[n]
// (moe_weight_backward); all_to_all; moe_experts_backward on the local plan (this rank's
// experts' gradients, summed over the group's rows); all_to_all back;
// dx[n] = sum_j dxs[pos[n k + j]] (moe_combine, weights 1). The router's backward follows
// in device_moe.cpp. Recompute re-runs the forward's exchanges: every rank of the group
// recomputes the same layers in the same order.
//
// gpt-oss's block: its router's bias and top-k softmax run before the exchange, on every
// rank for its own tokens (device_moe.cpp, as without a group); its experts' biases (the
// slice's [L, 2I] and [L, C]) and clamped SwiGLU run on the rank holding the experts, by
// the same kernels and table (expert_extras), and so do their biases' gradients.
// Qwen's blocks: the experts' width is expert_width() here as without a group; the top-k
// weights (renormalised or not) are the router's, applied in the combine; the shared
// expert and its gate run after the combine on every rank for its own tokens
// (device_moe.cpp), and the dense layers (mlp_only_layers) never reach the exchange.
//
// The exchanges: a group on device memory (NCCL) moves the device buffers directly,
// ordered on the stream (Comm::order_after at set_expert_group, Request::order_before);
// a group on host memory (MPI) goes through pinned buffers (one polled wait for the copy
// down). Each layer call ends with the group's handles waited (ep_settle).
#include <algorithm>
#include <type_traits>

#include "device_model_impl.hpp"
#include "zt/comm/device_wait.hpp"
#include "zt/model/moe_parallel.hpp"

namespace zt::model {

namespace {

template <class X>
constexpr DType dtype_of() {
  return std::is_same_v<X, float> ? DType::kF32 : DType::kBF16;
}

// b holds at least n elements (grown with a quarter's slack: R changes every step).
template <class X>
void grow(kc::DeviceBuffer<X>& b, int64_t n, const char* what) {
  if (static_cast<int64_t>(b.size()) < n) b = kc::DeviceBuffer<X>(static_cast<size_t>(n + n / 4), what);
}
template <class X>
void grow(kc::PinnedBuffer<X>& b, int64_t n) {
  if (static_cast<int64_t>(b.size()) < n) b = kc::PinnedBuffer<X>(static_cast<size_t>(n + n / 4));
}

// Rows to each rank (the plan's rows of its experts) and from each (the received counts).
void rows_per_rank(const std::vector<int64_t>& offsets, const std::vector<int64_t>& received,
                   int64_t P, int64_t L, std::vector<size_t>& out_rows, std::vector<size_t>& in_rows) {
  out_rows.assign(static_cast<size_t>(P), 0);
  in_rows.assign(static_cast<size_t>(P), 0);
  for (int64_t q = 0; q < P; ++q) {
    out_rows[static_cast<size_t>(q)] =
        static_cast<size_t>(offsets[static_cast<size_t>((q + 1) * L)] - offsets[static_cast<size_t>(q * L)]);
    for (int64_t e = 0; e < L; ++e)
      in_rows[static_cast<size_t>(q)] += static_cast<size_t>(received[static_cast<size_t>(q * L + e)]);
  }
}

}  // namespace

template <class T, class G>
void DeviceModel<T, G>::Impl::set_expert_group(comm::Comm* group) {
  ep_settle();
  expert_group = nullptr;
  if (!group) return;
  const int P = group->size();
  if (!cfg.moe() || layout.expert_parts() != P ||
      layout.first_expert() != cfg.experts / P * group->rank())
    throw InputError(strf("an expert group of %d ranks (rank %d) for a GPU model whose layout "
                          "holds %s",
                          P, group->rank(),
                          cfg.moe() ? strf("experts from %lld of %d slices",
                                           static_cast<long long>(layout.first_expert()),
                                           layout.expert_parts()).c_str()
                                    : "no experts"),
                     "build the model on ParamLayout::expert_slice(cfg, group size, group rank)");
  check_expert_parallel_block(cfg, P);
  if (lora.bound()) refuse_expert_parallel_lora(P);
  group->order_after(stream);  // a device group's exchanges wait for the rows they move
  expert_group = group;
}

template <class T, class G>
void DeviceModel<T, G>::Impl::ep_settle() {
  for (comm::Handle& h : ep_pending) h->wait();
  ep_pending.clear();
}

template <class T, class G>
void DeviceModel<T, G>::Impl::ep_exchange(const T* send, const std::vector<size_t>& out_rows,
                                          T* recv, const std::vector<size_t>& in_rows,
                                          int64_t width) {
  comm::Comm& g = *expert_group;
  const size_t P = out_rows.size(), w = static_cast<size_t>(width);
  std::vector<size_t> sc(P), so(P), rc(P), ro(P);  // [P] elements and offsets
  size_t s_at = 0, r_at = 0;
  for (size_t q = 0; q < P; ++q) {
    sc[q] = out_rows[q] * w;
    so[q] = s_at;
    s_at += sc[q];
    rc[q] = in_rows[q] * w;
    ro[q] = r_at;
    r_at += rc[q];
  }
  if (g.memory() == comm::Memory::kDevice) {
    comm::Handle h = g.iall_to_all(send, sc, so, recv, rc, ro, dtype_of<T>());
    if (h->order_before(stream))
      ep_pending.push_back(std::move(h));
    else
      h->wait();
    return;
  }
  // A host group: down to pinned memory (the polled wait also covers the last exchange's
  // copy up from ep_stage_recv, which may then be regrown), across, and up.
  const size_t sb = s_at * sizeof(T), rb = r_at * sizeof(T);
  grow(ep_stage_send, static_cast<int64_t>(sb));
  if (sb > 0)
    ZT_CUDA_CHECK(cudaMemcpyAsync(ep_stage_send.data(), send, sb, cudaMemcpyDeviceToHost, stream));
  comm::wait_stream(stream, "expert parallelism: the rows to exchange, copied to the host");
  grow(ep_stage_recv, static_cast<int64_t>(rb));
  g.all_to_all(ep_stage_send.data(), sc, so, ep_stage_recv.data(), rc, ro, dtype_of<T>());
  if (rb > 0)
    ZT_CUDA_CHECK(cudaMemcpyAsync(recv, ep_stage_recv.data(), rb, cudaMemcpyHostToDevice, stream));
}

template <class T, class G>
std::vector<int64_t> DeviceModel<T, G>::Impl::ep_exchange_counts(const std::vector<int64_t>& send) {
  comm::Comm& g = *expert_group;
  const size_t P = static_cast<size_t>(g.size()), PL = send.size(), L = PL / P;
  std::vector<size_t> n(P, L), off(P);  // [P] L counts to and from each rank
  for (size_t q = 0; q < P; ++q) off[q] = q * L;
  std::vector<int64_t> got(PL);
  if (g.memory() == comm::Memory::kHost) {
    g.all_to_all(send.data(), n, off, got.data(), n, off, DType::kI64);
    return got;
  }
  // A device group: up, across, down ([2 P L]: sent | received), one polled wait.
  grow(ep_counts, static_cast<int64_t>(2 * PL), "the expert-parallel counts");
  grow(ep_counts_h, static_cast<int64_t>(2 * PL));
  std::copy(send.begin(), send.end(), ep_counts_h.data());
  ZT_CUDA_CHECK(cudaMemcpyAsync(ep_counts.data(), ep_counts_h.data(), PL * sizeof(int64_t),
                                cudaMemcpyHostToDevice, stream));
  comm::Handle h = g.iall_to_all(ep_counts.data(), n, off, ep_counts.data() + PL, n, off, DType::kI64);
  if (h->order_before(stream)) ep_pending.push_back(std::move(h));
  else h->wait();
  ZT_CUDA_CHECK(cudaMemcpyAsync(ep_counts_h.data() + PL, ep_counts.data() + PL,
                                PL * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  comm::wait_stream(stream, "expert parallelism: the rows each rank sends to this rank's experts");
  ep_settle();
  std::copy_n(ep_counts_h.data() + PL, PL, got.begin());
  return got;
}

template <class T, class G>
void DeviceModel<T, G>::Impl::ep_experts_forward(const T* p, const BlockOffsets& o,
                                                 detail::DeviceBlockActs<T>& a, int64_t N) {
  const int64_t C = cfg.hidden, I = cfg.expert_width(), E = cfg.experts, K = cfg.experts_per_token;
  const int64_t P = expert_group->size(), L = E / P, S = N * K;
  // The counts: the plan's rows of each expert, in (rank, local expert) order.
  std::vector<int64_t> send(static_cast<size_t>(E));  // [P, L]
  for (int64_t e = 0; e < E; ++e)
    send[static_cast<size_t>(e)] = a.offsets[static_cast<size_t>(e + 1)] - a.offsets[static_cast<size_t>(e)];
  a.ecounts = ep_exchange_counts(send);
  LocalExpertPlan lp = local_expert_plan(a.ecounts, P, L);
  const int64_t R = static_cast<int64_t>(lp.perm.size());
  a.eoffsets = std::move(lp.offsets);
  std::vector<size_t> out_rows, in_rows;
  rows_per_rank(a.offsets, a.ecounts, P, L, out_rows, in_rows);
  // Buffers for R received rows (the single-rank sizes hold S).
  const int64_t rows = std::max(S, R);
  grow(ep_send, rows * C, "the expert-parallel rows sent");
  grow(ep_recv, rows * C, "the expert-parallel rows received");
  grow(a.xp, R * C, "the MoE permuted rows");
  grow(a.my, R * C, "the MoE expert outputs");
  grow(a.mg, R * I, "the MoE gate pre-activations");
  grow(a.mu, R * I, "the MoE up pre-activations");
  grow(a.mh, R * I, "the MoE hidden rows");
  grow(a.eperm, R, "the expert-parallel plan");
  grow(a.epos, R, "the expert-parallel plan");
  grow(a.eys, S * C, "the expert-parallel outputs");
  // The local plan up (its pinned source is rewritten only after a later polled wait).
  grow(ep_plan_h, 2 * R);
  if (R > 0) {
    std::copy(lp.perm.begin(), lp.perm.end(), ep_plan_h.data());
    std::copy(lp.pos.begin(), lp.pos.end(), ep_plan_h.data() + R);
    const size_t b = static_cast<size_t>(R) * sizeof(int32_t);
    ZT_CUDA_CHECK(cudaMemcpyAsync(a.eperm.data(), ep_plan_h.data(), b, cudaMemcpyHostToDevice, stream));
    ZT_CUDA_CHECK(cudaMemcpyAsync(a.epos.data(), ep_plan_h.data() + R, b, cudaMemcpyHostToDevice, stream));
  }
  // Dispatch: xs [S, C] (ep_send) = xn2 rows in dispatch order -> xr [R, C] (ep_recv).
  kc::moe_gather<T>(ep_send.data(), a.xn2.data(), a.perm.data(), S, C, K, stream);
  ep_exchange(ep_send.data(), out_rows, ep_recv.data(), in_rows, C);
  // This rank's experts: yr [R, C] (ep_send) = expert(xr), weight 1; xp, mg, mu, mh, my kept
  // (gpt-oss: their biases, the slice's [L, 2I] and [L, C], and the clamped SwiGLU).
  if (R > 0)
    kc::moe_experts_forward<T>(gemm, ep_send.data(), a.experts(), ep_recv.data(),
                               p + o.experts_gate_up, p + o.experts_down, a.local_plan(),
                               /*w=*/nullptr, R, C, I, L, 1, stream, expert_extras(p, o));
  // Back: ys [S, C] (a.eys) in dispatch order; delta [N, C] = sum_j rw[n, j] ys[pos[n k + j]].
  ep_exchange(ep_send.data(), in_rows, a.eys.data(), out_rows, C);
  kc::moe_combine<T>(delta.data(), a.eys.data(), a.pos.data(), a.rw.data(), N, C, K,
                     /*accumulate=*/false, stream);
  ep_settle();
}

template <class T, class G>
void DeviceModel<T, G>::Impl::ep_experts_backward(int u, const T* p, const BlockOffsets& o,
                                                  detail::DeviceBlockActs<T>& a, int64_t N) {
  const int64_t C = cfg.hidden, I = cfg.expert_width(), E = cfg.experts, K = cfg.experts_per_token;
  const int64_t P = expert_group->size(), L = E / P, S = N * K;
  if (static_cast<int64_t>(a.eoffsets.size()) != L + 1 ||
      static_cast<int64_t>(a.ecounts.size()) != E)
    throw std::logic_error("DeviceModel: an expert-parallel backward without its forward's plan");
  const int64_t R = a.eoffsets[static_cast<size_t>(L)];
  std::vector<size_t> out_rows, in_rows;
  rows_per_rank(a.offsets, a.ecounts, P, L, out_rows, in_rows);
  const int64_t rows = std::max(S, R);
  grow(ep_send, rows * C, "the expert-parallel rows sent");
  grow(ep_recv, rows * C, "the expert-parallel rows received");
  grow(moe_rows, R * C, "the MoE backward rows");
  grow(moe_dh, R * I, "the MoE backward dh");
  grow(ep_dw, R, "the expert-parallel weights' gradient");
  // moe_dw [S] = dres[n] . ys[pos[s]]; dys [S, C] (ep_send): dys[pos[s]] = rw[s] dres[n]
  kc::moe_weight_backward<T>(moe_dw.data(), ep_send.data(), dres.data(), a.eys.data(),
                             a.pos.data(), a.rw.data(), S, C, K, stream);
  // -> dyr [R, C] (ep_recv); this rank's experts: dxr [R, C] (ep_send) written, their
  // weights' (and biases') gradients accumulated (over the rows of every rank of the group).
  ep_exchange(ep_send.data(), out_rows, ep_recv.data(), in_rows, C);
  if (R > 0)
    kc::moe_experts_backward<T, G>(gemm, ep_send.data(), base_grad(u, o.experts_gate_up),
                                   base_grad(u, o.experts_down), ep_dw.data(), ep_recv.data(),
                                   a.experts(), p + o.experts_gate_up, p + o.experts_down,
                                   a.local_plan(), /*w=*/nullptr, moe_rows.data(),
                                   moe_dh.data(), R, C, I, L, 1, /*accumulate_dx=*/false, stream,
                                   expert_extras(p, o), bias_grad(u, o.experts_gate_up_bias),
                                   bias_grad(u, o.experts_down_bias));
  // Back: dxs [S, C] (ep_recv) in dispatch order; dxn [N, C] = sum_j dxs[pos[n k + j]].
  ep_exchange(ep_send.data(), in_rows, ep_recv.data(), out_rows, C);
  kc::moe_combine<T>(dxn.data(), ep_recv.data(), a.pos.data(), nullptr, N, C, K,
                     /*accumulate=*/false, stream);
  ep_settle();
}

#define ZT_DEVICE_MOE_EP_INSTANTIATE(T, G)                                                     \
  template void DeviceModel<T, G>::Impl::set_expert_group(comm::Comm*);                        \
  template void DeviceModel<T, G>::Impl::ep_settle();                                          \
  template void DeviceModel<T, G>::Impl::ep_exchange(const T*, const std::vector<size_t>&, T*, \
                                                     const std::vector<size_t>&, int64_t);     \
  template std::vector<int64_t> DeviceModel<T, G>::Impl::ep_exchange_counts(                   \
      const std::vector<int64_t>&);                                                            \
  template void DeviceModel<T, G>::Impl::ep_experts_forward(                                   \
      const T*, const BlockOffsets&, detail::DeviceBlockActs<T>&, int64_t);                     \
  template void DeviceModel<T, G>::Impl::ep_experts_backward(                                  \
      int, const T*, const BlockOffsets&, detail::DeviceBlockActs<T>&, int64_t);
ZT_DEVICE_MOE_EP_INSTANTIATE(float, float)
ZT_DEVICE_MOE_EP_INSTANTIATE(kc::bf16_t, float)
ZT_DEVICE_MOE_EP_INSTANTIATE(kc::bf16_t, kc::bf16_t)
#undef ZT_DEVICE_MOE_EP_INSTANTIATE

}  // namespace zt::model
