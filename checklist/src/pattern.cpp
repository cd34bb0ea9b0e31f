// The verification pattern: fill and check (include/zt/check/pattern.hpp).
#include "zt/check/pattern.hpp"

#include <algorithm>

#include "zt/core/error.hpp"

namespace zt::check {
namespace {

// Element <-> double for every supported type.
template <typename T> T to_elem(double v) { return static_cast<T>(v); }
template <> bf16 to_elem<bf16>(double v) { return bf16(static_cast<float>(v)); }
template <> f16 to_elem<f16>(double v) { return f16(static_cast<float>(v)); }
template <typename T> double from_elem(T x) { return static_cast<double>(x); }
template <> double from_elem<bf16>(bf16 x) { return static_cast<double>(static_cast<float>(x)); }
template <> double from_elem<f16>(f16 x) { return static_cast<double>(static_cast<float>(x)); }

// Calls f(T{}) with the C++ type of `dtype`.
template <typename F>
void with_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(float{}); return;
    case DType::kF64: f(double{}); return;
    case DType::kBF16: f(bf16{}); return;
    case DType::kF16: f(f16{}); return;
    case DType::kI8: f(int8_t{}); return;
    case DType::kI32: f(int32_t{}); return;
    case DType::kI64: f(int64_t{}); return;
    case DType::kU8: break;
  }
  throw InputError("zt check does not verify " + std::string(dtype_name(dtype)),
                   "use float, double, bfloat16, half, int8, int32 or int64");
}

// b(i) for consecutive i without a division per element.
struct Cycle {
  uint64_t m, b;
  Cycle(uint64_t modulus, uint64_t first) : m(modulus), b(first % modulus) {}
  double next() {
    const double v = static_cast<double>(b);
    if (++b == m) b = 0;
    return v;
  }
};

}  // namespace

struct PatternAccess {
  static uint64_t m(const Pattern& p) { return p.m_; }
  static uint64_t seed(const Pattern& p) { return p.seed_; }
  static uint64_t distinct_m(const Pattern& p) { return p.distinct_m_; }
  static void reduction_terms(const Pattern& p, comm::ReduceOp op, double* base, double* scale) {
    p.reduced(op, 0);  // throws for a reduction the pattern cannot verify
    *scale = op == comm::ReduceOp::kSum ? static_cast<double>(p.n_) : 1.0;
    *base = op == comm::ReduceOp::kSum ? p.a_sum_ : op == comm::ReduceOp::kMax ? p.a_max_ : p.a_min_;
  }
  static double a(const Pattern& p, int rank) {
    return static_cast<double>((static_cast<uint64_t>(rank) + p.seed_) % p.m_);
  }
};

uint64_t exact_integer_limit(DType dtype) {
  switch (dtype) {
    case DType::kF32: return uint64_t{1} << 24;
    case DType::kF64: return uint64_t{1} << 53;
    case DType::kBF16: return 256;
    case DType::kF16: return 2048;
    case DType::kI8: return 127;
    case DType::kU8: return 255;
    case DType::kI32: return (uint64_t{1} << 31) - 1;
    case DType::kI64: return (uint64_t{1} << 62);
  }
  return 0;
}

uint64_t distinct_modulus(DType dtype) {
  switch (dtype) {  // largest primes below the bounds (checked in test_pattern.cpp)
    case DType::kBF16: return 257;
    case DType::kF16: return 2039;
    case DType::kI8: return 127;
    case DType::kU8: return 251;
    case DType::kF32: return (uint64_t{1} << 24) - 3;
    case DType::kI32: return (uint64_t{1} << 31) - 1;
    case DType::kF64:
    case DType::kI64: return (uint64_t{1} << 53) - 111;  // values go through double
  }
  return 1;
}

Pattern::Pattern(DType dtype, int nranks, uint32_t seed)
    : n_(nranks), seed_(seed), distinct_m_(distinct_modulus(dtype)) {
  ZT_CHECK(nranks >= 1, "pattern needs at least one rank", "");
  // Worst case sum: n * ((m-1) + (m-1)) <= limit.
  const uint64_t limit = exact_integer_limit(dtype);
  const uint64_t per_term = limit / (2 * static_cast<uint64_t>(nranks));
  m_ = std::clamp<uint64_t>(per_term + 1, 1, 13);
  for (int r = 0; r < nranks; ++r) {
    const double a = PatternAccess::a(*this, r);
    a_sum_ += a;
    a_max_ = r == 0 ? a : std::max(a_max_, a);
    a_min_ = r == 0 ? a : std::min(a_min_, a);
  }
}

double Pattern::value(int rank, uint64_t index) const {
  return PatternAccess::a(*this, rank) + static_cast<double>((index + seed_) % m_);
}

double Pattern::reduced(comm::ReduceOp op, uint64_t index) const {
  const double b = static_cast<double>((index + seed_) % m_);
  switch (op) {
    case comm::ReduceOp::kSum: return a_sum_ + static_cast<double>(n_) * b;
    case comm::ReduceOp::kMax: return a_max_ + b;
    case comm::ReduceOp::kMin: return a_min_ + b;
    case comm::ReduceOp::kAvg: break;
  }
  throw InputError("zt check verifies sum, max and min only", "use --op sum, max or min");
}

double Pattern::distinct(uint64_t id) const {
  return static_cast<double>((id % distinct_m_ + seed_) % distinct_m_);
}

void fill_pattern(void* dst, DType dtype, size_t count, const Pattern& p, int rank,
                  uint64_t first_index) {
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dst);  // [count]
    const double a = PatternAccess::a(p, rank);
    Cycle b(PatternAccess::m(p), first_index + PatternAccess::seed(p));
    for (size_t k = 0; k < count; ++k) out[k] = to_elem<T>(a + b.next());
  });
}

void fill_value(void* dst, DType dtype, size_t count, double value) {
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dst);  // [count]
    const T v = to_elem<T>(value);
    std::fill(out, out + count, v);
  });
}

int64_t count_wrong_from_rank(const void* src, DType dtype, size_t count, const Pattern& p,
                              int rank, uint64_t first_index) {
  int64_t wrong = 0;
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(src);  // [count]
    const double a = PatternAccess::a(p, rank);
    Cycle b(PatternAccess::m(p), first_index + PatternAccess::seed(p));
    for (size_t k = 0; k < count; ++k)
      if (from_elem<T>(in[k]) != a + b.next()) ++wrong;
  });
  return wrong;
}

int64_t count_wrong_reduced(const void* src, DType dtype, size_t count, const Pattern& p,
                            comm::ReduceOp op, uint64_t first_index) {
  // reduced(op, i) = base + scale * b(i)
  double base = 0.0, scale = 1.0;
  PatternAccess::reduction_terms(p, op, &base, &scale);
  int64_t wrong = 0;
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(src);  // [count]
    Cycle b(PatternAccess::m(p), first_index + PatternAccess::seed(p));
    for (size_t k = 0; k < count; ++k)
      if (from_elem<T>(in[k]) != base + scale * b.next()) ++wrong;
  });
  return wrong;
}

void fill_distinct(void* dst, DType dtype, size_t count, const Pattern& p, uint64_t first_id) {
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dst);  // [count]
    Cycle g(PatternAccess::distinct_m(p), first_id % PatternAccess::distinct_m(p) + PatternAccess::seed(p));
    for (size_t k = 0; k < count; ++k) out[k] = to_elem<T>(g.next());
  });
}

int64_t count_wrong_distinct(const void* src, DType dtype, size_t count, const Pattern& p,
                             uint64_t first_id) {
  int64_t wrong = 0;
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(src);  // [count]
    Cycle g(PatternAccess::distinct_m(p), first_id % PatternAccess::distinct_m(p) + PatternAccess::seed(p));
    for (size_t k = 0; k < count; ++k)
      if (from_elem<T>(in[k]) != g.next()) ++wrong;
  });
  return wrong;
}

}  // namespace zt::check
