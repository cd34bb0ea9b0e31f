#pragma once
// Internal: the launchers of the GPU stress kernels (stress.cu, compiled as C++17 by nvcc),
// called by the C++20 measurements (stress.cpp; zt/kernels/cuda/stress.hpp). Every launcher
// checks its launch (ZT_CUDA_LAUNCH_CHECK).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda::detail {

// The pattern the kernels use, on the host: splitmix64's finaliser, and the burn's operand
// value of element i under a seed (one of +-0.5, +-1, +-1.5, +-2).
uint64_t mix_host(uint64_t x);
float burn_value_host(uint64_t seed, uint64_t i);

// p[i] = burn value (seed, i), as bf16, for i < n.
void launch_fill_burn(bf16_t* p, int64_t n, uint64_t seed, int blocks, cudaStream_t stream);
// *wrong += the elements whose bits differ between a and b.
void launch_count_differences(const float* a, const float* b, int64_t n, unsigned long long* wrong, int blocks,
                              cudaStream_t stream);
// out[s] = d[index[s]] for s < count.
void launch_gather(const float* d, const int64_t* index, float* out, int count, cudaStream_t stream);
// The HBM test's 16-byte words: fill with the pattern of the word index, copy, count the
// words that differ from the pattern.
void launch_fill_words(uint4* p, int64_t words, uint64_t seed, int blocks, cudaStream_t stream);
void launch_copy_words(uint4* dst, const uint4* src, int64_t words, int blocks, cudaStream_t stream);
void launch_count_wrong_words(const uint4* p, int64_t words, uint64_t seed, unsigned long long* wrong, int blocks,
                              cudaStream_t stream);

}  // namespace zt::kernels::cuda::detail
