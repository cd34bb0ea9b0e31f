#pragma once
// Bandwidth arithmetic, with nccl-tests' definitions (its doc/PERFORMANCE.md):
//   algbw = S / t                      (GB/s, 1 GB = 1e9 bytes)
//   busbw = algbw * factor(op, n)
//     all_reduce      2 (n-1) / n
//     all_gather      (n-1) / n        S = total bytes gathered (count per rank * n * size)
//     reduce_scatter  (n-1) / n        S = total bytes reduced  (count per rank * n * size)
//     broadcast       1
//     sendrecv        1
//     all_to_all      (n-1) / n        S = total bytes each rank sends (count per peer * n * size)
// busbw is comparable to the hardware's link bandwidth whatever the rank count. The
// factors and shapes live in the table of collectives (checklist/src/collectives.cpp).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "zt/check/ops.hpp"
#include "zt/core/dtype.hpp"

namespace zt::check {

// One row of the sweep. `count` is the count argument of the Comm call: total elements
// for all_reduce, broadcast and sendrecv; elements per rank for all_gather,
// reduce_scatter and all_to_all. `bytes` is S above (the "size" column). Sizes that are
// not a multiple of the element size (times n for the per-rank ops) round down, so a row can
// have count 0; the sweep skips such rows.
struct RowShape {
  size_t count = 0;
  uint64_t bytes = 0;
};
RowShape row_shape(CheckOp op, uint64_t nominal_bytes, DType dtype, int nranks);

double bus_factor(CheckOp op, int nranks);
double alg_bw_gbs(uint64_t bytes, double seconds);
double bus_bw_gbs(CheckOp op, uint64_t bytes, double seconds, int nranks);

// min, min*factor, min*factor^2, ... while <= max (nccl-tests' -b/-e/-f sweep).
// Preconditions (checked by validate_options): 1 <= min <= max, factor >= 2.
std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor);

}  // namespace zt::check
