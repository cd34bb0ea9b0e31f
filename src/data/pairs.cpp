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

size_t common_prefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

// One pair's ids as TRL's tokenize_fn: the prompt's and the two whole sequences'.
struct PairIds {
  std::vector<uint32_t> prompt, chosen, rejected;
};

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

TokenFile pairs_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                          const PairOptions& o, PairStats* stats) {
  if (paths.empty()) throw InputError("no preference data files given", "name at least one IN.jsonl");
  if (o.seq_len == 0) throw InputError("--seq-len must be at least 1", "give train.seq_len of the run");
  const TokenizerInfo& info = tokenizer.info();
  if (!info.eos || info.eos_token.empty())
    throw InputError("tokenizer '" + info.name + "' has no EOS token, which ends each completion",
                     "set eos_token in the tokenizer_config.json beside the tokenizer");
  const uint32_t eos = *info.eos;
  std::vector<PreferencePair> pairs;
  for (const std::string& path : paths)
    for (PreferencePair& p : read_preference_pairs(path)) pairs.push_back(std::move(p));
  PairStats st;
  st.pairs = pairs.size();

  // Render conversations first (errors name FILE:LINE), then encode on all threads.
  const bool any_chat = std::any_of(pairs.begin(), pairs.end(), [](const PreferencePair& p) { return p.chat; });
  const ChatTemplate* tmpl = nullptr;
  ChatTokens chat_tokens;
  if (any_chat) {
    if (info.kind == "sentencepiece")
      throw InputError("tokenizer '" + info.name + "': conversational pairs need a tokenizer.json",
                       "give the model folder's tokenizer.json with --tokenizer");
    tmpl = &chat_template_for(o.chat_template, tokenizer);
    chat_tokens = chat_tokens_of(info);
  }
  std::vector<std::array<std::vector<ChatPiece>, 3>> rendered(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    PreferencePair& p = pairs[i];
    if (!p.chat) {  // TRL: EOS text appended to plain completions unless they end with it
      for (std::string* c : {&p.chosen, &p.rejected})
        if (!c->ends_with(info.eos_token)) *c += info.eos_token;
      continue;
    }
    auto with = [&](const std::vector<ChatMessage>& tail) {
      std::vector<ChatMessage> m = p.prompt_m;
      m.insert(m.end(), tail.begin(), tail.end());
      return render_chat(*tmpl, m, chat_tokens, false, p.where);
    };
    rendered[i] = {render_chat(*tmpl, p.prompt_m, chat_tokens, true, p.where), with(p.chosen_m),
                   with(p.rejected_m)};
  }
  std::vector<PairIds> ids(pairs.size());
  for_each_parallel(pairs.size(), 0, [&](size_t i) {
    const PreferencePair& p = pairs[i];
    if (p.chat) {
      ids[i] = {encode_rendered(tokenizer, rendered[i][0]), encode_rendered(tokenizer, rendered[i][1]),
                encode_rendered(tokenizer, rendered[i][2])};
    } else {
      ids[i] = {tokenizer.encode_with_specials(p.prompt), tokenizer.encode_with_specials(p.prompt + p.chosen),
                tokenizer.encode_with_specials(p.prompt + p.rejected)};
    }
  });
  if (tmpl)
    log::info(strf("chat template %s (%s)", chat_template_name(*tmpl),
                   o.chat_template == "auto" ? "recognised in the model's template" : "--chat-template"));

  TokenFile out;
  out.vocab_size = info.vocab_size;
  out.tokenizer = info.name;
  out.tokenizer_hash = info.hash;
  out.tokenizer_path = info.path;
  const size_t row = o.seq_len + 1;  // TRL's max_length
  out.row_len = static_cast<uint32_t>(row);
  out.pairs = true;
  for (const PairIds& x : ids) {
    const size_t prompt_len =
        std::min(common_prefix(x.prompt, x.chosen), common_prefix(x.prompt, x.rejected));
    if (prompt_len < x.prompt.size()) ++st.prefix_differs;
    if (o.truncation == Truncation::kKeepStart && prompt_len >= row) {
      ++st.dropped_prompt;
      continue;
    }
    bool cut = false;
    std::array<std::vector<uint8_t>, 2> masks;
    std::array<std::vector<uint32_t>, 2> seqs = {x.chosen, x.rejected};
    size_t targets[2] = {0, 0};
    for (int s = 0; s < 2; ++s) {
      std::vector<uint32_t>& seq = seqs[static_cast<size_t>(s)];
      std::vector<uint8_t>& mask = masks[static_cast<size_t>(s)];
      mask.assign(seq.size(), 1);
      std::fill_n(mask.begin(), std::min(prompt_len, seq.size()), uint8_t{0});
      if (seq.size() > row) {
        cut = true;
        const size_t from = o.truncation == Truncation::kKeepStart ? 0 : seq.size() - row;
        seq.assign(seq.begin() + static_cast<std::ptrdiff_t>(from),
                   seq.begin() + static_cast<std::ptrdiff_t>(from + row));
        mask.assign(mask.begin() + static_cast<std::ptrdiff_t>(from),
                    mask.begin() + static_cast<std::ptrdiff_t>(from + row));
      }
      if (!mask.empty()) mask[0] = 0;  // a row's first token is never a target
      for (const uint8_t m : mask) targets[s] += m;
    }
    if (targets[0] == 0 || targets[1] == 0) {
      ++st.dropped_empty;
      continue;
    }
    st.truncated += cut ? 1 : 0;
    for (int s = 0; s < 2; ++s) {
      out.doc_starts.push_back(out.tokens.size());
      const std::vector<uint32_t>& seq = seqs[static_cast<size_t>(s)];
      out.tokens.insert(out.tokens.end(), seq.begin(), seq.end());
      out.tokens.insert(out.tokens.end(), row - seq.size(), eos);
      out.loss_mask.insert(out.loss_mask.end(), masks[static_cast<size_t>(s)].begin(),
                           masks[static_cast<size_t>(s)].end());
      out.loss_mask.insert(out.loss_mask.end(), row - seq.size(), 0);
      st.target_tokens += targets[s];
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
