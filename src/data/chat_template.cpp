// Chat templates: the table of the templates zt knows, their rendering and recognition
// (see zt/data/chat_template.hpp).
#include "zt/data/chat_template.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <functional>
#include <span>

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
  bool developer = false;              // writes a first "developer" message (as a system one)
  bool thinking = false;               // writes an assistant's "thinking"
  bool reasoning = false;              // writes an assistant's "reasoning_content"
};

namespace {

constexpr const char* kHint =
    "messages are {\"role\": \"system\" (first only) | \"user\" | \"assistant\", \"content\": "
    "string} (gpt-oss: also \"developer\" first, and an assistant's \"thinking\"; qwen3.5: an assistant's "
    "\"reasoning_content\"); docs/finetune.md (chat data)";

// Python's str.isspace() for one code point.
bool python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

void refuse(const std::string& where, const std::string& what) { throw InputError(where + ": " + what, kHint); }

// Roles known, a system (or developer) message only first, at least one message; a
// developer message or an assistant's "thinking" only where the template writes them (no
// field of the data is dropped unsaid).
void check_roles(const ChatTemplate& t, const std::vector<ChatMessage>& m, const std::string& where) {
  if (m.empty()) refuse(where, "the conversation has no messages");
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string& r = m[i].role;
    const std::string at = "message " + std::to_string(i);
    if (r != "system" && r != "developer" && r != "user" && r != "assistant")
      refuse(where, at + ": unknown role '" + r + "'");
    if ((r == "system" || r == "developer") && i != 0)
      refuse(where, at + ": a " + r + " message is only allowed first");
    if (r == "developer" && !t.developer)
      refuse(where, at + ": the " + std::string(t.name) + " template has no developer message (gpt-oss's has)");
    if (m[i].thinking && (r != "assistant" || !t.thinking))
      refuse(where, at + ": field 'thinking' is written only by the gpt-oss template, in an assistant "
                         "message; the " + std::string(t.name) + " template would drop it");
    if (m[i].reasoning_content && (r != "assistant" || !t.reasoning))
      refuse(where, at + ": field 'reasoning_content' is written only by the qwen3.5 template, in an "
                         "assistant message; the " + std::string(t.name) + " template would drop it");
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

// The index of the first turn after an optional system message (1 or 0), the turns from
// there alternating user/assistant.
size_t turns_after_system(const std::vector<ChatMessage>& m, const std::string& where, const char* name) {
  const size_t first = m[0].role == "system" ? 1 : 0;
  check_alternating(m, first, where, name);
  return first;
}

void push(std::vector<ChatPiece>& out, std::string text, bool trained) {
  out.push_back({std::move(text), trained});
}

// Llama 2 chat (meta-llama/Llama-2-*-chat-hf tokenizer_config.json): the system message
// goes into the first user turn; no generation prompt of its own.
void render_llama2(const std::vector<ChatMessage>& m, const ChatTokens& t, bool, const std::string& where,
                   std::vector<ChatPiece>& out) {
  const size_t first = turns_after_system(m, where, "llama2");
  const bool system = first == 1;
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
  const size_t first = turns_after_system(m, where, "mistral");
  const bool system = first == 1;
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

// Gemma 3 instruct (google/gemma-3-*-it): BOS, then "<start_of_turn>{user|model}\n" +
// the trimmed content + "<end_of_turn>\n"; roles alternate user/assistant after an optional
// system message, whose content + "\n\n" begins the first user turn.
void render_gemma3(const std::vector<ChatMessage>& m, const ChatTokens& t, bool gen, const std::string& where,
                   std::vector<ChatPiece>& out) {
  const size_t first = turns_after_system(m, where, "gemma3");
  std::string prefix = first == 1 ? m[0].content + "\n\n" : "";  // the first user turn's
  push(out, t.bos, false);
  for (const ChatMessage& msg : std::span(m).subspan(first)) {
    if (msg.role == "assistant") {
      push(out, "<start_of_turn>model\n", false);
      push(out, python_strip(msg.content) + "<end_of_turn>", true);
      push(out, "\n", false);
      continue;
    }
    push(out, "<start_of_turn>user\n" + prefix + python_strip(msg.content) + "<end_of_turn>\n", false);
    prefix.clear();
  }
  if (gen) push(out, "<start_of_turn>model\n", false);
}

// Today's date as transformers' strftime_now("%Y-%m-%d") writes it (local time).
std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  char buf[32];
  if (now == static_cast<std::time_t>(-1) || localtime_r(&now, &tm) == nullptr ||
      std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm) == 0)
    throw Error(strf("time/localtime_r/strftime (today's date for the gpt-oss template): %s", std::strerror(errno)),
                "check the system clock and the TZ environment variable");
  return buf;
}

// gpt-oss (openai/gpt-oss-*'s chat_template.jinja, without tools): the harmony system
// message (its model identity, knowledge cutoff, today's date, reasoning medium, channels),
// a first system or developer message as "# Instructions", each user message, each
// assistant message on the final channel: "<|return|>" ends the last one (no generation
// prompt), "<|end|>" the others; the last one's "thinking" goes on the analysis channel
// before it, earlier turns' is dropped (the template's rule; a warning says so). Trained:
// all the assistant turn writes after "<|start|>assistant", its generation prompt.
void render_gpt_oss(const std::vector<ChatMessage>& m, const ChatTokens&, bool gen, const std::string& where,
                    std::vector<ChatPiece>& out) {
  push(out, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: " + today() + "\n\nReasoning: medium\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>",
       false);
  const size_t first = m[0].role == "system" || m[0].role == "developer" ? 1 : 0;
  if (first && !m[0].content.empty())
    push(out, "<|start|>developer<|message|># Instructions\n\n" + m[0].content + "<|end|>", false);
  for (size_t i = first; i < m.size(); ++i) {
    if (m[i].role == "user") {
      push(out, "<|start|>user<|message|>" + m[i].content + "<|end|>", false);
      continue;
    }
    for (const std::string* text : {&m[i].content, m[i].thinking ? &*m[i].thinking : nullptr})
      for (const char* tag : {"<|channel|>analysis<|message|>", "<|channel|>final<|message|>"})
        if (text && text->find(tag) != std::string::npos)
          refuse(where, "message " + std::to_string(i) + ": its " + (text == &m[i].content ? "content" : "thinking") +
                            " holds '" + tag + "': give the analysis text in 'thinking' and the final text in "
                            "'content', without channel tags (as the gpt-oss template requires)");
    const bool last = i + 1 == m.size() && !gen;
    std::string turn;
    if (m[i].thinking && last) {
      turn = "<|channel|>analysis<|message|>" + *m[i].thinking + "<|end|><|start|>assistant";
    } else if (m[i].thinking) {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        log::warn(where + ": the gpt-oss template writes an assistant's 'thinking' only in the last message of "
                  "a conversation; message " + std::to_string(i) + "'s is not rendered (as apply_chat_template "
                  "renders it; further such warnings are not shown)");
    }
    push(out, "<|start|>assistant", false);
    push(out, turn + "<|channel|>final<|message|>" + m[i].content + (last ? "<|return|>" : "<|end|>"), true);
  }
  if (gen) push(out, "<|start|>assistant", false);
}

// Python's s.lstrip("\n") / s.rstrip("\n").
std::string lstrip_newlines(const std::string& s) {
  return s.substr(std::min(s.find_first_not_of('\n'), s.size()));
}
std::string rstrip_newlines(const std::string& s) {
  const size_t last = s.find_last_not_of('\n');
  return last == std::string::npos ? std::string() : s.substr(0, last + 1);
}

// Qwen3.5 (Qwen/Qwen3.5-*'s chat_template.jinja, its tool-free branches): ChatML with each
// content trimmed and no default system turn. An assistant turn after the last user query
// (a user message that is not a <tool_response> block) is "<think>\n{reasoning}\n</think>
// \n\n{content}", the reasoning from "reasoning_content" or else split out of a content
// holding "</think>" as the template splits it; earlier assistant turns are their content
// alone (their reasoning dropped, as the template drops it; a warning says so). The
// generation prompt opens a <think> block (enable_thinking) or writes an empty one. Trained:
// all the turn writes after "<|im_start|>assistant\n", think block included.
void render_qwen3_5(const std::vector<ChatMessage>& m, const ChatTokens& t, bool gen, const std::string& where,
                    std::vector<ChatPiece>& out) {
  size_t last_query = m.size();
  for (size_t i = m.size(); i-- > 0 && last_query == m.size();) {
    const std::string c = python_strip(m[i].content);
    if (m[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>")))
      last_query = i;
  }
  if (last_query == m.size())
    refuse(where, "the qwen3.5 template needs a user message that is not a <tool_response> block "
                  "(apply_chat_template raises 'No user query found in messages.')");
  for (size_t i = 0; i < m.size(); ++i) {
    std::string content = python_strip(m[i].content);
    if (m[i].role != "assistant") {
      push(out, "<|im_start|>" + m[i].role + "\n" + content + "<|im_end|>\n", false);
      continue;
    }
    std::string reasoning;
    if (m[i].reasoning_content) {
      reasoning = *m[i].reasoning_content;
    } else if (const size_t close = content.find("</think>"); close != std::string::npos) {
      reasoning = rstrip_newlines(content.substr(0, close));
      if (const size_t open = reasoning.rfind("<think>"); open != std::string::npos)
        reasoning = reasoning.substr(open + std::strlen("<think>"));
      reasoning = lstrip_newlines(reasoning);
      content = lstrip_newlines(content.substr(content.rfind("</think>") + std::strlen("</think>")));
    }
    reasoning = python_strip(reasoning);
    push(out, "<|im_start|>assistant\n", false);
    if (i > last_query) {
      push(out, "<think>\n" + reasoning + "\n</think>\n\n" + content + "<|im_end|>", true);
    } else {
      if (!reasoning.empty()) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true))
          log::warn(where + ": the qwen3.5 template writes an assistant's reasoning only after the last user "
                    "message; message " + std::to_string(i) + "'s is not rendered (as apply_chat_template "
                    "renders it; further such warnings are not shown)");
      }
      push(out, content + "<|im_end|>", true);
    }
    push(out, "\n", false);
  }
  if (gen)
    push(out, std::string("<|im_start|>assistant\n") + (t.enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n"),
         false);
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
      // Before chatml (whose variants hold "tools"): the texts of its generation prompt are
      // markers (Qwen3's and Qwen3-VL's open no <think> block there); Qwen3.6's
      // preserve_thinking renders otherwise.
      {"qwen3.5", "Qwen3.5",
       {"<|im_start|>", "<|im_end|>", "render_content", "ns.last_query_index", "reasoning_content",
        "enable_thinking is defined and enable_thinking is false", "'<think>\\n\\n</think>\\n\\n'",
        "{{- '<think>\\n' }}"},
       {"preserve_thinking"}, false, false, "<|im_end|>", render_qwen3_5,
       {"<|im_start|>", "<|im_end|>", "<think>", "</think>"}, false, false, true},
      // Before chatml: Qwen's template is ChatML plus its default system turn.
      {"qwen", "Qwen2.5 instruct", {"<|im_start|>", "<|im_end|>", "You are Qwen, created by Alibaba Cloud."},
       {}, false, false, "<|im_end|>", render_qwen, {"<|im_start|>", "<|im_end|>"}},
      {"chatml", "ChatML", {"<|im_start|>", "<|im_end|>"}, {"tools", "You are"}, false, false, "<|im_end|>",
       render_chatml, {"<|im_start|>", "<|im_end|>"}},
      {"alpaca", "LitGPT's Alpaca", {"### Instruction:", "### Response:"}, {}, false, true, nullptr, render_alpaca},
      {"gemma3", "Gemma 3 instruct", {"<start_of_turn>", "<end_of_turn>", "first_user_prefix"}, {}, true, false,
       "<end_of_turn>", render_gemma3, {"<start_of_turn>", "<end_of_turn>"}},
      // The texts zt writes are markers: a template with other system text is not recognised.
      {"gpt-oss", "gpt-oss (harmony)",
       {"<|start|>", "<|channel|>final<|message|>", "<|return|>", "# Instructions", "Reasoning: ", "\"medium\"",
        "You are ChatGPT, a large language model trained by OpenAI.", "Knowledge cutoff: 2024-06",
        "# Valid channels: analysis, commentary, final. Channel must be included for every message.\"",
        "strftime_now(\"%Y-%m-%d\")"},
       {"developer_instructions", "harmony_header"}, false, false, "<|return|>", render_gpt_oss,
       {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>"}, true, true},
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
  check_roles(t, messages, where);
  if ((t.needs_bos && tokens.bos.empty()) || (t.needs_eos && tokens.eos.empty()))
    throw InputError(strf("%s: the %s template needs the tokenizer's %s text", where.c_str(), t.name,
                          t.needs_bos && tokens.bos.empty() ? "bos_token" : "eos_token"),
                     "set bos_token and eos_token in the tokenizer_config.json beside the tokenizer");
  if (!tokens.enable_thinking && !t.reasoning)
    throw InputError(strf("%s: the %s template has no enable_thinking switch (qwen3.5's has)", where.c_str(), t.name),
                     "leave out --no-thinking, or give a template with thinking turns");
  std::vector<ChatPiece> out;
  t.render(messages, tokens, add_generation_prompt, where, out);
  return out;
}

const ChatTemplate& chat_template_for(const std::string& name, const TextTokenizer& tokenizer) {
  const TokenizerInfo& info = tokenizer.info();
  const std::string where = "the " + info.chat_template_file + " of tokenizer '" + info.name + "'";
  const ChatTemplate& t = chat_template_named(name, info.chat_template, where);
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
