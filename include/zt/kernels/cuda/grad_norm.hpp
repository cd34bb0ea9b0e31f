#pragma once
// Global gradient norm on the GPU: sums of squares in double, reduced in a fixed order
// (a fixed grid of kSumSquaresBlocks blocks writes partial sums; one block adds them), so
// the result does not depend on timing. The global norm over units and ranks is
// sqrt(sum of each unit's sum_squares), all-reduced over ranks by the caller.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

inline constexpr int kSumSquaresBlocks = 256;

//   total   [1] double, device: WRITTEN with sum(x^2), or ADDED to when accumulate
//   x       [n] G = float or bf16_t
//   partial [kSumSquaresBlocks] double, device scratch
template <class G>
void sum_squares(double* total, const G* x, int64_t n, double* partial, bool accumulate,
                 cudaStream_t stream = nullptr);

// x[i] *= factor (clipping), computed in fp32.
template <class G>
void scale_inplace(G* x, int64_t n, float factor, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
