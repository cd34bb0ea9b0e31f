// Config: presets and their published parameter counts, validation naming each field,
// and the FLOP formula.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "zt/core/error.hpp"
#include "zt/model/config.hpp"
#include "model_fixtures.hpp"

namespace zt::model {
namespace {

// Expects cfg.validate() to throw InputError whose message contains `field`.
void expect_invalid(const Config& cfg, const std::string& field) {
  try {
    cfg.validate();
    ADD_FAILURE() << "no error for bad " << field;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos)
        << "message does not name " << field << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("HINT"), std::string::npos) << e.what();
  }
}

TEST(Config, PresetsValidate) {
  for (const auto& name : Config::preset_names()) {
    const Config c = Config::preset(name);
    EXPECT_EQ(c.name, name);
    EXPECT_NO_THROW(c.validate()) << name;
  }
  EXPECT_THROW(Config::preset("llama-70b"), InputError);
}

TEST(Config, PublishedParameterCounts) {
  // Counts of the Hugging Face checkpoints (sum of tensor sizes in their safetensors).
  EXPECT_EQ(Config::preset("tinyllama-1.1b").num_params(), 1'100'048'384);  // "1.1B"
  EXPECT_EQ(Config::preset("open-llama-3b").num_params(), 3'426'473'600);   // "3B"
  EXPECT_EQ(Config::preset("llama-7b").num_params(), 6'738'415'616);        // "6.7B"
  EXPECT_EQ(Config::preset("llama-13b").num_params(), 13'015'864'320);      // "13.0B"
  // transformers 5.24's Gemma3ForCausalLM of gemma-3-1b-pt's config on the meta device.
  EXPECT_EQ(Config::preset("gemma-3-1b").num_params(), 999'885'952);
  // The same of gemma-3-{4b,12b,27b}-pt's text_config (Gemma3ForCausalLM, the text model).
  EXPECT_EQ(Config::preset("gemma-3-4b").num_params(), 3'880'263'168);
  EXPECT_EQ(Config::preset("gemma-3-12b").num_params(), 11'766'034'176);
  EXPECT_EQ(Config::preset("gemma-3-27b").num_params(), 27'009'346'304);
  // transformers 5.24's Gemma2ForCausalLM of gemma-2-2b's config (Gemma2Config()) on meta.
  EXPECT_EQ(Config::preset("gemma-2-2b").num_params(), 2'614'341'888);
  // transformers 5.24's GptOssForCausalLM of openai/gpt-oss-20b's and -120b's config.json
  // on the meta device (active: less (E - 4) experts of each layer, weights and biases).
  EXPECT_EQ(Config::preset("gpt-oss-20b").num_params(), 20'914'757'184);
  EXPECT_EQ(Config::preset("gpt-oss-20b").num_active_params(), 4'187'440'704);
  EXPECT_EQ(Config::preset("gpt-oss-120b").num_params(), 116'829'156'672);
  EXPECT_EQ(Config::preset("gpt-oss-120b").num_active_params(), 5'711'982'912);
  // meta-llama's Llama 3.1 / 3.2 checkpoints ("8.03B", "70.55B", "1.24B", "3.21B").
  EXPECT_EQ(Config::preset("llama-3.1-8b").num_params(), 8'030'261'248);
  EXPECT_EQ(Config::preset("llama-3.1-70b").num_params(), 70'553'706'496);
  EXPECT_EQ(Config::preset("llama-3.2-1b").num_params(), 1'235'814'400);
  EXPECT_EQ(Config::preset("llama-3.2-3b").num_params(), 3'212'749'824);
  EXPECT_EQ(Config::preset("mistral-7b").num_params(), 7'241'732'096);  // Mistral-7B-v0.1
  EXPECT_EQ(Config::preset("mistral-7b").sliding_window, 4096);
  EXPECT_EQ(Config::preset("mistral-7b").family, "mistral");
  EXPECT_TRUE(Config::preset("llama-3.2-1b").tied_embeddings);
  EXPECT_TRUE(Config::preset("llama-3.2-3b").tied_embeddings);
  EXPECT_FALSE(Config::preset("llama-3.1-8b").tied_embeddings);
  // Qwen/Qwen2.5-7B ("7.62B": q/k/v biases) and Qwen/Qwen3-8B ("8.19B": q/k norms, head_dim
  // 128): the sums of their safetensors' tensor sizes, as transformers 5.24's models built
  // from the published config.json on the meta device count them.
  const Config q25 = Config::preset("qwen2.5-7b"), q3 = Config::preset("qwen3-8b");
  EXPECT_EQ(q25.num_params(), 7'615'616'512);
  EXPECT_EQ(q3.num_params(), 8'190'735'360);
  EXPECT_TRUE(q25.qkv_bias() && !q25.o_bias() && !q25.qk_norm());
  EXPECT_TRUE(!q3.qkv_bias() && !q3.o_bias() && q3.qk_norm());
  EXPECT_EQ(q3.head_dim(), 128);
  EXPECT_EQ(q3.q_dim(), 4096);
  EXPECT_EQ(q25.head_dim(), 128);
  // Qwen3.5 / Qwen3.6: transformers 5.24's Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM of
  // the published text_config on the meta device (model.hf.preset_counts recomputes them).
  const std::pair<const char*, int64_t> qwen35[] = {
      {"qwen3.5-0.8b", 752'393'024},       {"qwen3.5-4b", 4'205'751'296},
      {"qwen3.5-9b", 8'953'803'264},       {"qwen3.5-27b", 26'895'998'464},
      {"qwen3.5-35b-a3b", 34'660'610'688}, {"qwen3.6-35b-a3b", 34'660'610'688}};
  for (const auto& [name, count] : qwen35) EXPECT_EQ(Config::preset(name).num_params(), count) << name;
  std::string lllf;  // 48 Gated DeltaNet layers + 16 full, every fourth full
  for (int i = 0; i < 16; ++i) lllf += "lllf";
  EXPECT_EQ(Config::preset("qwen3.5-27b").layer_types, lllf);
  const Config tiny = Config::preset("tiny");
  EXPECT_EQ(tiny.num_params(), 1'049'728);  // ~1M
  EXPECT_EQ(tiny.vocab, 256);
  EXPECT_EQ(tiny.context, 256);
}

TEST(Config, PresetShapes) {
  const Config t = Config::preset("tinyllama-1.1b");
  EXPECT_EQ(t.layers, 22);
  EXPECT_EQ(t.hidden, 2048);
  EXPECT_EQ(t.heads, 32);
  EXPECT_EQ(t.kv_heads, 4);
  EXPECT_EQ(t.intermediate, 5632);
  EXPECT_EQ(t.vocab, 32000);
  EXPECT_EQ(t.context, 2048);
  EXPECT_EQ(t.head_dim(), 64);
  EXPECT_FALSE(t.tied_embeddings);
}

// Llama 3.1 8B's inverse frequencies: the values printed by transformers 5.24's
// ROPE_INIT_FUNCTIONS["llama3"] (_compute_llama3_parameters, fp32) for head_dim 128,
// theta 500000, factor 8, low 1, high 4, original 8192: high (i <= 28), medium (29..34)
// and low (>= 35) frequencies. zt computes in double, so within fp32's rounding.
TEST(Config, Llama3InverseFrequenciesEqualTransformers) {
  const Config c = Config::preset("llama-3.1-8b");
  const std::vector<double> f = zt::kernels::rope_inv_freq(c.head_dim(), c.rope_theta, c.rope_scaling);
  ASSERT_EQ(f.size(), 64u);
  const std::pair<int, double> hf[] = {
      {0, 1.000000000e+00},  {20, 1.656044088e-02}, {28, 3.211446106e-03},
      {29, 2.166570630e-03}, {31, 8.567514597e-04}, {34, 1.785077911e-04},
      {35, 9.556212171e-05}, {40, 3.428102355e-05}, {63, 3.068925878e-07}};
  for (const auto& [i, want] : hf) EXPECT_NEAR(f[i] / want, 1.0, 2e-6) << "inv_freq[" << i << "]";
  // linear: every frequency divided by the factor.
  const std::vector<double> plain = zt::kernels::rope_inv_freq(128, 500000.0);
  const std::vector<double> lin = zt::kernels::rope_inv_freq(128, 500000.0, {"linear", 4.0, 1, 4, 0});
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_DOUBLE_EQ(lin[i], plain[i] / 4.0);
  // A scaling zt does not implement is refused by name.
  Config bad = c;
  bad.rope_scaling.type = "dynamic";
  EXPECT_THROW(bad.validate(), InputError);
  // yarn without its original context is refused naming the field.
  Config yarn = c;
  yarn.rope_scaling = {.type = "yarn", .factor = 32.0};
  try {
    yarn.validate();
    ADD_FAILURE() << "yarn without original_max_position_embeddings accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("original_max_position_embeddings"), std::string::npos);
  }
}

// The GPU model runs gpt_oss and gemma3_text blocks, Gemma 3 1b-12b's head dim 256
// included; a head dim its attention lacks (512) is refused by name (train.device = cpu
// runs it); zt estimate sizes it (validate_for_device(false)) and names the gap.
TEST(Config, DeviceModelGapNamesTheHeadDim) {
  EXPECT_EQ(Config::preset("gpt-oss-20b").device_model_gap(), "");
  EXPECT_NO_THROW(Config::preset("gpt-oss-20b").validate_for_device());
  EXPECT_EQ(Config::preset("llama-3.2-1b").device_model_gap(), "");
  Config g = Config::preset("gemma-3-1b");
  EXPECT_EQ(g.device_model_gap(), "");
  EXPECT_NO_THROW(g.validate_for_device());
  g.head_dim_ = 512;
  try {
    g.validate_for_device();
    ADD_FAILURE() << "head dim 512 accepted on the GPU";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("head dim 512"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("train.device = cpu"), std::string::npos);
  }
  EXPECT_NO_THROW(g.validate_for_device(false));
  g.head_dim_ = 128;  // gemma-3-27b's head dim: the block runs
  EXPECT_EQ(g.device_model_gap(), "");
}

// Qwen3.5's full-attention layers (output gate, partial RoPE, q/k norms) and its Gated
// DeltaNet layers run on the GPU model; a Gated DeltaNet head dim or conv kernel its
// kernels lack is refused by name.
TEST(Config, DeviceModelGapOfQwen35) {
  Config c = testing::small_qwen35();  // layers f, f
  EXPECT_EQ(c.device_model_gap(), "");
  EXPECT_NO_THROW(c.validate_for_device());
  c = testing::small_qwen35_hybrid();  // layers l, f
  EXPECT_EQ(c.device_model_gap(), "");
  EXPECT_NO_THROW(c.validate_for_device());
  c.linear_value_dim = 256;
  EXPECT_NE(c.device_model_gap().find("key/value head dims 4/256"), std::string::npos)
      << c.device_model_gap();
  c.linear_value_dim = 3;
  c.linear_conv_kernel = 9;
  EXPECT_NE(c.device_model_gap().find("conv1d kernel of 9"), std::string::npos)
      << c.device_model_gap();
}

TEST(Config, TiedEmbeddingsCountOnce) {
  Config c = Config::preset("tiny");
  const int64_t untied = c.num_params();
  c.tied_embeddings = true;
  EXPECT_EQ(c.num_params(), untied - 256 * 128);
}

TEST(Config, FlopsPerTokenPalmConvention) {
  // 6N + 12 L H Q T with N = all parameters except the input embedding table.
  const Config c = Config::preset("tinyllama-1.1b");
  const double N = 1'100'048'384.0 - 32000.0 * 2048.0;
  EXPECT_DOUBLE_EQ(c.flops_per_token(2048), 6 * N + 12.0 * 22 * 32 * 64 * 2048);
  Config tied = Config::preset("tiny");
  tied.tied_embeddings = true;  // the shared matrix is the head's matmul: counted
  EXPECT_DOUBLE_EQ(tied.flops_per_token(256),
                   6.0 * static_cast<double>(tied.num_params()) + 12.0 * 4 * 4 * 32 * 256);
}

// Qwen3.5's hybrid: only the full layers carry the 12 H D T term; a Gated DeltaNet layer
// counts its chunked rule and conv, constant in T (3 x (Hv (2 c (2 Dk + Dv) + 6 Dk Dv) +
// 2 K Cc), c = 64).
TEST(Config, FlopsPerTokenGatedDeltaNet) {
  // layer 0 Gated DeltaNet (Hk 1, Hv 2, Dk 4, Dv 3, K 3: Cc = 2 x 4 + 6 = 14), layer 1 full
  // (H 2, D 8)
  const Config c = testing::small_qwen35_hybrid();
  const double N = static_cast<double>(c.num_matmul_params());
  const double lin = 3.0 * (2 * (2.0 * 64 * (2 * 4 + 3) + 6.0 * 4 * 3) + 2.0 * 3 * 14);
  for (const int64_t T : {256, 4096})
    EXPECT_DOUBLE_EQ(c.flops_per_token(T), 6 * N + lin + 12.0 * 2 * 8 * static_cast<double>(T)) << T;
}

// Each layer's window: sliding_window from first_sliding_layer on (Qwen's max_window_layers).
TEST(Config, WindowPerLayer) {
  Config c = Config::preset("tiny");
  EXPECT_EQ(c.window(0), 0);
  c.sliding_window = 8;
  EXPECT_EQ(c.window(0), 8);  // first_sliding_layer 0: every layer (Mistral)
  c.first_sliding_layer = 2;
  EXPECT_EQ(c.window(1), 0);
  EXPECT_EQ(c.window(2), 8);
  EXPECT_EQ(c.window(3), 8);
  c.first_sliding_layer = c.layers;  // valid: no layer slides
  EXPECT_NO_THROW(c.validate());
}
// The schedule: layer_types any pattern, a RoPE per type, and the same windows as the
// first_sliding_layer rule it generalises; bad schedules refused by name.
TEST(Config, LayerTypesSchedule) {
  Config c = Config::preset("tiny");
  c.sliding_window = 8;
  c.first_sliding_layer = 2;
  Config s = c;
  s.first_sliding_layer = 0;
  s.layer_types = "ffss";
  for (int64_t l = 0; l < c.layers; ++l) EXPECT_EQ(s.window(l), c.window(l)) << l;
  s.layer_types = "sfsf";
  EXPECT_NO_THROW(s.validate());
  EXPECT_EQ(s.window(0), 8);
  EXPECT_EQ(s.window(1), 0);
  EXPECT_FALSE(s.local_rope(0));  // rope_local_theta 0: the full layers' RoPE
  s.rope_local_theta = 1e4;
  EXPECT_TRUE(s.local_rope(0));
  EXPECT_FALSE(s.local_rope(1));
  const auto refused = [&](const std::string& types, const std::string& says) {
    Config b = s;
    b.layer_types = types;
    try {
      b.validate();
      ADD_FAILURE() << types << " accepted";
    } catch (const zt::InputError& e) {
      EXPECT_NE(e.message().find(says), std::string::npos) << e.message();
    }
  };
  refused("sfs", "3 letters for 4 layers");
  refused("sfxf", "layer 2 is 'x'");
  refused("sfls", "layer 2 is linear_attention (a Gated DeltaNet layer) in model.family");
  Config both = s;
  both.first_sliding_layer = 1;
  EXPECT_THROW(both.validate(), zt::InputError);
  Config no_window = s;
  no_window.sliding_window = 0;
  EXPECT_THROW(no_window.validate(), zt::InputError);
}

TEST(Config, InvalidFieldsAreNamed) {
  const Config good = Config::preset("tiny");
  const std::vector<std::pair<std::function<void(Config&)>, std::string>> cases = {
      {[](Config& c) { c.vocab = 0; }, "model.vocab"},
      {[](Config& c) { c.hidden = 0; }, "model.hidden"},
      {[](Config& c) { c.layers = 0; }, "model.layers"},
      {[](Config& c) { c.heads = -4; }, "model.heads"},
      {[](Config& c) { c.kv_heads = 0; }, "model.kv_heads"},
      {[](Config& c) { c.intermediate = 0; }, "model.intermediate"},
      {[](Config& c) { c.context = 0; }, "model.context"},
      {[](Config& c) { c.hidden = 130; }, "model.hidden"},     // 130 % 4 heads
      {[](Config& c) { c.kv_heads = 3; }, "model.kv_heads"},   // 4 % 3
      {[](Config& c) { c.heads = 8; c.kv_heads = 8; c.hidden = 120; }, "head_dim"},  // 15, odd
      {[](Config& c) { c.rope_theta = 0; }, "model.rope_theta"},
      {[](Config& c) { c.norm_eps = -1e-5; }, "model.norm_eps"},
      {[](Config& c) { c.vocab = int64_t{1} << 32; }, "model.vocab"},
      {[](Config& c) { c.family = "gpt2"; }, "model.family"},
      {[](Config& c) { c.family = "qwen2"; c.attention_bias = true; }, "model.attention_bias"},
      {[](Config& c) { c.head_dim_ = -2; }, "model.head_dim"},
      {[](Config& c) { c.head_dim_ = 7; }, "head_dim 7"},
      {[](Config& c) { c.first_sliding_layer = -1; }, "model.first_sliding_layer"},
      {[](Config& c) { c.first_sliding_layer = c.layers + 1; }, "model.first_sliding_layer"},
  };
  for (const auto& [mutate, field] : cases) {
    Config c = good;
    mutate(c);
    expect_invalid(c, field);
  }
}

}  // namespace
}  // namespace zt::model
