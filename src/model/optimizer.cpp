// AdamW over a slice of a unit, with per-tensor weight decay from the layout.
#include "zt/model/optimizer.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/adamw.hpp"

namespace zt::model {

template <class T>
void adamw_unit_slice(const ParamLayout& layout, int u, int64_t begin, std::span<T> param,
                      std::span<const T> grad, std::span<T> m, std::span<T> v,
                      const AdamWConfig& cfg, int64_t step) {
  const UnitInfo& unit = layout.unit(u);
  const int64_t n = static_cast<int64_t>(param.size());
  const int64_t end = begin + n;
  ZT_CHECK(grad.size() == param.size() && m.size() == param.size() && v.size() == param.size(),
           "adamw_unit_slice: param, grad, m and v differ in size",
           "pass the same slice of each buffer.");
  ZT_CHECK(begin >= 0 && end <= unit.numel, "adamw_unit_slice: slice outside the unit " + unit.name,
           "a bug in the caller's shard arithmetic.");
  if (step < 1) {
    throw InputError(strf("AdamW step %lld: steps count from 1", static_cast<long long>(step)),
                     "pass the number of optimizer steps taken so far, plus one.");
  }
  for (int i = unit.first_tensor; i < unit.first_tensor + unit.num_tensors; ++i) {
    const TensorInfo& t = layout.tensors()[static_cast<size_t>(i)];
    const int64_t lo = std::max(begin, t.offset);
    const int64_t hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    const int64_t j = lo - begin;
    kernels::cpu::adamw_step(param.data() + j, grad.data() + j, m.data() + j, v.data() + j,
                             hi - lo, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps,
                             t.weight_decay ? cfg.weight_decay : 0.0, step);
  }
}

template void adamw_unit_slice<float>(const ParamLayout&, int, int64_t, std::span<float>,
                                      std::span<const float>, std::span<float>, std::span<float>,
                                      const AdamWConfig&, int64_t);
template void adamw_unit_slice<double>(const ParamLayout&, int, int64_t, std::span<double>,
                                       std::span<const double>, std::span<double>,
                                       std::span<double>, const AdamWConfig&, int64_t);

}  // namespace zt::model
