#pragma once
// Unpaired labelled completions -> token files for KTO (`zt convert kto-to-tokens`;
// docs/finetune.md "KTO").
//
// Input: JSONL, one example a line (blank lines skipped), as TRL's unpaired preference
// format:
//   {"prompt": str, "completion": str, "label": true | false}                     plain text
//   {"prompt": [messages], "completion": [messages], "label": true | false}       conversational
// Tokens as TRL 1.16's KTOTrainer: the ids of the prompt and of prompt + completion
// (pairs.hpp encode_prompt_completions), the completion from where they first differ.
// An example whose prompt alone fills max_length = seq_len + 1 is dropped (TRL drops it);
// then, as TRL's KL estimate, the completions are rotated by one within each block of
// kl_batch consecutive examples (TRL's per_device_train_batch_size): example i of a block
// gets the completion of example i - 1 (the first the block's last) as its mismatched one.
// A sequence longer than max_length keeps its first max_length tokens (TRL's collator).
//
// Layout: rows of row_len = seq_len + 1, one sequence a row, padded with EOS (masked);
// example k is rows 2k (prompt + completion) and 2k + 1 (prompt + mismatched completion),
// its label /labels[k] (1 desirable); /loss_mask marks each row's completion.
#include <cstddef>
#include <string>
#include <vector>

#include "zt/data/pairs.hpp"

namespace zt::data {

struct KtoOptions {
  size_t seq_len = 0;                 // rows of seq_len + 1 tokens; must be > 0
  size_t kl_batch = 8;                // the blocks the mismatched completions rotate in; >= 2
  std::string chat_template = "auto";
};

struct KtoStats {
  size_t examples = 0, written = 0, desirable = 0, truncated = 0, dropped_prompt = 0, prefix_differs = 0;
  size_t target_tokens = 0;
};

// The examples of one file. A line that is not a JSON object, lacks prompt, completion or
// label, has a label that is not true or false, a completion of another form than the
// prompt's, or an empty completion is a zt::InputError naming "FILE:LINE" and the field.
std::vector<PromptCompletions> read_kto_examples(const std::string& path, std::vector<uint8_t>& labels);

// Examples of every file -> a token file with loss_mask, row_len and labels (zt::InputError
// when no example is left).
TokenFile kto_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                        const KtoOptions& options, KtoStats* stats = nullptr);

// `zt convert kto-to-tokens`: load_tokenizer + kto_to_tokens + write_token_file.
TokenFile convert_kto_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                const std::string& tokenizer, const KtoOptions& options, KtoStats* stats = nullptr);

}  // namespace zt::data
