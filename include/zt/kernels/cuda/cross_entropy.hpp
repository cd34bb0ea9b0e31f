#pragma once
// Fused softmax cross-entropy on the GPU (same semantics as zt/kernels/cross_entropy.hpp):
// one block per row computes the row's max and sum of exponentials in one online pass,
// its loss, and writes dlogits over the logits (in place allowed).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// Written by cross_entropy into device memory; copy it to the host when the loss is needed.
struct CrossEntropyTotals {
  double loss_sum;    // sum over counted rows of logsumexp(logits[n]) - logits[n, target]
  long long count;    // counted rows (0 <= target < V)
  long long bad_row;  // first row whose target is >= V (such rows are ignored), or -1
};

//   dlogits [N, V] T (nullable; may alias logits): WRITTEN with
//           scale * (softmax(logits[n]) - onehot(target_n)) for counted rows, 0 otherwise
//   logits  [N, V] T
//   targets [N] int32, device; < 0 ignored
//   row_loss [N] float scratch (written: each row's loss, 0 for ignored rows)
//   totals  [1] device (written; the sum over rows in a fixed order, in double)
template <class T>
void cross_entropy(T* dlogits, const T* logits, const int32_t* targets, int64_t N, int64_t V,
                   double scale, float* row_loss, CrossEntropyTotals* totals,
                   cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
