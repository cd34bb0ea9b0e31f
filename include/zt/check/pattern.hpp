#pragma once
// The verification pattern behind `#wrong`. Every element is a small integer, so sums,
// maxima and minima over all ranks are exact in every supported type and the expected
// result has a closed form:
//
//   value(rank, i) = a(rank) + b(i),  a(r) = (r + seed) mod m,  b(i) = (i + seed) mod m
//   sum over ranks  = SUM_r a(r) + n * b(i)
//   max over ranks  = MAX_r a(r) + b(i)          min likewise
//
// m (2..13) is the largest modulus whose worst-case sum 2 (m-1) n stays an exact integer
// in the element type (2^24 for float, 256 for bfloat16, ...); m = 1 (all zeros) only
// when even that is impossible. Buffers that must be overwritten start as kPoison (-1),
// which no result can equal.
//
// Ops that only move data (all_to_all) use the distinct pattern instead: element id g
// holds distinct(g) = (g + seed) mod M, M the largest prime whose values 0..M-1 are exact
// in the type (257 for bfloat16, 2039 for half, 2^24-3 for float, 2^53-111 for double and
// int64). all_to_all gives element k of the block rank s sends rank d the id
// (s n + d) count + k: every (sender, receiver, element) has its own value while
// n n count <= M, and a block from a wrong sender, for a wrong receiver or shifted by any
// amount that M does not divide reads wrong.
#include <cstddef>
#include <cstdint>

#include "zt/comm/comm.hpp"
#include "zt/core/dtype.hpp"

namespace zt::check {

// Largest integer N such that every integer in [-N, N] is exact in `dtype`.
uint64_t exact_integer_limit(DType dtype);
// M of the distinct pattern: the largest prime <= min(limit + 1, 2^53).
uint64_t distinct_modulus(DType dtype);

class Pattern {
 public:
  static constexpr double kPoison = -1.0;

  Pattern(DType dtype, int nranks, uint32_t seed);

  int modulus() const { return m_; }
  double value(int rank, uint64_t index) const;
  // The reduction over all ranks of value(r, index), from the closed form above.
  double reduced(comm::ReduceOp op, uint64_t index) const;
  // The distinct pattern's value of element id g.
  double distinct(uint64_t id) const;

 private:
  friend struct PatternAccess;
  int n_ = 1;
  uint64_t m_ = 1;
  uint64_t seed_ = 0;
  uint64_t distinct_m_ = 1;
  double a_sum_ = 0.0, a_max_ = 0.0, a_min_ = 0.0;
};

// dst[k] = value(rank, first_index + k) for k in [0, count), stored as `dtype`.
void fill_pattern(void* dst, DType dtype, size_t count, const Pattern& p, int rank,
                  uint64_t first_index);
// dst[k] = value for k in [0, count).
void fill_value(void* dst, DType dtype, size_t count, double value);
// Elements k with src[k] != value(rank, first_index + k).
int64_t count_wrong_from_rank(const void* src, DType dtype, size_t count, const Pattern& p,
                              int rank, uint64_t first_index);
// Elements k with src[k] != reduced(op, first_index + k).
int64_t count_wrong_reduced(const void* src, DType dtype, size_t count, const Pattern& p,
                            comm::ReduceOp op, uint64_t first_index);
// dst[k] = distinct(first_id + k) for k in [0, count).
void fill_distinct(void* dst, DType dtype, size_t count, const Pattern& p, uint64_t first_id);
// Elements k with src[k] != distinct(first_id + k).
int64_t count_wrong_distinct(const void* src, DType dtype, size_t count, const Pattern& p,
                             uint64_t first_id);

}  // namespace zt::check
