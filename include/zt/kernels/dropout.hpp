#pragma once
// Inverted dropout with masks from a counter-based stream (zt/core/hash.hpp), the rule the
// LoRA adapters' dropout follows on the CPU (src/model/lora_apply.cpp) and on the GPU
// (zt/kernels/cuda/dropout.hpp): element i of a tensor is kept when the stream's uniform
// in (0, 1] at counter i exceeds p (probability 1 - p), and a kept element is scaled by
// 1 / (1 - p) (torch's inverted dropout). A pure function of (stream, i, p): the backward
// and a recomputed forward regenerate the forward's mask instead of storing it.
// Header-only and C++17, so nvcc compiles the same definition for the device.
#include <cstdint>

#include "zt/core/hash.hpp"

namespace zt::kernels {

ZT_HOST_DEVICE constexpr bool dropout_kept(uint64_t stream, int64_t i, double p) {
  return counter_uniform(stream, i) > p;
}

}  // namespace zt::kernels
