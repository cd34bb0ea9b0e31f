// Text files -> tokens (the byte tokenizer or a real one), one document per file.
#include "zt/data/text.hpp"

#include <filesystem>
#include <fstream>
#include <memory>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/progress.hpp"
#include "zt/data/text_tokenizer.hpp"
#include "zt/data/tokenizer.hpp"

namespace zt::data {

namespace {

// Bytes read and tokenized at a time, so progress moves on a file of gigabytes.
constexpr size_t kChunk = size_t{16} << 20;

}  // namespace

TokenFile text_files_to_tokens(const std::vector<std::string>& paths, Progress* progress) {
  if (paths.empty()) throw InputError("no input text files given", "name at least one IN.txt");
  TokenFile out;
  out.vocab_size = ByteTokenizer::kVocabSize;
  out.tokenizer = std::string(ByteTokenizer::kName);
  for (const std::string& path : paths) {
    require_regular_file(path, "input text file",
                         "name a text file (relative paths are from the current directory)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot read input text file '" + path + "'", "check its permissions");
    const size_t start = out.tokens.size();
    out.doc_starts.push_back(start);
    // The byte tokenizer maps each byte alone, so chunks tokenize as the whole file does.
    std::string chunk(kChunk, '\0');
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const size_t got = static_cast<size_t>(in.gcount());
      if (got == 0) break;
      const std::vector<uint32_t> ids = ByteTokenizer::encode(std::string_view(chunk.data(), got));
      out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
      if (progress) progress->advance(got, ids.size());
    }
    if (in.bad())
      throw InputError("cannot read input text file '" + path + "'", "check the file and its disk");
    if (out.tokens.size() == start)
      throw InputError("input text file '" + path + "' is empty (an empty corpus)",
                       "give a text file with at least one byte");
  }
  if (out.doc_starts.size() == 1) out.doc_starts.clear();  // one document: no boundaries
  return out;
}

TokenFile text_files_to_tokens(const std::vector<std::string>& paths, const TextTokenizer& tokenizer,
                               Progress* progress) {
  if (paths.empty()) throw InputError("no input text files given", "name at least one IN.txt");
  const TokenizerInfo& info = tokenizer.info();
  if (!info.eos)
    throw InputError("tokenizer '" + info.name + "' has no EOS token, which separates documents",
                     "set eos_token in the tokenizer_config.json beside the tokenizer");
  TokenFile out;
  out.vocab_size = info.vocab_size;
  out.tokenizer = info.name;
  out.tokenizer_hash = info.hash;
  out.tokenizer_path = info.path;
  // Whole files in batches of about kBatchBytes, encoded in parallel.
  constexpr size_t kBatchBytes = size_t{256} << 20;
  size_t next = 0;
  while (next < paths.size()) {
    std::vector<std::string> texts;
    size_t bytes = 0;
    while (next < paths.size() && (texts.empty() || bytes < kBatchBytes)) {
      const std::string& path = paths[next++];
      std::string text = read_regular_file(
          path, "input text file", "name a text file (relative paths are from the current directory)");
      if (text.empty())
        throw InputError("input text file '" + path + "' is empty (an empty corpus)",
                         "give a text file with at least one byte");
      bytes += text.size();
      texts.push_back(std::move(text));
    }
    const std::vector<std::vector<uint32_t>> ids = encode_batch(tokenizer, texts, 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      const size_t start = out.tokens.size();
      out.doc_starts.push_back(start);
      out.tokens.insert(out.tokens.end(), info.prefix.begin(), info.prefix.end());
      out.tokens.insert(out.tokens.end(), ids[i].begin(), ids[i].end());
      out.tokens.insert(out.tokens.end(), info.suffix.begin(), info.suffix.end());
      if (out.tokens.size() == start || out.tokens.back() != *info.eos) out.tokens.push_back(*info.eos);
      if (progress) progress->advance(texts[i].size(), out.tokens.size() - start);
    }
  }
  if (out.doc_starts.size() == 1) out.doc_starts.clear();
  return out;
}

TokenFile convert_text_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                 const WriteOptions& options, const std::string& tokenizer) {
  // Load the tokenizer first: a bad --tokenizer is reported before any file is read.
  const std::unique_ptr<TextTokenizer> tok = tokenizer.empty() ? nullptr : load_tokenizer(tokenizer);
  // Progress over the input bytes; the end line comes after the file is written.
  uint64_t total = 0;
  for (const std::string& path : inputs) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec) total += size;
  }
  Progress progress("text-to-tokens", total, ProgressUnit::kBytes);
  progress.count_items(0, "tokens");
  TokenFile f = tok ? text_files_to_tokens(inputs, *tok, &progress)
                    : text_files_to_tokens(inputs, &progress);
  write_token_file(output, f, options);
  progress.finish();
  return f;
}

}  // namespace zt::data
