#pragma once
// Rotary position embedding, Hugging Face Llama "rotate_half" convention (CPU reference).
// For a head vector x of size D (half = D / 2), position p, i in [0, half):
//   angle_i = p * theta^(-2 i / D)
//   y[i]        = x[i] cos(angle_i) - x[i + half] sin(angle_i)
//   y[i + half] = x[i + half] cos(angle_i) + x[i] sin(angle_i)
// Positions are 0..T-1 within each sequence, or per token (pos [B, Tn]: packed examples
// restart at 0 at each example boundary, as HF's position_ids).
#include <cstdint>

namespace zt::kernels::cpu {

// cos, sin [T_max, D/2] (written), computed in double then rounded to T.
template <class T>
void rope_table(T* cos, T* sin, int64_t T_max, int64_t D, double theta);

// In place: x [B, Tn, nh, D] is rotated (nh heads per position).
//   cos, sin [>= Tn, D/2]
//   pos      [B, Tn] positions in [0, Tn) (nullptr: position t at index t)
template <class T>
void rope_forward(T* x, const T* cos, const T* sin, int64_t B, int64_t Tn, int64_t nh, int64_t D,
                  const int32_t* pos = nullptr);

// In place: dx [B, Tn, nh, D] holds dL/dy on entry and dL/dx on exit (the inverse
// rotation: the map is orthogonal). This is the one backward that does not accumulate.
template <class T>
void rope_backward(T* dx, const T* cos, const T* sin, int64_t B, int64_t Tn, int64_t nh,
                   int64_t D, const int32_t* pos = nullptr);

}  // namespace zt::kernels::cpu
