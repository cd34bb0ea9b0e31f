// The preference objectives (DPO, ORPO: zt/train/preference.hpp) on the GPU model: the
// device half of Model's RowObjective seam (model.cpp's row_sums / objective_backward /
// row_logps), op for op. Each row's summed completion log-probability is the fused
// cross-entropy's total over that row's T positions (in double, a fixed order), copied to
// the host; the objective (the one pair loss the CPU uses: preference_value, called by
// the engine's RowObjective) turns them into d value / d logp on the host; the logits'
// gradient of row b is then the cross-entropy gradient with scale -grad_scale * dlogp[b],
// written over the logits by the same kernel (one rounding to T, as the plain loss's).
#include <vector>

#include "device_model_impl.hpp"
#include "zt/comm/device_wait.hpp"

namespace zt::model {

template <class T, class G>
void DeviceModel<T, G>::Impl::row_sums(int64_t B, int64_t Tn, std::span<double> logp,
                                       std::span<int64_t> count) {
  const int64_t V = cfg.vocab;
  if (static_cast<int64_t>(logp.size()) != B || static_cast<int64_t>(count.size()) != B)
    throw InputError(strf("row log-probs: %zu / %zu outputs for %lld rows", logp.size(),
                          count.size(), static_cast<long long>(B)),
                     "pass spans of B elements");
  if (totals.size() < static_cast<size_t>(B))  // [B]: one total per row (grown once)
    totals = kc::DeviceBuffer<kc::CrossEntropyTotals>(static_cast<size_t>(B),
                                                      "the per-row cross-entropy totals");
  for (int64_t b = 0; b < B; ++b)  // row b: positions [b T, (b + 1) T) of the logits [N, V]
    kc::cross_entropy<T>(nullptr, logits.data() + b * Tn * V, targets_d.data() + b * Tn, Tn, V, 1.0,
                         row_loss.data() + b * Tn, totals.data() + b, stream);
  std::vector<kc::CrossEntropyTotals> t(static_cast<size_t>(B));  // [B] host
  ZT_CUDA_CHECK(cudaMemcpyAsync(t.data(), totals.data(), t.size() * sizeof(t[0]),
                                cudaMemcpyDeviceToHost, stream));
  comm::wait_stream(stream, "reading the rows' log-probabilities");
  for (int64_t b = 0; b < B; ++b) {
    logp[static_cast<size_t>(b)] = -t[static_cast<size_t>(b)].loss_sum;
    count[static_cast<size_t>(b)] = t[static_cast<size_t>(b)].count;
  }
}

// d value / d logits of row b's target t = dlogp[b] x d logp_t / d logits
// = -dlogp[b] x (softmax - onehot): the cross-entropy gradient with scale -dlogp[b].
template <class T, class G>
double DeviceModel<T, G>::Impl::objective_backward(int64_t B, int64_t Tn, double grad_scale) {
  const int64_t V = cfg.vocab;
  std::vector<double> logp(static_cast<size_t>(B)), dlogp(static_cast<size_t>(B));  // [B]
  std::vector<int64_t> count(static_cast<size_t>(B));                               // [B]
  row_sums(B, Tn, logp, count);
  const double value = objective(logp, count, dlogp);
  for (int64_t b = 0; b < B; ++b) {
    T* row = logits.data() + b * Tn * V;  // [T, V] logits, then dlogits in place
    kc::cross_entropy<T>(row, row, targets_d.data() + b * Tn, Tn, V,
                         -dlogp[static_cast<size_t>(b)] * grad_scale, row_loss.data() + b * Tn,
                         totals.data() + b, stream);
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
