#pragma once
// Chat templates: a conversation (role/content messages) -> the text a chat model was
// trained on (docs/finetune.md). zt does not run Jinja: it implements the templates of the
// model families it knows, one entry each in a small table, and recognises a model's
// tokenizer_config.json "chat_template" by its markers (`auto`).
//
//   llama2  Llama 2 chat:  <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>
//   llama3  Llama 3 instruct: <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n
//           {content}<|eot_id|> per message
//   mistral Mistral 7B instruct v0.3: <s>[INST] {user}[/INST] {assistant}</s>, the system
//           message before the last user message's content (when that is the last message)
//   chatml  ChatML: <|im_start|>{role}\n{content}<|im_end|>\n per message
//   qwen    Qwen2 / Qwen2.5 instruct: ChatML, with the system turn "You are Qwen, created by
//           Alibaba Cloud. You are a helpful assistant." first when none is given
//   alpaca  LitGPT's Alpaca prompt style (the user turn as the instruction; alpaca_prompt)
//   gemma3  Gemma 3 instruct: <bos><start_of_turn>user\n{content}<end_of_turn>\n, the
//           assistant as "model", the system message folded into the first user turn
//   gpt-oss gpt-oss's harmony format: its system message (today's date, reasoning medium),
//           the system or developer message as "# Instructions", <|start|>{role}<|message|>,
//           the assistant on the final channel, ending <|return|> when last, its
//           "thinking" on the analysis channel in the last turn only
//   qwen3.5 Qwen3.5: ChatML without a default system turn, contents trimmed; each assistant
//           turn after the last user message as <think>\n{reasoning}\n</think>\n\n{content}
//           (its "reasoning_content", or the <think> block its content holds), earlier ones
//           without it; the generation prompt opens <think> (enable_thinking) or writes an
//           empty one (enable_thinking false)
// Each renders exactly what Hugging Face's apply_chat_template gives with that family's
// official template string (llama2 and llama3 strip the content as the templates'
// `.strip()` / `| trim` do, with Python's whitespace).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zt::data {

class TextTokenizer;
struct TokenizerInfo;

struct ChatMessage {
  std::string role;  // "system", "developer" (gpt-oss), "user" or "assistant"
  std::string content;
  std::optional<std::string> thinking;  // an assistant's reasoning ("thinking"; gpt-oss)
  std::optional<std::string> reasoning_content;  // an assistant's reasoning ("reasoning_content"; qwen3.5)
};

// A stretch of the rendered text; `trained` stretches are what the model writes in an
// assistant turn after the generation prompt: the content and its end token (gpt-oss: the
// channel tags too), the loss targets of chat fine-tuning; everything else is masked.
struct ChatPiece {
  std::string text;
  bool trained = false;
};

struct ChatTokens {
  std::string bos;        // the tokenizer's bos_token / eos_token text ("" when unknown)
  std::string eos;
  bool add_bos = false;   // the tokenizer adds BOS to a text (alpaca's prompt starts with it)
  bool enable_thinking = true;  // the templates' enable_thinking (qwen3.5's generation prompt)
};

struct ChatTemplate;  // one entry of the table (chat_template.cpp)

// The template named NAME (chat_template_names()); zt::InputError naming
// --chat-template and the known names otherwise.
const ChatTemplate& chat_template(const std::string& name);
// Recognised from a tokenizer_config.json "chat_template" string by its markers;
// zt::InputError naming `where`, --chat-template and the known names when it is empty or
// not one of them.
const ChatTemplate& chat_template_auto(const std::string& template_text, const std::string& where);
// NAME or "auto" (then from template_text).
const ChatTemplate& chat_template_named(const std::string& name, const std::string& template_text,
                                        const std::string& where);
// chat_template_named() against the tokenizer's tokenizer_config.json, then the one rule
// on the tokenizer: every special text the template writes (<|im_start|>, <|eot_id|>, the
// bos/eos texts it needs, ...) is one token of it; else zt::InputError naming the
// template, the tokenizer and the text (chatml over a byte-level tokenizer without
// <|im_start|> would spell it as plain text). What generate and the converters use.
const ChatTemplate& chat_template_for(const std::string& name, const TextTokenizer& tokenizer);
const char* chat_template_name(const ChatTemplate& t);
std::string chat_template_names();  // "llama2, llama3, mistral, qwen, chatml, alpaca, ..."

// The conversation rendered, in pieces (their concatenation is the text). With
// add_generation_prompt the opening of an assistant turn follows (for generation).
// zt::InputError naming `where` for a conversation the template cannot render (roles out
// of order, a system message not first, a developer message, "thinking" or
// "reasoning_content" the template does not write, empty, a token the template needs unknown).
std::vector<ChatPiece> render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                                   const ChatTokens& tokens, bool add_generation_prompt,
                                   const std::string& where);

// The text that ends an assistant turn ("<|eot_id|>", "<|im_end|>", or the EOS text):
// generation stops there.
std::string chat_end_text(const ChatTemplate& t, const ChatTokens& tokens);

// The bos/eos texts a template writes, from the tokenizer (tokenizer_config.json's names).
ChatTokens chat_tokens_of(const TokenizerInfo& info);

// The pieces' text encoded whole (as apply_chat_template(tokenize=True): no special tokens
// added, the template writes them), and mask[i] = 1 for the tokens of trained pieces.
// Token boundaries come from encoding the text up to each trained piece's start and end: a
// token that straddles a boundary (a merge across it) counts as trained, as Hugging Face's
// assistant-token masks (char_to_token) count it. `keep` > 0: only a row of `keep` tokens
// is wanted, the text is encoded by encode_for_row (a text past 16 bytes per token of keep
// + 64 from a prefix, then keep + 1 ids and their mask; issue 36, class 6).
struct ChatEncoding {
  std::vector<uint32_t> ids;  // [n]
  std::vector<uint8_t> mask;  // [n]
};
ChatEncoding encode_chat(const TextTokenizer& tokenizer, const std::vector<ChatPiece>& pieces, size_t keep = 0);

// Python's str.strip(): leading and trailing whitespace (str.isspace) removed.
std::string python_strip(const std::string& s);

}  // namespace zt::data
