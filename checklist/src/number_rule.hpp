#pragma once
// The one rule for every number in a thresholds file and a baseline file: a finite
// number inside its key's range. inf, NaN and values past the range are refused (exit 2)
// by the reader, naming the file and the key.
#include <cmath>
#include <string>

#include "zt/core/log.hpp"

namespace zt::check {

struct NumberRange {
  double lo, hi;
  bool lo_open = false, hi_open = false;  // lo (hi) itself refused
};
constexpr NumberRange kBandwidthGbs{0.0, 1e6, true};  // GB/s: above 0, at most 1 PB/s
constexpr NumberRange kLatencyUs{0.0, 1e9, true};     // microseconds: above 0, at most 1000 s
constexpr NumberRange kWarnBand{0.0, 1.0, false, true};
constexpr NumberRange kMeasuredGbs{0.0, 1e6};         // a baseline's bandwidths
constexpr NumberRange kRanks{1.0, 16777216.0};

// "" when v is finite and in r; else "must be a finite number in (0, 1e+06], got inf".
inline std::string number_problem(double v, const NumberRange& r) {
  const bool ok = std::isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
  if (ok) return {};
  return strf("must be a finite number in %s%g, %g%s, got %g", r.lo_open ? "(" : "[", r.lo, r.hi,
              r.hi_open ? ")" : "]", v);
}

}  // namespace zt::check
