// Instruction data -> token files with a loss mask, packed or padded rows (see sft.hpp).
#include "zt/data/sft.hpp"

#include <algorithm>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"
#include "zt/data/text_tokenizer.hpp"

namespace zt::data {
namespace {

using json = nlohmann::json;

const char* fields_hint(SftFormat f) {
  if (f == SftFormat::kChat)
    return "each line is an object {\"messages\": [{\"role\": \"system\" | \"developer\" | "
           "\"user\" | \"assistant\", \"content\": string, optionally \"thinking\" (gpt-oss) or "
           "\"reasoning_content\" (qwen3.5): string}, "
           "...]} (JSONL); docs/finetune.md";
  return f == SftFormat::kAlpaca
             ? "each Alpaca example is an object with string fields \"instruction\", \"output\" "
               "and optionally \"input\" (a JSON array of them, or one per line: JSONL); "
               "docs/finetune.md"
             : "each line is an object with string fields \"prompt\" and \"response\" (JSONL); "
               "docs/finetune.md";
}

// The string field `key` of example `obj` (optional: "" when absent or null).
std::string field(const json& obj, const char* key, bool optional, const std::string& where,
                  SftFormat format) {
  const auto it = obj.find(key);
  if (it == obj.end() || (optional && it->is_null())) {
    if (optional) return {};
    throw InputError(where + ": field '" + key + "' is missing", fields_hint(format));
  }
  if (!it->is_string())
    throw InputError(where + ": field '" + key + "' is " + describe_json(*it) + ", not a string",
                     fields_hint(format));
  return it->get<std::string>();
}

SftExample example_of(const json& obj, const std::string& where, SftFormat format) {
  if (!obj.is_object())
    throw InputError(where + ": the example is " + describe_json(obj) + ", not an object",
                     fields_hint(format));
  if (format == SftFormat::kChat) {
    std::vector<ChatMessage> m = chat_messages_of(obj, "messages", where, fields_hint(format));
    require_prompt(m, where, "messages");
    require_completion(m, where, "messages");
    return {{}, {}, std::move(m), where};
  }
  if (format == SftFormat::kAlpaca) {
    const std::string instruction = field(obj, "instruction", false, where, format);
    require_prompt(instruction, where, "instruction");
    return {alpaca_prompt(instruction, field(obj, "input", true, where, format)),
            field(obj, "output", false, where, format), {}, where};
  }
  std::string prompt = field(obj, "prompt", false, where, format);
  require_prompt(prompt, where, "prompt");
  return {std::move(prompt), field(obj, "response", false, where, format), {}, where};
}

// An example's tokens and loss mask (1: a target).
struct Encoded {
  std::vector<uint32_t> tokens;  // [n]
  std::vector<uint8_t> mask;     // [n]
};

// Prompt/response examples: prefix (BOS) + prompt, then response + EOS, each part encoded
// alone (LitGPT's SFTDataset), as much of each as a row of `row` tokens keeps
// (encode_for_row); the response and EOS are targets.
std::vector<Encoded> encode_prompt_response(std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                                            uint32_t eos, size_t row) {
  std::vector<std::string> texts;
  texts.reserve(2 * examples.size());
  for (SftExample& e : examples) {
    texts.push_back(std::move(e.prompt));
    texts.push_back(std::move(e.response));
  }
  std::vector<std::vector<uint32_t>> ids(texts.size());
  for_each_parallel(texts.size(), 0, [&](size_t i) {
    ids[i] = encode_for_row(tokenizer, texts[i], row);
    std::string().swap(texts[i]);  // the text is no longer needed
  });
  const TokenizerInfo& info = tokenizer.info();
  std::vector<Encoded> out(examples.size());
  for (size_t e = 0; e < examples.size(); ++e) {
    const std::vector<uint32_t>& prompt = ids[2 * e];
    const std::vector<uint32_t>& response = ids[2 * e + 1];
    Encoded& x = out[e];
    x.tokens.assign(info.prefix.begin(), info.prefix.end());
    x.tokens.insert(x.tokens.end(), prompt.begin(), prompt.end());
    x.mask.assign(x.tokens.size(), 0);
    x.tokens.insert(x.tokens.end(), response.begin(), response.end());
    x.tokens.push_back(eos);
    x.mask.resize(x.tokens.size(), 1);
  }
  return out;
}

// Chat examples: rendered with the template and encoded (encode_chat), as much of each as
// a row of `row` tokens keeps (encode_for_row), on all hardware threads as encode_batch.
std::vector<Encoded> encode_chats(std::vector<SftExample>& examples, const TextTokenizer& tokenizer,
                                  const std::string& template_name, size_t row) {
  const TokenizerInfo& info = tokenizer.info();
  if (info.kind == "sentencepiece")
    throw InputError("tokenizer '" + info.name + "': chat data needs a tokenizer.json (SentencePiece "
                     "reads a template's special tokens such as <s> as plain text)",
                     "give the model folder's tokenizer.json with --tokenizer");
  const ChatTemplate& t = chat_template_for(template_name, tokenizer);
  const ChatTokens tokens = chat_tokens_of(info);
  std::vector<std::vector<ChatPiece>> rendered;
  rendered.reserve(examples.size());
  for (SftExample& e : examples) {
    rendered.push_back(render_chat(t, e.messages, tokens, false, e.where));
    std::vector<ChatMessage>().swap(e.messages);  // rendered: no longer needed
  }
  std::vector<Encoded> out(examples.size());
  for_each_parallel(rendered.size(), 0, [&](size_t i) {
    ChatEncoding c = encode_chat(tokenizer, rendered[i], row);
    std::vector<ChatPiece>().swap(rendered[i]);
    out[i] = {std::move(c.ids), std::move(c.mask)};
  });
  log::info(strf("chat template %s (%s)", chat_template_name(t),
                 template_name == "auto" ? "recognised in the model's template" : "--chat-template"));
  return out;
}

}  // namespace

// {KEY: [{"role", "content", "thinking"?, "reasoning_content"?}, ...]}: a non-empty list of
// known roles.
std::vector<ChatMessage> chat_messages_of(const json& obj, const char* key, const std::string& where,
                                          const std::string& hint) {
  const auto it = obj.find(key);
  const std::string name = std::string("field '") + key + "'";
  if (it == obj.end()) throw InputError(where + ": " + name + " is missing", hint);
  if (!it->is_array())
    throw InputError(where + ": " + name + " is " + describe_json(*it) + ", not a list", hint);
  if (it->empty()) throw InputError(where + ": " + name + " is an empty list", hint);
  std::vector<ChatMessage> out;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& m = (*it)[k];
    const std::string at = where + ": " + key + "[" + std::to_string(k) + "]";
    if (!m.is_object()) throw InputError(at + " is " + describe_json(m) + ", not an object", hint);
    auto str = [&](const char* f) {
      const auto v = m.find(f);
      if (v == m.end()) throw InputError(at + ": field '" + f + "' is missing", hint);
      if (!v->is_string())
        throw InputError(at + ": field '" + f + "' is " + describe_json(*v) + ", not a string", hint);
      return v->get<std::string>();
    };
    ChatMessage msg{str("role"), str("content"), std::nullopt, std::nullopt};
    if (msg.role != "system" && msg.role != "developer" && msg.role != "user" && msg.role != "assistant")
      throw InputError(at + ": field 'role' is '" + msg.role + "', not system, developer, user or assistant",
                       hint);
    if (m.contains("thinking") && !m.at("thinking").is_null()) msg.thinking = str("thinking");
    if (m.contains("reasoning_content") && !m.at("reasoning_content").is_null())
      msg.reasoning_content = str("reasoning_content");
    out.push_back(std::move(msg));
  }
  return out;
}

namespace {
constexpr const char* kRuleHint =
    "every example needs a prompt (text; in chat form a user turn) and a completion (in chat "
    "form an assistant turn, the only turns learned): fix or remove the line (docs/finetune.md "
    "\"What every example needs\")";
bool has_text(const std::string& s) { return s.find_first_not_of(" \t\r\n\f\v") != std::string::npos; }
}  // namespace

void require_prompt(const std::string& text, const std::string& where, const char* field) {
  if (!has_text(text))
    throw InputError(where + ": field '" + field + "' is " + (text.empty() ? "empty" : "only white space") +
                         ": no prompt to learn from",
                     kRuleHint);
}

void require_prompt(const std::vector<ChatMessage>& turns, const std::string& where, const char* field) {
  if (std::any_of(turns.begin(), turns.end(),
                  [](const ChatMessage& m) { return m.role == "user" && has_text(m.content); }))
    return;
  const bool system_only = std::all_of(turns.begin(), turns.end(), [](const ChatMessage& m) {
    return m.role == "system" || m.role == "developer";
  });
  throw InputError(where + ": field '" + field + "' has no user turn with text" +
                       (system_only ? " (only system turns)" : "") + ": no prompt to learn from",
                   kRuleHint);
}

void require_completion(const std::vector<ChatMessage>& turns, const std::string& where, const char* field) {
  if (std::none_of(turns.begin(), turns.end(), [](const ChatMessage& m) { return m.role == "assistant"; }))
    throw InputError(where + ": field '" + field + "' has no assistant turn: no completion to learn",
                     kRuleHint);
}

void for_each_json_line(const std::string& text, const std::string& path,
                        const std::function<void(std::string_view, const std::string&)>& fn) {
  size_t line_no = 0;
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    const std::string_view line(text.data() + at, end - at);
    at = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    fn(line, path + ":" + std::to_string(line_no));
  }
}

SftFormat parse_sft_format(const std::string& name) {
  if (name == "alpaca") return SftFormat::kAlpaca;
  if (name == "prompt-response") return SftFormat::kPromptResponse;
  if (name == "chat") return SftFormat::kChat;
  throw InputError("unknown instruction data format '" + name + "'",
                   "--format is alpaca, prompt-response or chat");
}

std::string alpaca_prompt(const std::string& instruction, const std::string& input) {
  if (!input.empty())
    return "Below is an instruction that describes a task, paired with an input that provides "
           "further context. Write a response that appropriately completes the request.\n\n"
           "### Instruction:\n" + instruction + "\n\n### Input:\n" + input + "\n\n### Response:\n";
  return "Below is an instruction that describes a task. Write a response that appropriately "
         "completes the request.\n\n### Instruction:\n" + instruction + "\n\n### Response:\n";
}

std::vector<SftExample> read_sft_examples(const std::string& path, SftFormat format) {
  const std::string text = read_regular_file(
      path, "instruction data file",
      "name a .json or .jsonl file (relative paths are from the current directory)", false);
  std::vector<SftExample> out;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {  // one JSON array
    const json all = parse_json_strict(text, path, fields_hint(format));
    if (!all.is_array())
      throw InputError(path + ": not a JSON array of examples", fields_hint(format));
    for (size_t i = 0; i < all.size(); ++i)
      out.push_back(example_of(all[i], path + ": element " + std::to_string(i), format));
  } else {  // JSONL: one example per line, blank lines skipped
    for_each_json_line(text, path, [&](std::string_view line, const std::string& where) {
      out.push_back(example_of(parse_json_strict(line, where, fields_hint(format)), where, format));
    });
  }
  if (out.empty())
    throw InputError("instruction data file '" + path + "' holds no examples", fields_hint(format));
  return out;
}

TokenFile sft_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                        const SftOptions& o, SftStats* stats) {
  if (paths.empty()) throw InputError("no instruction data files given", "name at least one IN.jsonl");
  if (o.seq_len == 0) throw InputError("--seq-len must be at least 1", "give train.seq_len of the run");
  const TokenizerInfo& info = tokenizer.info();
  if (!info.eos)
    throw InputError("tokenizer '" + info.name + "' has no EOS token, which ends each response",
                     "set eos_token in the tokenizer_config.json beside the tokenizer");
  const uint32_t eos = *info.eos;
  // Each file is read whole, parsed and held as examples (measured: 285 MB for a 30 MB
  // example; issue 36, class 6); the rows are bounded by the examples.
  require_convert_memory("sft-to-tokens", paths, 10, [](double, double) { return 64.0 * (1 << 20); },
                         "10 bytes per input byte: the text, its parsed JSON, the examples and their rows");
  SftStats st;
  std::vector<SftExample> examples;
  for (const std::string& path : paths)
    for (SftExample& e : read_sft_examples(path, o.format)) examples.push_back(std::move(e));
  st.examples = examples.size();
  std::vector<Encoded> encoded = o.format == SftFormat::kChat
                                     ? encode_chats(examples, tokenizer, o.chat_template, o.seq_len + 1)
                                     : encode_prompt_response(examples, tokenizer, eos, o.seq_len + 1);

  TokenFile out;
  out.vocab_size = info.vocab_size;
  out.tokenizer = info.name;
  out.tokenizer_hash = info.hash;
  out.tokenizer_path = info.path;
  const size_t row = o.seq_len + 1;
  out.row_len = static_cast<uint32_t>(row);
  auto pad_to_row_end = [&] {
    const size_t used = out.tokens.size() % row;
    if (used == 0) return;
    st.pad_tokens += row - used;
    out.tokens.insert(out.tokens.end(), row - used, eos);
    out.loss_mask.insert(out.loss_mask.end(), row - used, 0);
  };
  for (Encoded& x : encoded) {
    std::vector<uint32_t>& tok = x.tokens;
    std::vector<uint8_t>& mask = x.mask;
    if (tok.empty()) {
      ++st.dropped_empty;
      continue;
    }
    mask[0] = 0;  // an example's first token is never a target (no previous token of its own)
    if (tok.size() > row) {
      if (o.drop_long) {
        ++st.dropped_long;
        continue;
      }
      ++st.truncated;
      tok.resize(row);
      mask.resize(row);
    }
    size_t targets = 0;
    for (const uint8_t m : mask) targets += m;
    if (targets == 0) {
      ++st.dropped_empty;
      continue;
    }
    const size_t used = out.tokens.size() % row;
    if (!o.pack || (used != 0 && used + tok.size() > row)) pad_to_row_end();
    out.doc_starts.push_back(out.tokens.size());
    out.tokens.insert(out.tokens.end(), tok.begin(), tok.end());
    out.loss_mask.insert(out.loss_mask.end(), mask.begin(), mask.end());
    st.target_tokens += targets;
    ++st.written;
  }
  pad_to_row_end();
  st.rows = out.tokens.size() / row;
  if (stats) *stats = st;
  if (st.written == 0)
    throw InputError(strf("no example is left of %zu (%zu longer than a row of %zu tokens dropped, "
                          "%zu with no response token after truncation)",
                          st.examples, st.dropped_long, row, st.dropped_empty),
                     "raise --seq-len, or truncate instead of dropping (--too-long truncate)");
  return out;
}

TokenFile convert_sft_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                const std::string& tokenizer, const SftOptions& options,
                                SftStats* stats) {
  const std::unique_ptr<TextTokenizer> tok = load_tokenizer(tokenizer);
  TokenFile f = sft_to_tokens(inputs, *tok, options, stats);
  write_token_file(output, f);
  return f;
}

}  // namespace zt::data
