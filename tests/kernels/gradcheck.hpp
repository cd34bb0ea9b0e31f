#pragma once
// Finite differences for the gradient tests (test helper). Five-point central
// difference, error O(h^4):
//   f'(x) ~ [8 (f(x+h) - f(x-h)) - (f(x+2h) - f(x-2h))] / (12 h)
// and the relative error used everywhere in these tests:
//   rel(a, b) = |a - b| / max(|a|, |b|, floor)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace zt::testing {

template <class F>
double central_diff5(F&& f, double* x, double h) {
  const double x0 = *x;
  *x = x0 + h;
  const double f1 = f();
  *x = x0 - h;
  const double fm1 = f();
  *x = x0 + 2 * h;
  const double f2 = f();
  *x = x0 - 2 * h;
  const double fm2 = f();
  *x = x0;
  return (8.0 * (f1 - fm1) - (f2 - fm2)) / (12.0 * h);
}

// The floor for rel_err that the difference itself calls for: the five-point formula
// rounds f's four values (each within eps |f|) into (8 + 8 + 1 + 1) / 12 eps |f| / h, so a
// derivative smaller than that / rtol cannot be checked to rtol in double. Below it the
// check is absolute, at the rounding error (a gradient of 4.5e-6 against a loss of 3.5 at
// h = 1e-4 differs by 9e-12 on an AVX2 build: 2e-6 relative, all of it rounding).
inline double fd_floor(double f0, double h, double rtol) {
  return 1.5 * 2.220446049250313e-16 * std::abs(f0) / h / rtol;
}

inline double rel_err(double a, double b, double floor) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), floor});
}

struct ErrStats {
  double max_rel = 0;
  double max_abs = 0;
  double max_grad = 0;
  int64_t n = 0;
  void add(double analytic, double numeric, double floor) {
    max_rel = std::max(max_rel, rel_err(analytic, numeric, floor));
    max_abs = std::max(max_abs, std::abs(analytic - numeric));
    max_grad = std::max(max_grad, std::abs(analytic));
    ++n;
  }
  void print(const std::string& what) const {
    std::printf("[gradcheck] %-40s coords %6lld  max rel err %.3e  max abs err %.3e  max |g| %.3e\n",
                what.c_str(), static_cast<long long>(n), max_rel, max_abs, max_grad);
  }
};

// Checks every coordinate of x: analytic[i] against the FD of f with respect to x[i].
template <class F>
ErrStats check_all(F&& f, std::vector<double>& x, const std::vector<double>& analytic, double h,
                   double floor) {
  ErrStats s;
  for (size_t i = 0; i < x.size(); ++i) s.add(analytic[i], central_diff5(f, &x[i], h), floor);
  return s;
}

inline std::vector<double> randn(size_t n, uint64_t seed, double scale = 1.0, double mean = 0.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// max |a - b| / max |b| : error of a relative to the scale of the reference b.
template <class A>
double rel_to_max(const std::vector<A>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return den > 0 ? num / den : num;
}

}  // namespace zt::testing
