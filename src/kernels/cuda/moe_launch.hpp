#pragma once
// Internal checks and launch shapes of the mixture-of-experts kernels (moe.cu,
// moe_shared.cu, moe_experts.cpp); the
// gather, combine and weight-backward launches are public (zt/kernels/cuda/moe.hpp).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda::detail {

// Throws zt::InputError unless 1 <= k <= E <= kMoeMaxExperts.
void check_moe_shape(int64_t E, int64_t k, const char* what);

// Blocks of 256 threads for a warp per row over `rows` rows.
inline unsigned warps_grid(int64_t rows) {
  return static_cast<unsigned>((rows * 32 + 255) / 256);
}

}  // namespace zt::kernels::cuda::detail
