// The `finetune` attribute of adapter checkpoints (ckpt::parse_finetune_json): what the
// lora.* keys accept is accepted, and every malformed value is a zt::InputError naming the
// file, the attribute and the field. Reading, merging and the PEFT export against PEFT
// itself: model.hf.lora_export (tests/model/hf/lora_export_test.py).
#include <gtest/gtest.h>

#include <string>

#include "zt/ckpt/adapter_export.hpp"
#include "zt/core/error.hpp"

namespace zt::ckpt {
namespace {

const model::Config kTiny = model::Config::preset("tiny");

std::string refusal(const std::string& text) {
  try {
    parse_finetune_json(text, kTiny, "a.h5");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(AdapterFinetune, Accepts) {
  const model::LoraConfig l = parse_finetune_json(
      R"({"method": "qlora", "rank": 4, "alpha": 8, "dropout": 0.05, "rslora": true,
          "targets": ["q", "v", "lm_head"]})",
      kTiny, "a.h5");
  EXPECT_EQ(l.method, model::FinetuneMethod::kQlora);
  EXPECT_EQ(l.rank, 4);
  EXPECT_DOUBLE_EQ(l.alpha, 8.0);
  EXPECT_DOUBLE_EQ(l.dropout, 0.05);
  EXPECT_TRUE(l.rslora);
  EXPECT_EQ(l.targets, (1u << static_cast<int>(model::LoraTarget::kQ)) |
                           (1u << static_cast<int>(model::LoraTarget::kV)) |
                           (1u << static_cast<int>(model::LoraTarget::kLmHead)));
}

TEST(AdapterFinetune, RefusalsNameTheField) {
  const std::string ok = R"("rank": 2, "alpha": 4.0, "dropout": 0.0, "rslora": false)";
  const struct { std::string text, words; } cases[] = {
      {R"({"method": "lora", "rank": 2)", "a.h5"},
      {"[1, 2]", "not a JSON object"},
      {R"({"rank": 2, "alpha": 4.0, "dropout": 0.0, "rslora": false, "targets": ["q"]})", "\"method\""},
      {R"({"method": "full", )" + ok + R"(, "targets": ["q"]})", "\"full\""},
      {R"({"method": "lora", "rank": "2", "alpha": 4.0, "dropout": 0.0, "rslora": false, "targets": ["q"]})", "\"rank\" is \"2\""},
      {R"({"method": "lora", "rank": 2, "alpha": 4.0, "dropout": 0.0, "rslora": 1, "targets": ["q"]})", "\"rslora\""},
      {R"({"method": "lora", )" + ok + R"(, "targets": []})", "\"targets\""},
      {R"({"method": "lora", )" + ok + R"(, "targets": ["q", "x"]})", "unknown target \"x\""},
      {R"({"method": "lora", )" + ok + R"(, "targets": ["q,v"]})", "\"q,v\", not one target name"},
      {R"({"method": "lora", )" + ok + R"(, "targets": [3]})", "\"targets\" holds 3"},
      {R"({"method": "lora", "rank": 65, "alpha": 4.0, "dropout": 0.0, "rslora": false, "targets": ["k"]})", "lora.rank = 65 exceeds"},
      {R"({"method": "lora", "rank": 2, "alpha": 4.0, "dropout": 1.0, "rslora": false, "targets": ["q"]})", "lora.dropout"},
      {R"({"method": "lora", "rank": 2, "alpha": 0, "dropout": 0.0, "rslora": false, "targets": ["q"]})", "lora.alpha"},
      {R"({"method": "lora", "method": "lora", )" + ok + R"(, "targets": ["q"]})", "a.h5"},
  };
  for (const auto& c : cases) {
    const std::string msg = refusal(c.text);
    EXPECT_NE(msg.find("a.h5"), std::string::npos) << c.text << "\n" << msg;
    EXPECT_NE(msg.find("finetune"), std::string::npos) << c.text << "\n" << msg;
    EXPECT_NE(msg.find(c.words), std::string::npos) << c.text << "\n" << msg;
  }
}

}  // namespace
}  // namespace zt::ckpt
