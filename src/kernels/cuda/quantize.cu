// Block-wise int8 quantization on the GPU, bit for bit the format and arithmetic of
// src/zero/quantize.cpp: one thread block per quantization block.
#include "common.cuh"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cuda/quantize.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Scales sit at byte n + 4k with no alignment promise: moved byte by byte.
__device__ void store_scale(uint8_t* out, size_t n, size_t k, float s) {
  const unsigned u = __float_as_uint(s);
  uint8_t* p = out + n + 4 * k;
  for (int b = 0; b < 4; ++b) p[b] = static_cast<uint8_t>(u >> (8 * b));  // little-endian host
}
__device__ float load_scale(const uint8_t* in, size_t n, size_t k) {
  const uint8_t* p = in + n + 4 * k;
  unsigned u = 0;
  for (int b = 0; b < 4; ++b) u |= static_cast<unsigned>(p[b]) << (8 * b);
  return __uint_as_float(u);
}

__global__ void quantize_kernel(const float* x, size_t n, size_t block, uint8_t* out) {
  __shared__ float scratch[32];
  const size_t blocks = n / block;
  for (size_t k = blockIdx.x; k < blocks; k += gridDim.x) {
    const float* xb = x + k * block;  // [block]
    float amax = 0.0f;
    for (size_t i = threadIdx.x; i < block; i += blockDim.x) amax = fmaxf(amax, fabsf(xb[i]));
    amax = detail::block_max(amax, scratch);
    const float scale = __fdiv_rn(amax, 127.0f);
    const float inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    int8_t* q = reinterpret_cast<int8_t*>(out + k * block);
    for (size_t i = threadIdx.x; i < block; i += blockDim.x) {
      const float r = rintf(__fmul_rn(xb[i], inv));  // round half to even, like nearbyint
      q[i] = static_cast<int8_t>(fminf(fmaxf(r, -127.0f), 127.0f));
    }
    if (threadIdx.x == 0) store_scale(out, n, k, scale);
  }
}

template <bool kAdd>
__global__ void dequantize_kernel(const uint8_t* in, size_t n, size_t block, float* out) {
  const size_t blocks = n / block;
  for (size_t k = blockIdx.x; k < blocks; k += gridDim.x) {
    const float scale = load_scale(in, n, k);
    const int8_t* q = reinterpret_cast<const int8_t*>(in + k * block);
    float* o = out + k * block;
    for (size_t i = threadIdx.x; i < block; i += blockDim.x) {
      const float v = __fmul_rn(static_cast<float>(q[i]), scale);
      if constexpr (kAdd) {
        o[i] = __fadd_rn(o[i], v);
      } else {
        o[i] = v;
      }
    }
  }
}

void check_blocks(size_t n, size_t block) {
  ZT_CHECK(block > 0 && n % block == 0,
           strf("%zu elements are not a whole number of %zu-element blocks", n, block),
           "a bug in the engine's padding: shards are padded to whole blocks");
}

template <bool kAdd>
void launch_dequantize(const uint8_t* in, size_t n, size_t block, float* out,
                       cudaStream_t stream) {
  check_blocks(n, block);
  if (n == 0) return;
  dequantize_kernel<kAdd><<<detail::grid_for(static_cast<int64_t>(n / block), 1), kThreads, 0,
                            stream>>>(in, n, block, out);
  ZT_CUDA_LAUNCH_CHECK("dequantize_kernel");
}

}  // namespace

void quantize_pack(const float* x, size_t n, size_t block, uint8_t* out, cudaStream_t stream) {
  check_blocks(n, block);
  if (n == 0) return;
  quantize_kernel<<<detail::grid_for(static_cast<int64_t>(n / block), 1), kThreads, 0, stream>>>(
      x, n, block, out);
  ZT_CUDA_LAUNCH_CHECK("quantize_kernel");
}

void dequantize(const uint8_t* in, size_t n, size_t block, float* out, cudaStream_t stream) {
  launch_dequantize<false>(in, n, block, out, stream);
}

void dequantize_add(const uint8_t* in, size_t n, size_t block, float* out, cudaStream_t stream) {
  launch_dequantize<true>(in, n, block, out, stream);
}

}  // namespace zt::kernels::cuda
