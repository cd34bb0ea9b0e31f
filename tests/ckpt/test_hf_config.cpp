// Hugging Face config.json <-> model::Config. References: TinyLlama-1.1B's published
// config.json (typed here), and the keys transformers' LlamaConfig reads, checked with an
// independent JSON parse of what zt writes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/expect_error.hpp"
#include "zt/ckpt/format.hpp"
#include "zt/ckpt/hf_config.hpp"
#include "zt/core/error.hpp"

namespace {

using zt::testing::expect_input_error;

// TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json (as published).
const char* kTinyLlama = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 5632, "max_position_embeddings": 2048, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
  "tie_word_embeddings": false, "torch_dtype": "float32", "transformers_version": "4.31.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

TEST(HfConfig, ReadsTinyLlamaAsThePreset) {
  const zt::ckpt::HfConfig c = zt::ckpt::parse_hf_config(kTinyLlama, "config.json");
  const zt::model::Config p = zt::model::Config::preset("tinyllama-1.1b");
  EXPECT_EQ(c.model.vocab, p.vocab);
  EXPECT_EQ(c.model.hidden, p.hidden);
  EXPECT_EQ(c.model.layers, p.layers);
  EXPECT_EQ(c.model.heads, p.heads);
  EXPECT_EQ(c.model.kv_heads, p.kv_heads);
  EXPECT_EQ(c.model.intermediate, p.intermediate);
  EXPECT_EQ(c.model.context, p.context);
  EXPECT_EQ(c.model.tied_embeddings, p.tied_embeddings);
  EXPECT_EQ(c.model.rope_theta, p.rope_theta);
  EXPECT_EQ(c.model.norm_eps, p.norm_eps);
  EXPECT_EQ(c.model.num_params(), 1100048384);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.torch_dtype, "float32");
}

TEST(HfConfig, DefaultsFollowLlamaConfig) {
  // No num_key_value_heads (MHA), rope_theta, rms_norm_eps or tie_word_embeddings.
  const zt::ckpt::HfConfig c = zt::ckpt::parse_hf_config(
      R"({"model_type": "llama", "vocab_size": 32, "hidden_size": 16, "num_hidden_layers": 1,
          "num_attention_heads": 4, "intermediate_size": 32, "max_position_embeddings": 8})",
      "c.json");
  EXPECT_EQ(c.model.kv_heads, 4);
  EXPECT_EQ(c.model.rope_theta, 10000.0);
  EXPECT_EQ(c.model.norm_eps, 1e-6);
  EXPECT_FALSE(c.model.tied_embeddings);
  EXPECT_FALSE(c.bos_token_id.has_value());
}

TEST(HfConfig, WritesWhatLlamaConfigReads) {
  zt::model::Config m = zt::model::Config::preset("tiny");
  m.tied_embeddings = true;
  m.rope_theta = 500000.0;
  const std::string text = zt::ckpt::hf_config_json(m, "bfloat16", 0, 255);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j.at("architectures"), nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j.at("model_type"), "llama");
  EXPECT_EQ(j.at("vocab_size"), 256);
  EXPECT_EQ(j.at("hidden_size"), 128);
  EXPECT_EQ(j.at("intermediate_size"), 512);
  EXPECT_EQ(j.at("num_hidden_layers"), 4);
  EXPECT_EQ(j.at("num_attention_heads"), 4);
  EXPECT_EQ(j.at("num_key_value_heads"), 2);
  EXPECT_EQ(j.at("head_dim"), 32);
  EXPECT_EQ(j.at("max_position_embeddings"), 256);
  EXPECT_EQ(j.at("rms_norm_eps").get<double>(), 1e-5);
  EXPECT_EQ(j.at("rope_theta").get<double>(), 500000.0);
  EXPECT_EQ(j.at("tie_word_embeddings"), true);
  EXPECT_EQ(j.at("torch_dtype"), "bfloat16");
  EXPECT_EQ(j.at("hidden_act"), "silu");
  EXPECT_TRUE(j.at("rope_scaling").is_null());
  EXPECT_EQ(j.at("bos_token_id"), 0);
  EXPECT_EQ(j.at("eos_token_id"), 255);
  // And zt reads it back as the same shape.
  const zt::ckpt::HfConfig back = zt::ckpt::parse_hf_config(text, "c.json");
  EXPECT_EQ(back.model.num_params(), m.num_params());
  EXPECT_TRUE(back.model.tied_embeddings);
  EXPECT_EQ(back.model.rope_theta, 500000.0);
}

// The family table: qwen2 has q/k/v biases and no attention_bias key, qwen3 q/k norms and
// head_dim 128 when absent; a Llama with attention_bias and head_dim != hidden/heads; each
// written back as its own model_type and read again the same.
TEST(HfConfig, FamiliesQwen2Qwen3) {
  auto parse = [](nlohmann::json j) { return zt::ckpt::parse_hf_config(j.dump(), "c.json").model; };
  nlohmann::json j = nlohmann::json::parse(kTinyLlama);
  j.erase("architectures");
  j["model_type"] = "qwen2";
  j["attention_bias"] = true;  // not read by Qwen2 (transformers' Qwen2Attention ignores it)
  j["sliding_window"] = 4096;  // ignored while use_sliding_window is false
  const zt::model::Config q2 = parse(j);
  EXPECT_EQ(q2.family, "qwen2");
  EXPECT_TRUE(q2.qkv_bias());
  EXPECT_FALSE(q2.o_bias());
  EXPECT_FALSE(q2.attention_bias);
  j["model_type"] = "qwen3";
  j["attention_bias"] = false;
  const zt::model::Config q3 = parse(j);
  EXPECT_EQ(q3.family, "qwen3");
  EXPECT_TRUE(q3.qk_norm());
  EXPECT_EQ(q3.head_dim(), 128);  // Qwen3Config's default, not hidden / heads = 64
  j["model_type"] = "llama";
  j["attention_bias"] = true;
  j["head_dim"] = 32;
  const zt::model::Config ll = parse(j);
  EXPECT_TRUE(ll.qkv_bias() && ll.o_bias() && !ll.qk_norm());
  EXPECT_EQ(ll.head_dim(), 32);
  for (const zt::model::Config& m : {q2, q3, ll}) {
    const nlohmann::json w = nlohmann::json::parse(zt::ckpt::hf_config_json(m, "float32"));
    EXPECT_EQ(w.at("model_type"), m.family);
    const zt::model::Config back = parse(w);
    EXPECT_EQ(back.family, m.family);
    EXPECT_EQ(back.head_dim(), m.head_dim());
    EXPECT_EQ(back.num_params(), m.num_params());
  }
  j["model_type"] = "qwen2";
  j["architectures"] = {"LlamaForCausalLM"};
  expect_input_error([&] { parse(j); }, {"architectures", "Qwen2ForCausalLM"});
  j.erase("architectures");
  // Qwen's per-layer window (transformers 5's Qwen2Config): used only with use_sliding_window;
  // layers from max_window_layers on slide, or as layer_types names them.
  const auto n = j.at("num_hidden_layers").get<int64_t>();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 16;
  j["max_window_layers"] = 1;
  const zt::model::Config w = parse(j);
  EXPECT_EQ(w.sliding_window, 16);
  EXPECT_EQ(w.first_sliding_layer, 1);
  EXPECT_EQ(w.window(0), 0);
  EXPECT_EQ(w.window(n - 1), 16);
  nlohmann::json out = nlohmann::json::parse(zt::ckpt::hf_config_json(w, "float32"));
  EXPECT_EQ(out.at("use_sliding_window"), true);
  EXPECT_EQ(out.at("sliding_window"), 16);
  EXPECT_EQ(out.at("max_window_layers"), 1);
  EXPECT_EQ(out.at("layer_types").size(), static_cast<size_t>(n));
  EXPECT_EQ(out.at("layer_types")[0], "full_attention");
  EXPECT_EQ(out.at("layer_types")[1], "sliding_attention");
  j["max_window_layers"] = n;  // no layer slides: full causal
  EXPECT_EQ(parse(j).sliding_window, 0);
  j["max_window_layers"] = 1;
  j["use_sliding_window"] = false;  // the window is ignored
  EXPECT_EQ(parse(j).sliding_window, 0);
  j["use_sliding_window"] = true;
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < n; ++i) types.push_back(i < 1 ? "full_attention" : "sliding_attention");
  j["layer_types"] = types;
  j["max_window_layers"] = 28;  // layer_types wins (transformers 5)
  EXPECT_EQ(parse(j).first_sliding_layer, 1);
  types[0] = "sliding_attention";
  types[1] = "full_attention";
  j["layer_types"] = types;
  expect_input_error([&] { parse(j); }, {"c.json", "layer_types", "full-attention layer 1"});
  types[0] = "chunked_attention";
  j["layer_types"] = types;
  expect_input_error([&] { parse(j); }, {"c.json", "layer_types", "chunked_attention"});
  types[0] = "sliding_attention";
  types[1] = "sliding_attention";
  j["layer_types"] = types;
  j["use_sliding_window"] = false;
  expect_input_error([&] { parse(j); }, {"c.json", "layer_types", "use_sliding_window"});
  j.erase("layer_types");
}

// Mistral (model_type "mistral", MistralConfig's fields as transformers 5.24 saves them):
// sliding_window read (null: full causal), refused when < 1 or per-layer; written back.
TEST(HfConfig, MistralSlidingWindow) {
  nlohmann::json j = nlohmann::json::parse(kTinyLlama);
  j["model_type"] = "mistral";
  j["architectures"] = {"MistralForCausalLM"};
  j.erase("attention_bias");
  j.erase("pretraining_tp");
  j["sliding_window"] = 4096;
  zt::ckpt::HfConfig c = zt::ckpt::parse_hf_config(j.dump(), "m.json");
  EXPECT_EQ(c.model.family, "mistral");
  EXPECT_EQ(c.model.sliding_window, 4096);
  const nlohmann::json out = nlohmann::json::parse(zt::ckpt::hf_config_json(c.model, "bfloat16"));
  EXPECT_EQ(out.at("model_type"), "mistral");
  EXPECT_EQ(out.at("architectures"), nlohmann::json::array({"MistralForCausalLM"}));
  EXPECT_EQ(out.at("sliding_window"), 4096);
  EXPECT_FALSE(out.contains("attention_bias"));  // not a MistralConfig field
  j["sliding_window"] = nullptr;
  c = zt::ckpt::parse_hf_config(j.dump(), "m.json");
  EXPECT_EQ(c.model.sliding_window, 0);
  EXPECT_TRUE(nlohmann::json::parse(zt::ckpt::hf_config_json(c.model, "bfloat16"))
                  .at("sliding_window").is_null());
  for (const char* bad : {"0", "-3", "\"4096\"", "1e3"}) {
    j["sliding_window"] = nlohmann::json::parse(bad);
    expect_input_error([&] { zt::ckpt::parse_hf_config(j.dump(), "m.json"); },
                       {"m.json", "sliding_window"});
  }
  j["sliding_window"] = 16;
  j["layer_types"] = {"sliding_attention", "full_attention"};
  expect_input_error([&] { zt::ckpt::parse_hf_config(j.dump(), "m.json"); },
                     {"m.json", "layer_types"});
  // A Llama's sliding_window is not a Llama field: ignored, as transformers' LlamaConfig.
  nlohmann::json l = nlohmann::json::parse(kTinyLlama);
  l["sliding_window"] = 16;
  EXPECT_EQ(zt::ckpt::parse_hf_config(l.dump(), "l.json").model.sliding_window, 0);
  // A zt model of family llama with a window is exported as the Mistral it is.
  zt::model::Config m = zt::model::Config::preset("tiny");
  m.sliding_window = 8;
  EXPECT_EQ(nlohmann::json::parse(zt::ckpt::hf_config_json(m, "float32")).at("model_type"),
            "mistral");
  // Full layers before sliding ones are Qwen's form only (Mistral's window covers every layer).
  m.first_sliding_layer = 2;
  expect_input_error([&] { zt::ckpt::hf_config_json(m, "float32"); },
                     {"first 2 layers attend in full", "qwen2"});
  m.family = "qwen2";
  EXPECT_EQ(nlohmann::json::parse(zt::ckpt::hf_config_json(m, "float32")).at("max_window_layers"),
            2);
}

// mistralai/Mixtral-8x7B-v0.1's config.json (as published): the mixtral-8x7b preset.
TEST(HfConfig, MixtralExperts) {
  const char* kMixtral = R"({
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
    "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
    "rms_norm_eps": 1e-05, "rope_theta": 1e6, "router_aux_loss_coef": 0.02,
    "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0", "use_cache": true, "vocab_size": 32000})";
  const zt::ckpt::HfConfig c = zt::ckpt::parse_hf_config(kMixtral, "mixtral.json");
  const zt::model::Config p = zt::model::Config::preset("mixtral-8x7b");
  EXPECT_EQ(c.model.family, "mixtral");
  EXPECT_EQ(c.model.experts, 8);
  EXPECT_EQ(c.model.experts_per_token, 2);
  EXPECT_EQ(c.model.router_aux_loss_coef, 0.02);
  EXPECT_FALSE(c.model.router_aux_loss);
  EXPECT_EQ(c.model.rope_theta, p.rope_theta);
  EXPECT_EQ(c.model.sliding_window, 0);
  EXPECT_EQ(c.model.num_params(), p.num_params());
  EXPECT_EQ(c.model.num_active_params(), p.num_active_params());
  // Written back in MixtralConfig's fields, and read again the same.
  const std::string text = zt::ckpt::hf_config_json(c.model, "bfloat16");
  const nlohmann::json out = nlohmann::json::parse(text);
  EXPECT_EQ(out.at("architectures"), nlohmann::json::array({"MixtralForCausalLM"}));
  EXPECT_EQ(out.at("num_local_experts"), 8);
  EXPECT_EQ(out.at("num_experts_per_tok"), 2);
  EXPECT_EQ(out.at("router_aux_loss_coef"), 0.02);
  EXPECT_EQ(out.at("output_router_logits"), false);
  EXPECT_EQ(out.at("router_jitter_noise"), 0.0);
  EXPECT_FALSE(out.contains("attention_bias"));
  EXPECT_EQ(zt::ckpt::parse_hf_config(text, "again.json").model.experts, 8);
  // What zt cannot represent, named.
  nlohmann::json j = nlohmann::json::parse(kMixtral);
  j["num_experts_per_tok"] = 9;
  expect_input_error([&] { zt::ckpt::parse_hf_config(j.dump(), "m.json"); },
                     {"m.json", "model.experts_per_token"});
  j["num_experts_per_tok"] = 2;
  j["router_jitter_noise"] = 0.01;
  expect_input_error([&] { zt::ckpt::parse_hf_config(j.dump(), "m.json"); },
                     {"m.json", "router_jitter_noise"});
  j["router_jitter_noise"] = 0.0;
  j["num_local_experts"] = 0;
  expect_input_error([&] { zt::ckpt::parse_hf_config(j.dump(), "m.json"); },
                     {"m.json", "num_local_experts"});
}

// A config.json that zt's model rules refuse (fields that disagree with each other) is
// refused naming the file's own fields beside zt's keys, whichever rule it breaks.
TEST(HfConfig, ModelRefusalsNameTheFileFields) {
  struct Case {
    const char* model_type;  // "mixtral" or "qwen3_moe" (on kTinyLlama's sizes)
    std::vector<std::pair<std::string, nlohmann::json>> set;
    std::vector<std::string> named;
  };
  const std::vector<Case> cases = {
      {"mixtral", {{"num_experts_per_tok", 5}}, {"num_experts_per_tok", "num_local_experts"}},
      {"qwen3_moe", {{"num_experts_per_tok", 5}}, {"num_experts_per_tok", "num_experts"}},
      {"qwen3_moe", {{"decoder_sparse_step", 30}}, {"decoder_sparse_step", "num_hidden_layers"}},
      {"mixtral", {{"router_aux_loss_coef", -1}}, {"router_aux_loss_coef"}},
      {"mixtral", {{"num_key_value_heads", 3}}, {"num_key_value_heads", "num_attention_heads"}},
      {"mixtral", {{"num_attention_heads", 3}}, {"num_attention_heads", "hidden_size"}}};
  for (const Case& c : cases) {
    nlohmann::json j = nlohmann::json::parse(kTinyLlama);
    j["model_type"] = c.model_type;
    j["architectures"] = {std::string(c.model_type) == "mixtral" ? "MixtralForCausalLM" : "Qwen3MoeForCausalLM"};
    j.erase("attention_bias");
    j["num_experts"] = 4;
    if (std::string(c.model_type) == "mixtral") j["num_local_experts"] = 4;
    j["num_experts_per_tok"] = 2;
    for (const auto& [k, v] : c.set) j[k] = v;
    try {
      zt::ckpt::parse_hf_config(j.dump(), "c.json");
      ADD_FAILURE() << c.model_type << " " << c.set.front().first << ": accepted";
    } catch (const zt::InputError& e) {
      for (const std::string& n : c.named)
        EXPECT_NE(std::string(e.message()).find(n), std::string::npos) << e.message();
    }
  }
}

TEST(HfConfig, RefusesWhatZtCannotRepresent) {
  auto with = [](const std::string& key, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(kTinyLlama);
    j[key] = nlohmann::json::parse(value);
    return j.dump();
  };
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"rope_scaling", R"({"type": "yarn", "factor": 2.0})"},
           {"rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})"},
           {"rope_scaling", R"({"rope_type": "linear", "factor": 2.0, "beta": 1})"},
           {"rope_parameters", R"({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4})"},
           {"rope_parameters", R"({"rope_type": "default", "partial_rotary_factor": 0.5})"},
           {"num_hidden_layers", "10000000"},
           {"hidden_size", "0"},
           {"max_position_embeddings", "100000000"},
           {"attention_dropout", "0.1"},
           {"pretraining_tp", "0"},
           {"quantization_config", R"({"quant_method": "gptq"})"},
           {"attention_bias", "1"},
           {"mlp_bias", "true"},
           {"model_type", R"("gemma")"},
           {"model_type", "3"},
           {"architectures", R"(["MistralForCausalLM"])"},
           {"hidden_act", R"("gelu")"},
           {"head_dim", "127"},
           {"head_dim", "0"},
           {"hidden_size", R"("2048")"},
           {"num_hidden_layers", "22.5"},
           {"tie_word_embeddings", "1"},
           {"rope_theta", R"("big")"}}) {
    SCOPED_TRACE(key);
    expect_input_error([&] { zt::ckpt::parse_hf_config(with(key, value), "dir/config.json"); },
                       {"dir/config.json", key});
  }
  // Both RoPE forms present and disagreeing.
  nlohmann::json both = nlohmann::json::parse(kTinyLlama);
  both["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  both["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 10000.0}};
  expect_input_error([&] { zt::ckpt::parse_hf_config(both.dump(), "config.json"); },
                     {"rope_scaling", "rope_parameters", "disagrees"});
  // A NUL byte and junk after the object (nlohmann alone would stop at the NUL).
  expect_input_error([] { zt::ckpt::parse_hf_config(std::string(kTinyLlama) + std::string(1, '\0') + "junk", "config.json"); },
                     {"config.json", "NUL"});
  nlohmann::json j = nlohmann::json::parse(kTinyLlama);
  j.erase("vocab_size");
  expect_input_error([&] { zt::ckpt::parse_hf_config(j.dump(), "config.json"); },
                     {"vocab_size", "missing"});
  expect_input_error([&] { zt::ckpt::parse_hf_config(with("num_key_value_heads", "5"), "config.json"); },
                     {"config.json", "model.kv_heads"});
  expect_input_error([] { zt::ckpt::parse_hf_config("{\"model_type\": \"llama\",", "config.json"); },
                     {"config.json", "JSON"});
  expect_input_error([] { zt::ckpt::read_hf_config("/nonexistent/zt/config.json"); },
                     {"/nonexistent/zt/config.json"});
}

// Llama 3.2's RoPE as transformers 5 writes it (rope_parameters) and as transformers 4
// wrote it (rope_theta + rope_scaling): the same model either way, and zt writes both.
TEST(HfConfig, RopeBothForms) {
  nlohmann::json v5 = nlohmann::json::parse(kTinyLlama);
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192},
                           {"rope_theta", 500000.0}};
  nlohmann::json v4 = nlohmann::json::parse(kTinyLlama);
  v4["rope_theta"] = 500000.0;
  v4["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const zt::kernels::RopeScaling want{"llama3", 32.0, 1.0, 4.0, 8192};
  for (const nlohmann::json& j : {v5, v4}) {
    const zt::ckpt::HfConfig c = zt::ckpt::parse_hf_config(j.dump(), "config.json");
    EXPECT_EQ(c.model.rope_theta, 500000.0);
    EXPECT_TRUE(c.model.rope_scaling == want);
    const nlohmann::json out = nlohmann::json::parse(zt::ckpt::hf_config_json(c.model, "float32"));
    EXPECT_EQ(out.at("rope_parameters").at("rope_type"), "llama3");
    EXPECT_EQ(out.at("rope_parameters").at("rope_theta").get<double>(), 500000.0);
    EXPECT_EQ(out.at("rope_scaling").at("factor").get<double>(), 32.0);
    const zt::ckpt::HfConfig back = zt::ckpt::parse_hf_config(out.dump(), "out/config.json");
    EXPECT_TRUE(back.model.rope_scaling == want);
    EXPECT_EQ(back.model.rope_theta, 500000.0);
  }
  // The legacy key "type" and a llama3 dict without original_max_position_embeddings
  // (transformers 5 then takes max_position_embeddings).
  v4["rope_scaling"] = {{"type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0}};
  const zt::ckpt::HfConfig c = zt::ckpt::parse_hf_config(v4.dump(), "config.json");
  EXPECT_EQ(c.model.rope_scaling.original_context, c.model.context);
}

// Qwen/Qwen3-30B-A3B's config.json (as published, transformers 4.51's form): the
// qwen3-30b-a3b preset; written back in Qwen3MoeConfig's fields and read again the same.
TEST(HfConfig, Qwen3MoeExperts) {
  const char* kQwen3Moe = R"({
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
    "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";
  const zt::ckpt::HfConfig c = zt::ckpt::parse_hf_config(kQwen3Moe, "qwen3moe.json");
  const zt::model::Config p = zt::model::Config::preset("qwen3-30b-a3b");
  EXPECT_EQ(c.model.family, "qwen3_moe");
  EXPECT_EQ(c.model.experts, 128);
  EXPECT_EQ(c.model.experts_per_token, 8);
  EXPECT_EQ(c.model.expert_width(), 768);
  EXPECT_TRUE(c.model.norm_topk_prob);
  EXPECT_EQ(c.model.moe_layer_count(), 48);
  EXPECT_EQ(c.model.num_params(), p.num_params());
  EXPECT_EQ(c.model.num_active_params(), p.num_active_params());
  const zt::ckpt::HfConfig back =
      zt::ckpt::parse_hf_config(zt::ckpt::hf_config_json(c.model, "bfloat16"), "back.json");
  EXPECT_EQ(zt::ckpt::config_to_json(back.model), zt::ckpt::config_to_json(c.model));
  // Qwen2-MoE's transformers 5 form (num_experts, qkv_bias, the shared expert, a dense layer).
  nlohmann::json q2 = nlohmann::json::parse(kQwen3Moe);
  q2["model_type"] = "qwen2_moe";
  q2["architectures"] = {"Qwen2MoeForCausalLM"};
  q2["shared_expert_intermediate_size"] = 5632;
  q2["mlp_only_layers"] = {0, 47};
  q2["qkv_bias"] = false;
  q2.erase("head_dim");
  const zt::model::Config m2 = zt::ckpt::parse_hf_config(q2.dump(), "q2.json").model;
  EXPECT_EQ(m2.shared_expert_intermediate, 5632);
  EXPECT_FALSE(m2.qkv_bias());
  EXPECT_EQ(m2.moe_layer_count(), 46);
  EXPECT_EQ(zt::ckpt::config_to_json(
                zt::ckpt::parse_hf_config(zt::ckpt::hf_config_json(m2, "float32"), "b").model),
            zt::ckpt::config_to_json(m2));
  // Refused by name: a router option zt does not implement, experts out of range.
  struct Bad {
    const char* key;
    nlohmann::json value;
    const char* named;  // what the message names
  };
  for (const Bad& b : {Bad{"mlp_only_layers", {48}, "mlp_only_layers"},
                       Bad{"decoder_sparse_step", 0, "decoder_sparse_step"},
                       Bad{"num_experts_per_tok", 129, "experts_per_token"},
                       Bad{"router_jitter_noise", 0.1, "router_jitter_noise"}}) {
    nlohmann::json bad = nlohmann::json::parse(kQwen3Moe);
    bad[b.key] = b.value;
    try {
      zt::ckpt::parse_hf_config(bad.dump(), "bad.json");
      ADD_FAILURE() << "no error for " << b.key;
    } catch (const zt::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(b.named), std::string::npos) << e.what();
    }
  }
}

}  // namespace
