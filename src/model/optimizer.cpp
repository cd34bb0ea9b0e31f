// AdamW over a slice of a unit, with per-tensor weight decay from the layout.
#include "zt/model/optimizer.hpp"

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/adamw.hpp"

namespace zt::model {

void check_unit_slice(const ParamLayout& layout, int u, int64_t begin, int64_t n,
                      std::initializer_list<size_t> sizes, const char* who) {
  const UnitInfo& unit = layout.unit(u);
  for (const size_t size : sizes)
    ZT_CHECK(static_cast<int64_t>(size) == n, strf("%s: param, grad, m and v differ in size", who),
             "pass the same slice of each buffer.");
  ZT_CHECK(begin >= 0 && begin + n <= unit.numel,
           strf("%s: slice outside the unit %s", who, unit.name.c_str()),
           "a bug in the caller's shard arithmetic.");
}

template <class T>
void adamw_unit_slice(const ParamLayout& layout, int u, int64_t begin, std::span<T> param,
                      std::span<const T> grad, std::span<T> m, std::span<T> v,
                      const AdamWConfig& cfg, int64_t step) {
  const int64_t n = static_cast<int64_t>(param.size());
  check_unit_slice(layout, u, begin, n, {grad.size(), m.size(), v.size()}, "adamw_unit_slice");
  if (step < 1) {
    throw InputError(strf("AdamW step %lld: steps count from 1", static_cast<long long>(step)),
                     "pass the number of optimizer steps taken so far, plus one.");
  }
  for_each_decay_run(layout, u, begin, n, [&](int64_t j, int64_t count, bool decayed) {
    kernels::cpu::adamw_step(param.data() + j, grad.data() + j, m.data() + j, v.data() + j, count,
                             cfg.lr, cfg.beta1, cfg.beta2, cfg.eps,
                             decayed ? cfg.weight_decay : 0.0, step);
  });
}

template void adamw_unit_slice<float>(const ParamLayout&, int, int64_t, std::span<float>,
                                      std::span<const float>, std::span<float>, std::span<float>,
                                      const AdamWConfig&, int64_t);
template void adamw_unit_slice<double>(const ParamLayout&, int, int64_t, std::span<double>,
                                       std::span<const double>, std::span<double>,
                                       std::span<double>, const AdamWConfig&, int64_t);

}  // namespace zt::model
