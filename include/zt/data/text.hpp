#pragma once
// Text -> tokens: each input file is one document. With the byte tokenizer (the default)
// or a real tokenizer (zt/data/text_tokenizer.hpp, `--tokenizer`).
#include <string>
#include <vector>

#include "zt/data/token_file.hpp"

namespace zt {
class Progress;
}

namespace zt::data {

class TextTokenizer;

// Reads every file (throws zt::InputError naming a missing, unreadable or empty file)
// and returns their bytes as tokens, with one document per file. `progress`, when given,
// advances by the bytes read (and the tokens made).
TokenFile text_files_to_tokens(const std::vector<std::string>& paths, Progress* progress = nullptr);

// The same with a real tokenizer: the ids of each file are those of the whole file
// encoded as one text (Hugging Face's), written as the tokenizer's prefix (BOS when it
// adds one) + ids + suffix, and EOS unless the suffix ends with it, so documents are
// separated by EOS. Files are read in pieces of about 4 MiB where the tokenizer's encode
// is additive at the cuts (probed at the start on texts cut at every such place):
// byte-level BPE such as GPT-2's and Llama 3's at a newline before an ASCII letter or digit
// (or, after 1 MiB without one, at a space between an ASCII letter/digit and a letter); a
// tokenizer that writes '▁' before every text (SentencePiece's dummy prefix, a Prepend
// normalizer: TinyLlama's, Llama 2's) at such a space, left out of both pieces (the
// continuation's own '▁' stands for it); any other gets each file whole (logged). Pieces
// are encoded in parallel (all hardware threads), about 64 MiB at a time (issue 36, class
// 6). Throws zt::InputError for a tokenizer without an EOS token,
// and as above for the files.
TokenFile text_files_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                               Progress* progress = nullptr);

// `zt convert text-to-tokens [--tokenizer PATH] IN... OUT`: text_files_to_tokens +
// write_token_file; `tokenizer` empty is the byte tokenizer, else load_tokenizer(PATH).
// Returns the file written (for a summary line). Reports progress (zt/core/progress.hpp).
TokenFile convert_text_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                 const WriteOptions& options = {}, const std::string& tokenizer = {});

}  // namespace zt::data
