// Text files -> byte tokens, one document per file.
#include "zt/data/text.hpp"

#include <filesystem>
#include <fstream>

#include "zt/core/error.hpp"
#include "zt/core/files.hpp"
#include "zt/core/progress.hpp"
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

TokenFile convert_text_to_tokens(const std::vector<std::string>& inputs, const std::string& output,
                                 const WriteOptions& options) {
  // Progress over the input bytes; the end line comes after the file is written.
  uint64_t total = 0;
  for (const std::string& path : inputs) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec) total += size;
  }
  Progress progress("text-to-tokens", total, ProgressUnit::kBytes);
  progress.count_items(0, "tokens");
  TokenFile f = text_files_to_tokens(inputs, &progress);
  write_token_file(output, f, options);
  progress.finish();
  return f;
}

}  // namespace zt::data
