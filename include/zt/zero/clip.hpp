#pragma once
// Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_ does it: one L2 norm
// over every element of every unit's gradient (not per tensor; the engine sums the
// squares of its shards and all-reduces them), then every gradient times this factor.

namespace zt::zero {

// max_norm / (norm + 1e-6) when norm > max_norm, else 1 (also for a NaN norm: that step
// is skipped anyway). max_norm <= 0 disables clipping (always 1).
inline double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0;
  return max_norm / (norm + 1e-6);
}

}  // namespace zt::zero
