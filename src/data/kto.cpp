// Unpaired labelled completions -> token files for KTO (see kto.hpp).
#include "zt/data/kto.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"
#include "zt/data/sft.hpp"
#include "zt/data/text_tokenizer.hpp"

namespace zt::data {
namespace {

using json = nlohmann::json;

constexpr const char* kHint =
    "each line is an object {\"prompt\", \"completion\", \"label\"}: two strings, or two lists of "
    "{\"role\", \"content\"} messages (TRL's unpaired preference format), and label true "
    "(desirable) or false (undesirable); docs/finetune.md \"KTO\"";

PromptCompletions example_of(const json& obj, const std::string& where, uint8_t& label) {
  if (!obj.is_object())
    throw InputError(where + ": the example is " + describe_json(obj) + ", not an object", kHint);
  const auto l = obj.find("label");
  if (l == obj.end()) throw InputError(where + ": field 'label' is missing", kHint);
  if (!l->is_boolean())
    throw InputError(where + ": field 'label' is " + describe_json(*l) + ", not true or false", kHint);
  label = l->get<bool>() ? 1 : 0;
  PromptCompletions p;
  p.where = where;
  const auto prompt = obj.find("prompt");
  if (prompt == obj.end()) throw InputError(where + ": field 'prompt' is missing", kHint);
  const auto completion = obj.find("completion");
  if (completion == obj.end()) throw InputError(where + ": field 'completion' is missing", kHint);
  if (prompt->is_array()) {
    p.chat = true;
    p.prompt_m = chat_messages_of(obj, "prompt", where, kHint);
    p.completions_m.push_back(chat_messages_of(obj, "completion", where, kHint));
    require_prompt(p.prompt_m, where, "prompt");
    require_completion(p.completions_m[0], where, "completion");
  } else if (prompt->is_string()) {
    p.prompt = prompt->get<std::string>();
    require_prompt(p.prompt, where, "prompt");
    if (!completion->is_string())
      throw InputError(where + ": field 'completion' is " + describe_json(*completion) +
                           ", not a string like the prompt",
                       kHint);
    p.completions.push_back(completion->get<std::string>());
  } else {
    throw InputError(where + ": field 'prompt' is " + describe_json(*prompt) +
                         ", not a string or a list of messages",
                     kHint);
  }
  return p;
}

}  // namespace

std::vector<PromptCompletions> read_kto_examples(const std::string& path, std::vector<uint8_t>& labels) {
  const std::string text = read_regular_file(
      path, "KTO data file", "name a .jsonl file (relative paths are from the current directory)", false);
  std::vector<PromptCompletions> out;
  for_each_json_line(text, path, [&](std::string_view line, const std::string& where) {
    uint8_t label = 0;
    out.push_back(example_of(parse_json_strict(line, where, kHint), where, label));
    labels.push_back(label);
  });
  if (out.empty()) throw InputError("KTO data file '" + path + "' holds no examples", kHint);
  return out;
}

TokenFile kto_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                        const KtoOptions& o, KtoStats* stats) {
  if (paths.empty()) throw InputError("no KTO data files given", "name at least one IN.jsonl");
  if (o.kl_batch < 2)
    throw InputError(strf("--kl-batch %zu: the mismatched completion of a block of one is its own", o.kl_batch),
                     "give --kl-batch 2 or more (TRL's per_device_train_batch_size; TRL refuses 1 too)");
  TokenFile out = rows_file(tokenizer, o.seq_len);
  const uint32_t eos = *tokenizer.info().eos;
  std::vector<PromptCompletions> examples;
  std::vector<uint8_t> labels;
  for (const std::string& path : paths)
    for (PromptCompletions& p : read_kto_examples(path, labels)) examples.push_back(std::move(p));
  KtoStats st;
  st.examples = examples.size();
  const auto ids = encode_prompt_completions(tokenizer, examples, o.chat_template);
  const size_t row = out.row_len;
  // TRL's tokenize_fn, then its filter (a prompt that fills max_length), then the rotation.
  struct Kept {
    std::vector<uint32_t> prompt, completion;
    uint8_t label;
  };
  std::vector<Kept> kept;
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t prompt_len = common_prefix(ids[i][0], ids[i][1]);
    if (prompt_len < ids[i][0].size()) ++st.prefix_differs;
    if (prompt_len >= row) {
      ++st.dropped_prompt;
      continue;
    }
    const std::vector<uint32_t>& whole = ids[i][1];
    kept.push_back({{whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(prompt_len)},
                    {whole.begin() + static_cast<std::ptrdiff_t>(prompt_len), whole.end()},
                    labels[i]});
  }
  for (size_t i = 0; i < kept.size(); ++i) {
    const size_t block = i / o.kl_batch * o.kl_batch, n = std::min(o.kl_batch, kept.size() - block);
    const Kept& other = kept[i == block ? block + n - 1 : i - 1];
    const std::vector<uint32_t>* completions[2] = {&kept[i].completion, &other.completion};
    for (int k = 0; k < 2; ++k) {
      std::vector<uint32_t> seq = kept[i].prompt;
      seq.insert(seq.end(), completions[k]->begin(), completions[k]->end());
      const TokenRow r = token_row(std::move(seq), kept[i].prompt.size(), row, Truncation::kKeepStart);
      ZT_CHECK(r.targets > 0, "a KTO row without a completion token", "the prompt is shorter than a row");
      append_row(out, r, eos);
      if (k == 0) {
        st.truncated += r.cut ? 1 : 0;
        st.target_tokens += r.targets;
      }
    }
    out.labels.push_back(kept[i].label);
    st.desirable += kept[i].label;
  }
  st.written = kept.size();
  if (stats) *stats = st;
  if (st.written == 0)
    throw InputError(strf("no example is left of %zu: every prompt fills max_length = %zu tokens", st.examples, row),
                     "raise --seq-len");
  return out;
}

TokenFile convert_kto_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                const std::string& tokenizer, const KtoOptions& options, KtoStats* stats) {
  const std::unique_ptr<TextTokenizer> tok = load_tokenizer(tokenizer);
  TokenFile f = kto_to_tokens(inputs, *tok, options, stats);
  write_token_file(output, f);
  return f;
}

}  // namespace zt::data
