// The CPU AdamW (see cpu_adam.hpp): scalar, AVX2 and AVX-512 bodies of one formula, picked
// at run time. Built with -ffp-contract=off: no level may fuse a multiply and an add,
// or the levels (and the homes that use them) would stop agreeing bit for bit.
#include "zt/offload/cpu_adam.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::offload {
namespace {

constexpr int64_t kTile = 16384;  // elements per OpenMP work item (4 arrays x 64 KiB)

// One element, in the reference's order.
inline void scalar_one(const AdamScalars& s, float* p, const float* g, float* m, float* v,
                       ParamCopy out, int64_t i) {
  const float gi = g[i];
  const float mi = s.b1 * m[i] + s.one_minus_b1 * gi;
  const float vi = s.b2 * v[i] + s.one_minus_b2 * gi * gi;
  m[i] = mi;
  v[i] = vi;
  const float denom = std::sqrt(vi) * s.inv_sqrt_bc2 + s.eps;
  const float pi = p[i] * s.decay - s.step_size * mi / denom;
  p[i] = pi;
  if (out.f32) out.f32[i] = pi;
  if (out.half) out.half[i].bits = bf16::from_float(pi);
}

void tile_scalar(const AdamScalars& s, float* p, const float* g, float* m, float* v,
                 ParamCopy out, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) scalar_one(s, p, g, m, v, out, i);
}

// bf16 round-to-nearest-even of 8 / 16 floats (bf16::from_float, NaN kept quiet).
__attribute__((target("avx2"))) __m128i to_bf16_avx2(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  r = _mm256_blendv_epi8(r, qnan, nan);
  // pack 8 x 32-bit (values < 65536) into 8 x 16-bit
  const __m256i packed = _mm256_packus_epi32(r, r);  // per 128-bit lane
  return _mm_unpacklo_epi64(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1));
}

__attribute__((target("avx2"))) void tile_avx2(const AdamScalars& s, float* p, const float* g,
                                               float* m, float* v, ParamCopy out, int64_t lo,
                                               int64_t hi) {
  const __m256 b1 = _mm256_set1_ps(s.b1), c1 = _mm256_set1_ps(s.one_minus_b1);
  const __m256 b2 = _mm256_set1_ps(s.b2), c2 = _mm256_set1_ps(s.one_minus_b2);
  const __m256 decay = _mm256_set1_ps(s.decay), ss = _mm256_set1_ps(s.step_size);
  const __m256 ib = _mm256_set1_ps(s.inv_sqrt_bc2), eps = _mm256_set1_ps(s.eps);
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i);
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, gi));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                    _mm256_mul_ps(_mm256_mul_ps(c2, gi), gi));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 denom = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), ib), eps);
    const __m256 pi = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p + i), decay),
                                    _mm256_div_ps(_mm256_mul_ps(ss, mi), denom));
    _mm256_storeu_ps(p + i, pi);
    if (out.f32) _mm256_storeu_ps(out.f32 + i, pi);
    if (out.half) _mm_storeu_si128(reinterpret_cast<__m128i*>(out.half + i), to_bf16_avx2(pi));
  }
  tile_scalar(s, p, g, m, v, out, i, hi);
}

__attribute__((target("avx512f,avx512bw"))) __m256i to_bf16_avx512(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, qnan));
}

// One vector of 16 elements at i (the formula above, no fused multiply-add).
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void vec_avx512(
    const AdamScalars& s, float* p, const float* g, float* m, float* v, ParamCopy out, int64_t i) {
  const __m512 gi = _mm512_loadu_ps(g + i);
  const __m512 mi = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(s.b1), _mm512_loadu_ps(m + i)),
                                  _mm512_mul_ps(_mm512_set1_ps(s.one_minus_b1), gi));
  const __m512 vi = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(s.b2), _mm512_loadu_ps(v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(s.one_minus_b2), gi), gi));
  _mm512_storeu_ps(m + i, mi);
  _mm512_storeu_ps(v + i, vi);
  const __m512 denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), _mm512_set1_ps(s.inv_sqrt_bc2)),
                                     _mm512_set1_ps(s.eps));
  const __m512 pi = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(p + i), _mm512_set1_ps(s.decay)),
                                  _mm512_div_ps(_mm512_mul_ps(_mm512_set1_ps(s.step_size), mi), denom));
  _mm512_storeu_ps(p + i, pi);
  if (out.f32) _mm512_storeu_ps(out.f32 + i, pi);
  if (out.half) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.half + i), to_bf16_avx512(pi));
}

// 4 vectors per iteration (64 elements): more loads in flight per core.
__attribute__((target("avx512f,avx512bw"))) void tile_avx512(const AdamScalars& s, float* p,
                                                             const float* g, float* m, float* v,
                                                             ParamCopy out, int64_t lo,
                                                             int64_t hi) {
  int64_t i = lo;
  for (; i + 64 <= hi; i += 64) {
    vec_avx512(s, p, g, m, v, out, i);
    vec_avx512(s, p, g, m, v, out, i + 16);
    vec_avx512(s, p, g, m, v, out, i + 32);
    vec_avx512(s, p, g, m, v, out, i + 48);
  }
  for (; i + 16 <= hi; i += 16) vec_avx512(s, p, g, m, v, out, i);
  tile_scalar(s, p, g, m, v, out, i, hi);
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

Isa parse_isa(std::string_view text) {
  if (text == "scalar") return Isa::kScalar;
  if (text == "avx2") return Isa::kAvx2;
  if (text == "avx512") return Isa::kAvx512;
  throw InputError(strf("CPU AdamW level '%.*s' is unknown", static_cast<int>(text.size()), text.data()),
                   "valid values of ZT_CPU_ADAM_ISA: scalar, avx2, avx512.");
}

bool isa_supported(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return __builtin_cpu_supports("avx2");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }
  return false;
}

Isa default_isa() {
  if (const char* env = std::getenv("ZT_CPU_ADAM_ISA"); env && *env) {
    const Isa forced = parse_isa(env);
    if (!isa_supported(forced))
      throw InputError(strf("ZT_CPU_ADAM_ISA=%s: this CPU does not support it", env),
                       "check /proc/cpuinfo flags (avx2, avx512f, avx512bw), or unset it.");
    return forced;
  }
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

AdamScalars adam_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                         int64_t step) {
  if (step < 1)
    throw InputError(strf("AdamW step %lld: steps count from 1", static_cast<long long>(step)),
                     "pass the number of optimizer steps taken so far, plus one.");
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  AdamScalars s;
  s.b1 = static_cast<float>(beta1);
  s.one_minus_b1 = static_cast<float>(1.0 - beta1);
  s.b2 = static_cast<float>(beta2);
  s.one_minus_b2 = static_cast<float>(1.0 - beta2);
  s.decay = static_cast<float>(1.0 - lr * weight_decay);
  s.step_size = static_cast<float>(lr / bc1);
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  s.eps = static_cast<float>(eps);
  return s;
}

void adamw(const AdamScalars& s, float* master, const float* grad, float* m, float* v,
           ParamCopy out, int64_t n, Isa isa) {
  if (!isa_supported(isa))
    throw InputError(strf("CPU AdamW level %s is not supported by this CPU",
                          std::string(isa_name(isa)).c_str()),
                     "use default_isa().");
  const int64_t tiles = (n + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (tiles > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t lo = t * kTile;
    const int64_t hi = std::min(n, lo + kTile);
    switch (isa) {
      case Isa::kAvx512: tile_avx512(s, master, grad, m, v, out, lo, hi); break;
      case Isa::kAvx2: tile_avx2(s, master, grad, m, v, out, lo, hi); break;
      default: tile_scalar(s, master, grad, m, v, out, lo, hi); break;
    }
  }
}

void adamw_unit_slice(const model::ParamLayout& layout, int u, int64_t begin,
                      std::span<float> master, std::span<const float> grad, std::span<float> m,
                      std::span<float> v, ParamCopy out, const model::AdamWConfig& cfg,
                      int64_t step, Isa isa) {
  const int64_t n = static_cast<int64_t>(master.size());
  model::check_unit_slice(layout, u, begin, n, {grad.size(), m.size(), v.size()},
                          "offload::adamw_unit_slice");
  const AdamScalars decayed = adam_scalars(cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, step);
  const AdamScalars plain = adam_scalars(cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, 0.0, step);
  model::for_each_decay_run(layout, u, begin, n, [&](int64_t lo, int64_t count, bool decay) {
    const size_t j = static_cast<size_t>(lo);
    ParamCopy o;
    if (out.f32) o.f32 = out.f32 + j;
    if (out.half) o.half = out.half + j;
    adamw(decay ? decayed : plain, master.data() + j, grad.data() + j, m.data() + j, v.data() + j,
          o, count, isa);
  });
}

}  // namespace zt::offload
