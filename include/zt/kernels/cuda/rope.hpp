#pragma once
// Rotary position embedding on the GPU, Hugging Face rotate_half convention (same as
// zt/kernels/rope.hpp). The cos/sin tables are fp32 on the device, made on the host by
// zt::kernels::cpu::rope_table<float> (double, rounded once) and uploaded once.
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// In place: x [B, Tn, nh, D] T is rotated by +angle (positions 0..Tn-1 per sequence, or
// pos [B, Tn] int32 on the device: packed examples, as zt::kernels::cpu::rope_forward),
// its first rotary_dim dims of each head (0: all D; partial rotary), the rest unchanged.
//   cos, sin [>= Tn, rotary_dim/2] float, device
template <class T>
void rope_forward(T* x, const float* cos, const float* sin, int64_t B, int64_t Tn, int64_t nh,
                  int64_t D, cudaStream_t stream = nullptr, const int32_t* pos = nullptr,
                  int64_t rotary_dim = 0);

// In place: dx holds dL/dy on entry and dL/dx on exit (the transposed map: rotation by
// -angle with the same tables on the rotary dims, identity on the rest).
template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, int64_t B, int64_t Tn, int64_t nh,
                   int64_t D, cudaStream_t stream = nullptr, const int32_t* pos = nullptr,
                   int64_t rotary_dim = 0);

}  // namespace zt::kernels::cuda
