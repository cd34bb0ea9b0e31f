#pragma once
// Instruction data -> token files for supervised fine-tuning (`zt convert sft-to-tokens`;
// docs/finetune.md). Each example is a prompt and a response:
//   alpaca           JSON array or JSONL of {"instruction", "input" (optional), "output"},
//                    the prompt rendered in LitGPT's Alpaca style
//   prompt-response  JSONL of {"prompt", "response"}, the prompt used as it is
//   chat             JSONL of {"messages": [{"role", "content"}, ...]}, rendered with a chat
//                    template (zt/data/chat_template.hpp) and encoded whole, as Hugging
//                    Face's apply_chat_template; only assistant turns (with their end token)
//                    are targets
// Tokens of an example: the tokenizer's prefix (BOS) + encode(prompt), then
// encode(response) + EOS, each part encoded alone (as LitGPT's SFTDataset does). Only the
// response tokens are targets (the loss mask); prompt tokens are masked out.
//
// The file holds rows of seq_len + 1 tokens (a row gives seq_len inputs and seq_len
// targets). Packed (the default), examples are placed in order, each in the current row
// if it fits there, else at the start of a new one, the rest of a row padded; unpacked,
// each example has a row of its own. Padding is EOS, masked. /doc_starts records where
// each example starts, so positions and attention can be reset there. An example longer
// than a row is truncated to it (or dropped with drop_long); one left with no response
// token is dropped. The counts come back in SftStats.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "zt/core/json.hpp"

#include "zt/data/chat_template.hpp"
#include "zt/data/token_file.hpp"

namespace zt::data {

class TextTokenizer;

enum class SftFormat { kAlpaca, kPromptResponse, kChat };

// "alpaca", "prompt-response" or "chat"; throws zt::InputError naming the others.
SftFormat parse_sft_format(const std::string& name);

struct SftExample {
  std::string prompt;    // alpaca, prompt-response
  std::string response;
  std::vector<ChatMessage> messages;  // chat
  std::string where;     // "FILE:LINE" (or "FILE: element N"), for messages
};

// LitGPT's Alpaca prompt (litgpt/prompts.py, class Alpaca) for an instruction and an
// optional input.
std::string alpaca_prompt(const std::string& instruction, const std::string& input);

// Reads the examples of one file. A line (JSONL) or element (JSON array) that is not an
// object with the format's string fields is a zt::InputError naming "FILE:LINE" (or
// "FILE: element N") and the field (chat: "messages[K].role"; a role other than system,
// user or assistant; an empty list); so is an example that breaks require_prompt /
// require_completion.
std::vector<SftExample> read_sft_examples(const std::string& path, SftFormat format);

// The list of chat messages obj[key] ({"role": system | developer | user | assistant,
// "content", optionally "thinking"}): a zt::InputError naming `where`, the field (and
// "KEY[K].role") and `hint` otherwise.
std::vector<ChatMessage> chat_messages_of(const nlohmann::json& obj, const char* key,
                                          const std::string& where, const std::string& hint);
// The one rule every training example passes, checked by every reader of them
// (read_sft_examples in each format, read_preference_pairs and read_kto_examples in both
// forms) so the error names where = "FILE:LINE" (docs/finetune.md "What every example needs"): a prompt to
// learn from and a completion to learn. The prompt holds text (a character other than
// white space): the prompt field (`instruction`, `prompt`), or in chat form a user turn.
// The completion: the field (`output`, `response`, `chosen`, `rejected`, `completion`; it may be empty:
// its EOS is the target, as LitGPT and TRL train it), or in chat form an assistant turn
// (its content may be empty: the turn's end token is the target; only assistant turns
// are learned, so a conversation of system turns alone, or with no assistant turn, has
// nothing to learn). SFT's one list of messages is both prompt and completion. Roles are
// system, developer, user or assistant (chat_messages_of). zt::InputError (exit 2) naming
// `where`, `field` and what to do otherwise.
void require_prompt(const std::string& text, const std::string& where, const char* field);
void require_prompt(const std::vector<ChatMessage>& turns, const std::string& where, const char* field);
void require_completion(const std::vector<ChatMessage>& turns, const std::string& where, const char* field);

// fn(line, "PATH:LINE") for every non-blank line of a JSONL text.
void for_each_json_line(const std::string& text, const std::string& path,
                        const std::function<void(std::string_view, const std::string&)>& fn);

struct SftOptions {
  SftFormat format = SftFormat::kAlpaca;
  size_t seq_len = 0;      // rows of seq_len + 1 tokens; must be > 0
  bool pack = true;        // false: one example per row, padded
  bool drop_long = false;  // false: truncate an example longer than a row
  std::string chat_template = "auto";  // chat: a template name, or auto (tokenizer_config.json)
};

struct SftStats {
  size_t examples = 0;       // read
  size_t written = 0;        // in the file
  size_t truncated = 0;      // cut to a row
  size_t dropped_long = 0;   // longer than a row, with drop_long
  size_t dropped_empty = 0;  // no response token left after truncation
  size_t rows = 0;
  size_t pad_tokens = 0;
  size_t target_tokens = 0;  // tokens with loss_mask 1
};

// Examples of every file -> a token file with loss_mask and row_len (zt::InputError when no
// example is left).
TokenFile sft_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                        const SftOptions& options, SftStats* stats = nullptr);

// `zt convert sft-to-tokens`: load_tokenizer(tokenizer) + sft_to_tokens + write_token_file.
TokenFile convert_sft_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                const std::string& tokenizer, const SftOptions& options,
                                SftStats* stats = nullptr);

}  // namespace zt::data
