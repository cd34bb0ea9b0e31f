#pragma once
// Real tokenizers, encoding exactly as Hugging Face does (docs/finetune.md):
//   - tokenizer.json (Hugging Face `tokenizers`): a BPE model with byte-level
//     pre-tokenization (GPT-2 and Llama 3 regexes, run by PCRE2) or SentencePiece-style
//     (Prepend/Replace normalizers or Metaspace, byte fallback, fuse_unk), merges, added
//     and special tokens, and the decoders they come with;
//   - tokenizer.model (SentencePiece, through libsentencepiece).
// BOS/EOS: tokenizer_config.json beside the file (add_bos_token, add_eos_token, bos_token,
// eos_token) when it says, else the tokenizer.json post-processor's template, else
// SentencePiece's defaults (BOS added, EOS not).
//
// Invalid UTF-8 in the input: a tokenizer.json tokenizer sees every maximal invalid
// subsequence as U+FFFD (what Python's bytes.decode("utf-8", "replace") gives, which is
// how text with such bytes reaches Python's `tokenizers`); SentencePiece handles bytes
// itself (each invalid byte is U+FFFD, as Python's sentencepiece given bytes).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zt::data {

struct TokenizerInfo {
  std::string name;                // "<kind>:<folder name>", e.g. "tokenizer.json:TinyLlama"
  std::string kind;                // "tokenizer.json" or "sentencepiece"
  uint32_t vocab_size = 0;         // one past the largest id (model + added tokens)
  std::string hash;                // 16 hex digits: FNV-1a 64 over the files read
  std::vector<std::string> files;  // the files read, in order
  std::string path;                // load_tokenizer's PATH, absolute ("" from contents)
  std::optional<uint32_t> bos, eos;
  std::vector<uint32_t> prefix;    // ids before a document's tokens (BOS when added)
  std::vector<uint32_t> suffix;    // ids after them (EOS when added)
  std::string bos_token, eos_token;  // their text, as tokenizer_config.json names them ("" unnamed)
  std::string chat_template;         // chat_template.jinja beside, else tokenizer_config.json's
                                     // "chat_template" ("" when none)
  std::string chat_template_file = "tokenizer_config.json";  // where chat_template is read, for messages
};

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  // Text -> ids without BOS/EOS (Hugging Face: encode(text, add_special_tokens=False)).
  virtual std::vector<uint32_t> encode(std::string_view text) const = 0;
  // Ids -> text, special tokens skipped (decode(ids, skip_special_tokens=True)). Throws
  // zt::InputError for an id >= vocab_size.
  virtual std::string decode(std::span<const uint32_t> ids) const = 0;
  // Text -> ids as Hugging Face's tokenizer(text): BOS/EOS as tokenizer_config.json says
  // (info().prefix + encode(text) + info().suffix). A prompt for generation.
  std::vector<uint32_t> encode_with_specials(std::string_view text) const {
    std::vector<uint32_t> ids = info_.prefix;
    const std::vector<uint32_t> body = encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
    ids.insert(ids.end(), info_.suffix.begin(), info_.suffix.end());
    return ids;
  }
  const TokenizerInfo& info() const { return info_; }
  TokenizerInfo& info_mut() { return info_; }  // for load_tokenizer: name, hash, files

 protected:
  TokenizerInfo info_;
};

// PATH: a folder holding tokenizer.json (preferred) or tokenizer.model, or one of those
// files; tokenizer_config.json beside it is read when present. Throws zt::InputError
// naming the file (and what it does not support) for anything else.
std::unique_ptr<TextTokenizer> load_tokenizer(const std::string& path);

// The files of a Hugging Face tokenizer in PATH's folder (PATH: a folder, or a file in
// it), those present, in this order: tokenizer.json, tokenizer.model,
// tokenizer_config.json, special_tokens_map.json, chat_template.jinja.
std::vector<std::string> tokenizer_files(const std::string& path);

// Checks that load_tokenizer(path) has `hash` (what a token file or checkpoint recorded):
// a tokenizer that changed or vanished since is a zt::InputError naming `what_recorded`,
// the path and both hashes.
void verify_tokenizer(const std::string& path, const std::string& hash, const std::string& what_recorded);
// Copies tokenizer_files(path) into `outdir` (each written safely); returns their names.
std::vector<std::string> copy_tokenizer_files(const std::string& path, const std::string& outdir);

// From contents, for tests and fuzzing: `where` names the source in messages and the
// tokenizer ("<kind>:<where>"); no files, so no hash.
// tokenizer_config may be empty (no tokenizer_config.json).
std::unique_ptr<TextTokenizer> tokenizer_from_json(std::string_view tokenizer_json,
                                                   std::string_view tokenizer_config,
                                                   const std::string& where);
std::unique_ptr<TextTokenizer> tokenizer_from_sentencepiece(std::string_view model_proto,
                                                            std::string_view tokenizer_config,
                                                            const std::string& where);

// Encodes each text on `threads` threads (0: all hardware threads), like Hugging Face's
// encode_batch. The result is the same for any number of threads.
std::vector<std::vector<uint32_t>> encode_batch(const TextTokenizer& tokenizer,
                                                const std::vector<std::string>& texts,
                                                int threads);

// fn(0) ... fn(count - 1) on `threads` threads (0: all hardware threads); the first
// exception is rethrown after all threads stop.
void for_each_parallel(size_t count, int threads, const std::function<void(size_t)>& fn);

// The ids of `text` a row of `keep` tokens can use (issue 36, class 6: memory and time
// follow the row, not the text). A text of at most 16 bytes per token of keep + 64 is
// encoded whole; a longer one is encoded from its first B bytes (cut at a UTF-8 character
// start; B = 16 x (keep + 64), x4 while that gives fewer than keep + 64 tokens, the whole
// text at the latest), and when that gives at least keep + 64 tokens, its first keep + 1
// are returned: the text is longer than the row either way, and the ids kept equal the
// whole text's wherever the cut changes at most the last 64 tokens (a cut moves only the
// pre-token it falls in). A text that fits the row has under keep + 1 tokens, so it is
// always encoded whole. `encoded_bytes`, when given, gets the bytes encoded (text.size()
// when whole).
std::vector<uint32_t> encode_for_row(const TextTokenizer& tokenizer, std::string_view text, size_t keep,
                                     size_t* encoded_bytes = nullptr);

// Every maximal invalid subsequence of `text` replaced by U+FFFD, as Python's
// bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy do (Unicode's
// "substitution of maximal subparts"; well-formed sequences per Unicode Table 3-7).
std::string utf8_replace_invalid(std::string_view text);

}  // namespace zt::data
