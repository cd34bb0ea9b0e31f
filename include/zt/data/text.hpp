#pragma once
// Text -> tokens with the byte tokenizer: each input file is one document.
#include <string>
#include <vector>

#include "zt/data/token_file.hpp"

namespace zt {
class Progress;
}

namespace zt::data {

// Reads every file (throws zt::InputError naming a missing, unreadable or empty file)
// and returns their bytes as tokens, with one document per file. `progress`, when given,
// advances by the bytes read (and the tokens made).
TokenFile text_files_to_tokens(const std::vector<std::string>& paths, Progress* progress = nullptr);

// `zt convert text-to-tokens IN... OUT`: text_files_to_tokens + write_token_file.
// Returns the file written (for a summary line). Reports progress (zt/core/progress.hpp).
TokenFile convert_text_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                 const WriteOptions& options = {});

}  // namespace zt::data
