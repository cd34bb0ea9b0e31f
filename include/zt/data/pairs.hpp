#pragma once
// Preference pairs -> token files for DPO and ORPO (`zt convert pairs-to-tokens`;
// docs/finetune.md "Preference data", the layout in docs/data.md).
//
// Input: JSONL, one pair a line (blank lines skipped), as TRL's explicit-prompt
// preference format:
//   {"prompt": str, "chosen": str, "rejected": str}                    plain text
//   {"prompt": [messages], "chosen": [messages], "rejected": [messages]}  conversational,
//     rendered with a chat template (zt/data/chat_template.hpp)
// Tokens, as TRL's DPOTrainer (1.16, tokenize_fn) makes them: plain text: the chosen and
// rejected texts get the EOS text appended unless they end with it; prompt_ids =
// tokenizer(prompt), prompt+chosen = tokenizer(prompt + chosen) (BOS/EOS as
// tokenizer_config.json says), and the same for rejected; conversational: the template
// rendered for prompt (with the generation prompt) and for prompt + chosen / + rejected,
// encoded whole. The completion begins where the prompt's ids and each whole sequence's
// ids first differ (the smaller of the two common prefixes), so the prompt part is the
// same in both rows; completion tokens are the targets (/loss_mask 1).
//
// Truncation (TRL's DPO collator): a sequence longer than max_length = seq_len + 1 tokens
// keeps its first max_length (keep_start, TRL's default) or its last (keep_end); with
// keep_start a pair whose prompt alone fills max_length is dropped (TRL drops it too).
// A pair either of whose rows is left with no target is dropped.
//
// Layout: rows of row_len = seq_len + 1 tokens, one sequence a row, padded with EOS
// (masked); pair k is rows 2k (chosen) and 2k + 1 (rejected); the root attribute
// pairs = 1 says so; /doc_starts holds every row's start.
#include <cstddef>
#include <string>
#include <vector>

#include "zt/data/chat_template.hpp"
#include "zt/data/token_file.hpp"

namespace zt::data {

class TextTokenizer;

enum class Truncation { kKeepStart, kKeepEnd };
Truncation parse_truncation(const std::string& name);  // "keep_start" | "keep_end"

struct PreferencePair {
  bool chat = false;
  std::string prompt, chosen, rejected;                        // plain text
  std::vector<ChatMessage> prompt_m, chosen_m, rejected_m;     // conversational
  std::string where;                                           // "FILE:LINE"
};

// The pairs of one JSONL file. A line that is not a JSON object, lacks prompt, chosen or
// rejected, or has one of another type (a string, or a list of {role, content} messages
// like the prompt's) is a zt::InputError naming "FILE:LINE" and the field.
std::vector<PreferencePair> read_preference_pairs(const std::string& path);

struct PairOptions {
  size_t seq_len = 0;                      // rows of seq_len + 1 tokens; must be > 0
  Truncation truncation = Truncation::kKeepStart;
  std::string chat_template = "auto";      // conversational pairs
};

struct PairStats {
  size_t pairs = 0;             // read
  size_t written = 0;           // in the file
  size_t truncated = 0;         // pairs with a row cut to max_length
  size_t dropped_prompt = 0;    // keep_start: the prompt alone fills max_length
  size_t dropped_empty = 0;     // a row with no completion token
  size_t prefix_differs = 0;    // prompt ids not a prefix of prompt + completion ids
  size_t target_tokens = 0;
};

// Pairs of every file -> a token file with loss_mask, row_len and pairs (zt::InputError
// when no pair is left).
TokenFile pairs_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                          const PairOptions& options, PairStats* stats = nullptr);

// What the preference converters (pairs, KTO rows: zt/data/kto.hpp) share.
// One prompt and its completions (plain text, or chat messages), "FILE:LINE" in `where`.
struct PromptCompletions {
  bool chat = false;
  std::string prompt;
  std::vector<std::string> completions;
  std::vector<ChatMessage> prompt_m;
  std::vector<std::vector<ChatMessage>> completions_m;
  std::string where;
};
// Each example's ids as TRL 1.16's tokenize_fn makes them: [prompt, prompt + completion 1,
// ...] (plain completions get the EOS text appended unless they end with it; chat ones are
// rendered with the template `chat_template`, auto or a name, the prompt with the
// generation prompt).
std::vector<std::vector<std::vector<uint32_t>>> encode_prompt_completions(const TextTokenizer& tokenizer,
                                                                          std::vector<PromptCompletions>& examples,
                                                                          const std::string& chat_template);
// How many leading ids a and b share (where the completion begins).
size_t common_prefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);
// One row: the sequence cut to `row` tokens (truncation), its mask (0 for the first
// prompt_len tokens and the row's first token), its targets.
struct TokenRow {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;
  size_t targets = 0;
  bool cut = false;
};
TokenRow token_row(std::vector<uint32_t> seq, size_t prompt_len, size_t row, Truncation truncation);
// An empty token file of rows of seq_len + 1 for the tokenizer (zt::InputError for
// seq_len 0 or a tokenizer without EOS), and one row appended to it, padded with EOS.
TokenFile rows_file(const TextTokenizer& tokenizer, size_t seq_len);
void append_row(TokenFile& out, const TokenRow& r, uint32_t eos);

// `zt convert pairs-to-tokens`: load_tokenizer + pairs_to_tokens + write_token_file.
TokenFile convert_pairs_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                  const std::string& tokenizer, const PairOptions& options,
                                  PairStats* stats = nullptr);

}  // namespace zt::data
