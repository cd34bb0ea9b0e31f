#pragma once
// Rotary position embedding, Hugging Face Llama "rotate_half" convention (CPU reference).
// For a head vector x of size D (half = D / 2), position p, i in [0, half):
//   angle_i = p * inv_freq_i, inv_freq_i = theta^(-2 i / D) (scaled: RopeScaling below)
//   y[i]        = x[i] cos(angle_i) - x[i + half] sin(angle_i)
//   y[i + half] = x[i + half] cos(angle_i) + x[i] sin(angle_i)
// Positions are 0..T-1 within each sequence, or per token (pos [B, Tn]: packed examples
// restart at 0 at each example boundary, as HF's position_ids).
#include <cstdint>
#include <string>
#include <vector>

namespace zt::kernels {

// RoPE frequency scaling, as Hugging Face transformers' rope_type (modeling_rope_utils.py):
//   "default"  inv_freq_i = theta^(-2 i / D)
//   "linear"   inv_freq_i / factor (positions interpolated by factor)
//   "llama3"   Llama 3.1's: with wavelen_i = 2 pi / inv_freq_i, L = original_context,
//              wavelen_i < L / high_freq_factor: unchanged; wavelen_i > L / low_freq_factor:
//              inv_freq_i / factor; between: (1 - s) inv_freq_i / factor + s inv_freq_i with
//              s = (L / wavelen_i - low_freq_factor) / (high_freq_factor - low_freq_factor)
//              (_compute_llama3_parameters; its attention factor is 1, as linear's).
struct RopeScaling {
  std::string type = "default";
  double factor = 1.0;            // linear, llama3
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_context = 0;   // llama3: original_max_position_embeddings
  bool operator==(const RopeScaling&) const = default;
};

// The D/2 inverse frequencies for head size D, base theta and scaling s, in double (the
// formula of transformers, which evaluates it in fp32).
std::vector<double> rope_inv_freq(int64_t D, double theta, const RopeScaling& s = {});

}  // namespace zt::kernels

namespace zt::kernels::cpu {

// cos, sin [T_max, D/2] (written): angle p * rope_inv_freq(D, theta, scaling)_i computed in
// double then rounded to T.
template <class T>
void rope_table(T* cos, T* sin, int64_t T_max, int64_t D, double theta,
                const RopeScaling& scaling = {});

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
