// Gemma 3's and gpt-oss's blocks on the GPU model (docs/model.md "Families";
// src/model/cuda/device_block.cpp, device_moe.cpp) against the CPU model in double
// (DeviceModelTest::check_model, device_model_check.hpp): the loss, every unit's gradient,
// the forward-only loss and the last position's logits (and for gpt-oss the router's tokens
// per expert exactly and its aux), with and without recompute, untied and tied. Each piece
// carries signal: the norms' weights and the biases and sinks are drawn off their init
// (draw_off_init), the schedule mixes sliding and full layers with a RoPE per type.
//   gemma3_text: (1 + w) norms, the sandwich, GeGLU, embeddings times sqrt(hidden), q/k
//     norms, query_pre_attn_scalar 24 (head_dim 16), the final soft-cap 0.3 (the logits of
//     a tiny model are ~0.2: the cap bends them), layers s f s: window 5 with their own RoPE
//     base, the full layer linear-scaled.
//   gpt_oss: q/k/v/o biases, sinks, layers s f (window 5), yarn (factor 4 over 16), the
//     router's bias and the softmax over the top 2 of 4 logits, the experts with biases
//     and the clamped SwiGLU (limit 0.4: gate and up values clamp at this init).
// fp32 to 1e-5; bf16 to 1e-2 (loss) and 5e-2 (gradients, logits), gpt-oss with k = E.
#include <gtest/gtest.h>

#include "device_model_check.hpp"
#include "model_params.hpp"

namespace zt::kernels::cuda::testing {
namespace {

Config tiny_gemma(bool tied) {
  Config c = tiny_family("gemma3_text", 0, false);
  c.layers = 3;
  c.layer_types = "sfs";
  c.sliding_window = 5;
  c.rope_theta = 1e6;
  c.rope_local_theta = 1e4;
  c.rope_scaling = {.type = "linear", .factor = 2.0};
  c.query_pre_attn_scalar = 24.0;
  c.final_logit_softcap = 0.3;
  c.tied_embeddings = tied;
  return c;
}

TEST_F(DeviceModelTest, Gemma3TextFp32) {
  const Config cfg = tiny_gemma(false);
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "gemma3_text fp32", true);
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "gemma3_text fp32 recompute", true,
                                    true);
  check_model<double, float, float>(tiny_gemma(true), 2, 40, 1e-5, 1e-5, "gemma3_text tied fp32",
                                    true);
}

// Gemma 3 1b-12b's head dim 256 (zt's kernel, 16-row tiles) and the attention soft-cap
// (model.attn_logit_softcap): loss, logits and every gradient against Model<double>.
TEST_F(DeviceModelTest, Gemma3HeadDim256AndAttentionSoftcap) {
  Config cfg = tiny_gemma(false);
  cfg.head_dim_ = 256;
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "gemma3_text D 256 fp32", true);
  cfg.attn_logit_softcap = 0.5;
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "gemma3_text D 256 softcap fp32",
                                    true, true);
  Config small = tiny_gemma(true);
  small.attn_logit_softcap = 0.5;
  check_model<double, float, float>(small, 2, 40, 1e-5, 1e-5, "gemma3_text softcap tied fp32",
                                    true);
  check_model<double, bf16_t, float>(small, 2, 40, 1e-2, 5e-2,
                                     "gemma3_text softcap bf16-mixed", true);
}

TEST_F(DeviceModelTest, GptOssFp32) {
  const Config cfg = tiny_gpt_oss(4, 2);
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "gpt_oss fp32", true);
  check_model<double, float, float>(cfg, 2, 40, 1e-5, 1e-5, "gpt_oss fp32 recompute", true, true);
  Config tied = cfg;
  tied.tied_embeddings = true;
  tied.router_aux_loss = true;  // the load-balancing loss's gradient through the biased router
  tied.router_aux_loss_coef = 0.02;
  check_model<double, float, float>(tied, 1, 24, 1e-5, 1e-5, "gpt_oss tied aux fp32", true);
}

TEST_F(DeviceModelTest, GemmaGptOssBf16) {
  check_model<double, bf16_t, float>(tiny_gemma(false), 2, 40, 1e-2, 5e-2,
                                     "gemma3_text bf16-mixed", true);
  check_model<double, bf16_t, bf16_t>(tiny_gemma(true), 2, 40, 1e-2, 5e-2,
                                      "gemma3_text tied bf16-true", true, true);
  check_model<double, bf16_t, float>(tiny_gpt_oss(3, 3), 2, 40, 1e-2, 5e-2,
                                     "gpt_oss k=E bf16-mixed", true);
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
