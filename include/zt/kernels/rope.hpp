#pragma once
// Rotary position embedding, Hugging Face Llama "rotate_half" convention (CPU reference).
// For a head vector x of size D, the first rd = rotary_dim of its dims rotate (partial
// rotary: transformers' rd = int(D * partial_rotary_factor); rd = D by default), the rest
// pass through unchanged. With half = rd / 2, position p, i in [0, half):
//   angle_i = p * inv_freq_i, inv_freq_i = theta^(-2 i / rd) (scaled: RopeScaling below)
//   y[i]        = a (x[i] cos(angle_i) - x[i + half] sin(angle_i))
//   y[i + half] = a (x[i + half] cos(angle_i) + x[i] sin(angle_i))
// where a = rope_attention_factor(scaling) (1 except for yarn) is folded into the tables.
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
//   "yarn"     YaRN (_compute_yarn_parameters; gpt-oss, DeepSeek-V3): with
//              corr(n) = rd ln(L / (2 pi n)) / (2 ln theta), low = corr(beta_fast),
//              high = corr(beta_slow) (floor / ceil when truncate), clamped to [0, rd - 1],
//              ramp_i = clamp((i - low) / (high - low), 0, 1) (high += 0.001 if equal):
//              inv_freq_i = ramp_i inv_freq_i / factor + (1 - ramp_i) inv_freq_i.
//              Attention factor (multiplies cos and sin): attention_factor when > 0, else
//              m(factor, mscale) / m(factor, mscale_all_dim) when both are non-zero, else
//              m(factor, 1), with m(s, k) = 0.1 k ln(s) + 1 for s > 1, 1 otherwise.
// A field transformers reads as optional is 0 here when absent (mscale, mscale_all_dim,
// attention_factor); beta_fast / beta_slow 0 read as transformers' defaults 32 / 1.
struct RopeScaling {
  std::string type = "default";
  double factor = 1.0;            // linear, llama3, yarn
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_context = 0;   // llama3, yarn: original_max_position_embeddings
  double beta_fast = 32.0;        // yarn
  double beta_slow = 1.0;         // yarn
  bool truncate = true;           // yarn: round the correction range to whole dims
  double mscale = 0.0;            // yarn (DeepSeek): 0 = absent
  double mscale_all_dim = 0.0;    // yarn (DeepSeek): 0 = absent
  double attention_factor = 0.0;  // yarn: 0 = derived from factor (and mscale)
  bool operator==(const RopeScaling&) const = default;
};

// The rd/2 inverse frequencies for rotary size rd (the head size D, or the rotary part of
// it), base theta and scaling s, in double (the formula of transformers, which evaluates
// it in fp32).
std::vector<double> rope_inv_freq(int64_t rd, double theta, const RopeScaling& s = {});

// The factor transformers multiplies cos and sin by: yarn's (above), 1 for the other types.
double rope_attention_factor(const RopeScaling& s);

}  // namespace zt::kernels

namespace zt::kernels::cpu {

// cos, sin [T_max, rd/2] (written): a cos(angle), a sin(angle) with angle
// p * rope_inv_freq(rd, theta, scaling)_i and a = rope_attention_factor(scaling), computed
// in double then rounded to T. rd: the rotary size (D, or the rotary part of a head).
template <class T>
void rope_table(T* cos, T* sin, int64_t T_max, int64_t rd, double theta,
                const RopeScaling& scaling = {});

// In place: x [B, Tn, nh, D] is rotated (nh heads per position), its first rotary_dim
// dims of each head (0: all D; even, <= D), the rest unchanged.
//   cos, sin [>= Tn, rotary_dim/2]
//   pos      [B, Tn] positions in [0, Tn) (nullptr: position t at index t)
template <class T>
void rope_forward(T* x, const T* cos, const T* sin, int64_t B, int64_t Tn, int64_t nh, int64_t D,
                  const int32_t* pos = nullptr, int64_t rotary_dim = 0);

// In place: dx [B, Tn, nh, D] holds dL/dy on entry and dL/dx on exit (the transposed
// map: a times the inverse rotation on the rotary dims, identity on the rest). This is the
// one backward that does not accumulate.
template <class T>
void rope_backward(T* dx, const T* cos, const T* sin, int64_t B, int64_t Tn, int64_t nh,
                   int64_t D, const int32_t* pos = nullptr, int64_t rotary_dim = 0);

}  // namespace zt::kernels::cpu
