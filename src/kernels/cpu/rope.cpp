// Rotary position embedding (HF rotate_half convention), forward and backward, in place.
#include "zt/kernels/rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "eigen_maps.hpp"

namespace zt::kernels {

namespace {
// YaRN's m(s, k) (transformers' get_mscale).
double yarn_mscale(double scale, double k) {
  return scale <= 1 ? 1.0 : 0.1 * k * std::log(scale) + 1.0;
}

// transformers' _compute_yarn_parameters on f = the unscaled inv_freq over rd dims.
void yarn_inv_freq(std::vector<double>& f, int64_t rd, double theta, const RopeScaling& s) {
  const double beta_fast = s.beta_fast != 0 ? s.beta_fast : 32.0;
  const double beta_slow = s.beta_slow != 0 ? s.beta_slow : 1.0;
  const double dim = static_cast<double>(rd);
  const double L = static_cast<double>(s.original_context);
  // the dim at which a wavelength turns n times in the original context (find_correction_dim)
  const auto corr = [&](double n) {
    return dim * std::log(L / (n * 2 * std::numbers::pi)) / (2 * std::log(theta));
  };
  double low = corr(beta_fast), high = corr(beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
  for (size_t i = 0; i < f.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;  // weight of the unscaled frequency
    f[i] = f[i] / s.factor * (1 - extrapolation) + f[i] * extrapolation;
  }
}
}  // namespace

double rope_attention_factor(const RopeScaling& s) {
  if (s.type != "yarn") return 1.0;
  if (s.attention_factor > 0) return s.attention_factor;
  if (s.mscale != 0 && s.mscale_all_dim != 0)
    return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
  return yarn_mscale(s.factor, 1.0);
}

std::vector<double> rope_inv_freq(int64_t rd, double theta, const RopeScaling& s) {
  const int64_t half = rd / 2;
  std::vector<double> f(static_cast<size_t>(half));  // [rd/2]
  for (int64_t i = 0; i < half; ++i)
    f[static_cast<size_t>(i)] =
        1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(rd));
  if (s.type == "yarn") yarn_inv_freq(f, rd, theta, s);
  if (s.type == "linear") {
    for (double& x : f) x /= s.factor;
  } else if (s.type == "llama3") {
    // transformers' _compute_llama3_parameters, step by step.
    const double old_context = static_cast<double>(s.original_context);
    const double low_freq_wavelen = old_context / s.low_freq_factor;
    const double high_freq_wavelen = old_context / s.high_freq_factor;
    for (double& x : f) {
      const double wavelen = 2 * std::numbers::pi / x;
      const double llama = wavelen > low_freq_wavelen ? x / s.factor : x;
      const double smooth = (old_context / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      const double smoothed = (1 - smooth) * llama / s.factor + smooth * llama;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      x = medium ? smoothed : llama;
    }
  }
  return f;
}

}  // namespace zt::kernels

namespace zt::kernels::cpu {

template <class T>
void rope_table(T* cos, T* sin, int64_t T_max, int64_t rd, double theta,
                const RopeScaling& scaling) {
  // cos, sin [T_max, rd/2]
  const int64_t half = rd / 2;
  const std::vector<double> inv_freq = rope_inv_freq(rd, theta, scaling);  // [rd/2]
  const double a = rope_attention_factor(scaling);
  for (int64_t p = 0; p < T_max; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv_freq[static_cast<size_t>(i)];
      cos[p * half + i] = static_cast<T>(a * std::cos(angle));
      sin[p * half + i] = static_cast<T>(a * std::sin(angle));
    }
  }
}

namespace {
// Rotates the first rd dims of every head vector of x [B, Tn, nh, D] by +angle (sign = 1)
// or -angle (sign = -1); pos [B, Tn] (or nullptr: t) picks each token's row of the table.
template <class T>
void rotate(T* x, const T* cos, const T* sin, int64_t B, int64_t Tn, int64_t nh, int64_t D,
            T sign, const int32_t* pos, int64_t rd) {
  const int64_t half = (rd > 0 ? rd : D) / 2;
#pragma omp parallel for collapse(2) schedule(static) if (B * Tn * nh * D >= detail::kParallelMin)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < Tn; ++t) {
      const int64_t p = pos ? pos[b * Tn + t] : t;
      const T* c = cos + p * half;  // [half]
      const T* s = sin + p * half;  // [half]
      for (int64_t h = 0; h < nh; ++h) {
        T* v = x + ((b * Tn + t) * nh + h) * D;  // [D]
        for (int64_t i = 0; i < half; ++i) {
          const T a = v[i];
          const T bb = v[i + half];
          const T si = sign * s[i];
          v[i] = a * c[i] - bb * si;
          v[i + half] = bb * c[i] + a * si;
        }
      }
    }
  }
}
}  // namespace

template <class T>
void rope_forward(T* x, const T* cos, const T* sin, int64_t B, int64_t Tn, int64_t nh, int64_t D,
                  const int32_t* pos, int64_t rotary_dim) {
  rotate(x, cos, sin, B, Tn, nh, D, T(1), pos, rotary_dim);
}

template <class T>
void rope_backward(T* dx, const T* cos, const T* sin, int64_t B, int64_t Tn, int64_t nh,
                   int64_t D, const int32_t* pos, int64_t rotary_dim) {
  // y = a R x with R orthogonal, so dL/dx = a R^T dL/dy: the rotation by -angle with the
  // same (scaled) tables; the pass-through dims keep dL/dy.
  rotate(dx, cos, sin, B, Tn, nh, D, T(-1), pos, rotary_dim);
}

template void rope_table<float>(float*, float*, int64_t, int64_t, double, const RopeScaling&);
template void rope_table<double>(double*, double*, int64_t, int64_t, double, const RopeScaling&);
template void rope_forward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t,
                                  int64_t, const int32_t*, int64_t);
template void rope_forward<double>(double*, const double*, const double*, int64_t, int64_t,
                                   int64_t, int64_t, const int32_t*, int64_t);
template void rope_backward<float>(float*, const float*, const float*, int64_t, int64_t, int64_t,
                                   int64_t, const int32_t*, int64_t);
template void rope_backward<double>(double*, const double*, const double*, int64_t, int64_t,
                                    int64_t, int64_t, const int32_t*, int64_t);

}  // namespace zt::kernels::cpu
