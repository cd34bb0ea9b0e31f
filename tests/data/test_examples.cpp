// The one rule of training examples (zt/data/sft.hpp require_prompt / require_completion,
// docs/finetune.md "What every example needs"), run through every reader of them over one
// table of bad inputs: read_sft_examples in each format (Alpaca JSONL and JSON array,
// prompt-response, chat), read_preference_pairs and read_kto_examples in both forms (text,
// chat). Each bad
// example stands after a good one and must be exit 2 naming FILE:LINE (FILE: element 1),
// the field and the rule; the good examples, an empty completion among them (its EOS is
// the target, as LitGPT and TRL train it), are read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "zt/core/error.hpp"
#include "zt/data/kto.hpp"
#include "zt/data/pairs.hpp"
#include "zt/data/sft.hpp"

namespace fs = std::filesystem;
using zt::data::SftFormat;

namespace {

struct Reader {
  const char* name;
  std::string good;                                 // an accepted example
  std::function<size_t(const std::string&)> read;   // the examples read from a file
  bool array = false;                               // a JSON array, not JSONL
};

// One kind of bad example, as each reader spells it ("" where the reader has no such form).
struct Bad {
  const char* kind;
  std::vector<std::string> line;    // [readers]
  std::vector<std::string> needle;  // [readers]: in the message
};

std::string file_of(const Reader& r, const fs::path& p, const std::string& bad) {
  std::ofstream(p, std::ios::binary) << (r.array ? "[" + r.good + ",\n" + bad + "]\n" : r.good + "\n" + bad + "\n");
  return p.string();
}

size_t sft(const std::string& path, SftFormat f) { return zt::data::read_sft_examples(path, f).size(); }
size_t kto(const std::string& path) {
  std::vector<uint8_t> labels;
  return zt::data::read_kto_examples(path, labels).size();
}

}  // namespace

TEST(TrainingExamples, EveryReaderRefusesTheSameBadInputs) {
  const std::string chat_ok =
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, )"
      R"({"role": "assistant", "content": ""}]})";  // an empty reply: its end token is learned
  const std::string u = R"([{"role": "user", "content": "u"}])";
  const std::string a = R"([{"role": "assistant", "content": "a"}])";
  const std::vector<Reader> readers = {
      {"alpaca", R"({"instruction": "i", "output": ""})", [](auto& p) { return sft(p, SftFormat::kAlpaca); }},
      {"alpaca array", R"({"instruction": "i", "input": null, "output": "o"})",
       [](auto& p) { return sft(p, SftFormat::kAlpaca); }, true},
      {"prompt-response", R"({"prompt": "p", "response": ""})",
       [](auto& p) { return sft(p, SftFormat::kPromptResponse); }},
      {"chat", chat_ok, [](auto& p) { return sft(p, SftFormat::kChat); }},
      {"pairs", R"({"prompt": "p", "chosen": "", "rejected": "r"})",
       [](auto& p) { return zt::data::read_preference_pairs(p).size(); }},
      {"chat pairs", R"({"prompt": )" + u + R"(, "chosen": )" + a + R"(, "rejected": )" + a + "}",
       [](auto& p) { return zt::data::read_preference_pairs(p).size(); }},
      {"kto", R"({"prompt": "p", "completion": "", "label": true})", kto},
      {"chat kto", R"({"prompt": )" + u + R"(, "completion": )" + a + R"(, "label": false})", kto},
  };
  const std::string sys = R"([{"role": "system", "content": "s"}])";
  const std::vector<Bad> table = {
      {"empty prompt",
       {R"({"instruction": "", "output": "o"})", R"({"instruction": "", "output": "o"})",
        R"({"prompt": "", "response": "r"})", R"({"messages": )" + a + "}",
        R"({"prompt": "", "chosen": "c", "rejected": "r"})",
        R"({"prompt": [{"role": "user", "content": ""}], "chosen": )" + a + R"(, "rejected": )" + a + "}",
        R"({"prompt": "", "completion": "c", "label": true})",
        R"({"prompt": [{"role": "user", "content": ""}], "completion": )" + a + R"(, "label": true})"},
       {"field 'instruction' is empty", "field 'instruction' is empty", "field 'prompt' is empty",
        "field 'messages' has no user turn with text", "field 'prompt' is empty",
        "field 'prompt' has no user turn with text", "field 'prompt' is empty",
        "field 'prompt' has no user turn with text"}},
      {"a prompt of white space",
       {R"({"instruction": " \n\t", "output": "o"})", R"({"instruction": "  ", "output": "o"})",
        R"({"prompt": "\r\n", "response": "r"})",
        R"({"messages": [{"role": "user", "content": " \n"}, {"role": "assistant", "content": "a"}]})",
        R"({"prompt": "\t", "chosen": "c", "rejected": "r"})",
        R"({"prompt": [{"role": "user", "content": "  "}], "chosen": )" + a + R"(, "rejected": )" + a + "}",
        R"({"prompt": "\t", "completion": "c", "label": true})",
        R"({"prompt": [{"role": "user", "content": "  "}], "completion": )" + a + R"(, "label": true})"},
       {"field 'instruction' is only white space", "field 'instruction' is only white space",
        "field 'prompt' is only white space", "field 'messages' has no user turn with text",
        "field 'prompt' is only white space", "field 'prompt' has no user turn with text",
        "field 'prompt' is only white space", "field 'prompt' has no user turn with text"}},
      {"system turns only (the fuzzer's crash: rendered as no text)",
       {"", "", "", R"({"messages": )" + sys + "}", "",
        R"({"prompt": )" + sys + R"(, "chosen": )" + a + R"(, "rejected": )" + a + "}", "",
        R"({"prompt": )" + sys + R"(, "completion": )" + a + R"(, "label": true})"},
       {"", "", "", "'messages' has no user turn with text (only system turns)", "",
        "'prompt' has no user turn with text (only system turns)", "",
        "'prompt' has no user turn with text (only system turns)"}},
      {"no completion (no assistant turn)",
       {R"({"instruction": "i"})", R"({"instruction": "i", "input": "x"})", R"({"prompt": "p"})",
        R"({"messages": )" + u + "}", R"({"prompt": "p", "chosen": "c"})",
        R"({"prompt": )" + u + R"(, "chosen": )" + a + R"(, "rejected": )" + u + "}",
        R"({"prompt": "p", "label": true})",
        R"({"prompt": )" + u + R"(, "completion": )" + u + R"(, "label": true})"},
       {"field 'output' is missing", "field 'output' is missing", "field 'response' is missing",
        "field 'messages' has no assistant turn", "field 'rejected' is missing",
        "field 'rejected' has no assistant turn", "field 'completion' is missing",
        "field 'completion' has no assistant turn"}},
      {"an unknown role",
       {"", "", "",
        R"({"messages": [{"role": "user", "content": "u"}, {"role": "tool", "content": "t"}]})", "",
        R"({"prompt": )" + u + R"(, "chosen": [{"role": "robot", "content": "c"}], "rejected": )" + a + "}", "",
        R"({"prompt": )" + u + R"(, "completion": [{"role": "robot", "content": "c"}], "label": true})"},
       {"", "", "", "messages[1]: field 'role' is 'tool', not system, developer, user or assistant", "",
        "chosen[0]: field 'role' is 'robot', not system, developer, user or assistant", "",
        "completion[0]: field 'role' is 'robot', not system, developer, user or assistant"}},
  };
  const fs::path d = zt::testing::temp_dir() / "training-examples";
  fs::create_directories(d);
  int refused = 0;
  for (size_t r = 0; r < readers.size(); ++r) {
    const Reader& reader = readers[r];
    const fs::path p = d / (std::string("r") + std::to_string(r) + (reader.array ? ".json" : ".jsonl"));
    {  // the good example alone (twice) is read
      std::ofstream(p, std::ios::binary)
          << (reader.array ? "[" + reader.good + ", " + reader.good + "]" : reader.good + "\n" + reader.good + "\n");
      EXPECT_EQ(reader.read(p.string()), 2u) << reader.name;
    }
    for (const Bad& bad : table) {
      ASSERT_EQ(bad.line.size(), readers.size()) << bad.kind;
      if (bad.line[r].empty()) continue;  // no such form in this reader
      const std::string path = file_of(reader, p, bad.line[r]);
      const std::string where = reader.array ? path + ": element 1" : path + ":2";
      try {
        reader.read(path);
        ADD_FAILURE() << reader.name << ", " << bad.kind << ": accepted " << bad.line[r];
      } catch (const zt::InputError& e) {
        ++refused;
        const std::string w = e.what();
        EXPECT_EQ(e.exit_code(), zt::ExitCode::kBadInput) << w;
        EXPECT_NE(w.find(where + ": "), std::string::npos) << reader.name << ", " << bad.kind << ": " << w;
        EXPECT_NE(w.find(bad.needle[r]), std::string::npos)
            << reader.name << ", " << bad.kind << ": '" << bad.needle[r] << "' not in: " << w;
        EXPECT_FALSE(e.hint().empty()) << w;
      }
    }
  }
  EXPECT_EQ(refused, 30);  // 8 readers x the 3 kinds each has, 3 chat readers x the 2 chat-only kinds
}

// KTO's own field: `label`, true or false; a missing one, another type, or an empty list
// of completion messages is exit 2 naming FILE:2 and the field; the labels are read in order.
TEST(TrainingExamples, KtoLabelsAreBoolean) {
  const fs::path p = zt::testing::temp_dir() / "kto-labels.jsonl";
  const std::string good = R"({"prompt": "p", "completion": "c", "label": true})";
  for (const auto& [line, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": "p", "completion": "c"})", "field 'label' is missing"},
           {R"({"prompt": "p", "completion": "c", "label": "yes"})", "field 'label' is \"yes\", not true or false"},
           {R"({"prompt": "p", "completion": "c", "label": 1})", "not true or false"},
           {R"({"prompt": "p", "completion": 3, "label": false})", "field 'completion' is"},
           {R"({"prompt": [{"role": "user", "content": "u"}], "completion": [], "label": false})",
            "completion"}}) {
    std::ofstream(p, std::ios::binary) << good << "\n" << line << "\n";
    try {
      kto(p.string());
      ADD_FAILURE() << "accepted " << line;
    } catch (const zt::InputError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(p.string() + ":2: "), std::string::npos) << w;
      EXPECT_NE(w.find(needle), std::string::npos) << "'" << needle << "' not in: " << w;
    }
  }
  std::ofstream(p, std::ios::binary) << good << "\n" << R"({"prompt": "q", "completion": "", "label": false})" << "\n";
  std::vector<uint8_t> labels;
  EXPECT_EQ(zt::data::read_kto_examples(p.string(), labels).size(), 2u);
  EXPECT_EQ(labels, (std::vector<uint8_t>{1, 0}));
}
