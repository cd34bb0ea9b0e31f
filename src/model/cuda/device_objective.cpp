// The preference objectives (DPO, ORPO: zt/train/preference.hpp) on the GPU model: the
// device half of Model's RowObjective seam (model.cpp's row_sums / objective_backward /
// row_logps), op for op. Each row's summed completion log-probability is the fused
// cross-entropy's total over that row's T positions (in double, a fixed order), copied to
// the host, and, with context targets (orpo.nll = sequence), row b's context targets'
// total as a second sum [B + b]; the objective (the pair loss the CPU uses: dpo_value / orpo_value, called by
// the engine's RowObjective) turns them into d value / d logp on the host; the logits'
// gradient of row b is then the cross-entropy gradient with scale -grad_scale * dlogp[b],
// written over the logits by the same kernel (one rounding to T, as the plain loss's).
#include <vector>

#include "device_model_impl.hpp"

namespace zt::model {

template <class T, class G>
void DeviceModel<T, G>::Impl::row_sums(int64_t B, int64_t Tn, std::span<double> logp,
                                       std::span<int64_t> count) {
  const int64_t V = cfg.vocab;
  const bool context = static_cast<int64_t>(logp.size()) == 2 * B;
  if ((static_cast<int64_t>(logp.size()) != B && !context) || count.size() != logp.size())
    throw InputError(strf("row log-probs: %zu / %zu outputs for %lld rows", logp.size(),
                          count.size(), static_cast<long long>(B)),
                     "pass spans of B elements (2B: the context targets' sums after them)");
  const size_t n = logp.size();
  if (totals.size() < n)  // [B], [2B] with context sums: one total per sum (grown once)
    totals = kc::DeviceBuffer<kc::CrossEntropyTotals>(n, "the per-row cross-entropy totals");
  // part 0: row b's own targets (targets_d: < 0 ignored); part 1: its context targets
  // (context_d), none when the batch has none (sums 0 over 0 targets, as Model's).
  const int parts = context && has_context ? 2 : 1;
  for (int part = 0; part < parts; ++part)
    for (int64_t b = 0; b < B; ++b)  // row b: positions [b T, (b + 1) T) of the logits [N, V]
      kc::cross_entropy<T>(nullptr, logits.data() + b * Tn * V,
                           (part == 0 ? targets_d.data() : context_d.data()) + b * Tn, Tn, V, 1.0,
                           row_loss.data() + b * Tn, totals.data() + part * B + b, stream);
  std::vector<kc::CrossEntropyTotals> t(n, kc::CrossEntropyTotals{0.0, 0, -1});  // [n] host
  stage.to_host(t.data(), totals.data(), static_cast<size_t>(parts * B) * sizeof(t[0]),
                "reading the rows' log-probabilities");
  for (size_t i = 0; i < n; ++i) {
    logp[i] = -t[i].loss_sum;
    count[i] = t[i].count;
  }
}

// d value / d logits of row b's target t = dlogp[b] x d logp_t / d logits
// = -dlogp[b] x (softmax - onehot): the cross-entropy gradient with scale -dlogp[b]
// (-dlogp[B + b] at row b's context targets, run by run: the kernel writes over each run
// of positions, zero at the ignored ones, as Model's objective_backward).
template <class T, class G>
double DeviceModel<T, G>::Impl::objective_backward(int64_t B, int64_t Tn, double grad_scale) {
  const int64_t V = cfg.vocab;
  const size_t n = static_cast<size_t>(has_context ? 2 * B : B);
  std::vector<double> logp(n), dlogp(n);  // [B] or [2B]
  std::vector<int64_t> count(n);
  row_sums(B, Tn, logp, count);
  const double value = objective(logp, count, dlogp);
  for (int64_t b = 0; b < B; ++b) {
    T* row = logits.data() + b * Tn * V;  // [T, V] logits, then dlogits in place
    if (!has_context) {
      kc::cross_entropy<T>(row, row, targets_d.data() + b * Tn, Tn, V,
                           -dlogp[static_cast<size_t>(b)] * grad_scale, row_loss.data() + b * Tn,
                           totals.data() + b, stream);
      continue;
    }
    const int32_t* ch = context_h.data() + b * Tn;  // >= 0 exactly at the context targets
    for (int64_t t0 = 0, t1; t0 < Tn; t0 = t1) {    // runs of one kind: context or not
      const bool ctx = ch[t0] >= 0;
      for (t1 = t0 + 1; t1 < Tn && (ch[t1] >= 0) == ctx; ++t1) {
      }
      const double d = dlogp[static_cast<size_t>(ctx ? B + b : b)];
      kc::cross_entropy<T>(row + t0 * V, row + t0 * V,
                           (ctx ? context_d.data() : targets_d.data()) + b * Tn + t0, t1 - t0, V,
                           -d * grad_scale, row_loss.data() + b * Tn + t0,
                           totals.data() + (ctx ? B + b : b), stream);
    }
  }
  return value;
}

template <class T, class G>
void DeviceModel<T, G>::Impl::row_logps(std::span<const int32_t> tokens,
                                        std::span<const int32_t> targets, int64_t B, int64_t Tn,
                                        std::span<const int32_t> positions, std::span<double> logp,
                                        std::span<int64_t> count) {
  upload_batch(tokens, targets, B, Tn, positions);
  forward_trunk_and_norm(B, Tn, /*keep_all=*/false);
  done_head();
  row_sums(B, Tn, logp, count);
  moe_aux_term();  // router_stats of this forward, as Model's (the value joins no sum)
}

#define ZT_DEVICE_OBJECTIVE_INSTANTIATE(T, G)                                            \
  template void DeviceModel<T, G>::Impl::row_sums(int64_t, int64_t, std::span<double>,   \
                                                  std::span<int64_t>);                   \
  template double DeviceModel<T, G>::Impl::objective_backward(int64_t, int64_t, double); \
  template void DeviceModel<T, G>::Impl::row_logps(                                      \
      std::span<const int32_t>, std::span<const int32_t>, int64_t, int64_t,              \
      std::span<const int32_t>, std::span<double>, std::span<int64_t>);
ZT_DEVICE_OBJECTIVE_INSTANTIATE(float, float)
ZT_DEVICE_OBJECTIVE_INSTANTIATE(kc::bf16_t, float)
ZT_DEVICE_OBJECTIVE_INSTANTIATE(kc::bf16_t, kc::bf16_t)
#undef ZT_DEVICE_OBJECTIVE_INSTANTIATE

}  // namespace zt::model
