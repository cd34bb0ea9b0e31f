// Qwen's MoE families in the model (qwen2_moe, qwen3_moe): the presets' counts against
// the published ones, the layout of dense layers among MoE ones and of the shared expert,
// the routed rows counted over the MoE layers only, and recompute bit for bit. (Their keys'
// validation: MoeKeys.Validated in test_mixtral.cpp; the device's refusals:
// RefusedOnTheDevice; finite differences:
// ModelGradcheck.Qwen3MoeEveryCoordinate, Qwen2MoeSharedExpertEveryCoordinate; against
// transformers: ckpt.hf.peer_transformers_qwen_moe.)
#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

#include "zt/core/error.hpp"
#include "model_fixtures.hpp"

namespace zt::model {
namespace {

// Qwen/Qwen3-30B-A3B: "30.5B" total, "3.3B" activated; Qwen/Qwen1.5-MoE-A2.7B: "14.3B"
// total, "2.7B" activated (the model cards).
TEST(QwenMoe, PresetPublishedCounts) {
  const Config q3 = Config::preset("qwen3-30b-a3b");
  EXPECT_EQ(q3.family, "qwen3_moe");
  EXPECT_EQ(q3.num_params(), 30'532'122'624);
  EXPECT_EQ(q3.num_active_params(), 3'353'032'704);
  const Config q2 = Config::preset("qwen1.5-moe-a2.7b");
  EXPECT_EQ(q2.family, "qwen2_moe");
  EXPECT_TRUE(q2.qkv_bias());
  EXPECT_FALSE(q2.o_bias());
  EXPECT_EQ(q2.num_params(), 14'315'784'192);
  EXPECT_EQ(q2.num_active_params(), 2'689'173'504);
  EXPECT_EQ(ParamLayout(q2).total_numel(), q2.num_params());
}

// The GPU model runs every family, Qwen's MoE blocks too (tests/kernels_cuda
// DeviceQwenMoe.*): what the device still refuses by name is more experts than its router
// takes (a warp holds a row's E probabilities), which the CPU model takes.
TEST(QwenMoe, RefusedOnTheDevice) {
  for (Config c : {testing::small_qwen2_moe(), testing::small_qwen3_moe()}) {
    EXPECT_NO_THROW(c.validate_for_device()) << c.family;
    c.experts = Config::kMaxDeviceExperts;
    EXPECT_NO_THROW(c.validate_for_device()) << c.family;
    c.experts = Config::kMaxDeviceExperts + 1;
    c.validate();  // the CPU model takes it
    try {
      c.validate_for_device();
      ADD_FAILURE() << "no refusal for " << c.experts << " experts of " << c.family;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("model.experts = 1025"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.family), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(testing::small_mixtral().validate_for_device());
  EXPECT_NO_THROW(testing::small_qwen3().validate_for_device());
}

TEST(QwenMoe, LayoutOfDenseLayersAndSharedExpert) {
  const Config c = testing::small_qwen2_moe();  // layer 0 dense
  const ParamLayout layout(c);
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1) && c.moe_layer(2));
  EXPECT_EQ(layout.total_numel(), c.num_params());
  EXPECT_EQ(layout.find("model.layers.0.mlp.gate_proj.weight").shape, (std::vector<int64_t>{12, 8}));
  EXPECT_EQ(layout.try_find("model.layers.0.mlp.gate.weight"), nullptr);
  EXPECT_EQ(layout.find("model.layers.1.mlp.experts.gate_up_proj").shape,
            (std::vector<int64_t>{4, 10, 8}));  // [E, 2 x moe_intermediate, C]
  EXPECT_EQ(layout.find("model.layers.1.mlp.shared_expert.down_proj.weight").shape,
            (std::vector<int64_t>{8, 7}));
  EXPECT_EQ(layout.find("model.layers.2.mlp.shared_expert_gate.weight").shape,
            (std::vector<int64_t>{1, 8}));
  EXPECT_GE(layout.block_offsets(0).gate, 0);
  EXPECT_EQ(layout.block_offsets(1).gate, -1);
  EXPECT_GE(layout.block_offsets(1).shared_expert_gate, 0);
  EXPECT_THROW(layout.block_offsets(), std::logic_error);  // the blocks differ
  EXPECT_THROW(ParamLayout(testing::small_qwen35_moe()).block_offsets(), std::logic_error);  // l, f
  // The experts' elements (expert parallelism's slice): none in the dense layer; in a MoE
  // layer from gate_up_proj to the shared expert, which follows them.
  EXPECT_EQ(layout.expert_range(layout.block_unit(0)).end, 0);
  const BlockOffsets& o1 = layout.block_offsets(1);
  const ParamLayout::ElementRange r1 = layout.expert_range(layout.block_unit(1));
  EXPECT_EQ(r1.begin, o1.experts_gate_up);
  EXPECT_EQ(r1.end, o1.shared_gate);
  EXPECT_EQ(r1.end - r1.begin, 4 * 3 * 5 * 8);  // E x (2 I_e + I_e) x C
  Config step = testing::small_qwen3_moe();
  step.mlp_only_layers.clear();
  step.decoder_sparse_step = 2;
  EXPECT_EQ(step.moe_layer_count(), 1);  // layer 1 of 0..2
  EXPECT_TRUE(step.moe_layer(1));
}

// The routed rows are those of the MoE layers only; recompute gives the same loss and
// gradients bit for bit (fp32) with the shared expert, dense layers and the aux loss.
TEST(QwenMoe, RoutedRowsAndRecomputeBitwise) {
  for (const Config& cfg : {testing::small_qwen2_moe(), testing::small_qwen3_moe()})
    testing::expect_recompute_bitwise(cfg, [](const Model<float>& m) {
      const RouterStats& r = m.router_stats();
      EXPECT_EQ(r.rows, 16.0 * 2);  // rows x the 2 MoE layers of 3
      EXPECT_EQ(std::accumulate(r.tokens.begin(), r.tokens.end(), 0.0), r.rows * 2);  // k each
    });
}

// qwen3_5_moe_text routes every layer with the top-k renormalised: each key that would
// make a dense layer or drop the renormalisation is refused by name (Config::validate).
TEST(QwenMoe, Qwen35MoeEveryLayerRouted) {
  EXPECT_NO_THROW(testing::small_qwen35_moe().validate());
  const std::pair<const char*, void (*)(Config&)> bad[] = {
      {"norm_topk_prob = false", [](Config& c) { c.norm_topk_prob = false; }},
      {"decoder_sparse_step = 2", [](Config& c) { c.decoder_sparse_step = 2; }},
      {"mlp_only_layers (1 layers)", [](Config& c) { c.mlp_only_layers = {0}; }},
      {"intermediate = 9 vs the experts' 5", [](Config& c) { c.intermediate = 9; }},
  };
  for (const auto& [field, change] : bad) {
    Config c = testing::small_qwen35_moe();
    change(c);
    testing::expect_invalid(c, field);
  }
}

}  // namespace
}  // namespace zt::model
