#pragma once
// The parameter store of the ZeRO engine (engine_params.cpp): every unit's stored
// parameters, in `mem`. Stages 0-2 hold whole units (fp32 `full`, and with bf16 weights
// their bf16 `compute` copy; bf16-true: `compute` alone, the parameters themselves);
// stage 3 holds this rank's shard (fp32, or bf16 `half` with bf16-true). Offload may
// take the fp32 copies away (drop_fp32): the store's master replaces them.
#include <cstdint>
#include <span>
#include <vector>

#include "engine_context.hpp"
#include "zt/core/dtype.hpp"
#include "zt/model/init.hpp"
#include "zt/model/layout.hpp"
#include "zt/zero/plan.hpp"

namespace zt::zero::detail {

class ParamStore {
 public:
  // The parameters with their initial values (init: by name and element, so every
  // stage and rank count holds the same values).
  ParamStore(const EngineContext& ctx, const model::ParamLayout& layout, const model::InitOptions& init,
             bool bf16_weights, bool bf16_master);

  float* full(int u);     // stages 0-2: [padded] fp32 (null: bf16-true, or dropped)
  float* shard(int u);    // stage 3: [shard] fp32 (null: bf16-true, or dropped)
  bf16* compute(int u);   // stages 0-2 with bf16 weights: [padded]
  bf16* half(int u);      // stage 3, bf16-true or after add_half_shards: [shard]
  float* owned(int u);    // this rank's owned fp32 parameters of u [owned]
  bf16* owned_half(int u);  // the same, bf16 (bf16-true, or offload's bf16 copy up)
  std::span<bf16> half_for_update(int u);  // what AdamW updates: stage 0 the whole unit
  const void* replicated(int u) const;     // stages 0-2: u's compute copy (fp32 or bf16)
  // Stages 0-2 with bf16 weights: compute = bf16(full), after every change of full
  // (nothing when there is no fp32 copy: bf16-true, or dropped).
  void cast_compute();

  // Offload (engine_offload.cpp): stage 3, the bf16 copies of the fp32 shards ([shard] of
  // plan's param_half per unit); then the fp32 copies go, unit by unit or all at once.
  void add_half_shards(const BufferPlan& plan);
  void drop_shard(int u);
  void drop_fp32();

  size_t replicated_bytes() const;  // full + compute
  size_t shard_bytes() const;       // shard + half

 private:
  const EngineContext& c_;
  const bool bf16_weights_, bf16_master_;
  std::vector<Buf<float>> full_;     // stages 0-2: [padded]
  std::vector<Buf<float>> shard_;    // stage 3: [shard]
  std::vector<Buf<bf16>> compute_;   // stages 0-2, bf16 weights: [padded]
  std::vector<Buf<bf16>> half_;      // stage 3, bf16-true or half_up: [shard]
};

}  // namespace zt::zero::detail
