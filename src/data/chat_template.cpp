// Chat templates: the table of the templates zt knows, their rendering and recognition
// (see zt/data/chat_template.hpp).
#include "zt/data/chat_template.hpp"

#include <algorithm>
#include <atomic>
#include <functional>

#include "tokenizer_internal.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/data/sft.hpp"
#include "zt/data/text_tokenizer.hpp"

namespace zt::data {

using Render = std::function<void(const std::vector<ChatMessage>&, const ChatTokens&, bool,
                                  const std::string&, std::vector<ChatPiece>&)>;

struct ChatTemplate {
  const char* name;
  const char* what;                    // the family, for messages
  std::vector<const char*> markers;    // `auto`: all of these are in the template string
  std::vector<const char*> variants;   // ... and none of these (variants rendering otherwise)
  bool needs_bos, needs_eos;           // the template writes the tokenizer's bos/eos text
  const char* end;                     // the text ending an assistant turn; nullptr: EOS
  Render render;
  std::vector<const char*> specials;   // texts the template writes that must be one token each
};

namespace {

constexpr const char* kHint =
    "messages are {\"role\": \"system\" (first only) | \"user\" | \"assistant\", \"content\": "
    "string}; docs/finetune.md (chat data)";

// Python's str.isspace() for one code point.
bool python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

void refuse(const std::string& where, const std::string& what) { throw InputError(where + ": " + what, kHint); }

// Roles known, a system message only first, at least one message.
void check_roles(const std::vector<ChatMessage>& m, const std::string& where) {
  if (m.empty()) refuse(where, "the conversation has no messages");
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string& r = m[i].role;
    if (r != "system" && r != "user" && r != "assistant")
      refuse(where, "message " + std::to_string(i) + ": unknown role '" + r + "'");
    if (r == "system" && i != 0)
      refuse(where, "message " + std::to_string(i) + ": a system message is only allowed first");
  }
}

// user, assistant, user, ... after an optional system message (Llama 2's template raises
// otherwise; Alpaca pairs an instruction with its response).
void check_alternating(const std::vector<ChatMessage>& m, size_t first, const std::string& where,
                       const char* name) {
  for (size_t i = first; i < m.size(); ++i) {
    const char* want = (i - first) % 2 == 0 ? "user" : "assistant";
    if (m[i].role != want)
      refuse(where, "message " + std::to_string(i) + ": role '" + m[i].role + "' where the " + name +
                        " template needs '" + want + "' (roles alternate user/assistant)");
  }
}

void push(std::vector<ChatPiece>& out, std::string text, bool trained) {
  out.push_back({std::move(text), trained});
}

// Llama 2 chat (meta-llama/Llama-2-*-chat-hf tokenizer_config.json): the system message
// goes into the first user turn; no generation prompt of its own.
void render_llama2(const std::vector<ChatMessage>& m, const ChatTokens& t, bool, const std::string& where,
                   std::vector<ChatPiece>& out) {
  const bool system = m[0].role == "system";
  const size_t first = system ? 1 : 0;
  check_alternating(m, first, where, "llama2");
  for (size_t i = first; i < m.size(); ++i) {
    std::string content = m[i].content;
    if (i == first && system) content = "<<SYS>>\n" + m[0].content + "\n<</SYS>>\n\n" + content;
    if (m[i].role == "user") push(out, t.bos + "[INST] " + python_strip(content) + " [/INST]", false);
    else push(out, std::string(" ").append(python_strip(content)).append(" ").append(t.eos), true);
  }
}

// Mistral instruct (mistralai/Mistral-7B-Instruct-v0.3, the tool-free branch): BOS, then
// "[INST] {user}[/INST]" and " {assistant, trimmed}</s>"; roles alternate user/assistant
// after an optional system message, which goes before the content of the user message
// only when that message is the last of the conversation (the template's `loop.last`): a
// conversation ending in an assistant turn renders without its system message, as
// apply_chat_template does (a warning says so).
void render_mistral(const std::vector<ChatMessage>& m, const ChatTokens& t, bool, const std::string& where,
                    std::vector<ChatPiece>& out) {
  const bool system = m[0].role == "system";
  const size_t first = system ? 1 : 0;
  check_alternating(m, first, where, "mistral");
  push(out, t.bos, false);
  for (size_t i = first; i < m.size(); ++i) {
    if (m[i].role == "user") {
      std::string text = "[INST] ";
      if (system && i + 1 == m.size()) text.append(m[0].content).append("\n\n");
      push(out, text.append(m[i].content).append("[/INST]"), false);
    } else {
      push(out, std::string(" ").append(python_strip(m[i].content)).append(t.eos), true);
    }
  }
  if (system && m.back().role != "user") {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log::warn(where + ": the mistral template writes a system message only before the last user "
                "message; this conversation ends with an assistant turn, so its system message is not "
                "rendered (as apply_chat_template renders it; further such warnings are not shown)");
  }
}

// Llama 3 instruct (meta-llama/Meta-Llama-3-8B-Instruct): a header per message, BOS first.
void render_llama3(const std::vector<ChatMessage>& m, const ChatTokens& t, bool gen, const std::string&,
                   std::vector<ChatPiece>& out) {
  for (size_t i = 0; i < m.size(); ++i) {
    const bool assistant = m[i].role == "assistant";
    push(out, (i == 0 ? t.bos : "") + "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n", false);
    push(out, python_strip(m[i].content) + "<|eot_id|>", assistant);
  }
  if (gen) push(out, "<|start_header_id|>assistant<|end_header_id|>\n\n", false);
}

// ChatML (the template of Hugging Face's chat-templating docs, OpenHermes and others).
void render_chatml(const std::vector<ChatMessage>& m, const ChatTokens&, bool gen, const std::string&,
                   std::vector<ChatPiece>& out) {
  for (const ChatMessage& msg : m) {
    push(out, "<|im_start|>" + msg.role + "\n", false);
    push(out, msg.content + "<|im_end|>", msg.role == "assistant");
    push(out, "\n", false);
  }
  if (gen) push(out, "<|im_start|>assistant\n", false);
}

// Qwen2 / Qwen2.5 instruct: ChatML with Qwen's default system turn when the conversation
// has none (the tool-free branch of Qwen2.5's template; zt's conversations have no tools).
void render_qwen(const std::vector<ChatMessage>& m, const ChatTokens& t, bool gen, const std::string& where,
                 std::vector<ChatPiece>& out) {
  if (m.empty() || m[0].role != "system")
    push(out, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
              "assistant.<|im_end|>\n", false);
  render_chatml(m, t, gen, where, out);
}

// LitGPT's Alpaca prompt style: each user turn is an instruction (alpaca_prompt), each
// assistant turn its response + EOS; BOS first when the tokenizer adds one.
void render_alpaca(const std::vector<ChatMessage>& m, const ChatTokens& t, bool, const std::string& where,
                   std::vector<ChatPiece>& out) {
  if (m[0].role == "system") refuse(where, "the alpaca template has no system message");
  check_alternating(m, 0, where, "alpaca");
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i].role == "user") push(out, (i == 0 && t.add_bos ? t.bos : "") + alpaca_prompt(m[i].content, ""), false);
    else push(out, m[i].content + t.eos, true);
  }
}

const std::vector<ChatTemplate>& table() {
  static const std::vector<ChatTemplate> t{
      {"llama2", "Llama 2 chat", {"[INST]", "[/INST]", "<<SYS>>"}, {}, true, true, nullptr, render_llama2},
      {"llama3", "Llama 3 instruct", {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
       {"Cutting Knowledge", "tools", "ipython"}, true, false, "<|eot_id|>", render_llama3,
       {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
      // After llama2 (which also holds <<SYS>>): v0.3's "[INST] " + ... + "[/INST]"; the
      // v0.1/v0.2 forms (" [/INST]") and Tekken's ("[INST]" + ...) render otherwise.
      {"mistral", "Mistral 7B instruct v0.3", {"[INST] ", "[/INST]", "system_message", "loop.last"},
       {" [/INST]", "[INST]\"", "[INST]'"}, true, true, nullptr, render_mistral},
      // Before chatml: Qwen's template is ChatML plus its default system turn.
      {"qwen", "Qwen2.5 instruct", {"<|im_start|>", "<|im_end|>", "You are Qwen, created by Alibaba Cloud."},
       {}, false, false, "<|im_end|>", render_qwen, {"<|im_start|>", "<|im_end|>"}},
      {"chatml", "ChatML", {"<|im_start|>", "<|im_end|>"}, {"tools", "You are"}, false, false, "<|im_end|>",
       render_chatml, {"<|im_start|>", "<|im_end|>"}},
      {"alpaca", "LitGPT's Alpaca", {"### Instruction:", "### Response:"}, {}, false, true, nullptr, render_alpaca},
  };
  return t;
}

}  // namespace

std::string python_strip(const std::string& s) {
  size_t begin = std::string::npos, end = 0;  // first and one past the last non-space byte
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_length(static_cast<unsigned char>(s[i]));
    if (i + n > s.size()) n = 1;
    const bool space = n == 1 ? python_space(static_cast<unsigned char>(s[i]))
                              : python_space(code_point(std::string_view(s).substr(i, n)));
    if (!space) {
      if (begin == std::string::npos) begin = i;
      end = i + n;
    }
    i += n;
  }
  return begin == std::string::npos ? std::string() : s.substr(begin, end - begin);
}

std::string chat_template_names() {
  std::string s;
  for (const ChatTemplate& t : table()) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

const char* chat_template_name(const ChatTemplate& t) { return t.name; }

const ChatTemplate& chat_template(const std::string& name) {
  for (const ChatTemplate& t : table())
    if (name == t.name) return t;
  throw InputError("--chat-template '" + name + "' is not a template zt knows",
                   "--chat-template is auto (from tokenizer_config.json) or one of " + chat_template_names());
}

const ChatTemplate& chat_template_auto(const std::string& text, const std::string& where) {
  const std::string hint = "name the model's template with --chat-template NAME (" +
                           chat_template_names() + "; docs/finetune.md)";
  if (text.empty())
    throw InputError("--chat-template auto: " + where + " has no chat_template", hint);
  for (const ChatTemplate& t : table()) {
    const auto in = [&](const char* m) { return text.find(m) != std::string::npos; };
    if (!std::all_of(t.markers.begin(), t.markers.end(), in)) continue;
    for (const char* v : t.variants)
      if (in(v))
        throw InputError(strf("--chat-template auto: the chat_template of %s looks like %s (%s) but "
                              "holds '%s', a variant zt does not render",
                              where.c_str(), t.name, t.what, v),
                         hint + "; a variant with tools or a default system message renders otherwise");
    return t;
  }
  throw InputError("--chat-template auto: the chat_template of " + where + " is none zt recognises",
                   hint);
}

const ChatTemplate& chat_template_named(const std::string& name, const std::string& text,
                                        const std::string& where) {
  return name == "auto" ? chat_template_auto(text, where) : chat_template(name);
}

std::vector<ChatPiece> render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                                   const ChatTokens& tokens, bool add_generation_prompt,
                                   const std::string& where) {
  check_roles(messages, where);
  if ((t.needs_bos && tokens.bos.empty()) || (t.needs_eos && tokens.eos.empty()))
    throw InputError(strf("%s: the %s template needs the tokenizer's %s text", where.c_str(), t.name,
                          t.needs_bos && tokens.bos.empty() ? "bos_token" : "eos_token"),
                     "set bos_token and eos_token in the tokenizer_config.json beside the tokenizer");
  std::vector<ChatPiece> out;
  t.render(messages, tokens, add_generation_prompt, where, out);
  return out;
}

const ChatTemplate& chat_template_for(const std::string& name, const TextTokenizer& tokenizer) {
  const TokenizerInfo& info = tokenizer.info();
  const ChatTemplate& t =
      chat_template_named(name, info.chat_template, "the tokenizer_config.json of tokenizer '" + info.name + "'");
  const ChatTokens tokens = chat_tokens_of(info);
  std::vector<std::string> specials(t.specials.begin(), t.specials.end());
  if (t.needs_bos && !tokens.bos.empty()) specials.push_back(tokens.bos);
  if (t.needs_eos && !tokens.eos.empty()) specials.push_back(tokens.eos);
  for (const std::string& s : specials) {
    const size_t n = tokenizer.encode(s).size();
    if (n != 1)
      throw InputError(strf("--chat-template %s: tokenizer '%s' has no token '%s' (it encodes as %zu "
                            "tokens of plain text), so the %s template's turns would not be marked",
                            t.name, info.name.c_str(), s.c_str(), n, t.what),
                       "give the model's own tokenizer (--tokenizer PATH, a folder with tokenizer.json), "
                       "or the template it was trained with (--chat-template " + chat_template_names() + ")");
  }
  return t;
}

ChatTokens chat_tokens_of(const TokenizerInfo& info) {
  return {info.bos_token, info.eos_token, !info.prefix.empty()};
}

ChatEncoding encode_chat(const TextTokenizer& tokenizer, const std::vector<ChatPiece>& pieces, size_t keep) {
  std::string text;
  for (const ChatPiece& p : pieces) text += p.text;
  ChatEncoding e;
  size_t used = text.size();  // the bytes encoded: a prefix where encode_for_row keeps a row
  e.ids = keep ? encode_for_row(tokenizer, text, keep, &used) : tokenizer.encode(text);
  e.mask.assign(e.ids.size(), 0);
  // The number of tokens wholly before byte `pos`, and with `end` the straddling one too
  // (past the prefix encoded: all of them).
  const auto boundary = [&](size_t pos, bool end) {
    if (pos >= used && used < text.size()) return e.ids.size();
    const std::vector<uint32_t> head = tokenizer.encode(std::string_view(text).substr(0, pos));
    const size_t n = std::min(head.size(), e.ids.size());
    const size_t common = static_cast<size_t>(
        std::mismatch(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(n), e.ids.begin()).first -
        head.begin());
    return common == head.size() || !end ? common : std::min(common + 1, e.ids.size());
  };
  size_t at = 0;
  for (const ChatPiece& p : pieces) {
    if (p.trained && !p.text.empty()) {
      const size_t b = boundary(at, false), f = boundary(at + p.text.size(), true);
      std::fill(e.mask.begin() + static_cast<std::ptrdiff_t>(b), e.mask.begin() + static_cast<std::ptrdiff_t>(std::max(b, f)), 1);
    }
    at += p.text.size();
  }
  return e;
}

std::string chat_end_text(const ChatTemplate& t, const ChatTokens& tokens) {
  return t.end ? std::string(t.end) : tokens.eos;
}

}  // namespace zt::data
