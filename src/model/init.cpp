// Deterministic per-element initialisation from (seed, tensor name, element index).
#include "zt/model/init.hpp"

#include <cmath>
#include <numbers>

#include "zt/core/error.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"

namespace zt::model {

namespace {


uint64_t tensor_key(uint64_t seed, std::string_view name) { return mix64(seed ^ mix64(fnv1a(name))); }

// Standard normal for counter i of the stream `key` (Box-Muller, cosine branch).
double normal_at(uint64_t key, int64_t i) {
  const uint64_t c = static_cast<uint64_t>(i) * 2;
  const double u1 = unit_interval(mix64(key ^ mix64(c)));
  const double u2 = unit_interval(mix64(key ^ mix64(c + 1)));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

double init_standard_normal(uint64_t seed, std::string_view name, int64_t i) {
  return normal_at(tensor_key(seed, name), i);
}

uint64_t init_stream(uint64_t seed, std::string_view name) { return tensor_key(seed, name); }

double uniform_at(uint64_t stream, int64_t i) { return counter_uniform(stream, i); }

double init_std(const TensorInfo& t, const Config& cfg, const InitOptions& opt) {
  switch (t.init) {
    case InitKind::kOnes:
    case InitKind::kZeros:
    case InitKind::kLoraA: return 0.0;  // not normal draws (init_tensor)
    case InitKind::kNormal: return opt.std;
    case InitKind::kNormalScaled:
      return opt.scale_residual ? opt.std / std::sqrt(2.0 * static_cast<double>(cfg.layers))
                                : opt.std;
  }
  return opt.std;
}

double init_value(const TensorInfo& t, const Config& cfg, const InitOptions& opt, int64_t i) {
  if (t.init == InitKind::kOnes) return 1.0;
  if (t.init == InitKind::kZeros) return 0.0;
  if (t.init == InitKind::kLoraA)  // as init_lora: kaiming_uniform_(a = sqrt(5)), fan_in = shape[1]
    return 1.0 / std::sqrt(static_cast<double>(t.shape[1])) *
           (2.0 * uniform_at(tensor_key(opt.seed, t.name), i) - 1.0);
  return init_std(t, cfg, opt) * init_standard_normal(opt.seed, t.name, t.global_begin + i);
}

template <class T>
void init_tensor(const TensorInfo& t, const Config& cfg, const InitOptions& opt, int64_t begin,
                 std::span<T> out) {
  const int64_t n = static_cast<int64_t>(out.size());
  ZT_CHECK(begin >= 0 && begin + n <= t.numel, "init slice outside the tensor " + t.name,
           "a bug in the caller's shard arithmetic.");
  if (t.init == InitKind::kOnes || t.init == InitKind::kZeros) {
    const T fill = t.init == InitKind::kOnes ? T(1) : T(0);
    for (int64_t j = 0; j < n; ++j) out[static_cast<size_t>(j)] = fill;
    return;
  }
  if (t.init == InitKind::kLoraA) {  // the same expression as init_lora (lora.cpp), bit for bit
    const double bound = 1.0 / std::sqrt(static_cast<double>(t.shape[1]));
    const uint64_t key = tensor_key(opt.seed, t.name);
    for (int64_t j = 0; j < n; ++j)
      out[static_cast<size_t>(j)] = static_cast<T>(bound * (2.0 * uniform_at(key, begin + j) - 1.0));
    return;
  }
  const double sd = init_std(t, cfg, opt);
  const uint64_t key = tensor_key(opt.seed, t.name);
  const int64_t at = t.global_begin + begin;  // an expert slice draws the whole tensor's values
  for (int64_t j = 0; j < n; ++j) {
    out[static_cast<size_t>(j)] = static_cast<T>(sd * normal_at(key, at + j));
  }
}

template <class T>
void init_unit_slice(const ParamLayout& layout, int u, const InitOptions& opt, int64_t begin,
                     std::span<T> out) {
  const UnitInfo& unit = layout.unit(u);
  const int64_t end = begin + static_cast<int64_t>(out.size());
  ZT_CHECK(begin >= 0 && end <= unit.numel,
           strf("init slice [%lld, %lld) outside unit %s of %lld elements",
                static_cast<long long>(begin), static_cast<long long>(end), unit.name.c_str(),
                static_cast<long long>(unit.numel)),
           "a bug in the caller's shard arithmetic.");
  for (int i = unit.first_tensor; i < unit.first_tensor + unit.num_tensors; ++i) {
    const TensorInfo& t = layout.tensors()[static_cast<size_t>(i)];
    const int64_t lo = std::max(begin, t.offset);
    const int64_t hi = std::min(end, t.offset + t.numel);
    if (lo >= hi) continue;
    init_tensor(t, layout.config(), opt, lo - t.offset,
                out.subspan(static_cast<size_t>(lo - begin), static_cast<size_t>(hi - lo)));
  }
}

template <class T>
void init_unit(const ParamLayout& layout, int u, const InitOptions& opt, std::span<T> out) {
  ZT_CHECK(static_cast<int64_t>(out.size()) == layout.unit(u).numel,
           "init_unit: buffer size differs from the unit's numel",
           "allocate layout.unit(u).numel elements.");
  init_unit_slice(layout, u, opt, 0, out);
}

template void init_tensor<float>(const TensorInfo&, const Config&, const InitOptions&, int64_t,
                                 std::span<float>);
template void init_tensor<double>(const TensorInfo&, const Config&, const InitOptions&, int64_t,
                                  std::span<double>);
template void init_unit_slice<float>(const ParamLayout&, int, const InitOptions&, int64_t,
                                     std::span<float>);
template void init_unit_slice<double>(const ParamLayout&, int, const InitOptions&, int64_t,
                                      std::span<double>);
template void init_unit<float>(const ParamLayout&, int, const InitOptions&, std::span<float>);
template void init_unit<double>(const ParamLayout&, int, const InitOptions&, std::span<double>);

}  // namespace zt::model
