#pragma once
// The update of the ZeRO engine (engine_update.cpp): the gradients (stages 0-1: whole
// units, reduced in place; stages 2-3: the owned shards, fp32 accumulators), their norm
// and clipping, the AdamW moments (stage 0: whole units; 1-3: the owned elements) and
// bf16-true's fp32 work buffer. Frozen units hold none of these (empty buffers keep the
// per-unit indexing). Offloaded optimizer state: the store's (moments empty here).
#include <cstdint>
#include <span>
#include <vector>

#include "engine_context.hpp"
#include "zt/zero/plan.hpp"

namespace zt::zero::detail {

class Update {
 public:
  // Allocates what `plan` says; frozen: per unit, 1 for a frozen unit.
  Update(const EngineContext& ctx, const BufferPlan& plan, const std::vector<uint8_t>& frozen);

  bool trainable(int u) const { return frozen_[static_cast<size_t>(u)] == 0; }

  // ---- gradients ------------------------------------------------------------------
  float* full_grads(int u);   // stages 0-1: u's whole gradient [padded]
  float* grad_shard(int u);   // stages 2-3: u's gradient shard [shard]
  float* owned_grads(int u);  // this rank's owned elements of u's gradient [owned]
  std::span<float> grads(int u);  // what AdamW reads: stage 0 the whole unit, else owned
  bool grads_finite(int u);       // no NaN or Inf in owned_grads(u)
  // The owned gradients' squares of every trainable unit, into the space's running sum.
  void add_sum_squares();
  // The step's squared norm (sums[0], from the space's running sum) and loss (sums[1])
  // summed over ranks in one all-reduce of two doubles.
  void all_reduce_sums(double sums[2]);
  void scale_grads(float c);  // grads(u) *= c for every trainable unit (clipping)
  void zero_grads();

  // ---- AdamW moments ----------------------------------------------------------------
  std::span<float> m(int u);  // what AdamW updates: stage 0 the whole unit, else owned
  std::span<float> v(int u);
  float* owned_m(int u);      // at the owned slice's first element [owned]
  float* owned_v(int u);
  // bf16-true: the fp32 work buffer's first count elements (the widened parameters).
  std::span<float> wide(size_t count) { return {wide_.data(), count}; }

  size_t grad_bytes() const;
  size_t moment_bytes() const;
  size_t wide_bytes() const { return wide_.bytes(); }

 private:
  int64_t moment_offset(int u) const;  // owned slice's first element in m(u)'s buffer

  const EngineContext& c_;
  const std::vector<uint8_t>& frozen_;
  std::vector<Buf<float>> full_grads_;  // stages 0-1: per unit [padded]
  std::vector<Buf<float>> grad_shard_;  // stages 2-3: per unit [shard]
  std::vector<Buf<float>> m_, v_;       // per unit: stage 0 [padded]; 1-3 [shard]
  Buf<float> wide_;                     // bf16-true: [max updated count]
  Buf<double> sums_;  // [2] squared norm, loss: when world takes mem's buffers
};

}  // namespace zt::zero::detail
