// algbw/busbw and the sweep's sizes (include/zt/check/bandwidth.hpp).
#include "zt/check/bandwidth.hpp"

#include "collectives.hpp"
#include "zt/core/error.hpp"

namespace zt::check {

RowShape row_shape(CheckOp op, uint64_t nominal_bytes, DType dtype, int nranks) {
  const uint64_t elem = dtype_size(dtype);
  const uint64_t parts = collective(op).per_rank ? static_cast<uint64_t>(nranks) : 1;
  const uint64_t count = nominal_bytes / (elem * parts);
  return {static_cast<size_t>(count), count * parts * elem};
}

double bus_factor(CheckOp op, int nranks) {
  return collective(op).bus_factor(static_cast<double>(nranks));
}

double alg_bw_gbs(uint64_t bytes, double seconds) {
  if (seconds <= 0.0) return 0.0;
  return static_cast<double>(bytes) / 1.0e9 / seconds;
}

double bus_bw_gbs(CheckOp op, uint64_t bytes, double seconds, int nranks) {
  return alg_bw_gbs(bytes, seconds) * bus_factor(op, nranks);
}

std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor) {
  ZT_CHECK(min_bytes >= 1 && min_bytes <= max_bytes && factor >= 2, "bad sweep bounds",
           "validate_options() checks these before the sweep");
  std::vector<uint64_t> sizes;
  for (uint64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;  // the next step would pass max (or overflow)
  }
  return sizes;
}

}  // namespace zt::check
