#pragma once
// Internal checks of the mixture-of-experts kernels (moe.cu, moe_experts.cpp); the
// gather, combine and weight-backward launches are public (zt/kernels/cuda/moe.hpp).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda::detail {

// Throws zt::InputError unless 1 <= k <= E <= kMoeMaxExperts.
void check_moe_shape(int64_t E, int64_t k, const char* what);

}  // namespace zt::kernels::cuda::detail
