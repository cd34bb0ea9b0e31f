// NF4 + double quantization: dequantizing on the GPU (format: zt/kernels/nf4.hpp).
#include "common.cuh"
#include "nf4_launch.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 32;  // elements per thread: 16 code bytes, one 128-bit load

template <class T>
__global__ void dequantize_nf4_kernel(const uint8_t* codes, const uint8_t* absmax_codes,
                                      const float* absmax_scale, float offset, int64_t n,
                                      bool aligned, detail::Nf4Tables tables, T* out) {
  __shared__ float nf4[16];   // [16] NF4 levels
  __shared__ float map[256];  // [256] the dynamic 8-bit map
  for (int i = threadIdx.x; i < 256; i += blockDim.x) map[i] = tables.map[i];
  if (threadIdx.x < 16) nf4[threadIdx.x] = tables.nf4[threadIdx.x];
  __syncthreads();

  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks;
       c += stride) {
    const int64_t first = c * kChunk;
    const int count = static_cast<int>(n - first < kChunk ? n - first : kChunk);
    const bool vec = aligned && count == kChunk;
    // A 32-element chunk lies inside one 64-element block.
    const int64_t block = first / detail::kNf4Block;
    const float c1 = __fadd_rn(
        __fmul_rn(map[absmax_codes[block]], absmax_scale[block / detail::kNf4StatBlock]), offset);

    alignas(16) uint8_t bytes[kChunk / 2];  // [16] two codes each, high nibble first
    if (vec) {
      *reinterpret_cast<uint4*>(bytes) = *reinterpret_cast<const uint4*>(codes + first / 2);
    } else {
      for (int k = 0; k < (count + 1) / 2; ++k) bytes[k] = codes[first / 2 + k];
    }
    alignas(16) T vals[kChunk];  // [32] decoded
#pragma unroll
    for (int k = 0; k < kChunk / 2; ++k) {
      vals[2 * k] = detail::from_f32<T>(__fmul_rn(nf4[bytes[k] >> 4], c1));
      vals[2 * k + 1] = detail::from_f32<T>(__fmul_rn(nf4[bytes[k] & 0x0F], c1));
    }
    if (vec) {
      constexpr int kStores = kChunk * static_cast<int>(sizeof(T)) / 16;
      uint4* dst = reinterpret_cast<uint4*>(out + first);
#pragma unroll
      for (int s = 0; s < kStores; ++s) dst[s] = reinterpret_cast<const uint4*>(vals)[s];
    } else {
      for (int k = 0; k < count; ++k) out[first + k] = vals[k];
    }
  }
}

}  // namespace

namespace detail {

template <class T>
void launch_dequantize_nf4(const Nf4View& q, const Nf4Tables& tables, T* out,
                           cudaStream_t stream) {
  const bool aligned = aligned16(q.codes, out);  // common.cuh
  const int64_t chunks = (q.n + kChunk - 1) / kChunk;
  dequantize_nf4_kernel<T><<<grid_for(chunks, kThreads), kThreads, 0, stream>>>(
      q.codes, q.absmax_codes, q.absmax_scale, q.offset, q.n, aligned, tables, out);
  ZT_CUDA_LAUNCH_CHECK("dequantize_nf4_kernel");
}

template void launch_dequantize_nf4<float>(const Nf4View&, const Nf4Tables&, float*, cudaStream_t);
template void launch_dequantize_nf4<bf16_t>(const Nf4View&, const Nf4Tables&, bf16_t*,
                                            cudaStream_t);

}  // namespace detail
}  // namespace zt::kernels::cuda
