#pragma once
// Test helper: the unit hooks of the GPU model against the CPU model's (the ZeRO engine
// relies on their order). Records every before_use / after_use / grad_ready of
// loss_and_grad without and with recompute and of loss on both models, and expects the
// same sequences (non-empty).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "zt/model/model.hpp"

namespace zt::kernels::cuda::testing {

inline model::UnitHooks hook_recorder(std::vector<std::string>& log) {
  model::UnitHooks h;
  h.before_use = [&log](int u) { log.push_back("use " + std::to_string(u)); };
  h.after_use = [&log](int u) { log.push_back("done " + std::to_string(u)); };
  h.grad_ready = [&log](int u) { log.push_back("ready " + std::to_string(u)); };
  return h;
}

template <class CpuModel, class GpuModel>
void expect_same_hook_order(CpuModel& ref, GpuModel& gpu, const std::vector<int32_t>& tokens,
                            const std::vector<int32_t>& targets, int64_t B, int64_t Tn,
                            const std::string& tag) {
  for (int mode = 0; mode < 3; ++mode) {  // loss_and_grad, with recompute, loss
    std::vector<std::string> want, got;
    ref.set_hooks(hook_recorder(want));
    gpu.set_hooks(hook_recorder(got));
    if (mode < 2) {
      ref.loss_and_grad(tokens, targets, B, Tn, /*recompute=*/mode == 1);
      gpu.loss_and_grad(tokens, targets, B, Tn, /*recompute=*/mode == 1);
    } else {
      ref.loss(tokens, targets, B, Tn);
      gpu.loss(tokens, targets, B, Tn);
    }
    EXPECT_EQ(got, want) << tag << " mode " << mode;
    EXPECT_FALSE(got.empty()) << tag << " mode " << mode;
    ref.set_hooks({});
    gpu.set_hooks({});
  }
}

}  // namespace zt::kernels::cuda::testing
