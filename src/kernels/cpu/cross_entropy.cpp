// Fused softmax cross-entropy: loss and dlogits in one pass over the logits.
// Rows are split into a fixed number of chunks whose partial sums are added in chunk
// order, so the loss does not depend on the thread count.
#include "zt/kernels/cross_entropy.hpp"

#include <array>
#include <cmath>

#include "eigen_maps.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::kernels::cpu {

template <class T>
CrossEntropyResult cross_entropy(T* dlogits, const T* logits, const int32_t* targets, int64_t N,
                                 int64_t V, double scale) {
  // dlogits [N, V] (written, nullable, may alias logits), logits [N, V], targets [N]
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] >= V) {
      throw InputError(strf("target id %d at position %lld is outside the vocabulary [0, %lld)",
                            targets[n], static_cast<long long>(n), static_cast<long long>(V)),
                       "the data was tokenized for a different vocabulary; targets < 0 "
                       "are ignored, others must be < vocab.");
    }
  }
  constexpr int64_t kChunks = 64;
  std::array<double, kChunks> partial{};
  std::array<int64_t, kChunks> counted{};
#pragma omp parallel for schedule(static) if (N * V >= detail::kParallelMin)
  for (int64_t chunk = 0; chunk < kChunks; ++chunk) {
    const int64_t n0 = N * chunk / kChunks;
    const int64_t n1 = N * (chunk + 1) / kChunks;
    for (int64_t n = n0; n < n1; ++n) {
      const T* row = logits + n * V;  // [V]
      const int32_t tgt = targets[n];
      if (tgt < 0) {
        if (dlogits) std::fill_n(dlogits + n * V, V, T(0));
        continue;
      }
      const auto x = detail::arr(row, V);  // [V]
      const T mx = x.maxCoeff();
      const double logit_t = static_cast<double>(row[tgt]);  // read before dlogits overwrites it
      double sum;
      if (dlogits) {
        auto d = detail::arr(dlogits + n * V, V);  // [V] (may alias row)
        d = (x - mx).exp();
        sum = static_cast<double>(d.sum());
        d *= static_cast<T>(scale / sum);
        dlogits[n * V + tgt] -= static_cast<T>(scale);
      } else {
        sum = static_cast<double>((x - mx).exp().sum());
      }
      partial[chunk] += static_cast<double>(mx) + std::log(sum) - logit_t;
      counted[chunk] += 1;
    }
  }
  CrossEntropyResult r;
  for (int64_t chunk = 0; chunk < kChunks; ++chunk) {
    r.loss_sum += partial[chunk];
    r.count += counted[chunk];
  }
  return r;
}

template CrossEntropyResult cross_entropy<float>(float*, const float*, const int32_t*, int64_t,
                                                 int64_t, double);
template CrossEntropyResult cross_entropy<double>(double*, const double*, const int32_t*, int64_t,
                                                  int64_t, double);

}  // namespace zt::kernels::cpu
