// Qwen's mixture-of-experts blocks on the GPU model (qwen2_moe, qwen3_moe; docs/model.md
// "Qwen2-MoE and Qwen3-MoE", src/model/cuda/device_moe.cpp) against the CPU model in
// double (DeviceModelTest::check_model, device_model_check.hpp): the loss, the router's
// tokens per expert exactly and its aux, every unit's gradient (the dense layer's MLP, the
// router, the experts of width moe_intermediate, qwen2_moe's shared expert and its gate,
// attention, norms, embedding), the forward-only loss and the last logits; with and
// without recompute. fp32 to 1e-5 (hidden 64, 2-3 layers, GEMMs over at most 128 terms, as
// the other family models); bf16 with every expert chosen (k = E: no top-k choice a bf16
// rounding could flip against the double reference) to 1e-2 (loss) and 5e-2.
#include <gtest/gtest.h>

#include "device_model_check.hpp"
#include "model_params.hpp"

namespace zt::kernels::cuda::testing {
namespace {

// qwen3_moe: E = 4, k = 2, the weights the chosen probabilities (not renormalised), the
// experts 48 wide against the dense MLP's 128, layer 1 dense; then 3 layers with the dense
// one between two MoE ones, renormalised (norm_topk_prob true), tied.
TEST_F(DeviceModelTest, Qwen3MoeFp32) {
  Config cfg = tiny_qwen_moe("qwen3_moe", 4, 2, /*dense_layer=*/1);
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "qwen3_moe fp32", true);
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "qwen3_moe fp32 recompute", true,
                                    true);
  cfg.layers = 3;
  cfg.norm_topk_prob = true;
  cfg.tied_embeddings = true;
  check_model<double, float, float>(cfg, 1, 24, 1e-5, 1e-5, "qwen3_moe 3 layers renormalised tied",
                                    true);
}

// qwen2_moe: q/k/v biases, E = 4, k = 2 not renormalised, the shared expert (40 wide) and
// its sigmoid gate on every token, layer 0 dense; recompute; tied without the aux loss in
// the loss; 8 experts over 3 layers (decoder_sparse_step 2: layer 1 alone routed), 24 rows.
TEST_F(DeviceModelTest, Qwen2MoeSharedExpertFp32) {
  Config cfg = tiny_qwen_moe("qwen2_moe", 4, 2, /*dense_layer=*/0);
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "qwen2_moe fp32", true);
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "qwen2_moe fp32 recompute", true,
                                    true);
  cfg.tied_embeddings = true;
  cfg.router_aux_loss = false;  // counted (router_stats), not in the loss
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "qwen2_moe tied no-aux fp32", true);
  cfg = tiny_qwen_moe("qwen2_moe", 8, 2, 0);
  cfg.layers = 3;
  cfg.mlp_only_layers.clear();
  cfg.decoder_sparse_step = 2;
  check_model<double, float, float>(cfg, 1, 24, 1e-5, 1e-5, "qwen2_moe E8 sparse step 2 fp32",
                                    true);
}

TEST_F(DeviceModelTest, QwenMoeBf16AllExperts) {
  const Config q2 = tiny_qwen_moe("qwen2_moe", 3, 3, 0);
  check_model<double, bf16_t, float>(q2, 2, 40, 1e-2, 5e-2, "qwen2_moe k=E bf16-mixed", true);
  check_model<double, bf16_t, float>(q2, 2, 40, 1e-2, 5e-2, "qwen2_moe k=E bf16-mixed recompute",
                                     true, true);
  check_model<double, bf16_t, bf16_t>(tiny_qwen_moe("qwen3_moe", 3, 3, 1), 2, 40, 1e-2, 5e-2,
                                      "qwen3_moe k=E bf16-true", true);
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
