// Unit tests of the training pieces: configuration keys, LR schedule, sampling.
#include <gtest/gtest.h>

#include "support/expect_error.hpp"

#include <cmath>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "zt/core/config.hpp"
#include "zt/core/error.hpp"
#include "zt/train/config.hpp"
#include "zt/train/generate.hpp"
#include "zt/train/metrics.hpp"
#include "zt/train/schedule.hpp"

namespace {

using zt::testing::expect_input_error;

zt::train::TrainConfig resolve_with(const std::vector<std::string>& sets, int world) {
  const zt::config::Schema schema = zt::train::train_schema();
  return zt::train::resolve(zt::config::load(schema, "", sets), world);
}

}  // namespace

TEST(TrainConfig, DefaultsAreTheEmbeddedDefault) {
  const auto t = resolve_with({}, 2);
  EXPECT_EQ(t.model.name, "tiny");
  EXPECT_EQ(t.model.num_params(), 1049728);
  EXPECT_EQ(t.global_batch % (t.micro_batch * 2), 0);
  EXPECT_EQ(t.accum, t.global_batch / (t.micro_batch * 2));
  EXPECT_TRUE(t.data_path.empty());
  EXPECT_EQ(t.sample_prompt, "ROMEO:");
}

TEST(TrainConfig, AccumulationIsDerived) {
  const auto t = resolve_with({"train.micro_batch=4", "train.global_batch=24"}, 3);
  EXPECT_EQ(t.accum, 2);  // 24 = 4 * 3 * 2
  EXPECT_EQ(t.tokens_per_step(), 24 * t.seq_len);
  expect_input_error([] { resolve_with({"train.micro_batch=4", "train.global_batch=20"}, 3); },
                     {"train.global_batch = 20", "train.micro_batch (4)", "3 ranks = 12"});
}

TEST(TrainConfig, ModelOverridesApplyToThePreset) {
  const auto t = resolve_with({"model.layers=2", "model.hidden=64", "model.heads=2",
                               "model.kv_heads=1", "model.intermediate=128"},
                              1);
  EXPECT_EQ(t.model.layers, 2);
  EXPECT_EQ(t.model.hidden, 64);
  EXPECT_EQ(t.model.vocab, 256);  // from the preset
  EXPECT_EQ(t.model.name, "tiny+overrides");
  expect_input_error([] { resolve_with({"model.heads=3"}, 1); }, {"model.heads"});
  expect_input_error([] { resolve_with({"train.seq_len=512"}, 1); },
                     {"train.seq_len = 512", "model.context"});
  expect_input_error([] { resolve_with({"train.lr=1e-4", "train.min_lr=1e-3"}, 1); },
                     {"train.min_lr", "train.lr"});
  expect_input_error([] { resolve_with({"model.preset=huge"}, 1); }, {"model.preset", "tiny"});
  expect_input_error([] { resolve_with({"train.stepz=3"}, 1); }, {"train.stepz", "train.steps"});
  expect_input_error([] { resolve_with({"train.steps=ten"}, 1); }, {"train.steps", "int"});
}

// The one rule for the model's fields: every field a checkpoint's model_config records
// (config_to_json; the resume refusals name each as model.<field>) is a `zt train` key.
// A Qwen2-MoE config with every optional field away from its default, written back as
// --set model.<field>=value from that JSON itself (so a new field cannot be missed),
// resolves to the same config.
TEST(TrainConfig, EveryModelConfigFieldIsAKey) {
  zt::model::Config want = zt::model::Config::preset("tiny");
  want.family = "qwen2_moe";
  want.layers = 4;
  want.head_dim_ = 16;
  want.attention_bias = true;
  want.tied_embeddings = true;
  want.sliding_window = 16;
  want.first_sliding_layer = 1;
  want.norm_eps = 1e-6;
  want.rope_theta = 5e5;
  want.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  want.experts = 4;
  want.experts_per_token = 3;
  want.router_aux_loss = true;
  want.router_aux_loss_coef = 0.25;
  want.moe_intermediate = 48;
  want.shared_expert_intermediate = 40;
  want.norm_topk_prob = false;
  want.decoder_sparse_step = 2;   // layers 1 and 3 have the experts ...
  want.mlp_only_layers = {3};     // ... but 3
  want.validate();
  nlohmann::json j = nlohmann::json::parse(zt::ckpt::config_to_json(want));
  j.erase("name");  // the preset's name (model.preset), not a field
  std::vector<std::string> sets;
  for (const auto& [field, value] : j.items()) {
    if (field == "rope_scaling") {  // model.rope_type, model.rope_factor, ...
      for (const auto& [k, v] : value.items())
        sets.push_back("model.rope_" + (k == "type" ? std::string("type") : k) + "=" +
                       (v.is_string() ? v.get<std::string>() : v.dump()));
      continue;
    }
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (value.is_array()) text = text.substr(1, text.size() - 2);  // [3] -> 3
    sets.push_back("model." + field + "=" + text);
  }
  const auto t = resolve_with(sets, 1);
  nlohmann::json got = nlohmann::json::parse(zt::ckpt::config_to_json(t.model));
  got.erase("name");
  EXPECT_EQ(got, j);
  EXPECT_EQ(t.model.moe_layer_count(), 1);
}

// A refusal's fix is a value the schema takes: a MoE preset turned into a dense family is
// told to set model.experts = 0, and that resolves (the dense MLP).
TEST(TrainConfig, DenseFamilyOnAMoePresetTakesExpertsZero) {
  expect_input_error([] { resolve_with({"model.preset=mixtral-8x7b", "model.family=mistral"}, 1); },
                     {"model.experts = 8 with model.family = mistral", "model.experts = 0"});
  const auto t = resolve_with({"model.preset=mixtral-8x7b", "model.family=mistral", "model.experts=0"}, 1);
  EXPECT_FALSE(t.model.moe());
  EXPECT_EQ(t.model.num_params(), zt::model::Config::preset("mistral-7b").num_params());
  // And Qwen2-MoE from the command line: its shared expert's width is named with its key.
  expect_input_error([] { resolve_with({"model.experts=4", "model.experts_per_token=2", "model.family=qwen2_moe"}, 1); },
                     {"model.shared_expert_intermediate = 0", "set model.shared_expert_intermediate"});
  expect_input_error([] { resolve_with({"model.experts=4", "model.experts_per_token=2", "model.family=qwen3_moe",
                                        "model.mlp_only_layers=0,x"}, 1); },
                     {"model.mlp_only_layers = \"0,x\"", "comma-separated"});
}

// Keys given that another key turns off are named, one rule for all of them; the same
// keys where their feature is on, or given at their default, are not.
TEST(TrainConfig, InertKeysAreNamedWithTheirFix) {
  const zt::config::Schema schema = zt::train::train_schema();
  const auto inert = [&](const std::vector<std::string>& sets) {
    const zt::config::Config c = zt::config::load(schema, "", sets);
    std::string all;
    for (const std::string& w : zt::train::inert_keys(c, zt::train::resolve(c, 1))) all += w + "\n";
    return all;
  };
  const std::vector<std::string> moe = {"model.family=mixtral", "model.experts=4", "model.experts_per_token=2"};
  const auto with = [&](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const struct {
    std::vector<std::string> sets;
    std::string named;  // "" : nothing named
  } cases[] = {
      {with(moe, {"model.router_aux_loss_coef=0.02"}), "model.router_aux_loss_coef = 0.02 has no effect"},
      {with(moe, {"model.router_aux_loss_coef=0.02", "model.router_aux_loss=true"}), ""},
      {{"lora.rank=16"}, "lora.rank = 16 has no effect in this run: finetune.method = full"},
      {{"lora.rank=16", "finetune.method=lora"}, ""},
      {{"lora.rank=8"}, ""},  // the default: a file listing every key says nothing
      {{"dpo.beta=0.3"}, "dpo.beta = 0.3 has no effect in this run: set finetune.objective = dpo"},
      {{"orpo.lambda=0.5", "finetune.objective=dpo"}, "orpo.lambda = 0.5 has no effect"},
      {{"model.rope_factor=2"}, "model.rope_factor = 2.0 has no effect"},
      {{"model.rope_factor=2", "model.rope_type=linear"}, ""},
      {{"model.rope_low_freq_factor=2", "model.rope_type=linear"}, "model.rope_low_freq_factor = 2.0"},
      {{"model.first_sliding_layer=1"}, "model.first_sliding_layer = 1 has no effect"},
      {{"model.first_sliding_layer=1", "model.sliding_window=8"}, ""},
      {{"model.experts_per_token=2"}, "model.experts_per_token = 2 has no effect"},
      {{"model.router_aux_loss=true"}, "model.router_aux_loss = true has no effect in this run: the model has no experts"},
      {{"model.router_aux_loss_coef=0.5"}, "model.router_aux_loss_coef = 0.5 has no effect in this run: the model has no experts"},
  };
  for (const auto& c : cases) {
    const std::string got = inert(c.sets);
    if (c.named.empty())
      EXPECT_EQ(got, "") << c.sets.back();
    else
      EXPECT_NE(got.find(c.named), std::string::npos) << c.sets.back() << ": " << got;
  }
}

TEST(TrainConfig, EveryKeyHasADescriptionAndASection) {
  const zt::config::Schema s = zt::train::train_schema();
  for (const auto& k : s.keys()) {
    EXPECT_FALSE(k.description.empty()) << k.name;
    EXPECT_NE(k.name.find('.'), std::string::npos) << k.name;
  }
  for (const char* needed : {"model.preset", "train.steps", "train.micro_batch", "train.global_batch",
                             "train.lr", "train.warmup", "train.seed", "data.path", "eval.every",
                             "log.metrics", "train.min_lr", "train.weight_decay", "train.beta1",
                             "train.beta2", "train.grad_clip", "train.seq_len", "train.recompute",
                             "eval.batches", "sample.tokens", "comm.timeout", "train.peak_tflops"})
    EXPECT_NE(s.find(needed), nullptr) << needed;
}

TEST(Schedule, KnownValues) {
  // lr 1.0, min 0.1, warm-up 10, 110 steps: the decay spans steps 10 .. 109 (99 intervals).
  const zt::train::Schedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(zt::train::lr_at(s, 0), 0.1);   // 1/10
  EXPECT_DOUBLE_EQ(zt::train::lr_at(s, 4), 0.5);   // 5/10
  EXPECT_DOUBLE_EQ(zt::train::lr_at(s, 9), 1.0);   // 10/10
  EXPECT_DOUBLE_EQ(zt::train::lr_at(s, 10), 1.0);  // cosine at p = 0
  EXPECT_NEAR(zt::train::lr_at(s, 109), 0.1, 1e-15);  // the last step uses min_lr
  // Halfway through the decay (p = 0.5 at step 10 + 49.5: not a step); p = 1/3 at step 43:
  // 0.1 + 0.9 * (1 + cos(pi/3)) / 2 = 0.1 + 0.9 * 0.75 = 0.775.
  EXPECT_NEAR(zt::train::lr_at(s, 43), 0.775, 1e-12);
  // p = 2/3 at step 76: 0.1 + 0.9 * (1 + cos(2 pi / 3)) / 2 = 0.1 + 0.9 * 0.25 = 0.325.
  EXPECT_NEAR(zt::train::lr_at(s, 76), 0.325, 1e-12);
  // No warm-up: the first step is at the peak.
  EXPECT_DOUBLE_EQ(zt::train::lr_at(zt::train::Schedule{3e-4, 0.0, 0, 5}, 0), 3e-4);
  // Monotone non-increasing after warm-up.
  for (int64_t k = 10; k < 109; ++k) EXPECT_LE(zt::train::lr_at(s, k + 1), zt::train::lr_at(s, k));
}

TEST(Sampling, InverseCdfAgainstHandProbabilities) {
  // logits log(1), log(2), log(7): p = 0.1, 0.2, 0.7 at temperature 1.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(7.0f)};
  EXPECT_EQ(zt::train::sample_token(logits, 1.0, 0.05), 0);
  EXPECT_EQ(zt::train::sample_token(logits, 1.0, 0.15), 1);
  EXPECT_EQ(zt::train::sample_token(logits, 1.0, 0.29), 1);
  EXPECT_EQ(zt::train::sample_token(logits, 1.0, 0.31), 2);
  EXPECT_EQ(zt::train::sample_token(logits, 1.0, 0.999), 2);
  // Temperature 0.5 squares the odds: 1 : 4 : 49 -> p0 = 1/54.
  EXPECT_EQ(zt::train::sample_token(logits, 0.5, 0.9 / 54.0), 0);
  EXPECT_EQ(zt::train::sample_token(logits, 0.5, 1.1 / 54.0), 1);
  // The uniforms are deterministic, in [0, 1), and differ between k.
  EXPECT_EQ(zt::train::sample_uniform(42, 7), zt::train::sample_uniform(42, 7));
  EXPECT_NE(zt::train::sample_uniform(42, 7), zt::train::sample_uniform(42, 8));
  double mean = 0;
  for (uint64_t k = 0; k < 10000; ++k) {
    const double u = zt::train::sample_uniform(1, k);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    mean += u / 10000;
  }
  EXPECT_NEAR(mean, 0.5, 0.02);
}

// Top-k and top-p against the rules written out (Hugging Face's warpers): top-k keeps the
// k largest (ties kept), top-p keeps a token while the mass strictly above it is < p.
TEST(Sampling, GreedyTopKTopP) {
  // p = 0.1, 0.2, 0.3, 0.4 at temperature 1 (logits log of them).
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  zt::train::SampleOptions o;
  o.temperature = 0.0;  // greedy: the argmax, whatever u
  EXPECT_EQ(zt::train::sample_token(logits, o, 0.0), 3);
  EXPECT_EQ(zt::train::sample_token(logits, o, 0.99), 3);
  const std::vector<float> tie = {1.0f, 3.0f, 3.0f};
  EXPECT_EQ(zt::train::sample_token(tie, o, 0.5), 1);  // the first maximum, as torch.argmax

  o.temperature = 1.0;
  o.top_k = 2;  // keeps 0.3, 0.4 -> renormalised 3/7, 4/7 in index order
  EXPECT_EQ(zt::train::sample_token(logits, o, 0.0), 2);
  EXPECT_EQ(zt::train::sample_token(logits, o, 0.42), 2);
  EXPECT_EQ(zt::train::sample_token(logits, o, 0.43), 3);
  o.top_k = 0;
  o.top_p = 0.5;  // 0.4 (mass above 0) and 0.3 (above 0.4 < 0.5) stay; 0.2 (above 0.7) goes
  EXPECT_EQ(zt::train::sample_token(logits, o, 0.0), 2);
  EXPECT_EQ(zt::train::sample_token(logits, o, 0.999), 3);
  o.top_p = 0.4;  // only 0.4: the mass above 0.3 is 0.4, not < 0.4
  for (const double u : {0.0, 0.5, 0.999}) EXPECT_EQ(zt::train::sample_token(logits, o, u), 3);
  o.top_p = 0.75;  // 0.4, 0.3, 0.2 stay (0.7 < 0.75 above 0.2); 0.1 goes (0.9 above it)
  EXPECT_EQ(zt::train::sample_token(logits, o, 0.0), 1);
  o.top_k = 2;  // then top-p over the renormalised top-2: 4/7 alone reaches 0.5
  o.top_p = 0.5;
  for (const double u : {0.0, 0.5, 0.999}) EXPECT_EQ(zt::train::sample_token(logits, o, u), 3);
  // Sampled frequencies follow the kept probabilities (top-k 3: 0.2, 0.3, 0.4 / 0.9).
  o.top_k = 3;
  o.top_p = 1.0;
  std::vector<int> count(4, 0);
  for (uint64_t k = 0; k < 20000; ++k)
    ++count[static_cast<size_t>(zt::train::sample_token(logits, o, zt::train::sample_uniform(5, k)))];
  EXPECT_EQ(count[0], 0);
  EXPECT_NEAR(count[1] / 20000.0, 0.2 / 0.9, 0.015);
  EXPECT_NEAR(count[3] / 20000.0, 0.4 / 0.9, 0.015);
}

// The decoding loop: stops at a stop id (kept) or a stop callback, restarts a full window
// from its last half, and a KV-cached model gives the recomputing model's greedy tokens.
TEST(Sampling, GenerateStopsAndSlidesTheWindow) {
  // A fake decoder: the logits make (last token + 1) % V the argmax; it records appends.
  std::vector<size_t> appended;
  std::vector<int32_t> held;
  zt::train::Decoder d;
  d.vocab = 8;
  d.capacity = 6;
  d.append = [&](std::span<const int32_t> t, std::span<float> out) {
    appended.push_back(t.size());
    held.insert(held.end(), t.begin(), t.end());
    ASSERT_LE(held.size(), 6u);
    std::fill(out.begin(), out.end(), 0.0f);
    out[static_cast<size_t>((held.back() + 1) % 8)] = 1.0f;
  };
  d.reset = [&] { held.clear(); };
  zt::train::SampleOptions o;
  o.temperature = 0.0;
  o.tokens = 10;
  const std::vector<int32_t> prompt = {5, 6, 7, 0, 1, 2, 3};  // longer than the window
  auto g = zt::train::generate(d, prompt, o);
  EXPECT_EQ(g.tokens, (std::vector<int32_t>{4, 5, 6, 7, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(g.reason, zt::train::StopReason::kLength);
  // prefill 6, one each until 6 held, then restarts from the last 3, ...
  EXPECT_EQ(appended.front(), 6u);
  EXPECT_NE(std::find(appended.begin(), appended.end(), 3u), appended.end());
  o.stop_ids = {7};
  g = zt::train::generate(d, prompt, o);
  EXPECT_EQ(g.tokens, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(g.reason, zt::train::StopReason::kStopId);
  o.stop_ids.clear();
  o.stop = [](std::span<const int32_t> gen) { return gen.size() == 2; };
  g = zt::train::generate(d, prompt, o);
  EXPECT_EQ(g.tokens.size(), 2u);
  EXPECT_EQ(zt::train::stop_reason_name(g.reason), std::string("stop"));
}

// The default step line: the essentials within 100 columns at common figures (120 at
// extreme ones); the verbose one adds memory and comm bytes.
TEST(Metrics, ShortStepLineAndVerbose) {
  zt::train::StepRecord r;
  r.step = 123456;
  r.loss = 12.3456;
  r.lr = 3e-4;
  r.grad_norm = 1234.5;
  r.clip_coef = 0.5;
  r.tokens_per_s = 12345678;
  r.mfu = 0.456;
  r.step_time_s = 12.345;
  const std::string line = zt::train::step_line(r, 1000000);
  EXPECT_EQ(line, "step 123456/1000000 | loss 12.3456 | lr 3.00e-04 | gnorm 1234.500 clip | "
                  "12345678 tok/s | MFU 45.6% | 12.345 s");
  EXPECT_LE(line.size(), 120u) << line;
  zt::train::StepRecord common = r;
  common.step = 25;
  common.loss = 2.6585;
  common.grad_norm = 0.99;
  common.tokens_per_s = 7972;
  common.mfu = 0.181;
  common.step_time_s = 0.514;
  EXPECT_LE(zt::train::step_line(common, 200).size(), 100u) << zt::train::step_line(common, 200);
  r.skipped = true;
  EXPECT_NE(zt::train::step_line(r, 1000000).find("gnorm 1234.500 skip |"), std::string::npos);
  const std::string full = zt::train::step_line(r, 1000000, true);
  EXPECT_NE(full.find("| grad norm 1234.500 (clipped) |"), std::string::npos) << full;
  EXPECT_NE(full.find("| mem "), std::string::npos) << full;
  EXPECT_NE(full.find("| comm intra "), std::string::npos) << full;
}

TEST(Metrics, MfuFormulaAndMemory) {
  // 1000 tok/s * 6e6 FLOP/token on 2 ranks of 1e10 FLOP/s: 6e9 / 2e10 = 0.3.
  EXPECT_DOUBLE_EQ(zt::train::mfu(1000.0, 6e6, 2, 1e10), 0.3);
  EXPECT_EQ(zt::train::mfu(1000.0, 6e6, 2, 0.0), 0.0);
  const zt::train::Memory m = zt::train::process_memory();
  EXPECT_GT(m.rss_bytes, 0u);
  EXPECT_GE(m.peak_rss_bytes, m.rss_bytes);
}

// The offload phase times: in the step line and the JSON when offload is on, absent
// (not zeros) without it.
TEST(Metrics, OffloadPhaseTimesInTheStepLineAndJson) {
  zt::train::StepRecord r;
  r.step = 3;
  r.step_time_s = 1.5;
  EXPECT_EQ(zt::train::step_line(r, 10, true).find("offload"), std::string::npos);
  EXPECT_EQ(zt::train::step_json(r).find("offload"), std::string::npos);
  r.offload.active = true;
  r.offload.d2h_s = 0.0125;
  r.offload.adam_s = 0.25;
  r.offload.h2d_s = 0.011;
  r.offload.stall_s = 0.004;
  r.offload.d2h_bytes = 4096;
  r.offload.h2d_bytes = 8192;
  EXPECT_EQ(zt::train::step_line(r, 10).find("offload"), std::string::npos);  // the short line
  const std::string line = zt::train::step_line(r, 10, /*verbose=*/true);
  EXPECT_NE(line.find("| 1.500 s | offload d2h 0.013 adam 0.250 h2d 0.011 stall 0.004 s"),
            std::string::npos)
      << line;
  const nlohmann::json j = nlohmann::json::parse(zt::train::step_json(r));
  ASSERT_TRUE(j.contains("offload")) << j.dump();
  EXPECT_EQ(j["offload"]["d2h_s"].get<double>(), 0.0125);
  EXPECT_EQ(j["offload"]["adam_s"].get<double>(), 0.25);
  EXPECT_EQ(j["offload"]["h2d_s"].get<double>(), 0.011);
  EXPECT_EQ(j["offload"]["stall_s"].get<double>(), 0.004);
  EXPECT_EQ(j["offload"]["d2h_bytes"].get<uint64_t>(), 4096u);
  EXPECT_EQ(j["offload"]["h2d_bytes"].get<uint64_t>(), 8192u);
}

TEST(TrainConfig, JobsTinyTomlIsTheEmbeddedDefault) {
  // jobs/tiny.toml must load with the schema and resolve to the built-in defaults.
  const zt::config::Schema schema = zt::train::train_schema();
  const zt::config::Config from_file =
      zt::config::load(schema, std::string(ZT_SOURCE_DIR) + "/jobs/tiny.toml", {});
  const zt::config::Config defaults(schema);
  EXPECT_EQ(from_file.to_toml(), defaults.to_toml());
}

TEST(TrainConfig, JobsTinyZero3TomlResolves) {
  // jobs/tiny-zero3.toml: stage 3 + hpZ + qwZ + qgZ on 4 ranks, global batch 32 as the default.
  const zt::config::Schema schema = zt::train::train_schema();
  const auto t = zt::train::resolve(
      zt::config::load(schema, std::string(ZT_SOURCE_DIR) + "/jobs/tiny-zero3.toml", {}), 4);
  EXPECT_EQ(t.zero.stage, 3);
  EXPECT_TRUE(t.zero.quantize_weights);
  EXPECT_TRUE(t.zero.quantize_grads);
  EXPECT_EQ(t.ranks_per_node, 2);
  EXPECT_EQ(t.global_batch, 32);
  EXPECT_EQ(t.accum, 1);
  EXPECT_EQ(t.zero.accum, 1);
  EXPECT_EQ(t.zero.max_batch, 8);
  EXPECT_NO_THROW(t.zero.validate(4, 2));
}

TEST(TrainConfig, ZeroKeysMapOntoEngineOptions) {
  const auto t = resolve_with({"zero.stage=2", "zero.prefetch=5", "zero.reduce_dtype=bf16",
                               "train.grad_clip=0.5", "train.lr=1e-3", "train.micro_batch=4",
                               "train.global_batch=16", "train.seq_len=64"},
                              2);
  EXPECT_EQ(t.zero.stage, 2);
  EXPECT_EQ(t.zero.prefetch, 5);
  EXPECT_EQ(t.zero.reduce_dtype, zt::DType::kBF16);
  EXPECT_EQ(t.zero.accum, 2);  // 16 = 4 x 2 ranks x 2
  EXPECT_EQ(t.zero.grad_clip, 0.5);
  EXPECT_EQ(t.zero.adamw.lr, 1e-3);
  EXPECT_EQ(t.zero.max_batch, 4);
  EXPECT_EQ(t.zero.max_seq, 64);
  expect_input_error([] { resolve_with({"zero.stage=3", "zero.hpz_partition_size=3", "train.micro_batch=8"}, 4).zero.validate(4, 2); },
                     {"zero.hpz_partition_size = 3", "valid values: 0 (the ranks per node), 1 (off), 2"});
}

TEST(TrainConfig, DocsListEveryKey) {
  // docs/training.md has a table row for every key of the schema.
  std::ifstream in(std::string(ZT_SOURCE_DIR) + "/docs/training.md");
  ASSERT_TRUE(in) << "docs/training.md not found";
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const zt::config::Schema schema = zt::train::train_schema();
  for (const auto& k : schema.keys())
    EXPECT_NE(text.find("| `" + k.name + "` |"), std::string::npos) << k.name << " is not documented";
}
