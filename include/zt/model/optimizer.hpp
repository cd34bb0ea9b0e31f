#pragma once
// AdamW over a unit's flat buffer (or any slice of it: a ZeRO shard), applying weight
// decay only to the tensors whose TensorInfo::weight_decay is true (2-D weights; not
// the RMSNorm weights). The arithmetic is zt::kernels::cpu::adamw_step.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "zt/model/layout.hpp"

namespace zt::model {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // decoupled; multiplied by lr (PyTorch AdamW semantics)
};

// Throws zt::Error unless every one of `sizes` equals n (the buffers of one slice) and
// elements [begin, begin + n) lie inside unit u. `who` names the caller in the message.
void check_unit_slice(const ParamLayout& layout, int u, int64_t begin, int64_t n,
                      std::initializer_list<size_t> sizes, const char* who);

// The weight-decay rule of AdamW, for every implementation of it (this one and the
// offload store's SIMD AdamW): walks the tensors of unit u that overlap elements
// [begin, begin + n) and calls run(j, count, decayed) for each overlap, in order: j is
// its first element relative to begin, decayed is the tensor's TensorInfo::weight_decay.
// Index arithmetic only: the floats are the kernel's that `run` calls.
template <class Run>
void for_each_decay_run(const ParamLayout& layout, int u, int64_t begin, int64_t n, Run&& run) {
  const UnitInfo& unit = layout.unit(u);
  const int64_t end = begin + n;
  for (int i = unit.first_tensor; i < unit.first_tensor + unit.num_tensors; ++i) {
    const TensorInfo& t = layout.tensors()[static_cast<size_t>(i)];
    const int64_t lo = std::max(begin, t.offset);
    const int64_t hi = std::min(end, t.offset + t.numel);
    if (lo < hi) run(lo - begin, hi - lo, t.weight_decay);
  }
}

// Updates elements [begin, begin + param.size()) of unit u. grad, m, v are the same
// slice (same size). step is 1-based (bias correction uses beta^step).
template <class T>
void adamw_unit_slice(const ParamLayout& layout, int u, int64_t begin, std::span<T> param,
                      std::span<const T> grad, std::span<T> m, std::span<T> v,
                      const AdamWConfig& cfg, int64_t step);

}  // namespace zt::model
