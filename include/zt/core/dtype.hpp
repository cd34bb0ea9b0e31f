#pragma once
// Element types moved by the comm layer and stored by the model.
#include <cstddef>
#include <cstdint>
#include <cstring>
#if __cplusplus >= 202002L
#include <span>
#endif
#include <string>
#include <string_view>

namespace zt {

enum class DType : uint8_t { kF32, kF64, kBF16, kF16, kI8, kU8, kI32, kI64 };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                                       DType::kI8,  DType::kU8,  DType::kI32,  DType::kI64};

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kBF16: case DType::kF16: return 2;
    case DType::kI8: case DType::kU8: return 1;
  }
  return 0;
}

constexpr bool dtype_is_float(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16;
}

// nccl-tests' names: float, double, bfloat16, half, int8, uint8, int32, int64.
std::string_view dtype_name(DType t);
// Accepts nccl-tests' names and the short ones (f32, bf16, f16, i8, u8, i32, i64, f64).
// Throws zt::InputError naming the bad string.
DType parse_dtype(std::string_view name);

// bfloat16: the top 16 bits of an IEEE float32. Conversion rounds to nearest even;
// NaN stays NaN.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(from_float(f)) {}
  explicit operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding) >> 16);
  }
};

// IEEE binary16. Conversion rounds to nearest even, handles subnormals, inf and NaN.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

// The one narrowing cast of values zt writes out (exports, files): float -> `to` (kBF16 or
// kF16, as bits), rounding to nearest even. What does not survive is counted:
// `overflow`, finite values beyond the target's range (they become +-inf, or the largest
// finite value of the target when `saturate`), and `nan`, NaN inputs (they stay NaN).
// +-inf in stays +-inf and is not counted. Counts add up over calls.
struct NarrowCount {
  uint64_t overflow = 0;
  uint64_t nan = 0;
  float largest = 0;  // largest |x| of an overflowing value
  bool clean() const { return overflow == 0 && nan == 0; }
};
#if __cplusplus >= 202002L  // std::span: C++20 (the CUDA sources, C++17, narrow nothing)
void narrow_floats(std::span<const float> in, DType to, std::span<uint16_t> out, bool saturate,
                   NarrowCount& count);
#endif
// "3 values beyond half's range (largest |x| 7e+04), 1 NaN" for a count that is not clean.
std::string narrow_count_text(const NarrowCount& count, DType to);

}  // namespace zt
