#include "zt/core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "zt/core/error.hpp"

namespace zt {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "half";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
  }
  return "?";
}

DType parse_dtype(std::string_view s) {
  struct Alias { std::string_view name; DType t; };
  static constexpr Alias kAliases[] = {
      {"float", DType::kF32},   {"f32", DType::kF32},     {"fp32", DType::kF32},
      {"double", DType::kF64},  {"f64", DType::kF64},     {"bfloat16", DType::kBF16},
      {"bf16", DType::kBF16},   {"half", DType::kF16},    {"f16", DType::kF16},
      {"fp16", DType::kF16},    {"int8", DType::kI8},     {"i8", DType::kI8},
      {"uint8", DType::kU8},    {"u8", DType::kU8},       {"int32", DType::kI32},
      {"i32", DType::kI32},     {"int64", DType::kI64},   {"i64", DType::kI64}};
  for (const Alias& a : kAliases)
    if (a.name == s) return a.t;
  throw InputError("unknown data type '" + std::string(s) + "'",
                   "use one of float, double, bfloat16, half, int8, uint8, int32, int64");
}

uint16_t f16::from_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    const uint32_t half_ulp = 1u << (shift - 1);
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    if (rem > half_ulp || (rem == half_ulp && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  // Normal: rebias exponent 127 -> 15, round mantissa 23 -> 10 bits to nearest even.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float f16::to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1fu) {
    u = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { mant <<= 1; ++e; } while ((mant & 0x400u) == 0);
      u = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void narrow_floats(std::span<const float> in, DType to, std::span<uint16_t> out, bool saturate,
                   NarrowCount& count) {
  ZT_CHECK(to == DType::kBF16 || to == DType::kF16, "narrow_floats: target is not bf16 or f16", "");
  ZT_CHECK(out.size() == in.size(), "narrow_floats: output size differs from input size", "");
  const bool brain = to == DType::kBF16;
  const uint16_t inf_bits = brain ? 0x7f80u : 0x7c00u;
  const uint16_t max_bits = brain ? 0x7f7fu : 0x7bffu;  // the largest finite value
  for (size_t i = 0; i < in.size(); ++i) {
    const float x = in[i];
    uint16_t h = brain ? bf16::from_float(x) : f16::from_float(x);
    if (std::isnan(x)) {
      ++count.nan;
    } else if (std::isfinite(x) && (h & 0x7fffu) == inf_bits) {
      ++count.overflow;  // finite in, inf out
      count.largest = std::max(count.largest, std::fabs(x));
      if (saturate) h = static_cast<uint16_t>((h & 0x8000u) | max_bits);
    }
    out[i] = h;
  }
}

std::string narrow_count_text(const NarrowCount& count, DType to) {
  std::string s;
  if (count.overflow > 0) {
    char largest[32];
    std::snprintf(largest, sizeof largest, "%.4g", static_cast<double>(count.largest));
    s = std::to_string(count.overflow) + " value" + (count.overflow == 1 ? "" : "s") +
        " beyond " + std::string(dtype_name(to)) + "'s range (largest |x| " + largest + ")";
  }
  if (count.nan > 0)
    s += (s.empty() ? "" : ", ") + std::to_string(count.nan) + " NaN" + (count.nan == 1 ? "" : "s");
  return s;
}

}  // namespace zt
