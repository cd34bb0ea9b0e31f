#pragma once
// The kernels' gradcheck verdict, shared by the gradcheck tests: finite-difference step,
// error floor and tolerance (in double), and the check of one ErrStats.
#include <gtest/gtest.h>

#include <string>

#include "gradcheck.hpp"

namespace zt::testing {

inline constexpr double kH = 1e-3;      // finite-difference step
inline constexpr double kFloor = 1e-6;  // relative errors below this are not counted
inline constexpr double kTol = 1e-6;    // the largest relative error that passes

inline void expect_ok(const ErrStats& s, const std::string& what) {
  s.print(what);
  EXPECT_LT(s.max_rel, kTol) << what;
  EXPECT_GT(s.n, 0) << what;
}

}  // namespace zt::testing
