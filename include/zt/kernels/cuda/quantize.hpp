#pragma once
// Block-wise symmetric int8 quantization on the GPU: the qwZ / qgZ wire format of
// zt/zero/quantize.hpp, bit for bit (same scale, same 127/amax, same round-half-to-even,
// same packing: n int8 values, then n / block float scales, native byte order, no
// alignment assumed). One thread block per quantization block.
#include <cstddef>
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// x [n] -> out [n + 4 n / block] bytes. n % block == 0 (else zt::Error).
void quantize_pack(const float* x, size_t n, size_t block, uint8_t* out,
                   cudaStream_t stream = nullptr);

// in [n + 4 n / block] -> out [n] = the dequantized values.
void dequantize(const uint8_t* in, size_t n, size_t block, float* out,
                cudaStream_t stream = nullptr);

// out [n] += the dequantized values of in.
void dequantize_add(const uint8_t* in, size_t n, size_t block, float* out,
                    cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
