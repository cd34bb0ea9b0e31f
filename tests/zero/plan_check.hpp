#pragma once
// The engine allocated what its buffer plan says (zt/zero/plan.hpp): every category of
// Engine::memory() equals BufferPlan::bytes() to the byte (the plan leaves out QLoRA's
// NF4 base, which full_params counts, and the activations).
#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"
#include "zt/zero/engine.hpp"

namespace zt::zero::testing {

// QLoRA's NF4 base of cfg with these adapters (QloraBase::bytes(); 0 without QLoRA).
inline size_t qlora_base_bytes(const model::Config& cfg, const model::LoraConfig& lora) {
  if (lora.method != model::FinetuneMethod::kQlora) return 0;
  const model::ParamLayout base(cfg);
  const model::Parameters<float> zeros(base);  // [every base unit] (bytes need no values)
  std::vector<std::span<const float>> units;
  for (int u = 0; u < base.num_units(); ++u) units.push_back(zeros.params(u));
  return static_cast<size_t>(model::QloraBase(model::LoraLayout(cfg, lora), base, units).bytes());
}

inline void expect_plan_allocated(const Engine& e, const model::Config& cfg) {
  MemoryStats m = e.memory();
  const MemoryStats p = e.buffer_plan().bytes();
  m.full_params -= qlora_base_bytes(cfg, e.options().lora);
  for (const MemoryField& f : kMemoryFields)
    if (f.bytes != &MemoryStats::activations) {
      EXPECT_EQ(m.*f.bytes, p.*f.bytes) << f.key;
    }
}

}  // namespace zt::zero::testing
