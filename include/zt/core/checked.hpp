#pragma once
// Checked integer arithmetic for sizes a user controls (model shapes, ranks, batch
// sizes): a product or sum that would overflow is a zt::InputError (exit 2) naming what
// was being computed, instead of a negative count or a wrapped allocation size.
#include <cstdint>
#include <string>
#include <string_view>

#include "zt/core/error.hpp"

namespace zt {

[[noreturn]] inline void overflow(std::string_view what, int64_t a, const char* op, int64_t b,
                                  std::string_view hint) {
  throw InputError(std::string(what) + " overflows 64 bits (" + std::to_string(a) + op +
                       std::to_string(b) + ")",
                   std::string(hint));
}

// a * b; throws InputError("<what> overflows 64 bits (a x b)", hint) when it does not fit.
inline int64_t mul_checked(int64_t a, int64_t b, std::string_view what, std::string_view hint) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow(what, a, " x ", b, hint);
  return r;
}

// a + b; as mul_checked.
inline int64_t add_checked(int64_t a, int64_t b, std::string_view what, std::string_view hint) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow(what, a, " + ", b, hint);
  return r;
}

}  // namespace zt
