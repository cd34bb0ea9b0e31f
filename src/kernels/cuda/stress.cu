// The kernels of the GPU stress (stress_launch.hpp; the measurements are stress.cpp): the
// burn's operands, the comparisons that count wrong results, the 128-bit copy.
#include "common.cuh"
#include "stress_launch.hpp"

namespace zt::kernels::cuda::detail {
namespace {

// splitmix64's finaliser: the pattern of element i under a seed.
__host__ __device__ inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// One of +-0.5, +-1, +-1.5, +-2: exact in bf16; products are multiples of 1/4 up to 4, so
// a sum of 8192 of them (|s| <= 2^15, 17 significant bits) is exact in fp32.
__host__ __device__ inline float burn_value(uint64_t seed, uint64_t i) {
  const uint64_t h = mix(seed ^ mix(i));
  const float magnitude = 0.5f * static_cast<float>((h & 3u) + 1u);
  return (h & 4u) != 0 ? -magnitude : magnitude;
}

__host__ __device__ inline uint4 hbm_word(uint64_t seed, uint64_t i) {
  const uint64_t h = mix(seed ^ mix(i));
  return make_uint4(static_cast<unsigned>(h), static_cast<unsigned>(h >> 32), static_cast<unsigned>(~h),
                    static_cast<unsigned>(i));
}

__device__ inline int64_t first_index() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void fill_burn_kernel(bf16_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) p[i] = __float2bfloat16_rn(burn_value(seed, i));
}

// wrong += the elements whose bits differ between a and b.
__global__ void count_differences_kernel(const float* a, const float* b, int64_t n, unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) mine += __float_as_uint(a[i]) != __float_as_uint(b[i]) ? 1 : 0;
  if (mine != 0) atomicAdd(wrong, mine);
}

__global__ void gather_kernel(const float* d, const int64_t* index, float* out, int count) {
  const int64_t i = first_index();
  if (i < count) out[i] = d[index[i]];
}

__global__ void fill_words_kernel(uint4* p, int64_t words, uint64_t seed) {
  for (int64_t i = first_index(); i < words; i += grid_stride()) p[i] = hbm_word(seed, i);
}

// dst = src in 16-byte words: four independent loads in flight per thread, then the tail.
__global__ void copy_words_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, int64_t words) {
  const int64_t stride = grid_stride();
  int64_t i = first_index();
  for (; i + 3 * stride < words; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < words; i += stride) dst[i] = src[i];
}

__global__ void count_wrong_words_kernel(const uint4* p, int64_t words, uint64_t seed, unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (int64_t i = first_index(); i < words; i += grid_stride()) {
    const uint4 w = p[i], e = hbm_word(seed, i);
    mine += w.x != e.x || w.y != e.y || w.z != e.z || w.w != e.w ? 1 : 0;
  }
  if (mine != 0) atomicAdd(wrong, mine);
}

}  // namespace

uint64_t mix_host(uint64_t x) { return mix(x); }
float burn_value_host(uint64_t seed, uint64_t i) { return burn_value(seed, i); }

void launch_fill_burn(bf16_t* p, int64_t n, uint64_t seed, int blocks, cudaStream_t stream) {
  fill_burn_kernel<<<blocks, 256, 0, stream>>>(p, n, seed);
  ZT_CUDA_LAUNCH_CHECK("fill_burn_kernel");
}

void launch_count_differences(const float* a, const float* b, int64_t n, unsigned long long* wrong, int blocks,
                              cudaStream_t stream) {
  count_differences_kernel<<<blocks, 256, 0, stream>>>(a, b, n, wrong);
  ZT_CUDA_LAUNCH_CHECK("count_differences_kernel");
}

void launch_gather(const float* d, const int64_t* index, float* out, int count, cudaStream_t stream) {
  gather_kernel<<<(count + 255) / 256, 256, 0, stream>>>(d, index, out, count);
  ZT_CUDA_LAUNCH_CHECK("gather_kernel");
}

void launch_fill_words(uint4* p, int64_t words, uint64_t seed, int blocks, cudaStream_t stream) {
  fill_words_kernel<<<blocks, 256, 0, stream>>>(p, words, seed);
  ZT_CUDA_LAUNCH_CHECK("fill_words_kernel");
}

void launch_copy_words(uint4* dst, const uint4* src, int64_t words, int blocks, cudaStream_t stream) {
  copy_words_kernel<<<blocks, 256, 0, stream>>>(dst, src, words);
  ZT_CUDA_LAUNCH_CHECK("copy_words_kernel");
}

void launch_count_wrong_words(const uint4* p, int64_t words, uint64_t seed, unsigned long long* wrong, int blocks,
                              cudaStream_t stream) {
  count_wrong_words_kernel<<<blocks, 256, 0, stream>>>(p, words, seed, wrong);
  ZT_CUDA_LAUNCH_CHECK("count_wrong_words_kernel");
}

}  // namespace zt::kernels::cuda::detail
