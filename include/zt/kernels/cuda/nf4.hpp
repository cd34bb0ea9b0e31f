#pragma once
// NF4 + double quantization on the GPU: dequantizing a tensor stored in the format of
// zt/kernels/nf4.hpp (QLoRA's frozen base weights), bit for bit the CPU's values in fp32
// (c1 = map[absmax_code] * c2 + offset, then level * c1, each operation rounded once) and
// those values rounded to nearest-even in bf16. Quantizing happens once, on the CPU.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// Device pointers to a quantized tensor of n elements (shapes as in nf4::Quantized).
struct Nf4View {
  const uint8_t* codes = nullptr;         // [ceil(n / 2)]
  const uint8_t* absmax_codes = nullptr;  // [ceil(n / 64)]
  const float* absmax_scale = nullptr;    // [ceil(ceil(n / 64) / 256)]
  float offset = 0.0f;
  int64_t n = 0;
};

// out [q.n] = the dequantized tensor; T = float or bf16_t. Each thread decodes 32
// elements (16 code bytes: one 128-bit load and 128-bit stores where codes and out are
// 16-byte aligned; byte loads for a partial last chunk).
template <class T>
void dequantize_nf4(const Nf4View& q, T* out, cudaStream_t stream = nullptr);

}  // namespace zt::kernels::cuda
