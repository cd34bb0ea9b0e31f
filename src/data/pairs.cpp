// Preference pairs -> token files in chosen/rejected rows (see pairs.hpp).
#include "zt/data/pairs.hpp"

#include <algorithm>
#include <array>

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
    "each line is an object {\"prompt\", \"chosen\", \"rejected\"}: three strings, or three "
    "lists of {\"role\", \"content\"} messages (TRL's explicit-prompt preference format); "
    "docs/finetune.md \"Preference data\"";

std::string text_field(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw InputError(where + ": field '" + key + "' is missing", kHint);
  if (!it->is_string())
    throw InputError(where + ": field '" + key + "' is " + describe_json(*it) +
                         ", not a string like the prompt",
                     kHint);
  return it->get<std::string>();
}

PreferencePair pair_of(const json& obj, const std::string& where) {
  if (!obj.is_object())
    throw InputError(where + ": the pair is " + describe_json(obj) + ", not an object", kHint);
  PreferencePair p;
  p.where = where;
  const auto prompt = obj.find("prompt");
  if (prompt == obj.end()) throw InputError(where + ": field 'prompt' is missing", kHint);
  if (prompt->is_array()) {
    p.chat = true;
    p.prompt_m = chat_messages_of(obj, "prompt", where, kHint);
    p.chosen_m = chat_messages_of(obj, "chosen", where, kHint);
    p.rejected_m = chat_messages_of(obj, "rejected", where, kHint);
    require_prompt(p.prompt_m, where, "prompt");
    require_completion(p.chosen_m, where, "chosen");
    require_completion(p.rejected_m, where, "rejected");
  } else if (prompt->is_string()) {
    p.prompt = prompt->get<std::string>();
    require_prompt(p.prompt, where, "prompt");
    p.chosen = text_field(obj, "chosen", where);
    p.rejected = text_field(obj, "rejected", where);
  } else {
    throw InputError(where + ": field 'prompt' is " + describe_json(*prompt) +
                         ", not a string or a list of messages",
                     kHint);
  }
  return p;
}

std::vector<uint32_t> encode_rendered(const TextTokenizer& tok, const std::vector<ChatPiece>& pieces) {
  return encode_chat(tok, pieces).ids;
}

}  // namespace

Truncation parse_truncation(const std::string& name) {
  if (name == "keep_start") return Truncation::kKeepStart;
  if (name == "keep_end") return Truncation::kKeepEnd;
  throw InputError("unknown truncation mode '" + name + "'", "--truncation is keep_start or keep_end (TRL's truncation_mode)");
}

std::vector<PreferencePair> read_preference_pairs(const std::string& path) {
  const std::string text = read_regular_file(
      path, "preference data file", "name a .jsonl file (relative paths are from the current directory)", false);
  std::vector<PreferencePair> out;
  for_each_json_line(text, path, [&](std::string_view line, const std::string& where) {
    out.push_back(pair_of(parse_json_strict(line, where, kHint), where));
  });
  if (out.empty()) throw InputError("preference data file '" + path + "' holds no pairs", kHint);
  return out;
}

std::vector<std::vector<std::vector<uint32_t>>> encode_prompt_completions(const TextTokenizer& tokenizer,
                                                                          std::vector<PromptCompletions>& ex,
                                                                          const std::string& chat_template) {
  const TokenizerInfo& info = tokenizer.info();
  // Render conversations first (errors name FILE:LINE), then encode on all threads.
  const bool any_chat = std::any_of(ex.begin(), ex.end(), [](const PromptCompletions& p) { return p.chat; });
  const ChatTemplate* tmpl = nullptr;
  ChatTokens chat_tokens;
  if (any_chat) {
    if (info.kind == "sentencepiece")
      throw InputError("tokenizer '" + info.name + "': conversational examples need a tokenizer.json",
                       "give the model folder's tokenizer.json with --tokenizer");
    tmpl = &chat_template_for(chat_template, tokenizer);
    chat_tokens = chat_tokens_of(info);
  }
  std::vector<std::vector<std::vector<ChatPiece>>> rendered(ex.size());
  for (size_t i = 0; i < ex.size(); ++i) {
    PromptCompletions& p = ex[i];
    if (!p.chat) {  // TRL: EOS text appended to plain completions unless they end with it
      for (std::string& c : p.completions)
        if (!c.ends_with(info.eos_token)) c += info.eos_token;
      continue;
    }
    rendered[i].push_back(render_chat(*tmpl, p.prompt_m, chat_tokens, true, p.where));
    for (const std::vector<ChatMessage>& tail : p.completions_m) {
      std::vector<ChatMessage> m = p.prompt_m;
      m.insert(m.end(), tail.begin(), tail.end());
      rendered[i].push_back(render_chat(*tmpl, m, chat_tokens, false, p.where));
    }
  }
  std::vector<std::vector<std::vector<uint32_t>>> ids(ex.size());
  for_each_parallel(ex.size(), 0, [&](size_t i) {
    const PromptCompletions& p = ex[i];
    if (p.chat) {
      for (const std::vector<ChatPiece>& r : rendered[i]) ids[i].push_back(encode_rendered(tokenizer, r));
    } else {
      ids[i].push_back(tokenizer.encode_with_specials(p.prompt));
      for (const std::string& c : p.completions) ids[i].push_back(tokenizer.encode_with_specials(p.prompt + c));
    }
  });
  if (tmpl)
    log::info(strf("chat template %s (%s)", chat_template_name(*tmpl),
                   chat_template == "auto" ? "recognised in the model's template" : "--chat-template"));
  return ids;
}

TokenRow token_row(std::vector<uint32_t> seq, size_t prompt_len, size_t row, Truncation truncation) {
  TokenRow r;
  r.mask.assign(seq.size(), 1);
  std::fill_n(r.mask.begin(), std::min(prompt_len, seq.size()), uint8_t{0});
  if (seq.size() > row) {
    r.cut = true;
    const size_t from = truncation == Truncation::kKeepStart ? 0 : seq.size() - row;
    seq.assign(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.begin() + static_cast<std::ptrdiff_t>(from + row));
    r.mask.assign(r.mask.begin() + static_cast<std::ptrdiff_t>(from),
                  r.mask.begin() + static_cast<std::ptrdiff_t>(from + row));
  }
  if (!r.mask.empty()) r.mask[0] = 0;  // a row's first token is never a target
  for (const uint8_t m : r.mask) r.targets += m;
  r.ids = std::move(seq);
  return r;
}

void append_row(TokenFile& out, const TokenRow& r, uint32_t eos) {
  const size_t row = out.row_len;
  out.doc_starts.push_back(out.tokens.size());
  out.tokens.insert(out.tokens.end(), r.ids.begin(), r.ids.end());
  out.tokens.insert(out.tokens.end(), row - r.ids.size(), eos);
  out.loss_mask.insert(out.loss_mask.end(), r.mask.begin(), r.mask.end());
  out.loss_mask.insert(out.loss_mask.end(), row - r.ids.size(), 0);
}

TokenFile rows_file(const TextTokenizer& tokenizer, size_t seq_len) {
  if (seq_len == 0) throw InputError("--seq-len must be at least 1", "give train.seq_len of the run");
  const TokenizerInfo& info = tokenizer.info();
  if (!info.eos || info.eos_token.empty())
    throw InputError("tokenizer '" + info.name + "' has no EOS token, which ends each completion",
                     "set eos_token in the tokenizer_config.json beside the tokenizer");
  TokenFile out;
  out.vocab_size = info.vocab_size;
  out.tokenizer = info.name;
  out.tokenizer_hash = info.hash;
  out.tokenizer_path = info.path;
  out.row_len = static_cast<uint32_t>(seq_len + 1);  // TRL's max_length
  return out;
}

size_t common_prefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

TokenFile pairs_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                          const PairOptions& o, PairStats* stats) {
  if (paths.empty()) throw InputError("no preference data files given", "name at least one IN.jsonl");
  TokenFile out = rows_file(tokenizer, o.seq_len);
  const uint32_t eos = *tokenizer.info().eos;
  std::vector<PromptCompletions> pairs;
  for (const std::string& path : paths)
    for (PreferencePair& p : read_preference_pairs(path))
      pairs.push_back({p.chat, std::move(p.prompt), {std::move(p.chosen), std::move(p.rejected)},
                       std::move(p.prompt_m), {std::move(p.chosen_m), std::move(p.rejected_m)}, p.where});
  PairStats st;
  st.pairs = pairs.size();
  const std::vector<std::vector<std::vector<uint32_t>>> ids =
      encode_prompt_completions(tokenizer, pairs, o.chat_template);
  const size_t row = out.row_len;
  out.pairs = true;
  for (const std::vector<std::vector<uint32_t>>& x : ids) {
    const size_t prompt_len = std::min(common_prefix(x[0], x[1]), common_prefix(x[0], x[2]));
    if (prompt_len < x[0].size()) ++st.prefix_differs;
    if (o.truncation == Truncation::kKeepStart && prompt_len >= row) {
      ++st.dropped_prompt;
      continue;
    }
    const TokenRow rows[2] = {token_row(x[1], prompt_len, row, o.truncation),
                              token_row(x[2], prompt_len, row, o.truncation)};
    if (rows[0].targets == 0 || rows[1].targets == 0) {
      ++st.dropped_empty;
      continue;
    }
    st.truncated += rows[0].cut || rows[1].cut ? 1 : 0;
    for (const TokenRow& r : rows) {
      append_row(out, r, eos);
      st.target_tokens += r.targets;
    }
    ++st.written;
  }
  if (stats) *stats = st;
  if (st.written == 0)
    throw InputError(strf("no pair is left of %zu (%zu whose prompt fills max_length = %zu tokens, "
                          "%zu with a row of no completion token)",
                          st.pairs, st.dropped_prompt, row, st.dropped_empty),
                     "raise --seq-len, or keep the completions' ends (--truncation keep_end)");
  return out;
}

TokenFile convert_pairs_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                  const std::string& tokenizer, const PairOptions& options,
                                  PairStats* stats) {
  const std::unique_ptr<TextTokenizer> tok = load_tokenizer(tokenizer);
  TokenFile f = pairs_to_tokens(inputs, *tok, options, stats);
  write_token_file(output, f);
  return f;
}

}  // namespace zt::data
