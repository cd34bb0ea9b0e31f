// Text tokenizers without Python (the parity with Hugging Face's packages is
// tokenizers/tokenizer_parity_test.py): UTF-8 repair as Python's "replace", BPE merges and
// added tokens on a hand-made tokenizer.json, BOS/EOS from tokenizer_config.json, the
// loader's folder resolution and hash, token files with EOS between documents, and the
// errors for what zt does not read. Runs under ASan (no hf label).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"
#include "zt/data/chat_template.hpp"
#include "zt/data/sft.hpp"
#include "zt/data/text.hpp"
#include "zt/data/text_tokenizer.hpp"

namespace fs = std::filesystem;
using zt::data::load_tokenizer;
using zt::data::tokenizer_from_json;
using zt::data::utf8_replace_invalid;
using zt::testing::expect_input_error;

namespace {

// vocab: a b c ab abc, <s> </s> as special added tokens; merges a+b, ab+c.
const char* kTiny = R"({
  "added_tokens": [
    {"id": 5, "content": "<s>", "special": true, "normalized": false},
    {"id": 6, "content": "</s>", "special": true, "normalized": false}],
  "normalizer": null, "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}},
  "decoder": null,
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4},
            "merges": [["a", "b"], "ab c"]}})";

using zt::testing::temp_dir;

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

}  // namespace

TEST(TextTokenizer, Utf8ReplaceInvalidAsPython) {
  // Expected: Python's bytes.decode("utf-8", "replace").encode().
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_replace_invalid("a\xff" "b"), "a" + r + "b");
  EXPECT_EQ(utf8_replace_invalid("\xe2\x82 "), r + " ");              // truncated 3-byte
  EXPECT_EQ(utf8_replace_invalid("\xf0\x9f\x98"), r);                  // truncated 4-byte
  EXPECT_EQ(utf8_replace_invalid("\xed\xa0\x80"), r + r + r);          // surrogate
  EXPECT_EQ(utf8_replace_invalid("\xc0\xaf"), r + r);                  // overlong
  EXPECT_EQ(utf8_replace_invalid("\xf4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(utf8_replace_invalid("\xe0\x80\xaf"), r + r + r);
  const std::string ok = "ok \xc3\xa9 \xf0\x9f\x98\x80";
  EXPECT_EQ(utf8_replace_invalid(ok), ok);
}

TEST(TextTokenizer, BpeMergesAddedTokensAndTemplate) {
  const auto t = tokenizer_from_json(kTiny, "", "tiny");
  EXPECT_EQ(t->encode("abcab<s>ba"), (std::vector<uint32_t>{4, 3, 5, 1, 0}));
  EXPECT_EQ(t->encode(""), std::vector<uint32_t>{});
  EXPECT_EQ(t->info().vocab_size, 7u);
  EXPECT_EQ(t->info().prefix, std::vector<uint32_t>{5});  // the template's BOS
  EXPECT_EQ(t->info().bos, 5u);
  EXPECT_FALSE(t->info().eos);
  // No decoder: tokens joined by spaces, special tokens skipped (Hugging Face's decode).
  const std::vector<uint32_t> ids{4, 5, 3};
  EXPECT_EQ(t->decode(ids), "abc ab");
  const std::vector<uint32_t> bad{7};
  expect_input_error([&] { t->decode(bad); }, {"token id 7"});
}

TEST(TextTokenizer, ConfigDecidesBosEos) {
  const auto t = tokenizer_from_json(
      kTiny, R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "add_bos_token": false,
                 "add_eos_token": true})",
      "tiny");
  EXPECT_EQ(t->info().prefix, std::vector<uint32_t>{});
  EXPECT_EQ(t->info().suffix, std::vector<uint32_t>{6});
  EXPECT_EQ(t->info().eos, 6u);
  expect_input_error([&] { tokenizer_from_json(kTiny, R"({"eos_token": "<eos>"})", "tiny"); },
                     {"eos_token \"<eos>\" is not a token"});
  expect_input_error([&] { tokenizer_from_json(kTiny, R"({"add_eos_token": 1})", "tiny"); },
                     {"add_eos_token", "not true or false"});
}

TEST(TextTokenizer, RefusesWhatItDoesNotRead) {
  expect_input_error([&] { tokenizer_from_json(R"({"model": {"type": "WordPiece"}})", "", "t.json"); },
                     {"t.json", "WordPiece", "not supported"});
  expect_input_error([&] { tokenizer_from_json("{\"model\": ", "", "t.json"); }, {"t.json", "not valid JSON"});
  expect_input_error(
      [&] { tokenizer_from_json(R"({"model": {"vocab": {"a": 0}, "merges": [["a", "z"]]}})", "", "t.json"); },
      {"model.merges[0]", "not in model.vocab"});
  expect_input_error(
      [&] {
        tokenizer_from_json(R"({"model": {"vocab": {"a": 0}, "merges": []},
                                "normalizer": {"type": "Lowercase"}})", "", "t.json");
      },
      {"normalizer", "Lowercase"});
  expect_input_error(
      [&] {
        tokenizer_from_json(R"({"model": {"vocab": {"a": 0}, "merges": []},
                                "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"},
                                                  "behavior": "Isolated"}})", "", "t.json");
      },
      {"pre_tokenizer.pattern.Regex", "PCRE2"});
  expect_input_error(
      [&] { zt::data::tokenizer_from_sentencepiece("not a model", "", "tokenizer.model"); },
      {"tokenizer.model", "SentencePiece"});
  // A unigram model with a piece holding a NUL byte: libsentencepiece 0.1.97 throws Darts'
  // exception loading it, or calls std::terminate (clang fuzz build; fuzz_sentencepiece,
  // fuzz/corpus/sentencepiece/nul-piece).
  const std::string nul_piece(
      "\x0a\x0e\x0a\x05<unk>\x15\x00\x00\x00\x00\x18\x02\x0a\x0c\x0a\x03\x00\x04>\x15\x00\x00"
      "\x00\x00@>\x15\x00\x0a\x03\x01 .U\x00\x00\x80?\x80\x01\x01\x98\x02\x00\x1a\x0c\x0a\x08identity"
      "\x12\x00",
      62);
  expect_input_error([&] { zt::data::tokenizer_from_sentencepiece(nul_piece, "", "nul.model"); },
                     {"nul.model", "loading it", "the file is corrupt"});
}

TEST(TextTokenizer, LoadsFolderAndWritesDocumentsWithEos) {
  const fs::path d = temp_dir() / "tiny-model";
  fs::create_directories(d);
  expect_input_error([&] { load_tokenizer(d.string()); }, {"neither tokenizer.json nor tokenizer.model"});
  write(d / "tokenizer.json", kTiny);
  const auto no_eos = load_tokenizer(d.string());
  EXPECT_EQ(no_eos->info().name, "tokenizer.json:tiny-model");
  EXPECT_EQ(no_eos->info().hash.size(), 16u);
  expect_input_error([&] { zt::data::text_files_to_tokens({(d / "tokenizer.json").string()}, *no_eos); },
                     {"no EOS token"});
  write(d / "tokenizer_config.json", R"({"eos_token": "</s>"})");
  const auto t = load_tokenizer((d / "tokenizer.json").string());
  EXPECT_NE(t->info().hash, no_eos->info().hash);  // the config is hashed too
  write(d / "a.txt", "abc");
  write(d / "b.txt", "ab</s>");
  const zt::data::TokenFile f =
      zt::data::text_files_to_tokens({(d / "a.txt").string(), (d / "b.txt").string()}, *t);
  EXPECT_EQ(f.tokens, (std::vector<uint32_t>{5, 4, 6, 5, 3, 6}));  // b ends with EOS: none added
  EXPECT_EQ(f.doc_starts, (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(f.vocab_size, 7u);
  EXPECT_EQ(f.tokenizer_hash, t->info().hash);
}

// ---- instruction data (zt/data/sft.hpp) ------------------------------------------------

TEST(Sft, AlpacaPromptIsLitGptsStyle) {
  EXPECT_EQ(zt::data::alpaca_prompt("Add.", ""),
            "Below is an instruction that describes a task. Write a response that appropriately "
            "completes the request.\n\n### Instruction:\nAdd.\n\n### Response:\n");
  EXPECT_EQ(zt::data::alpaca_prompt("Add.", "1 2"),
            "Below is an instruction that describes a task, paired with an input that provides "
            "further context. Write a response that appropriately completes the request.\n\n"
            "### Instruction:\nAdd.\n\n### Input:\n1 2\n\n### Response:\n");
}

TEST(Sft, ReadersNameFileLineAndField) {
  using zt::data::SftFormat;
  const fs::path d = temp_dir() / "sft";
  fs::create_directories(d);
  const std::string jsonl = (d / "a.jsonl").string();
  write(jsonl, "{\"instruction\": \"i\", \"output\": \"o\"}\n\n{\"instruction\": \"j\", \"input\": null, "
               "\"output\": \"p\"}\n");
  const auto ex = zt::data::read_sft_examples(jsonl, SftFormat::kAlpaca);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[1].prompt, zt::data::alpaca_prompt("j", ""));
  EXPECT_EQ(ex[1].response, "p");
  write(jsonl, "{\"instruction\": \"i\", \"output\": \"o\"}\n{\"instruction\": \"i\"}\n");
  expect_input_error([&] { zt::data::read_sft_examples(jsonl, SftFormat::kAlpaca); },
                     {jsonl + ":2", "field 'output' is missing"});
  write(jsonl, "{\"prompt\": \"p\", \"response\": 3}\n");
  expect_input_error([&] { zt::data::read_sft_examples(jsonl, SftFormat::kPromptResponse); },
                     {jsonl + ":1", "field 'response' is 3, not a string"});
  write(jsonl, "{\"prompt\": \"p\", \"response\": \"r\"}\n{\"prompt\": \n");
  expect_input_error([&] { zt::data::read_sft_examples(jsonl, SftFormat::kPromptResponse); },
                     {jsonl + ":2", "not valid JSON"});
  const std::string array = (d / "a.json").string();
  write(array, "[{\"instruction\": \"i\", \"output\": \"o\"}, [1]]");
  expect_input_error([&] { zt::data::read_sft_examples(array, SftFormat::kAlpaca); },
                     {array + ": element 1", "not an object"});
  expect_input_error([&] { zt::data::parse_sft_format("chatml"); }, {"chatml", "alpaca"});
}

TEST(Sft, PacksPadsTruncatesAndMasksThePrompt) {
  const fs::path d = temp_dir() / "sft-pack";
  fs::create_directories(d);
  const std::string in = (d / "pr.jsonl").string();
  write(in, "{\"prompt\": \"ab\", \"response\": \"c\"}\n{\"prompt\": \"a\", \"response\": \"b\"}\n");
  const auto t = tokenizer_from_json(kTiny, R"({"eos_token": "</s>"})", "tiny");
  zt::data::SftOptions o;
  o.format = zt::data::SftFormat::kPromptResponse;
  // Examples: <s> ab | c </s> and <s> a | b </s>; the prompt and <s> are masked.
  o.seq_len = 9;  // rows of 10: both fit in one, then padding (</s>, masked)
  zt::data::SftStats st;
  zt::data::TokenFile f = zt::data::sft_to_tokens({in}, *t, o, &st);
  EXPECT_EQ(f.tokens, (std::vector<uint32_t>{5, 3, 2, 6, 5, 0, 1, 6, 6, 6}));
  EXPECT_EQ(f.loss_mask, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(f.doc_starts, (std::vector<uint64_t>{0, 4}));
  EXPECT_EQ(f.row_len, 10u);
  EXPECT_EQ(st.rows, 1u);
  EXPECT_EQ(st.pad_tokens, 2u);
  EXPECT_EQ(st.target_tokens, 4u);
  o.seq_len = 5;  // rows of 6: the second example does not fit after the first
  f = zt::data::sft_to_tokens({in}, *t, o, &st);
  EXPECT_EQ(f.tokens, (std::vector<uint32_t>{5, 3, 2, 6, 6, 6, 5, 0, 1, 6, 6, 6}));
  EXPECT_EQ(f.doc_starts, (std::vector<uint64_t>{0, 6}));
  o.seq_len = 9;
  o.pack = false;  // one example per row
  f = zt::data::sft_to_tokens({in}, *t, o, &st);
  EXPECT_EQ(f.tokens.size(), 20u);
  EXPECT_EQ(f.doc_starts, (std::vector<uint64_t>{0, 10}));
  o.pack = true;
  o.seq_len = 2;  // rows of 3: both truncated, one target each
  f = zt::data::sft_to_tokens({in}, *t, o, &st);
  EXPECT_EQ(f.tokens, (std::vector<uint32_t>{5, 3, 2, 5, 0, 1}));
  EXPECT_EQ(f.loss_mask, (std::vector<uint8_t>{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(st.truncated, 2u);
  o.seq_len = 1;  // rows of 2: no response token left
  expect_input_error([&] { zt::data::sft_to_tokens({in}, *t, o, &st); },
                     {"no example is left of 2", "2 with no response token"});
  o.seq_len = 2;
  o.drop_long = true;
  expect_input_error([&] { zt::data::sft_to_tokens({in}, *t, o, &st); }, {"2 longer than a row"});
  // Written and read back: the mask and the row length survive.
  o.drop_long = false;
  o.seq_len = 5;
  const std::string out = (d / "sft.h5").string();
  zt::data::write_token_file(out, zt::data::sft_to_tokens({in}, *t, o));
  const zt::data::TokenFile back = zt::data::read_token_file(out);
  EXPECT_EQ(back.loss_mask, (std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(back.row_len, 6u);
  EXPECT_EQ(back.tokenizer_hash, "");  // tokenizer_from_json: no files, no hash
}

TEST(Sft, ChatReaderNamesFileLineAndField) {
  using zt::data::SftFormat;
  const fs::path d = temp_dir() / "sft-chat";
  fs::create_directories(d);
  const std::string jsonl = (d / "c.jsonl").string();
  const std::string good = R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, )"
                           R"({"role": "assistant", "content": "a"}]})";
  write(jsonl, good + "\n\n" + good + "\n");
  const auto ex = zt::data::read_sft_examples(jsonl, SftFormat::kChat);
  ASSERT_EQ(ex.size(), 2u);
  ASSERT_EQ(ex[1].messages.size(), 3u);
  EXPECT_EQ(ex[1].messages[2].role, "assistant");
  EXPECT_EQ(ex[1].messages[2].content, "a");
  EXPECT_EQ(ex[1].where, jsonl + ":3");
  const std::pair<std::string, std::vector<std::string>> bad[] = {
      {R"({"messages": [{"role": "robot", "content": "x"}]})", {"messages[0]", "'role' is 'robot'"}},
      {R"({"messages": [{"role": "user"}]})", {"messages[0]", "'content' is missing"}},
      {R"({"messages": [{"role": "user", "content": 5}]})", {"'content' is 5, not a string"}},
      {R"({"messages": []})", {"'messages' is an empty list"}},
      {R"({"messages": [{"role": "system", "content": "s"}, {"role": "system", "content": "t"}]})",
       {"'messages' has no user turn with text (only system turns)"}},  // fuzz: llama2 rendered ""
      {R"({"messages": {"role": "user"}})", {"'messages' is", "not a list"}},
      {R"({"messages": ["hi"]})", {"messages[0] is", "not an object"}},
      {R"({"prompt": "p"})", {"'messages' is missing"}},
  };
  for (const auto& [line, needles] : bad) {
    write(jsonl, good + "\n" + line + "\n");
    try {
      zt::data::read_sft_examples(jsonl, SftFormat::kChat);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const zt::InputError& e) {
      const std::string w = e.what();
      for (const std::string& n : needles) EXPECT_NE(w.find(n), std::string::npos) << n << " not in: " << w;
      EXPECT_NE(w.find(jsonl + ":2"), std::string::npos) << w;
    }
  }
}

TEST(ChatTemplate, RecognisedByMarkersRefusedOtherwise) {
  using zt::data::chat_template_auto;
  using zt::data::chat_template_name;
  // Excerpts of the families' template strings (the markers are what `auto` reads).
  EXPECT_STREQ(chat_template_name(chat_template_auto(
                   "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }} '<<SYS>>\\n'", "t")),
               "llama2");
  EXPECT_STREQ(chat_template_name(chat_template_auto(
                   "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + '<|eot_id|>'", "t")),
               "llama3");
  EXPECT_STREQ(chat_template_name(chat_template_auto("{{'<|im_start|>' + m + '<|im_end|>'}}", "t")), "chatml");
  EXPECT_STREQ(chat_template_name(chat_template_auto(
                   "{%- if tools %}{%- else %}'<|im_start|>system\\nYou are Qwen, created by Alibaba "
                   "Cloud. You are a helpful assistant.<|im_end|>'{%- endif %}", "t")),
               "qwen");
  EXPECT_STREQ(chat_template_name(chat_template_auto("### Instruction:\n{x}\n\n### Response:\n", "t")), "alpaca");
  expect_input_error([] { chat_template_auto("", "cfg.json"); }, {"--chat-template", "cfg.json", "llama3"});
  expect_input_error([] { chat_template_auto("{{ messages }}", "cfg.json"); },
                     {"--chat-template", "llama2, llama3, mistral, qwen3.5, qwen, chatml, alpaca"});
  expect_input_error(
      [] { chat_template_auto("<|start_header_id|><|end_header_id|><|eot_id|> Cutting Knowledge Date", "c"); },
      {"llama3", "Cutting Knowledge"});
  expect_input_error([] { zt::data::chat_template("jinja"); }, {"--chat-template 'jinja'", "chatml"});
}

TEST(ChatTemplate, RendersPiecesAndStripsAsPython) {
  using zt::data::ChatMessage;
  // Python's str.isspace: NBSP, EM SPACE, IDEOGRAPHIC SPACE, NEL are whitespace; ZERO WIDTH
  // SPACE is not.
  EXPECT_EQ(zt::data::python_strip("\u00a0\u2003 x y\u3000\u0085\n"), "x y");
  EXPECT_EQ(zt::data::python_strip("\u200bx\u200b"), "\u200bx\u200b");
  EXPECT_EQ(zt::data::python_strip(" \t "), "");
  const std::vector<ChatMessage> conv{{"system", "S"}, {"user", " U "}, {"assistant", " A "}};
  const zt::data::ChatTokens tokens{"<s>", "</s>", true};
  std::string text, trained;
  for (const auto& p : zt::data::render_chat(zt::data::chat_template("llama2"), conv, tokens, false, "x")) {
    text += p.text;
    if (p.trained) trained += p.text;
  }
  // The template strips the system block + the first user message as one string, so the
  // user's leading space stays (as Jinja's content.strip() gives).
  EXPECT_EQ(text, "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n U [/INST] A </s>");
  EXPECT_EQ(trained, " A </s>");
  expect_input_error(
      [&] {
        zt::data::render_chat(zt::data::chat_template("llama2"), {{"assistant", "a"}}, tokens, false, "f:7");
      },
      {"f:7", "message 0", "'user'"});
  expect_input_error(
      [&] {
        zt::data::render_chat(zt::data::chat_template("chatml"), {{"user", "u"}, {"system", "s"}}, tokens,
                              false, "f:8");
      },
      {"f:8", "message 1", "system message is only allowed first"});
}
